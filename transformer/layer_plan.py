"""The layer plan: one row per layer, derived once from the config.

A row says what its layer does that another layer may not: its attention kind, the window of keys
it sees (None = all), whether it rotates q and k (a NoPE layer of Llama 4 or SmolLM3 does not) and
with which base, and which layer's K/V it reads (its own). ``Block`` takes its row, so local/global
layers and layers without positions are data, not code. ``hf_layer_type`` names a row as Hugging
Face's newer configs do (``layer_types``).

Written as strings so a URL can carry them:
- ``layer_pattern``: which layers are local (see ``parse_layer_pattern``);
- ``nope_layers``: which layers leave RoPE out: "none", "every N" (the N-th, 2N-th ... layer, as
  Llama 4 and SmolLM3 with N = 4), or a comma list of layer indices ("3, 7").
"""
from __future__ import annotations

from dataclasses import dataclass

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
    kind: str  # its attention kind: a key of AXES["attention"]
    window: int | None  # it sees at most this many keys, itself included; None = every key the mask allows
    rotates: bool  # RoPE turns its q and k (False on a NoPE layer, and in a model without RoPE)
    rope_theta: float | None  # RoPE's base on this layer (Gemma 3's local layers have their own); None without RoPE
    rope_scaling: str  # the RoPE scaling on this layer ("none" on Gemma 3's local layers)
    kv_from: int  # the layer whose K and V it reads: its own

    @property
    def hf_layer_type(self) -> str:
        """Its name in a Hugging Face config's ``layer_types``."""
        return "sliding_attention" if self.window is not None else "full_attention"

    @property
    def inputs_key(self) -> tuple:
        """Layers with the same key share one mask and one set of RoPE tables per forward pass."""
        return self.window, self.rotates, self.rope_theta, self.rope_scaling


def build_plan(cfg) -> tuple[LayerSpec, ...]:
    """Every layer's row, from the config's layer_pattern, sliding_window, nope_layers and RoPE settings."""
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
    for i, window in enumerate(windows):
        turns = rotates and i not in nope
        local_base = window is not None and cfg.rope_local_theta is not None  # Gemma 3: local layers keep a plain base
        plan.append(LayerSpec(
            index=i, kind="softmax", window=window, rotates=turns,
            rope_theta=(cfg.rope_local_theta if local_base else cfg.rope_theta) if turns else None,
            rope_scaling=("none" if local_base else cfg.rope_scaling) if turns else "none",
            kv_from=i))
    return tuple(plan)
