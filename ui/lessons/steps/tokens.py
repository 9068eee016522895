"""Before any attention: how a sentence becomes the tokens a model reads."""
from __future__ import annotations

from transformer import AXES
from transformer.tokens import get_tokenizer
from ui.figures.tokens import token_tiles
from ui.lessons.live import Live
from ui.lessons.steps.lesson_model import lesson_model
from ui.lessons.steps.step import lesson_step


@lesson_step(
    "how-many-tokens", "How many tokens is this sentence?",
    text="A model reads ids, not text. The lab's own models read **one token per character**; real models read "
         "**subword pieces**, which byte-level BPE learns by merging the most frequent adjacent pair of its training "
         "text again and again. How a sentence is cut decides how many rows and columns every attention map has.",
    question="How many tokens is this sentence?", kind="number",
    try_this="On the Tokens page, replay BPE's merges on your own sentence one at a time, and see how many tokens "
             "the same sentence costs in twelve languages.",
    page="tokens", uses_model=True)
def how_many() -> Live:
    m = lesson_model()
    # the learned row of the table (byte-level BPE) against the lessons' model's own one token per character
    name, row = next((name, row) for name, row in AXES["tokens"].choices.items() if row.learned)
    tokenizer = get_tokenizer(name)
    ids = tokenizer.encode(m.text)
    n_bpe, n_chars, n_words = len(ids), len(m.text), len(m.text.split())
    options = sorted({n_words, n_bpe, n_chars // 2, n_chars})
    pieces = tokenizer.pieces(ids)
    # a whole word with its space, as the text's own example (the first such piece of more than one letter)
    word = next((piece for piece in pieces if piece.startswith("␣") and len(piece) > 2), "␣the")
    return Live(
        question=(f"The lab's {row.label} has {tokenizer.vocab_size:,} tokens, learned on English text. Into how many "
                  f"tokens does it cut \"{m.text}\" ({n_chars} characters, {n_words} words)?"),
        choices=[f"{n:,} tokens" for n in options], answer=options.index(n_bpe),
        why=(f"{n_bpe} pieces: a frequent word is one piece with the space before it ({word}), a rare one a few "
             f"pieces, punctuation a piece of its own. One token per character, as the lessons' model reads it, makes "
             f"{n_chars}: each attention map of this sentence is {n_chars} × {n_chars} instead of {n_bpe} × {n_bpe}."),
        figure=token_tiles(pieces, ids, f"{row.label}: {n_bpe} tokens, each with its id"),
        caption="Each tile is one token: its text (␣ a space) and below it the id the model reads.")
