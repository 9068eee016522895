"""The layer plan: one row per layer, derived once from the config.

A row says what its layer does that another layer may not: its attention kind (softmax, or one that
keeps a state), the window of keys it sees (None = all), whether it rotates q and k (a NoPE layer of
Llama 4 or SmolLM3 does not, nor does a layer that keeps a state) and with which base, and which
layer's K/V it reads (its own). ``Block`` takes its row, so hybrid, local/global layers and layers
without positions are data, not code. ``hf_layer_type`` names a row as Hugging Face's newer configs
do (``layer_types``).

Written as strings so a URL can carry them:
- ``attention_layers``: each layer's attention kind (see ``parse_attention_layers``);
- ``layer_pattern``: which layers are local (see ``parse_layer_pattern``);
- ``nope_layers``: which layers leave RoPE out: "none", "every N" (the N-th, 2N-th ... layer, as
  Llama 4 and SmolLM3 with N = 4), or a comma list of layer indices ("3, 7").
"""
from __future__ import annotations

from dataclasses import dataclass

from .axes import AXES
from .axes.attention import AttentionChoice, check_kind_fields

# named patterns: layer index, layer count -> local?
LAYER_PATTERNS = {
    "uniform": None,  # every layer alike: local when sliding_window is set, else global (Mistral; LLaMA)
    "global": lambda i, n: False,
    "local": lambda i, n: True,
    "alternate": lambda i, n: i % 2 == 0,  # local, global, local, ... (Gemma 2, gpt-oss)
}


def parse_layer_pattern(pattern: str, n_layers: int, window: int | None) -> tuple[int | None, ...]:
    """Each layer's window (None = global) from a pattern.

    "uniform", "global", "local", "alternate"; "5:1" = five local layers, then one global, repeated
    (Gemma 3); or a comma list with one entry per layer: "local", "global", or a window of its own ("64").
    """
    text = str(pattern).strip().lower()
    if text in LAYER_PATTERNS:
        rule = LAYER_PATTERNS[text]
        local = [window is not None] * n_layers if rule is None else [rule(i, n_layers) for i in range(n_layers)]
        windows = [window if is_local else None for is_local in local]
    elif ":" in text:
        parts = text.split(":")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts) or int(parts[0]) + int(parts[1]) < 1:
            raise ValueError(f"layer_pattern={pattern!r} does not parse: write 'N:M' with whole numbers, e.g. '5:1' "
                             "for five local layers then one global")
        n_local, n_global = int(parts[0]), int(parts[1])
        windows = [window if i % (n_local + n_global) < n_local else None for i in range(n_layers)]
    else:
        entries = [e.strip() for e in text.split(",")]
        if len(entries) != n_layers:
            raise ValueError(f"layer_pattern={pattern!r} names {len(entries)} layers but n_layers={n_layers}; "
                             f"give one entry per layer, or one of {', '.join(LAYER_PATTERNS)} or 'N:M'")
        windows = []
        for entry in entries:
            if entry in ("local", "l"):
                windows.append(window if window is not None else -1)
            elif entry in ("global", "g"):
                windows.append(None)
            elif entry.isdigit() and int(entry) >= 1:
                windows.append(int(entry))
            else:
                raise ValueError(f"layer_pattern={pattern!r} does not parse: {entry!r} is not 'local', 'global' or "
                                 "a window of at least 1")
    if any(w == -1 for w in windows) or (window is None and text not in ("uniform", "global") and "," not in text):
        raise ValueError(f"layer_pattern={pattern!r} has local layers but sliding_window is None; "
                         "set sliding_window to the local layers' window")
    return tuple(windows)


def parse_attention_layers(text: str, n_layers: int, linear_kind: str) -> tuple[str, ...]:
    """Each layer's attention kind, a key of AXES["attention"].

    A kind's key gives every layer that kind ("softmax", "gated-deltanet"); "3:1" = three layers of
    `linear_kind`, then one softmax layer, repeated (Qwen3.5, Qwen3-Next); a comma list names each layer,
    by its kind or by Hugging Face's ``layer_types`` ("linear_attention" is `linear_kind`, "full_attention"
    softmax), so a Hugging Face config's list reads as it is.
    """
    kinds = AXES["attention"].choices
    if not AXES["attention"].row(linear_kind, "linear_kind").keeps_state:
        raise ValueError(f"linear_kind={linear_kind!r} keeps no state; choose one of "
                         f"{', '.join(repr(key) for key, row in kinds.items() if row.keeps_state)}")
    full = next(key for key, row in kinds.items() if row.softmax)  # the kind of a "full_attention" layer
    spec = str(text).strip().lower()
    if spec in kinds:
        return (spec,) * n_layers
    if ":" in spec:
        parts = spec.split(":")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts) or int(parts[0]) + int(parts[1]) < 1:
            raise ValueError(f"attention_layers={text!r} does not parse: write 'N:M' with whole numbers, e.g. '3:1' "
                             f"for three {linear_kind} layers (linear_kind) then one softmax layer")
        n_linear, n_full = int(parts[0]), int(parts[1])
        return tuple(linear_kind if i % (n_linear + n_full) < n_linear else full for i in range(n_layers))
    hf_names = {"full_attention": full, "linear_attention": linear_kind}
    entries = [e.strip() for e in spec.split(",")]
    if len(entries) != n_layers:
        raise ValueError(f"attention_layers={text!r} names {len(entries)} layers but n_layers={n_layers}; give one "
                         "entry per layer, one kind for every layer, or 'N:M'")
    unknown = [e for e in entries if e not in kinds and e not in hf_names]
    if unknown:
        raise ValueError(f"attention_layers={text!r} does not parse: {unknown[0]!r} is no attention kind; choose "
                         f"among {', '.join(map(repr, [*kinds, *hf_names]))}")
    return tuple(hf_names.get(e, e) for e in entries)


def parse_nope_layers(text: str, n_layers: int) -> frozenset[int]:
    """The layers that leave positions out: "none", "every N", or a comma list of layer indices."""
    spec = str(text).strip().lower()
    if spec in ("", "none"):
        return frozenset()
    if spec.startswith("every"):
        step = spec[len("every"):].strip()
        if not step.isdigit() or int(step) < 1:
            raise ValueError(f"nope_layers={text!r} does not parse: write 'every N' with N at least 1, e.g. "
                             "'every 4' for layers 3, 7, 11 ... (Llama 4)")
        return frozenset(i for i in range(n_layers) if (i + 1) % int(step) == 0)
    entries = [e.strip() for e in spec.split(",")]
    if not all(e.isdigit() for e in entries):
        raise ValueError(f"nope_layers={text!r} does not parse: write 'none', 'every N', or layer indices "
                         "separated by commas, e.g. '3, 7'")
    layers = frozenset(int(e) for e in entries)
    beyond = sorted(i for i in layers if i >= n_layers)
    if beyond:
        raise ValueError(f"nope_layers={text!r} names layer {beyond[0]}, but n_layers={n_layers} numbers them "
                         f"0 to {n_layers - 1}")
    return layers


@dataclass(frozen=True)
class LayerSpec:
    """One layer of the plan."""

    index: int
    kind: str  # its attention kind: a key of AXES["attention"] (``row`` is its row)
    window: int | None  # it sees at most this many keys, itself included; None = every key the mask allows
    rotates: bool  # RoPE turns its q and k (False on a NoPE layer, and in a model without RoPE)
    rope_theta: float | None  # RoPE's base on this layer (Gemma 3's local layers have their own); None without RoPE
    rope_scaling: str  # the RoPE scaling on this layer ("none" on Gemma 3's local layers)
    kv_from: int  # the layer whose K and V it reads: its own

    @property
    def row(self) -> AttentionChoice:
        """Its attention kind's row of the table: ``spec.row.keeps_state``."""
        return AXES["attention"].row(self.kind)

    @property
    def hf_layer_type(self) -> str:
        """Its name in a Hugging Face config's ``layer_types``."""
        return "sliding_attention" if self.window is not None else self.row.hf_layer_type

    @property
    def inputs_key(self) -> tuple:
        """Layers with the same key share one mask and one set of RoPE tables (or, keeping a state, one padding
        check) per forward pass."""
        return self.row.keeps_state, self.window, self.rotates, self.rope_theta, self.rope_scaling


def build_plan(cfg) -> tuple[LayerSpec, ...]:
    """Every layer's row, from the config's attention_layers, layer_pattern, sliding_window, nope_layers and RoPE
    settings."""
    kinds = parse_attention_layers(cfg.attention_layers, cfg.n_layers, cfg.linear_kind)
    windows = parse_layer_pattern(cfg.layer_pattern, cfg.n_layers, cfg.sliding_window)
    nope = parse_nope_layers(cfg.nope_layers, cfg.n_layers)
    rotates = cfg.row("position").rotates_qk
    if nope and not rotates:
        raise ValueError(f"nope_layers={cfg.nope_layers!r} takes positions out of layer {min(nope)}, but "
                         f"position={cfg.position!r} does not rotate q and k in its layers; set position='rope' "
                         "or nope_layers='none'")
    if nope and len(nope) == cfg.n_layers:
        raise ValueError(f"nope_layers={cfg.nope_layers!r} takes positions out of all {cfg.n_layers} layers; "
                         "set position='none' instead")
    plan = []
    for i, (kind, window) in enumerate(zip(kinds, windows)):
        keeps_state = AXES["attention"].row(kind).keeps_state
        if keeps_state and window is not None:
            raise ValueError(f"layer {i} is {kind}, but layer_pattern={cfg.layer_pattern!r} with sliding_window="
                             f"{cfg.sliding_window} gives it a window of {window} keys; its state holds every past "
                             "token (faded, never cut off): make that layer global in layer_pattern, or set "
                             "sliding_window=None")
        turns = rotates and i not in nope and not keeps_state  # a state has no keys to turn (Qwen3-Next)
        local_base = window is not None and cfg.rope_local_theta is not None  # Gemma 3: local layers keep a plain base
        plan.append(LayerSpec(
            index=i, kind=kind, window=window, rotates=turns,
            rope_theta=(cfg.rope_local_theta if local_base else cfg.rope_theta) if turns else None,
            rope_scaling=("none" if local_base else cfg.rope_scaling) if turns else "none",
            kv_from=i))
    check_kind_fields(cfg, plan)
    return tuple(plan)
