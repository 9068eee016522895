"""The app's figures in a notebook (Jupyter, VS Code, Colab): the plotly builders the pages call, on your model.

    from transformer.checkpoint import SHIPPED_DIR, load
    from ui.notebook import show

    model, meta = load(SHIPPED_DIR / "llama2-language")
    run = show.trace(model, "The cat sat on the mat. The cat sat on the mat.", task=meta["task"])
    show.pattern(run, layer=3, head=1)    # one head's weights, as the playground draws them
    show.stages(run, layer=3, head=1)     # scores -> mask -> what softmax sees -> weights, one figure each
    show.grid(run, layer=3)               # every head of one layer, heads sharing a kv head side by side
    show.compare(run, other, layer=3, head=1)   # A, B and B - A on one input, as the Compare page
    show.lens(model, "The cat sat on the mat. The cat sat on the m", task=meta["task"])   # the logit lens
    show.patch_heads(model, clean, corrupt, right="a", wrong="o", task=meta["task"])   # activation patching

Each returns a plotly Figure with the app's look built in (ui/figures/standalone.py): a notebook draws it when
it is a cell's last value (`fig.show()` elsewhere), and `fig.write_html(path)` saves it as the app's HTML download
does. A layer or head out of range raises a ValueError naming the valid range.

It lives in ui/ rather than transformer/ because the figures are the app's and the library never imports the
app (tests/test_layers.py). It calls no Streamlit-cached function: the figure builders, and the token labels of
ui/compute/tokens.py.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import plotly.graph_objects as go
import torch

from transformer import Transformer
from transformer.interpret import logit_difference, logit_lens, patch_heads as patch_each_head, residual_labels
from transformer.training.tasks import get_task
from ui.compute.tokens import char_label, visible
from ui.figures.base import head_grid, side_by_side
from ui.figures.interpret import effect_heatmaps, lens_grid
from ui.figures.playground import attention_kinds, attention_view, head_stages, stage_figure
from ui.figures.standalone import standalone

LENS_TOP_K = 5  # tokens a lens cell lists when hovered, as on the page


@dataclass
class Run:
    """One text through one model: its tokens, their labels and every recorded tensor as numpy."""

    model: Transformer
    ids: list[int]
    labels: list[str]  # one per token, as the app labels them ("␣" for a space, "<0xF0>" for a byte)
    arrays: dict[str, np.ndarray]  # hook name -> (1, ...) the recorded tensor
    task: str | None  # the task whose vocabulary read the text (a shipped checkpoint's meta["task"]), or None


def encode(model: Transformer, text: str, task: str | None = None) -> tuple[list[int], list[str]]:
    """(ids, labels): the task's vocabulary when the model was trained on a task, else one id per character."""
    text = unicodedata.normalize("NFC", text)
    if not text:
        raise ValueError("The text is empty: give at least one character.")
    if task is not None:
        vocabulary = get_task(task)
        ids = vocabulary.encode(text)
        return ids, visible(vocabulary.decode(ids))
    return [ord(ch) % model.cfg.vocab_size for ch in text], [char_label(ch) for ch in text]


def labels_of(ids: list[int], task: str | None) -> list[str]:
    return visible(get_task(task).decode(ids)) if task is not None else [char_label(chr(int(i))) for i in ids]


def trace(model: Transformer, text: str, task: str | None = None) -> Run:
    """Run `text` through `model`, recording every hook (decoder and encoder models)."""
    if model.cfg.row("arch").cross:
        raise ValueError("An encoder-decoder reads two texts: trace it with model.run_with_trace(src, tgt) and draw "
                         "in the app's playground; show.trace takes decoder and encoder models.")
    ids, labels = encode(model, text, task)
    if len(ids) > model.cfg.max_len and model.cfg.row("position").bounds_length:
        raise ValueError(f"The text is {len(ids)} tokens and this model's position table has {model.cfg.max_len}: "
                         f"give at most {model.cfg.max_len} tokens.")
    with torch.no_grad():
        _, recorded = model.run_with_trace(torch.tensor([ids], device=model.device))
    return Run(model, ids, labels, recorded.to_numpy(), task)


def _check_layer(run: Run, layer: int) -> None:
    n_layers = run.model.cfg.n_layers
    if not 0 <= layer < n_layers:
        raise ValueError(f"layer={layer} is out of range: this model has {n_layers} layers, 0 to {n_layers - 1}.")


def _check_head(n_heads: int, head: int) -> None:
    if not 0 <= head < n_heads:
        raise ValueError(f"head={head} is out of range: this layer has {n_heads} heads, 0 to {n_heads - 1}.")


def _view(run: Run):
    return attention_view(attention_kinds(run.model.cfg.arch)[0])


def _patterns(run: Run, layer: int) -> np.ndarray:
    """(H, T, T) one layer's weights; a layer that keeps a state records no softmax weights."""
    _check_layer(run, layer)
    name = _view(run).hook(layer, "hook_pattern")
    if name not in run.arrays:
        raise ValueError(f"layer {layer} records no softmax weights (it keeps a state instead): pick a layer with "
                         "softmax attention, or draw the state in the app's State page.")
    return run.arrays[name][0]


def pattern(run: Run, layer: int, head: int) -> go.Figure:
    """One head's softmax weights, queries down, keys across: the playground's "weights" figure."""
    stages = _stages(run, layer, head)
    view = _view(run)
    return standalone(stage_figure(stages[-1], run.labels, run.labels, view.x_title, view.y_title))


def _stages(run: Run, layer: int, head: int):
    """The head's recorded stages, once its layer and head are checked."""
    _check_head(_patterns(run, layer).shape[0], head)
    return head_stages(run.arrays, _view(run), layer, head)


def stages(run: Run, layer: int, head: int) -> list[go.Figure]:
    """One head's stages in the order the five lines compute them (scores, mask, ALiBi's bias where it has one,
    what softmax sees, weights), one figure each, as the playground's "one head" view."""
    view = _view(run)
    return [standalone(stage_figure(stage, run.labels, run.labels, view.x_title, view.y_title))
            for stage in _stages(run, layer, head)]


def grid(run: Run, layer: int) -> go.Figure:
    """Every head of one layer, one small heatmap each; heads that read the same kv head share a row."""
    patterns = _patterns(run, layer)
    mask_name = _view(run).hook(layer, "hook_mask")
    mask = run.arrays[mask_name][0, 0] if mask_name in run.arrays else None  # (T, T), shared by every head
    return standalone(head_grid(patterns, run.labels, run.labels, run.model.cfg.n_kv_heads, title=f"layer {layer}",
                                mask=mask))


def compare(a: Run, b: Run, layer: int, head: int) -> go.Figure:
    """One head's weights in A and B side by side and their difference (B − A), as the Compare page draws them."""
    weights = []
    for run in (a, b):
        patterns = _patterns(run, layer)
        _check_head(patterns.shape[0], head)
        weights.append(patterns[head])
    return standalone(side_by_side(weights[0], weights[1], a.labels, b.labels, title=f"layer {layer}, head {head}"))


def lens(model: Transformer, text: str, task: str | None = None) -> go.Figure:
    """The logit lens: the top token read from the residual stream after every block at every position (hover: the
    top 5), coloured by the probability of the model's final answer there, as "Why this prediction?" draws it."""
    ids, labels = encode(model, text, task)
    with torch.no_grad():
        probs = logit_lens(model, torch.tensor([ids], device=model.device)).exp()  # (L + 1, T, vocab)
    top = probs.topk(min(LENS_TOP_K, probs.shape[-1]))  # values, indices: (L + 1, T, k)
    top_ids = top.indices.cpu().numpy()
    listed = np.unique(top_ids).tolist()
    label_of = dict(zip(listed, labels_of(listed, task)))
    answers = probs[-1].argmax(-1)  # (T,) the model's own next token at each position
    answer_probs = probs.gather(-1, answers.expand(probs.shape[0], -1)[..., None])[..., 0]  # (L + 1, T)
    return standalone(lens_grid(np.vectorize(label_of.get, otypes=[object])(top_ids), top.values.cpu().numpy(),
                     answer_probs.cpu().numpy(), residual_labels(model.cfg.n_layers),
                     [f"{i}:{label}" for i, label in enumerate(labels)], title="logit lens"))


def _answer_token(model: Transformer, prompt: str, answer: str, task: str | None, role: str) -> int:
    """The one token `answer` adds after `prompt` (a task's encoding may start with <bos>, so compare the two)."""
    before, _ = encode(model, prompt, task)
    after, _ = encode(model, prompt + answer, task)
    added = after[len(before):] if after[:len(before)] == before else after
    if len(added) != 1:
        raise ValueError(f"{role}={answer!r} is {len(added)} tokens after the prompt: the answer must be one token "
                         "(for a character model, one character of its table).")
    return added[0]


def patch_heads(model: Transformer, clean: str, corrupt: str, right: str, wrong: str,
                task: str | None = None) -> go.Figure:
    """Activation patching of every head: how much of the clean run's logit difference (right − wrong, after the
    last token) copying one head's output from the clean run into the corrupted run brings back."""
    clean_ids, corrupt_ids = (encode(model, text, task)[0] for text in (clean, corrupt))
    if len(clean_ids) != len(corrupt_ids):
        raise ValueError(f"The clean prompt is {len(clean_ids)} tokens and the corrupted one {len(corrupt_ids)}: "
                         "patching needs prompts of the same length.")
    metric = logit_difference(_answer_token(model, clean, right, task, "right"),
                              _answer_token(model, clean, wrong, task, "wrong"))
    clean_t, corrupt_t = (torch.tensor([ids], device=model.device) for ids in (clean_ids, corrupt_ids))
    with torch.no_grad():
        corrupted = float(metric(model(corrupt_t)))
        gap = float(metric(model(clean_t))) - corrupted
    effects = (patch_each_head(model, clean_t, corrupt_t, metric) - corrupted).cpu().numpy()  # (L, H)
    heads = range(model.cfg.n_heads)
    return standalone(effect_heatmaps([("", effects)], [f"head {h} · kv {h // model.cfg.group_size}" for h in heads],
                           [f"block {b}" for b in range(model.cfg.n_layers)], "head", "block", gap,
                           f"patching one head's output: {clean!r} vs {corrupt!r}"))


# `from ui.notebook import show`: the whole API under one name, as the module's docstring uses it
show = SimpleNamespace(trace=trace, pattern=pattern, stages=stages, grid=grid, compare=compare, lens=lens,
                       patch_heads=patch_heads)
