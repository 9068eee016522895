"""Which layers of a model's plan weigh keys by a softmax and which keep a state, and a model with other attention
layers: what the pages ask when a model mixes the two (a 3:1 hybrid), from the plan's rows, never the kinds' names."""
from __future__ import annotations

from transformer import AXES, TransformerConfig
from transformer.axes.attention import KIND_FIELDS
from transformer.layer_plan import parse_attention_layers

SOFTMAX = next(key for key, row in AXES["attention"].choices.items() if row.softmax)  # attention_layers: all softmax
HYBRID = "3:1"  # three linear layers, then one softmax layer: Qwen3-Next, Qwen3.5


def softmax_layers(cfg: TransformerConfig) -> list[int]:
    """The layers whose weights are a softmax (each row sums to 1), with a mask, scores and a KV cache."""
    return [spec.index for spec in cfg.layer_plan() if spec.row.softmax]


def state_layers(cfg: TransformerConfig) -> list[int]:
    """The layers whose kind keeps a state matrix: their hook_pattern holds implied weights, not a softmax. (A gated
    short convolution, LFM2's, keeps only its last inputs and has no weights at all: it is not one of them.)"""
    return [spec.index for spec in cfg.layer_plan() if spec.row.keeps_state and not spec.row.conv_only]


def non_softmax_layers(cfg: TransformerConfig) -> list[int]:
    """The layers that weigh no keys by a softmax, so have no scores, mask or KV cache: those that keep a state, and
    gated short convolutions (LFM2), which keep only their last inputs."""
    return [spec.index for spec in cfg.layer_plan() if not spec.row.softmax]


def with_attention_layers(cfg: TransformerConfig, layers: str) -> TransformerConfig:
    """cfg with other attention layers (``attention_layers``); where none of them keeps a state, the settings only
    linear layers read go back to their defaults, as the config refuses them without such a layer. A ValueError
    when the new layers do not fit the rest (a softmax setting in a model without softmax layers names its fix)."""
    changes = {"attention_layers": layers}
    kinds = parse_attention_layers(layers, cfg.n_layers, cfg.linear_kind)
    if not any(AXES["attention"].row(kind).keeps_state for kind in kinds):
        changes |= {field: default for field, (default, _) in KIND_FIELDS.items()}
    return cfg.replace(**changes)


def softmax_twin(cfg: TransformerConfig) -> TransformerConfig:
    """The same model with a softmax in every layer (cfg itself when every layer has one already)."""
    return cfg if len(softmax_layers(cfg)) == cfg.n_layers else with_attention_layers(cfg, SOFTMAX)
