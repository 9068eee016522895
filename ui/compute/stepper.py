"""What the forward-pass stepper says about each recorded step: words, formula, source line, inputs, node.

Words, formula and inputs come from the step's hook site (``transformer.hook_sites``, keyed by the
name's last part: ``hook_pattern``, ``hook_normalized`` ...); where the step sits in the app's block
diagram is the app's own fact (``SITE_NODES``, ``MODULE_NODES`` here); the steps themselves always
come from the recorded trace.
"""
from __future__ import annotations

import functools
import inspect
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from torch import nn

from transformer import TransformerConfig
from transformer.hook_sites import SITES

from ui.figures.base import masked_to_nan

REPO = Path(__file__).resolve().parents[2]

def suffix(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def parent(name: str) -> str:
    return name.rsplit(".", 1)[0] if "." in name else ""


def formula(name: str, cfg: TransformerConfig) -> str | None:
    site = SITES.get(suffix(name))
    return site.latex(cfg, suffix(name), name) if site else None


def explain(name: str) -> str:
    site = SITES.get(suffix(name))
    text = site.explain if site else ""
    if ".cross_attn." in name:
        text += " (Cross-attention: queries from the decoder, keys and values from the encoder.)"
    return text


def named_shape(event: dict) -> str:
    """``(B=1, H=4, T_q=9, T_kv=9)``"""
    return "(" + ", ".join(f"{d}={n}" for d, n in zip(event["dims"], event["shape"])) + ")"


def inputs_of(events: list[dict], index: int) -> list[int] | str:
    """The steps (event indices) a step reads, or a sentence when it reads no recorded tensor."""
    event = events[index]
    name, module = event["name"], parent(event["name"])
    site = SITES.get(suffix(name))
    reads = site.reads if site else None
    if isinstance(reads, str):
        return reads
    if reads is None:
        return [index - 1] if index > 0 else []
    position = {e["name"]: i for i, e in enumerate(events)}
    found = []
    for wanted in reads:
        if wanted == "<input>":
            found += _module_input(events, name, module)
            continue
        for candidate in (wanted if isinstance(wanted, tuple) else (wanted,)):
            if f"{module}.{candidate}" in position:
                found.append(position[f"{module}.{candidate}"])
                break
    return found


def _module_input(events: list[dict], name: str, module: str) -> list[int]:
    """What a sublayer reads: the block's latest norm output before it (pre-norm, sandwich, parallel), else the
    step before it (post-norm, a norm after the sublayer); cross-attention's keys and values read the encoder's
    last step instead. A norm on a sublayer's output (``ln1_post``, sandwich and after) feeds the residual add,
    never the next sublayer."""
    if module.endswith("cross_attn") and suffix(name) in ("hook_k", "hook_v"):
        encoder = [i for i, e in enumerate(events) if e["name"].startswith("encoder.")]
        return encoder[-1:]
    first = next(i for i, e in enumerate(events) if parent(e["name"]) == module)
    block = parent(module) + "."
    norms = [i for i in range(first) if events[i]["name"].startswith(block) and suffix(events[i]["name"]) == "hook_normalized"
             and not parent(events[i]["name"]).endswith("_post")]
    return norms[-1:] or ([first - 1] if first > 0 else [])


# where a step sits in ui.figures.diagram.architecture_dot. A stack's or a block's own sites by their name (a
# residual sum is drawn at the sublayer that adds to it) ...
SITE_NODES = {
    "hook_embed": "embed", "hook_pos_embed": "pos", "hook_logits": "head",
    "hook_resid_pre": "ln1", "hook_attn_out": "attn", "hook_resid_mid": "attn",
    "hook_cross_attn_out": "cross", "hook_resid_cross": "cross", "hook_mlp_out": "ffn", "hook_resid_post": "ffn",
    "hook_per_layer_out": "ffn",  # Gemma 4: a layer's own input, gated in after its FFN
}
# ... and every site inside a module (q, k, the pattern; a norm's output; the router) by that module's name
MODULE_NODES = {
    "ln1": "ln1", "attn": "attn", "ln_cross": "cross", "cross_attn": "cross", "ln2": "ln2", "mlp": "ffn",
    "ln1_post": "ln1_post", "ln_cross_post": "ln_cross_post", "ln2_post": "ln2_post",
    "ln_final": "ln_final", "ln_embed": "embed", "head_norm": "head",
    "per_layer_embed": "embed", "per_layer": "ffn",  # Gemma 4's per-layer inputs: made beside the embedding, used after the FFN
    "attn_hyper": "attn", "mlp_hyper": "ffn",  # DeepSeek-V4's hyper-connections: the streams read and written by a sublayer
    "hyper_head": "ln_final",  # ... and folded into one before the final norm
}


def diagram_node(name: str) -> str | None:
    """The node of architecture_dot that produced this step (encoder nodes are prefixed "enc_")."""
    prefix = "enc_" if name.startswith("encoder.") else ""
    parts = name.removeprefix("encoder.").removeprefix("decoder.").split(".")
    key = parts[2] if parts[0] == "blocks" and len(parts) > 2 else parts[0]
    node = SITE_NODES.get(key) or MODULE_NODES.get(key)
    return prefix + node if node else None


@dataclass
class SourceLine:
    path: str  # relative to the repository, e.g. "transformer/attention.py"
    line: int  # 1-based line of the call
    snippet: str  # a few lines around it, the call marked
    qualname: str  # the class or module that holds the call


@functools.lru_cache(maxsize=512)
def _source_lines(obj) -> tuple[list[str], int, str]:
    lines, start = inspect.getsourcelines(obj)
    return lines, max(start, 1), inspect.getsourcefile(obj)


def source_line(model: nn.Module, name: str, context: int = 2) -> SourceLine | None:
    """Find the library line that passes the tensor through this hook point, e.g. ``self.hook_pattern(``.

    Looks in the class of the module that owns the hook first, then in the whole file of that
    class (stack-level hooks are called from module functions such as ``run_stack``).
    """
    owner = model.get_submodule(parent(name))
    call = re.compile(rf"\.{re.escape(suffix(name))}\(")
    for holder in (type(owner), inspect.getmodule(type(owner))):
        lines, start, path = _source_lines(holder)
        hit = next((i for i, line in enumerate(lines) if call.search(line)), None)
        if hit is None:
            continue
        lo, hi = max(0, hit - context), min(len(lines), hit + context + 1)
        shown = [line.rstrip("\n") + ("  # ◀ this step" if i == hit else "") for i, line in enumerate(lines[lo:hi], lo)]
        indent = min(len(line) - len(line.lstrip()) for line in shown if line.strip())
        rel = str(Path(path).resolve().relative_to(REPO)) if Path(path).resolve().is_relative_to(REPO) else path
        return SourceLine(rel, start + hit, "\n".join(line[indent:] for line in shown), holder.__qualname__
                          if inspect.isclass(holder) else holder.__name__)
    return None


def slice_2d(values: np.ndarray, rows: int, cols: int, fixed: dict[int, int]) -> np.ndarray:
    """The (rows, cols) plane of an array; every other axis held at fixed[axis]."""
    if rows == cols:
        raise ValueError(f"rows and columns must be two different dimensions, got dimension {rows} twice")
    index = tuple(slice(None) if axis in (rows, cols) else fixed.get(axis, 0) for axis in range(values.ndim))
    plane = values[index]  # the two kept axes, in their original order
    return plane if rows < cols else plane.T


def shape_table(events: list[dict], arrays: dict[str, np.ndarray]) -> pd.DataFrame:
    """One row per recorded step: name, named shape, elements, bytes, min/mean/max of the unmasked entries."""
    rows = []
    for event in events:
        values = arrays[event["name"]]
        kept = masked_to_nan(values)  # the mask's most negative number would swamp every statistic
        seen = kept[np.isfinite(kept)]
        rows.append({
            "step": event["index"], "name": event["name"], "shape": named_shape(event),
            "elements": int(values.size), "bytes": int(values.nbytes), "masked": int(values.size - seen.size),
            "min": float(seen.min()) if seen.size else np.nan,
            "mean": float(seen.mean()) if seen.size else np.nan,
            "max": float(seen.max()) if seen.size else np.nan,
        })
    return pd.DataFrame(rows)
