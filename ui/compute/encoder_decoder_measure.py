"""A trained encoder-decoder beside random init: T5 at classroom size, trained here to write a word backwards, and
where its decoder's cross-attention looks (the mirrored letter of the source) against the same model unlearned."""
from __future__ import annotations

import numpy as np
import streamlit as st
import torch

from transformer import Transformer, analysis, checkpoint
from transformer.training.task_measures import head_scores
from transformer.training.tasks import get_task

TRAINED = "t5-reverse"  # assets/checkpoints: scripts/train_checkpoints.py's T5 recipe
RANDOM_SEEDS = (0, 1, 2)  # random-init controls: the same config, fresh weights
SCORE_BATCHES, SCORE_WORDS, SCORE_SEED = 8, 32, 1  # fresh words the heads are scored on, a length per batch (the
# training batches drew from seed 0)


@st.cache_resource(show_spinner=False)
def reverser() -> tuple[Transformer, dict]:
    model, meta = checkpoint.load(checkpoint.SHIPPED_DIR / TRAINED, device="cpu")
    return model.eval(), meta


def _random(seed: int) -> Transformer:
    model, _ = reverser()
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return Transformer(model.cfg, device="cpu").eval()


def check_word(word: str) -> list[int]:
    """The source ids of a word the model can reverse: the task's letters, as long as it trained on."""
    task = get_task("reverse")
    longest = task.lengths[1]
    if not word:
        raise ValueError(f"type a word to reverse, for example {task.example_text!r}")
    if len(word) > longest:
        raise ValueError(f"{word!r} has {len(word)} letters; the model trained on words of {task.lengths[0]} to "
                         f"{longest} letters, so type at most {longest}")
    return task.encode(word)  # raises ValueError naming a character outside its letters


@st.cache_data(max_entries=32, show_spinner=False)
def reversal(word: str) -> dict:
    """The trained model's greedy answer, and every cross-attention layer's weights (L, H, n, n + 1) of the trained
    model and of a random-init one, both reading the source and the trained model's own answer."""
    model, _ = reverser()
    task = get_task("reverse")
    src = torch.tensor([check_word(word)])  # (1, n + 1): the letters and <eos>
    start = torch.tensor([[task.token_id("<bos>")]])  # (1, 1)
    with torch.no_grad():
        written = model.generate(src, max_new_tokens=len(word), tgt_ids=start)  # (1, 1 + n)
    tgt_in = written[:, :-1]  # (1, n): <bos> and the answer but its last letter, as teacher forcing reads it
    fresh = _random(RANDOM_SEEDS[0])

    def weights(m: Transformer) -> np.ndarray:
        return np.stack([analysis.cross_attention(m, src, tgt_in, layer)[1][0].numpy()
                         for layer in range(m.cfg.n_layers)])  # (L, H, n, n + 1)

    return {"answer": "".join(task.decode(written[0, 1:])), "source": task.decode(src[0]),
            "queries": task.decode(tgt_in[0]), "trained": weights(model), "random": weights(fresh)}


@st.cache_data(show_spinner=False)
def mirror_scores() -> dict:
    """(L, H) the weight each cross-attention head puts on the mirrored source letter, over fresh words: the trained
    model, and each random-init seed."""
    model, meta = reverser()
    task = get_task("reverse")
    batches = [task.sample(SCORE_WORDS, seed=SCORE_SEED + i) for i in range(SCORE_BATCHES)]

    def scores(m: Transformer) -> np.ndarray:
        return np.mean([head_scores(m, task, batch)["solution"].numpy() for batch in batches], axis=0)  # (L, H)

    return {"trained": scores(model), "random": np.stack([scores(_random(s)) for s in RANDOM_SEEDS]),
            "accuracy": meta.get("accuracy"), "steps": meta.get("training", {}).get("steps")}
