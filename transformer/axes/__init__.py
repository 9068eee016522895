"""The one table of choices: every axis, every choice on it, as rows of data.

A row holds a choice's words (label, what it does, the problem it solves, who made it), its flags
(``PositionChoice.rotates_qk``, ``FFNChoice.routed``, ``ArchChoice.cross`` ...), the formulas and
words its hook sites show, and its config check. The config validates against these rows; the
modules keep one builder per row (tests/test_axes.py ties them); callers ask a row's flags through
``cfg.row(axis)``, never compare a choice's name. Nothing here imports torch.

Most axes are a config field of the same name (``field``); some are derived from other fields
(``TransformerConfig.choice_key``): KV heads from n_kv_heads and kv_rank, the block from
parallel_block, the scores from attn_softcap, sinks and attn_gate, linear attention's feature map
from linear_feature_map. The mask has no field: the architecture, padding and window make it. A
layer's attention kind comes from the layer plan (attention_layers).
"""
from __future__ import annotations

from .attention import ATTENTION, ATTENTION_PATTERN, FEATURE_MAP, KV_HEADS, MASK, QK_NORM, SCORES
from .base import Axis, Choice, divisors
from .cache import KV_CACHE
from .ffn import EXPERT_ACTIVATION, FFN, GELU_APPROXIMATE, ROUTER
from .positions import POSITION, ROPE_SCALING
from .stack import ARCH, BLOCK, DTYPE, NORM, NORM_POSITION
from .tokens import TOKENS
from .vision import PATCH_STEM

AXES: dict[str, Axis] = {
    "arch": ARCH,
    "kv_heads": KV_HEADS,
    "mask": MASK,
    "attention_pattern": ATTENTION_PATTERN,
    "position": POSITION,
    "rope_scaling": ROPE_SCALING,
    "qk_norm": QK_NORM,
    "norm": NORM,
    "norm_position": NORM_POSITION,
    "block": BLOCK,
    "ffn": FFN,
    "router": ROUTER,
    "expert_activation": EXPERT_ACTIVATION,
    "scores": SCORES,
    "attention": ATTENTION,
    "feature_map": FEATURE_MAP,
    "gelu_approximate": GELU_APPROXIMATE,
    "dtype": DTYPE,
    "tokens": TOKENS,  # no config field: a checkpoint's JSON names its tokenizer (transformer.tokens)
    "kv_cache": KV_CACHE,  # no config field: generation picks a layout when it makes the cache (model.CACHE_LAYOUTS)
    "patch_stem": PATCH_STEM,  # no config field: a ViT checkpoint's JSON names it (transformer.vision.VisionShape)
}

# config field -> its axis: the fields whose value is a key of the table
FIELD_AXES: dict[str, str] = {axis.field: name for name, axis in AXES.items() if axis.field}


def row(axis: str, key: str) -> Choice:
    """The row of one choice, e.g. ``row("position", "rope").rotates_qk``; an unknown key is a ValueError."""
    return AXES[axis].row(key)


def keys(axis: str) -> tuple[str, ...]:
    """The choices of an axis, in the table's order."""
    return AXES[axis].keys()


def label(axis: str, choice: str) -> str:
    """How the pages name a choice, e.g. ``label("position", "rope") == "RoPE"``."""
    return AXES[axis].choices[choice].label


def scores_choices(cfg) -> list[str]:
    """The keys of the "scores" axis a config switches on (the plain recipe's alone when none)."""
    on = [key for key, row in SCORES.choices.items() if row.switch and getattr(cfg, row.switch) not in (None, False)]
    return on or [key for key, row in SCORES.choices.items() if not row.switch]


__all__ = ["AXES", "FIELD_AXES", "Axis", "Choice", "row", "keys", "label", "scores_choices", "divisors"]
