"""What the forward-pass stepper says about each recorded step: words, formula, source line, inputs, node.

Everything is keyed by the hook's last name part (``hook_pattern``, ``hook_normalized`` ...)
in small dict registries; the steps themselves always come from the recorded trace.
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

from .figures import masked_to_nan

REPO = Path(__file__).resolve().parent.parent

# hook suffix -> what the step is, in one sentence
EXPLAIN = {
    "hook_embed": "Each token id picks its row of the embedding matrix: the model's first vector per token.",
    "hook_pos_embed": "Position vectors, added to the token embeddings so attention can tell places apart.",
    "hook_resid_pre": "The residual stream entering the block: every sublayer reads it and adds its result to it.",
    "hook_normalized": "The norm rescales each token's vector so the next sublayer sees a steady scale.",
    "hook_q": "Queries: what each token is looking for, one vector per query head.",
    "hook_k": "Keys: what each token offers to be found by, one vector per kv head (fewer with GQA/MQA).",
    "hook_v": "Values: what each token hands over when it is attended to, one vector per kv head.",
    "hook_rope_angles": "RoPE's angles: position times a frequency per pair of dimensions.",
    "hook_rot_q": "Queries rotated by their position (RoPE).",
    "hook_rot_k": "Keys rotated by their position (RoPE): q·k now depends on the distance only.",
    "hook_raw_scores": "Line 1: every query is compared with every key; scaled so the scores keep unit variance.",
    "hook_mask": "Who may see whom: 0 where attention is allowed, the most negative number where it is not.",
    "hook_alibi_bias": "ALiBi: a penalty growing with distance, its slope different for each head.",
    "hook_attn_scores": "Line 2: the scores softmax sees, with the mask (and any position bias) added.",
    "hook_pattern": "Line 3: softmax turns each query's scores into weights that sum to 1.",
    "hook_z": "Line 4: each query's output is the weighted average of the values it attends to.",
    "hook_attn_out": "Line 5: the heads are concatenated and projected back to d_model.",
    "hook_resid_mid": "The residual stream after the attention sublayer.",
    "hook_cross_attn_out": "Cross-attention's output: decoder queries read the encoder's keys and values.",
    "hook_resid_cross": "The residual stream after cross-attention.",
    "hook_pre": "The MLP's first projection, up to d_ff.",
    "hook_post": "The activation in the FFN's hidden layer.",
    "hook_gate": "SwiGLU's gate: SiLU of one projection decides, per hidden unit, how much passes.",
    "hook_up": "SwiGLU's second projection: what the gate lets through.",
    "hook_router_logits": "The router scores every expert for every token.",
    "hook_router_probs": "Softmax over experts: the router's probabilities.",
    "hook_expert_indices": "Each token keeps its top-k experts.",
    "hook_expert_weights": "The chosen experts' probabilities, renormalised to sum to 1.",
    "hook_expert_load": "How the token slots spread over the experts (1/E each when balanced).",
    "hook_aux_loss": "The load-balancing loss training adds, smallest when load and probability are even.",
    "hook_mlp_out": "The FFN sublayer's output.",
    "hook_resid_post": "The residual stream leaving the block.",
    "hook_logits": "Scores over the vocabulary for the next token (or the masked one).",
}

# how a formula depends on the config: selector name -> the config's choice on that axis
SELECTORS = {
    "norm": lambda cfg: cfg.norm,
    "ffn": lambda cfg: cfg.ffn,
    "position": lambda cfg: cfg.position,
    "block": lambda cfg: "parallel" if cfg.parallel_block else cfg.norm_position,
}

# hook suffix -> LaTeX, or (selector, {choice: LaTeX}) when the formula depends on an axis ("*" = any other)
FORMULAS = {
    "hook_embed": r"x_t = E[\mathrm{id}_t]",
    "hook_pos_embed": ("position", {
        "sinusoidal": r"P_{t,2i} = \sin\!\left(t / 10000^{2i/d}\right),\quad P_{t,2i+1} = \cos\!\left(t / 10000^{2i/d}\right)",
        "*": r"P_t = P_{\text{learned}}[t]"}),
    "hook_resid_pre": r"x = \text{the previous block's output (block 0: } E[\mathrm{id}] + P\text{)}",
    "hook_normalized": ("norm", {
        "layernorm": r"\mathrm{LN}(x) = \frac{x - \mu(x)}{\sqrt{\sigma^2(x) + \epsilon}} \odot w + b",
        "rmsnorm": r"\mathrm{RMSNorm}(x) = \frac{x}{\sqrt{\tfrac{1}{d}\sum_i x_i^2 + \epsilon}} \odot w"}),
    "hook_q": r"Q = x\,W_Q \quad \text{split into } H \text{ heads}",
    "hook_k": r"K = x\,W_K \quad \text{split into } G \text{ kv heads}",
    "hook_v": r"V = x\,W_V \quad \text{split into } G \text{ kv heads}",
    "hook_rope_angles": r"\phi_{t,i} = t \cdot \theta^{-2i/d_{head}}",
    "hook_rot_q": r"q'_t = q_t \cos\phi_t + \mathrm{rotate\_half}(q_t) \sin\phi_t",
    "hook_rot_k": r"k'_t = k_t \cos\phi_t + \mathrm{rotate\_half}(k_t) \sin\phi_t",
    "hook_raw_scores": r"S = \frac{Q K^\top}{\sqrt{d_{head}}}",
    "hook_mask": r"M_{ij} = \begin{cases} 0 & \text{query } i \text{ may see key } j \\ -\infty & \text{otherwise} \end{cases}",
    "hook_alibi_bias": r"A_{h,ij} = -m_h\,|i - j|",
    "hook_attn_scores": ("position", {"alibi": r"S' = S + M + A", "*": r"S' = S + M"}),
    "hook_pattern": r"W_{ij} = \mathrm{softmax}(S')_{ij} = \frac{e^{S'_{ij}}}{\sum_k e^{S'_{ik}}}",
    "hook_z": r"Z = W\,V",
    "hook_attn_out": r"\mathrm{Attn}(x) = \mathrm{concat}(Z_1, \dots, Z_H)\,W_O",
    "hook_resid_mid": ("block", {"pre": r"x \leftarrow x + \mathrm{Attn}(\mathrm{Norm}(x))",
                                 "post": r"x \leftarrow \mathrm{Norm}(x + \mathrm{Attn}(x))"}),
    "hook_cross_attn_out": r"\mathrm{CrossAttn}(x, m) = \mathrm{softmax}\!\left(\frac{(x W_Q)(m W_K)^\top}{\sqrt{d_{head}}}\right) m W_V\, W_O",
    "hook_resid_cross": ("block", {"pre": r"x \leftarrow x + \mathrm{CrossAttn}(\mathrm{Norm}(x), m)",
                                   "post": r"x \leftarrow \mathrm{Norm}(x + \mathrm{CrossAttn}(x, m))"}),
    "hook_pre": r"h = x\,W_{in} + b_{in}",
    "hook_post": ("ffn", {"relu": r"\max(0, h)", "gelu": r"\mathrm{GELU}(h) = h\,\Phi(h)",
                          "swiglu": r"\mathrm{SiLU}(x W_{gate}) \odot x W_{up}"}),
    "hook_gate": r"\mathrm{SiLU}(x W_{gate}) = x W_{gate}\; \sigma(x W_{gate})",
    "hook_up": r"x\,W_{up}",
    "hook_router_logits": r"r_t = x_t\,W_{router}",
    "hook_router_probs": r"p_t = \mathrm{softmax}(r_t)",
    "hook_expert_indices": r"\mathcal{E}_t = \operatorname{top-k}(p_t)",
    "hook_expert_weights": r"g_{t,e} = \frac{p_{t,e}}{\sum_{e' \in \mathcal{E}_t} p_{t,e'}}",
    "hook_expert_load": r"f_e = \frac{\#\{t : e \in \mathcal{E}_t\}}{T\,k}",
    "hook_aux_loss": r"L_{aux} = E \sum_e f_e\, \bar p_e",
    "hook_mlp_out": ("ffn", {"moe": r"\mathrm{FFN}(x_t) = \sum_{e \in \mathcal{E}_t} g_{t,e}\, \mathrm{SwiGLU}_e(x_t)",
                             "swiglu": r"\mathrm{FFN}(x) = \left(\mathrm{SiLU}(x W_{gate}) \odot x W_{up}\right) W_{down}",
                             "*": r"\mathrm{FFN}(x) = \mathrm{act}(x W_{in} + b_{in})\, W_{out} + b_{out}"}),
    "hook_resid_post": ("block", {"pre": r"x \leftarrow x + \mathrm{FFN}(\mathrm{Norm}(x))",
                                  "post": r"x \leftarrow \mathrm{Norm}(x + \mathrm{FFN}(x))",
                                  "parallel": r"x \leftarrow x + \mathrm{Attn}(\mathrm{Norm}(x)) + \mathrm{FFN}(\mathrm{Norm}(x))"}),
    "hook_logits": r"\text{logits} = h\,W_U",
}

# hook suffix -> what the step reads: a sentence when it is no recorded tensor, else sibling hooks
# (a tuple = the first of these that was recorded; "<input>" = the module's input; "<memory>" = the encoder output).
# Steps not listed read the step before them.
READS = {
    "hook_embed": "the token ids",
    "hook_pos_embed": "the position ids",
    "hook_rope_angles": "the position ids and the frequencies θ_i",
    "hook_mask": "the positions (causal, window) and the padding mask",
    "hook_alibi_bias": "the positions and each head's slope",
    "hook_q": ["<input>"], "hook_k": ["<input>"], "hook_v": ["<input>"],
    "hook_rot_q": ["hook_q", "hook_rope_angles"], "hook_rot_k": ["hook_k", "hook_rope_angles"],
    "hook_raw_scores": [("hook_rot_q", "hook_q"), ("hook_rot_k", "hook_k")],
    "hook_attn_scores": ["hook_raw_scores", "hook_mask", "hook_alibi_bias"],
    "hook_pattern": ["hook_attn_scores"],
    "hook_z": ["hook_pattern", "hook_v"],
    "hook_pre": ["<input>"], "hook_gate": ["<input>"], "hook_up": ["<input>"], "hook_router_logits": ["<input>"],
    "hook_post": [("hook_gate", "hook_pre"), "hook_up"],
    "hook_router_probs": ["hook_router_logits"],
    "hook_expert_indices": ["hook_router_probs"],
    "hook_expert_weights": ["hook_router_probs", "hook_expert_indices"],
    "hook_expert_load": ["hook_expert_indices"],
    "hook_aux_loss": ["hook_expert_load", "hook_router_probs"],
    "hook_mlp_out": [("mlp.hook_post", "mlp.hook_expert_weights")],  # MoE: the weights that mix the experts
}

# module or hook name inside a block / a stack -> node of ui.diagram.architecture_dot
DIAGRAM_NODES = {
    "hook_embed": "embed", "hook_pos_embed": "pos", "ln_final": "ln_final", "hook_logits": "head",
    "ln1": "ln1", "hook_resid_pre": "ln1", "attn": "attn", "hook_attn_out": "attn", "hook_resid_mid": "attn",
    "ln_cross": "cross", "cross_attn": "cross", "hook_cross_attn_out": "cross", "hook_resid_cross": "cross",
    "ln2": "ln2", "mlp": "ffn", "hook_mlp_out": "ffn", "hook_resid_post": "ffn",
    "ln_embed": "embed", "head_norm": "head",
}


def suffix(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def parent(name: str) -> str:
    return name.rsplit(".", 1)[0] if "." in name else ""


def formula(name: str, cfg: TransformerConfig) -> str | None:
    entry = FORMULAS.get(suffix(name))
    if entry is None or isinstance(entry, str):
        return entry
    selector, variants = entry
    choice = SELECTORS[selector](cfg)
    return variants.get(choice, variants.get("*"))


def explain(name: str) -> str:
    text = EXPLAIN.get(suffix(name), "")
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
    reads = READS.get(suffix(name))
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
    """What a sublayer reads: the block's latest norm output before it (pre-norm, parallel), else the step
    before it (post-norm); cross-attention's keys and values read the encoder's last step instead."""
    if module.endswith("cross_attn") and suffix(name) in ("hook_k", "hook_v"):
        encoder = [i for i, e in enumerate(events) if e["name"].startswith("encoder.")]
        return encoder[-1:]
    first = next(i for i, e in enumerate(events) if parent(e["name"]) == module)
    block = parent(module) + "."
    norms = [i for i in range(first) if events[i]["name"].startswith(block) and suffix(events[i]["name"]) == "hook_normalized"]
    return norms[-1:] or ([first - 1] if first > 0 else [])


def diagram_node(name: str) -> str | None:
    """The node of architecture_dot that produced this step (encoder nodes are prefixed "enc_")."""
    prefix = "enc_" if name.startswith("encoder.") else ""
    parts = name.removeprefix("encoder.").removeprefix("decoder.").split(".")
    key = parts[2] if parts[0] == "blocks" and len(parts) > 2 else parts[0]
    node = DIAGRAM_NODES.get(key)
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
