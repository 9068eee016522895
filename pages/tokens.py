"""Tokens: how a sentence becomes ids -- one per character, learned byte-level BPE pieces, or an open Hugging Face
model's own tokenizer -- BPE's merges replayed one at a time, what other languages cost, and where a large
vocabulary's parameters go."""
import pandas as pd
import streamlit as st

from transformer import AXES, tokens
from ui.app.charts import show_chart
from ui.app.page import start_page
from ui.app.page_controls import KEEP, keep_valid, url_state
from ui.compute.token_counts import (MAX_CHARS, MAX_DRAWN, SAMPLES, hf_split, language_costs, our_splits,
                                     trained_on_both, vocabulary_shares)
from ui.compute.tokens import hf_tokenizer
from ui.compute.weights import WeightsSource
from ui.figures import tokens as figs

url_state("tok", tok_step=0)

state = start_page("Tokens", """
**The problem.** A model reads ids, not text. How the text is cut decides how long every sequence is, what one
row of an attention map stands for, and how many parameters sit in the embedding before the first block.

**The idea.** The lab's own models read **one token per character** (bytes for anything outside their small table):
a tiny vocabulary and long sequences. Real models read **subword pieces**. Byte-level BPE starts from the 256 bytes
and merges the most frequent adjacent pair of its training text again and again; each merge adds one token. A frequent
word becomes one token, a rare one a few pieces, and any text still encodes, byte by byte where no piece fits.

**What to look at.** The sidebar's text cut three ways; the merges that build its pieces, in the order they were
learned; the same sentence in twelve languages; the shipped models trained on each; and the share of a real model's
parameters its vocabulary takes.
""")

text = state.text
if not text:
    st.error("The input text is empty: type at least one character in the sidebar.")
    st.stop()
if len(text) > MAX_CHARS:
    st.warning(f"The text has {len(text):,} characters; this page splits the first {MAX_CHARS:,}.")
    text = text[:MAX_CHARS]

source = WeightsSource.parse(state.weights)
splits = our_splits(text)
hf = hf_tokenizer(source.path) if source.kind == "huggingface" else None
if hf is not None:
    splits.append(hf_split(text, hf, source.path.rstrip("/").rsplit("/", 1)[-1]))

st.subheader("One text, cut three ways" if hf is not None else "One text, cut two ways")
if hf is None:
    st.caption("Open a Hugging Face model (Go further → Your Hugging Face model) to see its own tokenizer here too.")
columns = st.columns(len(splits) + 1)
columns[0].metric("characters", f"{len(text):,}", f"{len(text.encode('utf-8')):,} UTF-8 bytes", delta_color="off",
                  delta_arrow="off")
for column, split in zip(columns[1:], splits):
    per_token = f"{len(text) / len(split.ids):.2f} characters per token" if split.ids else "no token at all"
    column.metric(split.name, f"{len(split.ids):,} tokens", per_token, delta_color="off", delta_arrow="off")
for i, split in enumerate(splits):
    shown = min(MAX_DRAWN, len(split.ids))
    more = f" (the first {shown} drawn)" if shown < len(split.ids) else ""
    title = f"{split.name}: {len(split.ids)} tokens{more}"
    show_chart(figs.token_tiles(split.pieces[:shown], split.ids[:shown], title), key=f"tok_tiles_{i}")
st.caption("Each tile is one token: its text (␣ a space, ⏎ a new line, <0xF0> one byte of a character that no "
           "piece holds whole) and, below, the id the model reads.")

bpe = tokens.get_tokenizer("bpe")
with st.expander("Each BPE token, its bytes and its id"):
    ids = bpe.encode(text)[:MAX_DRAWN]
    st.dataframe(pd.DataFrame({"token": bpe.pieces(ids), "id": ids,
                               "bytes": [bpe.piece_bytes(i).hex(" ") for i in ids]}), hide_index=True)

st.subheader("BPE step by step")
steps = tokens.merge_steps(bpe, text[:400])
if len(steps) == 1:
    st.info("No learned merge applies to this text: every byte stays its own token.")
else:
    # a shorter text than the one the link or the last rerun kept has fewer merges: show its last
    keep_valid("tok_step", range(len(steps)), len(steps) - 1)
    st.slider("Merges applied", 0, len(steps) - 1, key="tok_step", **KEEP,
              help="0: every byte its own token; each step applies the learned merge of lowest rank that still fits")
    step = int(st.session_state["tok_step"])
    now = steps[step]
    if step:
        st.markdown(f"**Merge {step} of {len(steps) - 1}:** `{now.left}` + `{now.right}` → `{now.left}{now.right}`, "
                    f"rank {now.rank + 1:,} of the {len(bpe.merges):,} merges learned (rank 1: the most frequent pair "
                    f"of the training text), joined in {now.count} place(s).")
    show_chart(figs.token_tiles(list(now.pieces[:MAX_DRAWN]), list(now.ids[:MAX_DRAWN]),
                                f"After {step} merges: {len(now.pieces)} tokens"), key="tok_merge_tiles")
    show_chart(figs.merge_curve([len(s.pieces) for s in steps], step, "Each merge joins pairs: fewer, longer tokens"),
               key="tok_merge_curve")
    with st.expander("Every merge, in the order it was applied here"):
        st.dataframe(pd.DataFrame([{"step": i, "pair": f"{s.left} + {s.right}", "learned as merge": s.rank + 1,
                                    "places": s.count, "tokens left": len(s.pieces)}
                                   for i, s in enumerate(steps) if i]), hide_index=True)
    if len(text) > 400:
        st.caption("The replay uses the first 400 characters of the text.")

st.subheader("The same sentence in other languages")
encoders = {split_name: encode for split_name, encode in (
    ("characters", tokens.get_tokenizer("characters").encode), ("our BPE (English)", bpe.encode))}
if hf is not None:
    encoders[splits[-1].name] = lambda sentence: hf(sentence, add_special_tokens=False)["input_ids"]
counts = language_costs(encoders)
lengths = [len(sentence) for sentence in SAMPLES.values()]
show_chart(figs.language_costs(list(SAMPLES), lengths, counts, "Tokens per character, one meaning in 12 languages"),
           key="tok_languages")
english = counts["our BPE (English)"][0] / lengths[0]
dearest = max(range(len(lengths)), key=lambda i: counts["our BPE (English)"][i] / lengths[i])
st.caption(f"Our BPE learned its merges on English only: {english:.2f} tokens per character in English, "
           f"{counts['our BPE (English)'][dearest] / lengths[dearest]:.2f} in {list(SAMPLES)[dearest]}, where almost "
           "every character is two or three bytes with no merge for them. A model pays per token: for the same "
           "meaning, more compute, a shorter effective context and a higher bill.")
with st.expander("The sentences"):
    st.dataframe(pd.DataFrame({"language": list(SAMPLES), "sentence": list(SAMPLES.values()), "characters": lengths,
                               **{f"{name} tokens": n for name, n in counts.items()}}), hide_index=True)

st.subheader("The same model, trained on each")
both = trained_on_both()
if not both:
    st.info("No shipped family has been trained on both tokenizers yet (`scripts/train_checkpoints.py`).")
else:
    names = {name: AXES["tokens"].row(name).label for name in both[0].bits_per_char}
    show_chart(figs.bits_by_tokenizer([r.family for r in both],
                                      {names[k]: [r.bits_per_char[k] for r in both] for k in names},
                                      "Held-out English, bits per character: the same recipe, two tokenizers"),
               key="tok_trained_bits")
    st.dataframe(pd.DataFrame([{"family": r.family, **{f"{names[k]}: checkpoint": r.names[k] for k in names},
                                **{f"{names[k]}: held-out bits/char": r.bits_per_char[k] for k in names},
                                **{f"{names[k]}: outside prose": r.outside_prose[k] for k in names},
                                **{f"{names[k]}: parameters": r.parameters[k] for k in names}} for r in both]),
                 hide_index=True)
    st.caption("Each family's recipe and seed are the same; only the tokens differ (and GPT-2's BPE run took twice "
               "the steps). Bits are counted per character of the same held-out text, so the two compare although "
               "a piece holds about three characters. A BPE training crop of 192 tokens holds about 570 characters, "
               "against 512 for the character models; the larger token tables add parameters. Choose *byte-level "
               "BPE* under Tokens in the sidebar to open them on any page.")

st.subheader("Why the vocabulary's size matters")
shares = vocabulary_shares()
show_chart(figs.vocabulary_share([r.model for r in shares], [r.vocab_size for r in shares], [r.share for r in shares],
                                 "Share of the parameters in the embedding (and an untied unembedding)"),
           key="tok_vocab_share")
by_name = {r.model: r for r in shares}
llama, gemma = by_name.get("LLaMA 2 7B"), by_name.get("Gemma 3 27B")
if llama and gemma:
    st.markdown(f"LLaMA 2 7B reads **{llama.vocab_size:,}** tokens: its embedding and unembedding hold "
                f"{llama.vocabulary_params / 1e6:,.0f}M parameters, **{llama.share:.1%}** of the model. Gemma 3 27B "
                f"reads **{gemma.vocab_size:,}**: {gemma.vocabulary_params / 1e6:,.0f}M, **{gemma.share:.1%}** even "
                "at 27B. A larger vocabulary makes every text shorter (fewer steps, more context per token) and "
                "covers more languages, at the price of a table of V × D numbers and a V-wide softmax per token.")
