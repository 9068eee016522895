"""Small synthetic tasks whose solutions have a known attention pattern.

Random weights draw noise. A model trained on one of these tasks draws a pattern
you can name before you look:

| task      | model           | the pattern that solves it                                  |
|-----------|-----------------|-------------------------------------------------------------|
| induction | decoder         | previous-token head (layer 0), then induction head (layer 1) |
| copy      | encoder-decoder | cross-attention on the diagonal                              |
| reverse   | encoder-decoder | cross-attention on the anti-diagonal                         |
| sort      | decoder         | each answer token points at where that value sits in the input |
| mirror    | encoder         | a masked token looks at its mirror image, often to its right  |
| mixed     | decoder (MoE)   | digits and letters follow different rules: do experts specialise? |
| language  | decoder/encoder | English: previous-token and induction heads on any sentence  |

Every generator is seeded (same seed -> same batch) and every batch marks its
answer positions (``loss_mask``): loss and accuracy count those positions only.
``TASKS`` maps a name to its task. How much a trained model draws the pattern: task_measures.py.
"""
from __future__ import annotations

import copy
import math
import string
from dataclasses import dataclass, fields

import torch

from ..axes import AXES
from ..tokens import get_tokenizer
from . import language, per_character

LETTERS = string.ascii_lowercase
DIGITS = string.digits


@dataclass
class Batch:
    """One batch of a task. Decoder and encoder tasks fill input_ids; encoder-decoder tasks src_ids and tgt_in."""

    targets: torch.Tensor  # (B, T) the token each position must predict (tgt_out for an encoder-decoder)
    loss_mask: torch.Tensor  # (B, T) bool: True on answer positions
    input_ids: torch.Tensor | None = None  # (B, T)
    src_ids: torch.Tensor | None = None  # (B, S)
    tgt_in: torch.Tensor | None = None  # (B, T): <bos> followed by the answer shifted right

    @property
    def tgt_out(self) -> torch.Tensor:
        return self.targets

    def model_args(self) -> tuple[torch.Tensor, ...]:
        """What to call the model with: model(*batch.model_args())."""
        return (self.input_ids,) if self.src_ids is None else (self.src_ids, self.tgt_in)

    def to(self, device: torch.device | str) -> "Batch":
        moved = {f.name: getattr(self, f.name) for f in fields(self)}
        return Batch(**{name: t if t is None else t.to(device) for name, t in moved.items()})


class Task:
    """Vocabulary, text <-> ids, a seeded batch generator, and accuracy on answer positions.

    Subclasses set ``name``, ``arch``, ``symbols`` (characters a user may type),
    ``specials`` (tokens the task adds itself), ``example_text`` and ``description``,
    and write ``make_batch`` and ``frame``.
    """

    name: str
    arch: str  # the model kind that solves it: "decoder" | "encoder" | "encoder-decoder"
    description: str
    symbols: str  # one token per character
    specials: tuple[str, ...]  # tokens that are not typed, e.g. <bos>
    typed_specials: dict[str, str] = {}  # characters that stand for a special token ("_" -> <mask>)
    example_text: str
    max_tokens: int  # the longest sequence a batch holds (for max_len checks)
    max_len: int = 0  # the longest input its models should take (0: the preset's own)

    @property
    def vocab(self) -> list[str]:
        return [*self.specials, *self.symbols]

    def token_id(self, token: str) -> int:
        return self.vocab.index(token)

    @property
    def archs(self) -> tuple[str, ...]:
        """The model kinds that can learn the task."""
        return (self.arch,)

    def for_arch(self, arch: str) -> "Task":
        """The task as a model of kind `arch` learns it; most tasks suit one kind only."""
        if arch != self.arch:
            raise ValueError(f"the {self.name} task needs arch={self.arch!r}, but the config has arch={arch!r}; "
                             f"pick a task for {arch} models or another preset")
        return self

    # --- text <-> ids --------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        """The model input for a typed text: one token per character, framed as the task frames it.

        Unknown characters raise ValueError naming them and the valid symbols.
        """
        if not text:
            raise ValueError(f"the {self.name} task needs some text; try {self.example_text!r}")
        by_char = {**{c: self.token_id(c) for c in self.symbols},
                   **{c: self.token_id(tok) for c, tok in self.typed_specials.items()}}
        unknown = sorted(set(text) - set(by_char))
        if unknown:
            valid = self.symbols + "".join(self.typed_specials)
            raise ValueError(
                f"the {self.name} task has no token for {', '.join(map(repr, unknown))}; "
                f"type only these symbols: {valid!r} (for example {self.example_text!r})")
        return self.frame([by_char[c] for c in text])

    def frame(self, ids: list[int]) -> list[int]:
        """Add the task's special tokens around typed ids (default: none)."""
        return ids

    def decode(self, ids) -> list[str]:
        """The label of every id, e.g. ['<bos>', 'a', 'b']."""
        ids = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
        bad = [i for i in ids if not 0 <= int(i) < len(self.vocab)]
        if bad:
            raise ValueError(f"ids {bad} are outside the {self.name} vocabulary 0..{len(self.vocab) - 1}")
        return [self.vocab[int(i)] for i in ids]

    # --- batches ---------------------------------------------------------------

    def sample(self, batch_size: int, generator: torch.Generator | None = None, seed: int | None = None) -> Batch:
        """A batch drawn from `generator`, or from a fresh one seeded with `seed` (default 0)."""
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size} must be at least 1")
        if generator is not None and seed is not None:
            raise ValueError("pass a generator or a seed, not both")
        if generator is None:
            generator = torch.Generator().manual_seed(0 if seed is None else seed)
        return self.make_batch(batch_size, generator)

    def make_batch(self, batch_size: int, generator: torch.Generator) -> Batch:
        raise NotImplementedError

    def at(self, progress: float) -> "Task":
        """The task to draw batches from at this point of training (0 = the first step, 1 = the last).

        Most tasks never change; one with a curriculum starts on an easier variant of itself.
        """
        return self

    def accuracy(self, logits: torch.Tensor, batch: Batch) -> float:
        """Fraction of answer positions where the most likely token is the target."""
        correct = logits.argmax(-1) == batch.targets.to(logits.device)  # (B, T)
        return correct[batch.loss_mask.to(logits.device)].float().mean().item()

    def attention_targets(self, batch: Batch) -> torch.Tensor | None:
        """(B, T_q, T_k) bool: where the solution looks from each answer position; None if no one place."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, arch={self.arch!r}, vocab={len(self.vocab)} tokens)"


def _randint(low: int, high: int, generator: torch.Generator) -> int:
    """One integer in [low, high] (both included)."""
    return int(torch.randint(low, high + 1, (), generator=generator))


def _log_uniform(low: int, high: int, generator: torch.Generator) -> int:
    """One integer in [low, high], its logarithm uniform: short lengths as often as long ones in ratio."""
    u = float(torch.rand((), generator=generator))
    return round(math.exp(math.log(low) + u * (math.log(high) - math.log(low))))


def _first_symbol_id(task: Task) -> int:
    return len(task.specials)


# --- induction ------------------------------------------------------------------


class Induction(Task):
    """Random letters in which a segment of distinct letters appears twice, the copies d apart.

    The distance between the copies (3-8, uniform) and the segment length (3 up
    to the distance) vary from row to row, so no head can solve it by position: on
    the second copy the model must find where the current letter was before and
    predict the letter that followed it. That takes two heads in two layers: a
    previous-token head writes "the letter before me" into every position, and an
    induction head in the next layer matches the current letter against it. The
    distance stays within 8, well inside a sliding window (Mistral's classroom
    window is 32). Letters of the segment appear nowhere else, so the previous
    occurrence is unique.
    """

    name, arch = "induction", "decoder"
    description = "predict the next letter of a segment seen before (an induction head)"
    symbols, specials = LETTERS, ("<bos>",)
    example_text = "qhvtwcmbvtwcmbkx"
    n_letters, distances = 16, (3, 8)
    max_tokens = 1 + n_letters

    def frame(self, ids):
        return [self.token_id("<bos>"), *ids]

    def make_batch(self, batch_size, generator):
        T, first = self.n_letters, _first_symbol_id(self)
        ids = torch.empty(batch_size, 1 + T, dtype=torch.long)
        loss_mask = torch.zeros(batch_size, 1 + T, dtype=torch.bool)
        for row in range(batch_size):
            d = _randint(*self.distances, generator)  # from the first copy's start to the second's
            L = _randint(3, d, generator)  # segment length: the copies may touch, never overlap
            s1 = _randint(0, T - L - d, generator)
            letters = torch.randperm(len(LETTERS), generator=generator) + first
            segment, others = letters[:L], letters[L:]  # segment letters appear nowhere else
            seq = others[torch.randint(len(others), (T,), generator=generator)]  # (T,)
            seq[s1:s1 + L] = segment
            seq[s1 + d:s1 + d + L] = segment
            ids[row, 0], ids[row, 1:] = self.token_id("<bos>"), seq
            second = 1 + s1 + d  # where the second copy starts, counting <bos>
            loss_mask[row, second:second + L - 1] = True  # predict its 2nd..L-th letters
        targets = torch.cat((ids[:, 1:], ids[:, :1]), dim=1)  # next token; the last column is never scored
        return Batch(targets=targets, loss_mask=loss_mask, input_ids=ids)

    def attention_targets(self, batch):
        return induction_targets(batch.input_ids, batch.loss_mask)


def induction_targets(ids: torch.Tensor, query_mask: torch.Tensor) -> torch.Tensor:
    """(B, T, T) bool: from each query in `query_mask`, the token right after the latest earlier occurrence of its token."""
    B, T = ids.shape
    same = ids[:, :, None] == ids[:, None, :]  # (B, T_q, T_k)
    earlier = torch.ones(T, T, dtype=torch.bool).tril(-1)  # key before query
    seen = same & earlier  # (B, T_q, T_k)
    position = torch.arange(T)
    latest = torch.where(seen, position, -1).amax(-1)  # (B, T_q): latest earlier occurrence, -1 if none
    has_target = query_mask & (latest >= 0) & (latest + 1 < T)
    return has_target[:, :, None] & (position[None, None, :] == (latest + 1)[:, :, None])  # (B, T_q, T_k)


def previous_token_targets(batch_size: int, T: int) -> torch.Tensor:
    """(B, T, T) bool: every query from position 1 on looks at the token just before it."""
    return torch.ones(T - 1, dtype=torch.bool).diag(-1)[None].expand(batch_size, T, T)  # (B, T_q, T_k)


# --- copy and reverse (encoder-decoder) -------------------------------------------


class SequenceToSequence(Task):
    """Source: n letters and <eos>. Target: the same letters, copied or reversed.

    The decoder writes answer letter i while cross-attending to the source: to
    source position i for a copy (the diagonal), to n-1-i for a reversal (the
    anti-diagonal). <eos> marks where the source ends, which reversal needs.
    Every row of a batch has the same n, so there is no padding.
    """

    arch = "encoder-decoder"
    symbols, specials = LETTERS, ("<bos>", "<eos>")
    lengths = (3, 12)
    max_tokens = lengths[1] + 1

    def source_index(self, n: int) -> torch.Tensor:
        """(n,) the source position answer position i reads."""
        raise NotImplementedError

    def frame(self, ids):
        return [*ids, self.token_id("<eos>")]

    def make_batch(self, batch_size, generator):
        n = _randint(*self.lengths, generator)
        letters = torch.randint(len(LETTERS), (batch_size, n), generator=generator) + _first_symbol_id(self)  # (B, n)
        src = torch.cat((letters, torch.full((batch_size, 1), self.token_id("<eos>"))), dim=1)  # (B, n + 1)
        tgt_out = letters[:, self.source_index(n)]  # (B, n)
        bos = torch.full((batch_size, 1), self.token_id("<bos>"))
        tgt_in = torch.cat((bos, tgt_out[:, :-1]), dim=1)  # (B, n): teacher forcing, shifted right
        return Batch(targets=tgt_out, loss_mask=torch.ones_like(tgt_out, dtype=torch.bool), src_ids=src, tgt_in=tgt_in)

    def attention_targets(self, batch):
        B, n = batch.tgt_out.shape
        targets = torch.zeros(B, n, n + 1, dtype=torch.bool)  # (B, T_q, S)
        targets[:, torch.arange(n), self.source_index(n)] = True
        return targets


class Copy(SequenceToSequence):
    name = "copy"
    description = "write the source again (cross-attention on the diagonal)"
    example_text = "transformer"

    def source_index(self, n):
        return torch.arange(n)


class Reverse(SequenceToSequence):
    name = "reverse"
    description = "write the source backwards (cross-attention on the anti-diagonal)"
    example_text = "attention"

    def source_index(self, n):
        return torch.arange(n - 1, -1, -1)


# --- sort (decoder) ---------------------------------------------------------------


class Sort(Task):
    """<bos> digits <sep> the same digits sorted. Each answer token points back at its value in the input."""

    name, arch = "sort", "decoder"
    description = "write the digits in ascending order (pointer-like attention)"
    symbols, specials = DIGITS, ("<bos>", "<sep>")
    example_text = "3141592653"
    lengths = (3, 10)
    max_tokens = 2 * lengths[1] + 2

    def frame(self, ids):
        return [self.token_id("<bos>"), *ids, self.token_id("<sep>")]

    def make_batch(self, batch_size, generator):
        n = _randint(*self.lengths, generator)
        digits = torch.randint(len(DIGITS), (batch_size, n), generator=generator) + _first_symbol_id(self)  # (B, n)
        bos = torch.full((batch_size, 1), self.token_id("<bos>"))
        sep = torch.full((batch_size, 1), self.token_id("<sep>"))
        ids = torch.cat((bos, digits, sep, digits.sort(dim=1).values), dim=1)  # (B, 2n + 2)
        targets = torch.cat((ids[:, 1:], ids[:, :1]), dim=1)  # next token; the last column is never scored
        loss_mask = torch.zeros_like(ids, dtype=torch.bool)
        loss_mask[:, n + 1:2 * n + 1] = True  # from <sep> on, predict each sorted digit
        return Batch(targets=targets, loss_mask=loss_mask, input_ids=ids)

    def attention_targets(self, batch):
        ids, T = batch.input_ids, batch.input_ids.shape[1]
        n = (T - 2) // 2
        in_input = (torch.arange(T) >= 1) & (torch.arange(T) <= n)  # (T,) the unsorted digits
        points_at = batch.targets[:, :, None] == ids[:, None, :]  # (B, T_q, T_k): key holds the value to write
        return points_at & in_input[None, None, :] & batch.loss_mask[:, :, None]


# --- mirror (encoder, masked tokens) ------------------------------------------------


class Mirror(Task):
    """<cls> a mirrored word <sep>, some letters masked; recover each from its mirror image.

    The word is x followed by x reversed, so position i's twin is at the other
    end. When the masked letter is in the first half its twin lies to the right:
    only a bidirectional (encoder) model can see it.
    """

    name, arch = "mirror", "encoder"
    description = "fill in masked letters of a mirrored word from their twins (bidirectional)"
    symbols, specials = LETTERS, ("<cls>", "<sep>", "<mask>")
    typed_specials = {"_": "<mask>"}
    example_text = "dr_wwa_d"  # drawward
    half_lengths = (2, 8)
    mask_rate = 0.35
    max_tokens = 2 * half_lengths[1] + 2

    def frame(self, ids):
        return [self.token_id("<cls>"), *ids, self.token_id("<sep>")]

    def make_batch(self, batch_size, generator):
        n = _randint(*self.half_lengths, generator)
        half = torch.randint(len(LETTERS), (batch_size, n), generator=generator) + _first_symbol_id(self)  # (B, n)
        word = torch.cat((half, half.flip(1)), dim=1)  # (B, 2n): a palindrome
        # mask one twin of some pairs (at least one per row), never both: its twin must stay readable
        pair_masked = torch.rand(batch_size, n, generator=generator) < self.mask_rate  # (B, n)
        pair_masked[torch.arange(batch_size), torch.randint(n, (batch_size,), generator=generator)] = True
        right_twin = torch.rand(batch_size, n, generator=generator) < 0.5  # which twin of the pair is hidden
        masked = torch.cat((pair_masked & ~right_twin, (pair_masked & right_twin).flip(1)), dim=1)  # (B, 2n)
        cls = torch.full((batch_size, 1), self.token_id("<cls>"))
        sep = torch.full((batch_size, 1), self.token_id("<sep>"))
        no = torch.zeros(batch_size, 1, dtype=torch.bool)
        targets = torch.cat((cls, word, sep), dim=1)  # (B, 2n + 2)
        loss_mask = torch.cat((no, masked, no), dim=1)  # (B, 2n + 2)
        input_ids = targets.masked_fill(loss_mask, self.token_id("<mask>"))
        return Batch(targets=targets, loss_mask=loss_mask, input_ids=input_ids)

    def attention_targets(self, batch):
        B, T = batch.input_ids.shape
        twin = torch.zeros(T, T, dtype=torch.bool)
        inner = torch.arange(1, T - 1)  # the word, between <cls> and <sep>
        twin[inner, inner.flip(0)] = True  # position i <-> T - 1 - i
        return twin[None] & batch.loss_mask[:, :, None]  # (B, T_q, T_k)


# --- mixed (MoE) -------------------------------------------------------------------


class Mixed(Task):
    """Digits and letters interleaved, each kind with its own rule; the first digit is a key k.

    Every later digit is encrypted: it becomes (digit + k) mod 10, which needs
    attention to fetch the key and an FFN to add. Every letter passes through
    unchanged, which needs nothing from the FFN at all. Experts that learn to add
    only disturb letters, so the router moves letters onto experts of their own:
    the two kinds of token end up on visibly different experts.
    """

    name, arch = "mixed", "decoder"
    description = "digits add the key (the first digit) mod 10, letters pass through (will the router part the two kinds?)"
    symbols, specials = DIGITS + LETTERS, ("<bos>",)
    example_text = "3hello2024world"  # key 3: "hello5357world"
    kinds = {"digit": DIGITS, "letter": LETTERS}
    lengths = (4, 16)
    max_tokens = lengths[1] + 2

    def frame(self, ids):
        return [self.token_id("<bos>"), *ids]

    def make_batch(self, batch_size, generator):
        n = _randint(*self.lengths, generator)
        key = torch.randint(len(DIGITS), (batch_size, 1), generator=generator)  # (B, 1)
        is_digit = torch.rand(batch_size, n, generator=generator) < 0.5  # (B, n)
        digit = torch.randint(len(DIGITS), (batch_size, n), generator=generator)  # (B, n) values 0-9
        letter = torch.randint(len(LETTERS), (batch_size, n), generator=generator)  # (B, n) values 0-25
        first_digit, first_letter = self.token_id("0"), self.token_id("a")
        ids = torch.where(is_digit, digit + first_digit, letter + first_letter)  # (B, n)
        answer = torch.where(is_digit, (digit + key) % 10 + first_digit, ids)  # (B, n)
        bos = torch.full((batch_size, 1), self.token_id("<bos>"))
        no = torch.zeros(batch_size, 2, dtype=torch.bool)
        return Batch(targets=torch.cat((bos, key + first_digit, answer), dim=1),  # <bos> and the key are not scored
                     loss_mask=torch.cat((no, torch.ones_like(is_digit)), dim=1),
                     input_ids=torch.cat((bos, key + first_digit, ids), dim=1))  # (B, n + 2)

    def kind_of(self, ids: torch.Tensor) -> dict[str, torch.Tensor]:
        """kind -> (B, T) bool: which positions hold a token of that kind."""
        return {kind: torch.isin(ids, torch.tensor([self.token_id(c) for c in chars])) for kind, chars in self.kinds.items()}


# --- language (decoder: next character; encoder: masked characters) -----------------------


class Language(Task):
    """English text from the Python documentation, one token per character, any text encodable.

    A decoder learns the next character of random crops of the training topics; an
    encoder (BERT) learns masked characters, 15% of each crop. A quarter of the decoder's
    rows are one span of 20 to 200 characters written again and again, so that copying
    pays (real text repeats names and phrases, but rarely within one short crop).

    Language(induction_warmup=True) is a curriculum that grows induction heads: for the
    first 30% of training every row is a span of 20 to 60 characters of text repeated, in
    128-character crops; then, in 512-character crops, half the rows repeat a span of text,
    short spans as often as long ones in ratio. Mixed with plain text from the first step, the induction circuit
    did not form in 2,000 steps; repeats alone form it within a few hundred steps, and it
    survives the mix (docs/checkpoints.md). Language(repeat_rate=...) sets the share of
    repeating rows after the warm-up: fewer leave more plain text, so fewer bits per
    character, and a weaker head. A model with a sliding window trains on
    task.within_window(W), spans its window can reach (train() does this itself).

    The encoder (BERT) has a curriculum of its own, always on: a position table is an
    encoder's only source of order, and on longer crops of everyday English nothing pulled it
    off the unigram in 6,500 steps. So it starts on 8-character crops, where the few characters
    around a masked one say much and each of the table's first rows is seen in every row;
    then 16, 32 and finally 64 characters.
    """

    name, arch = "language", "decoder"
    description = "English text, one character at a time: previous-token and induction heads on any sentence"
    symbols, specials = language.CHARACTERS, language.SPECIALS
    example_text = "The cat sat on the mat. The cat sat on the mat."
    context = 256  # training crop length in characters
    max_len = 1 + 4 * context  # <bos> and text 4x longer than any seen in training, to measure extrapolation
    repeat_rate, repeat_lengths = 0.25, (20, 200)  # rows of one span written again and again, copies L apart
    log_uniform_lengths = False  # draw L with its logarithm uniform (short spans more often) instead of uniform
    random_spans = 0.5  # the share of those spans that are random characters rather than text
    random_alphabet = string.printable[:95]  # letters, digits, punctuation and the space
    mask_rate = 0.15
    docstrings = False  # train on the standard library's docstrings too (2.4x the text; held-out split unchanged)
    corpus = "python-docs"  # the text it reads: a key of language.CORPORA ("english": WordNet's everyday English)
    tokens = "characters"  # how it reads the text: a key of AXES["tokens"] ("bpe": learned pieces; context in tokens)
    curriculum: tuple[tuple[float, dict], ...] = ()  # (share of training it lasts until, settings), in order
    # after the warm-up, 512-character crops: a held-out sentence of 200 characters written twice is 402 long
    INDUCTION_WARMUP = dict(context=512, repeat_rate=0.5, random_spans=0.0, log_uniform_lengths=True, curriculum=(
        (0.3, dict(context=128, repeat_rate=1.0, repeat_lengths=(20, 60), random_spans=0.0, log_uniform_lengths=True)),))
    MASKED = dict(context=language.ENCODER_CONTEXT,
                  curriculum=((0.1, dict(context=8)), (0.2, dict(context=16)), (0.35, dict(context=32))))

    def __init__(self, masked: bool = False, induction_warmup: bool = False, **settings):
        self.masked, self.induction_warmup = masked, induction_warmup
        self.arch = "encoder" if masked else "decoder"
        defaults = self.MASKED if masked else self.INDUCTION_WARMUP if induction_warmup else {}
        for name, value in {**defaults, **settings}.items():
            setattr(self, name, value)  # instance settings shadow the class's defaults above
        if not 0.0 <= self.repeat_rate <= 1.0:
            raise ValueError(f"repeat_rate={self.repeat_rate!r} is the share of rows that repeat a span and must be "
                             f"between 0 and 1; the plain recipe uses 0.25, the induction warm-up 0.5")
        if self.corpus not in language.CORPORA:
            raise ValueError(f"corpus={self.corpus!r} is not a corpus; choose one of {', '.join(language.CORPORA)}")
        self.tokenizer = get_tokenizer(self.tokens)  # an unknown name is the axis's ValueError, listing the rows
        if not isinstance(self.context, int) or self.context < 1:
            raise ValueError(f"context={self.context!r} is the crop length in characters and must be a whole number "
                             f"of at least 1; the plain recipe uses 256, the induction warm-up 512")
        self.max_tokens, self.max_len = 1 + self.context, 1 + 4 * self.context

    def within_window(self, window: int) -> "Language":
        """This task for a model whose sliding window shows each query `window` keys: every stage's repeated
        spans made short enough (at most window - 1 characters, the longest span whose earlier copy the window
        still reaches), the shortest at most half the longest. A span the window cannot see twice teaches
        nothing: with 20-to-200-character spans and a 32-key window, Mistral's warm-up grew a head of 0.15."""
        def fit(lengths: tuple[int, int]) -> tuple[int, int]:
            high = max(1, min(lengths[1], window - 1))
            return max(1, min(lengths[0], high // 2)), high

        fitted = copy.copy(self)
        fitted.repeat_lengths = fit(self.repeat_lengths)
        fitted.curriculum = tuple((until, {**settings, "repeat_lengths": fit(settings.get("repeat_lengths", Language.repeat_lengths))})
                                  for until, settings in self.curriculum)
        return fitted

    def describe_curriculum(self) -> list[dict]:
        """The stages in order, JSON-ready: until (share of training) and the settings that differ."""
        return [{"until": until, **settings} for until, settings in self.curriculum]

    @property
    def vocab(self) -> list[str]:
        return self.tokenizer.texts(range(self.tokenizer.vocab_size))

    @property
    def archs(self) -> tuple[str, ...]:
        return ("decoder", "encoder")

    def for_arch(self, arch: str) -> "Language":
        if arch not in self.archs:
            raise ValueError(f"the language task trains decoders (next character) and encoders (masked characters), "
                             f"not arch={arch!r}; pick a decoder or encoder preset")
        return self if self.arch == arch else Language(masked=not AXES["arch"].row(arch).causal, induction_warmup=self.induction_warmup,
                                                       docstrings=self.docstrings, corpus=self.corpus, tokens=self.tokens)

    def at(self, progress: float) -> "Language":
        for until, settings in self.curriculum:
            if progress < until:
                return Language(masked=self.masked, **{"docstrings": self.docstrings, "corpus": self.corpus,
                                                       "tokens": self.tokens, **settings, "curriculum": ()})
        return self

    def encode(self, text: str) -> list[int]:
        """<bos> and the text's tokens (characters, UTF-8 bytes outside the table; or BPE pieces); never raises on text."""
        if not text:
            raise ValueError(f"the {self.name} task needs some text; try {self.example_text!r}")
        return [self.token_id("<bos>"), *self.tokenizer.encode(text)]

    def training_ids(self) -> torch.Tensor:
        """(N,) the training text in this task's tokens."""
        if self.tokenizer.row.learned:
            return per_character.train_ids(self.tokens, self.corpus)
        return language.train_ids(self.docstrings, self.corpus)

    def make_batch(self, batch_size, generator):
        corpus, T = self.training_ids(), self.context
        starts = torch.randint(len(corpus) - T - 1, (batch_size,), generator=generator)  # (B,)
        crops = corpus[starts[:, None] + torch.arange(T + 1)]  # (B, T + 1)
        bos = torch.full((batch_size, 1), self.token_id("<bos>"))
        if self.masked:
            text = crops[:, :T]  # (B, T)
            masked = torch.rand(batch_size, T, generator=generator) < self.mask_rate  # (B, T)
            masked[torch.arange(batch_size), torch.randint(T, (batch_size,), generator=generator)] = True
            no = torch.zeros(batch_size, 1, dtype=torch.bool)
            targets = torch.cat((bos, text), dim=1)  # (B, 1 + T)
            loss_mask = torch.cat((no, masked), dim=1)  # (B, 1 + T)
            return Batch(targets=targets, loss_mask=loss_mask, input_ids=targets.masked_fill(loss_mask, self.token_id("<mask>")))
        typed = torch.tensor([i for ch in self.random_alphabet for i in self.tokenizer.encode(ch)])
        for row in range(batch_size):
            if torch.rand((), generator=generator) < self.repeat_rate:  # one span, again and again
                L = (_log_uniform if self.log_uniform_lengths else _randint)(*self.repeat_lengths, generator)
                span = crops[row, :L]
                if torch.rand((), generator=generator) < self.random_spans:  # no n-gram predicts it: only copying helps
                    span = typed[torch.randint(len(typed), (L,), generator=generator)]
                crops[row] = span.repeat(-(-(T + 1) // L))[:T + 1]
        ids = torch.cat((bos, crops[:, :T]), dim=1)  # (B, 1 + T)
        return Batch(targets=crops, loss_mask=torch.ones_like(crops, dtype=torch.bool), input_ids=ids)


TASKS: dict[str, Task] = {task.name: task for task in (Induction(), Copy(), Reverse(), Sort(), Mirror(), Mixed(), Language())}


def get_task(name_or_task: "str | Task") -> Task:
    if isinstance(name_or_task, Task):
        return name_or_task
    if name_or_task not in TASKS:
        raise ValueError(f"unknown task {name_or_task!r}; choose one of {', '.join(TASKS)}")
    return TASKS[name_or_task]

