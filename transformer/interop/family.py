"""What every Hugging Face family mapping shares: the ``Family`` row, clear refusals, activations and RoPE."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

# HF activation name -> (our ffn, our gelu_approximate)
ACTIVATIONS = {
    "gelu": ("gelu", "none"),
    "gelu_new": ("gelu", "tanh"),
    "gelu_pytorch_tanh": ("gelu", "tanh"),
    "relu": ("relu", "none"),
}


@dataclass(frozen=True)
class Family:
    name: str
    config: Callable  # (hf_config, class_name, has_head) -> TransformerConfig fields
    weights: Callable  # (hf_model, cfg) -> Weights for everything but the output head
    notes: tuple[str, ...]  # what the mapping had to do, in words


def unsupported(hf_class: str, setting: str, why: str) -> ValueError:
    return ValueError(f"{hf_class} with {setting} is not supported: {why}")


def activation(hf_class: str, name: str) -> tuple[str, str]:
    if name not in ACTIVATIONS:
        raise unsupported(hf_class, f"activation {name!r}", f"supported activations are {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def head_dim(c) -> int | None:
    """head_dim when a config sets one of its own (Qwen3, Gemma), else None (d_model / n_heads)."""
    size = getattr(c, "head_dim", None)
    return None if size is None or size == c.hidden_size // c.num_attention_heads else int(size)


def yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    """YaRN's m(s, k) = 0.1 k ln s + 1 (1 for s <= 1)."""
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def rope_fields(hf_class: str, c, params: dict | None = None, partial: bool = False, head_dim: int | None = None) -> dict:
    """RoPE's base and scaling from a config's rope_parameters (or `params`, one layer type's dict).

    linear, dynamic, yarn and llama3 map onto ours; any other type raises. `partial`: the family honours
    partial_rotary_factor (Phi-3, GPT-NeoX); `head_dim` is then the width it is a fraction of.
    """
    top = getattr(c, "rope_parameters", None) or {}
    params = top if params is None else params
    rope_type = params.get("rope_type", params.get("type", "default"))
    fields = dict(rope_theta=float(params.get("rope_theta", getattr(c, "rope_theta", 10000.0))))
    fraction = params.get("partial_rotary_factor", getattr(c, "partial_rotary_factor", None))
    if partial and fraction is not None and fraction != 1.0:
        fields["rope_dim"] = int(head_dim * fraction)
    if rope_type == "default":
        return fields
    if rope_type not in ("linear", "dynamic", "yarn", "llama3"):
        raise unsupported(hf_class, f"rope_type={rope_type!r}", "the RoPE scalings are linear, dynamic, yarn and llama3")
    max_pos = c.max_position_embeddings
    original = max_pos if rope_type == "dynamic" else (params.get("original_max_position_embeddings") or max_pos)
    factor = params.get("factor")
    if factor is None:
        factor = max_pos / original
    fields |= dict(rope_scaling=rope_type, rope_factor=float(factor), rope_original_max_len=int(original))
    if rope_type == "llama3":
        fields |= dict(rope_low_freq_factor=float(params["low_freq_factor"]),
                       rope_high_freq_factor=float(params["high_freq_factor"]))
    if rope_type == "yarn":
        fields |= dict(yarn_beta_fast=float(params.get("beta_fast") or 32), yarn_beta_slow=float(params.get("beta_slow") or 1),
                       yarn_truncate=bool(top.get("truncate", True)))
        mscale, all_dim = params.get("mscale"), params.get("mscale_all_dim")
        if params.get("attention_factor") is not None:
            fields["yarn_attention_factor"] = float(params["attention_factor"])
        elif mscale and all_dim:
            fields["yarn_attention_factor"] = yarn_mscale(factor, mscale) / yarn_mscale(factor, all_dim)
    return fields


def rope_by_layer_type(hf_class: str, c) -> dict:
    """RoPE's fields where rope_parameters may hold one dict per layer type (Gemma 3, OLMo 3).

    Both types alike: one RoPE for every layer. Otherwise the sliding layers must turn by a plain RoPE with a
    base of their own (rope_local_theta), and the full layers' dict gives the rest, any scaling included.
    """
    params = getattr(c, "rope_parameters", None) or {}
    if "full_attention" not in params:
        return rope_fields(hf_class, c)
    full = rope_fields(hf_class, c, params["full_attention"])
    local = params.get("sliding_attention")
    if local is None or rope_fields(hf_class, c, local) == full:
        return full
    if local.get("rope_type", "default") != "default":
        raise unsupported(hf_class, f"a scaled RoPE on the sliding layers ({local['rope_type']!r})",
                          "local layers turn by a plain RoPE with their own base (rope_local_theta)")
    return full | dict(rope_local_theta=float(local["rope_theta"]))


def layer_pattern(layer_types, sliding_window) -> dict:
    """layer_pattern and sliding_window from HF's layer_types ("sliding_attention" / "full_attention" per layer)."""
    from ..layer_plan import parse_layer_pattern

    if not layer_types or sliding_window is None:
        return dict(sliding_window=None if not layer_types or "sliding_attention" not in layer_types else sliding_window)
    local = [kind == "sliding_attention" for kind in layer_types]
    if all(local):
        return dict(sliding_window=sliding_window)
    if not any(local):
        return dict(sliding_window=None)
    windows = tuple(sliding_window if is_local else None for is_local in local)
    for named in ("alternate", "5:1", "3:1", "1:1"):  # name the pattern when a name says it
        if parse_layer_pattern(named, len(local), sliding_window) == windows:
            return dict(layer_pattern=named, sliding_window=sliding_window)
    return dict(layer_pattern=",".join("local" if is_local else "global" for is_local in local),
                sliding_window=sliding_window)
