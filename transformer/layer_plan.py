"""The layer plan: one row per layer, derived once from the config.

A row says what its layer does that another layer may not: its attention kind (softmax, or one that
keeps a state), the keys it sees (a window, a chunk, or all), whether it rotates q and k (a NoPE layer
of Llama 4 or SmolLM3 does not, nor does a layer that keeps a state) and with which base, which
layer's K/V it reads (its own, or an earlier layer's in Gemma 4), and where its block's norms sit (OLMo
hybrid's linear layers before each sublayer, its full ones after). ``Block`` takes its row, so hybrid,
local/global, chunked and K/V-sharing layers and layers without positions are data, not code.
``hf_layer_type`` names a row as Hugging Face's newer configs do (``layer_types``).

Written as strings so a URL can carry them:
- ``attention_layers``: each layer's attention kind (see ``parse_attention_layers``);
- ``layer_pattern``: which layers are local (see ``parse_layer_pattern``);
- ``nope_layers``: which layers leave RoPE out: "none", "every N" (the N-th, 2N-th ... layer, as
  Llama 4 and SmolLM3 with N = 4), or a comma list of layer indices ("3, 7");
- ``moe_layers``: which layers of a routed model route to experts (see ``parse_moe_layers``);
- ``chunked_layers``: which layers ``attention_chunk`` cuts into chunks (see ``parse_chunked_layers``);
- ``kv_shared_layers``: which layers reuse an earlier layer's K and V (see ``parse_kv_shared_layers``);
- ``compress_layers``: which layers add pooled blocks of keys beside their window (see ``parse_compress_layers``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .axes import AXES
from .axes.attention import AttentionChoice, check_kind_fields
from .axes.stack import PlacementChoice

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


def parse_layer_list(field: str, text: str, n_layers: int, forms: str) -> frozenset[int]:
    """A comma list of layer indices ("3, 7"), each one a layer of the model; `forms` are the field's other words."""
    entries = [e.strip() for e in str(text).split(",")]
    if not all(e.isdigit() for e in entries):
        raise ValueError(f"{field}={text!r} does not parse: write {forms}, or layer indices separated by commas, "
                         "e.g. '3, 7'")
    layers = frozenset(int(e) for e in entries)
    beyond = sorted(i for i in layers if i >= n_layers)
    if beyond:
        raise ValueError(f"{field}={text!r} names layer {beyond[0]}, but n_layers={n_layers} numbers them "
                         f"0 to {n_layers - 1}")
    return layers


def _every_nth(field: str, text: str, n_layers: int, example: str) -> frozenset[int]:
    """"every N": the N-th, 2N-th ... layer (indices N - 1, 2N - 1 ...), as HF's Llama 4 counts its intervals."""
    step = str(text).strip().lower()[len("every"):].strip()
    if not step.isdigit() or int(step) < 1:
        raise ValueError(f"{field}={text!r} does not parse: write 'every N' with N at least 1, e.g. {example}")
    return frozenset(i for i in range(n_layers) if (i + 1) % int(step) == 0)


def parse_nope_layers(text: str, n_layers: int) -> frozenset[int]:
    """The layers that leave positions out: "none", "every N", or a comma list of layer indices."""
    spec = str(text).strip().lower()
    if spec in ("", "none"):
        return frozenset()
    if spec.startswith("every"):
        return _every_nth("nope_layers", text, n_layers, "'every 4' for layers 3, 7, 11 ... (Llama 4)")
    return parse_layer_list("nope_layers", text, n_layers, "'none', 'every N'")


def parse_moe_layers(text: str, n_layers: int) -> frozenset[int]:
    """The layers of a routed model that route to experts: "all", "every N" (Llama 4 Maverick: every 2nd), or a
    comma list of layer indices; the others keep a dense gated FFN."""
    spec = str(text).strip().lower()
    if spec == "all":
        return frozenset(range(n_layers))
    if spec.startswith("every"):
        return _every_nth("moe_layers", text, n_layers, "'every 2' for layers 1, 3, 5 ... (Llama 4 Maverick)")
    return parse_layer_list("moe_layers", text, n_layers, "'all', 'every N'")


def parse_chunked_layers(text: str, chunk: int | None, turning: list[bool]) -> frozenset[int]:
    """The layers cut into chunks of `chunk` tokens (``attention_chunk``; None: no layer is): "all"; "rope", the
    layers RoPE turns (Llama 4: its NoPE layers stay full, so they carry what crosses a chunk's edge; Hugging Face
    makes those two kinds its "chunked_attention" and "full_attention" layers); or a comma list of layer indices."""
    spec = str(text).strip().lower()
    if chunk is None:
        if spec != "all":
            raise ValueError(f"chunked_layers={text!r} names chunked layers, but attention_chunk is None; set "
                             "attention_chunk to the chunk's length (Llama 4: 8192), or chunked_layers='all'")
        return frozenset()
    if spec == "all":
        return frozenset(range(len(turning)))
    if spec == "rope":
        if not any(turning):
            raise ValueError(f"chunked_layers={text!r} chunks the layers RoPE turns, but no layer of this model turns "
                             "q and k; set position='rope', or chunked_layers to 'all' or a list of layers")
        return frozenset(i for i, turns in enumerate(turning) if turns)
    return parse_layer_list("chunked_layers", text, len(turning), "'all', 'rope' (the layers RoPE turns)")


COMPRESS_FORMS = {"window": False, "indexed": True, "pooled": False}  # entry word -> an indexer chooses its blocks


def parse_compress_layers(text: str, n_layers: int) -> tuple[tuple[int, bool], ...] | None:
    """Each layer's (compression rate, whether an indexer chooses its blocks), or None for "none".

    A comma list with one entry per layer: "window" (the sliding window alone), "indexed N" (blocks of N tokens,
    each query keeping the index_top_k its indexer scores highest: DeepSeek-V4's rate 4) or "pooled N" (blocks of
    N, every finished one seen: its rate 128).
    """
    entries = [e.strip().lower() for e in str(text).split(",")]
    if entries == ["none"]:
        return None
    if len(entries) != n_layers:
        raise ValueError(f"compress_layers={text!r} names {len(entries)} layers but n_layers={n_layers}; give one "
                         "entry per layer ('window', 'indexed 4' or 'pooled 128'), or 'none'")
    layers = []
    for entry in entries:
        word, _, rate = entry.partition(" ")
        rate = rate.strip()
        if word not in COMPRESS_FORMS or (word == "window") != (rate == "") or (rate and not rate.isdigit()):
            raise ValueError(f"compress_layers={text!r} does not parse: {entry!r} is not 'window', 'indexed N' or "
                             "'pooled N' with N a whole number (DeepSeek-V4: 'indexed 4', 'pooled 128')")
        if rate and int(rate) < 1:
            raise ValueError(f"compress_layers={text!r}: {entry!r} pools blocks of {rate} tokens; a block holds at "
                             "least 1 token (DeepSeek-V4: 4 and 128)")
        layers.append((int(rate or 0), COMPRESS_FORMS[word]))
    return tuple(layers)


def parse_kv_shared_layers(text: str, n_layers: int) -> dict[int, int | None]:
    """The layers that reuse an earlier layer's K and V, each with the layer it reads (None: the last earlier layer of
    its own type that makes its own, which ``build_plan`` finds): "none"; "last N", the last N layers, as Gemma 4's
    ``num_kv_shared_layers``; or a comma list "5 from 3, 6 from 4"."""
    spec = str(text).strip().lower()
    if spec in ("", "none"):
        return {}
    if spec.startswith("last"):
        count = spec[len("last"):].strip()
        if not count.isdigit() or int(count) < 1:
            raise ValueError(f"kv_shared_layers={text!r} does not parse: write 'last N' with N at least 1, e.g. "
                             "'last 2' for the last two layers (Gemma 4's num_kv_shared_layers)")
        if int(count) >= n_layers:
            raise ValueError(f"kv_shared_layers={text!r} leaves none of the n_layers={n_layers} layers to make the "
                             f"K and V the others reuse; set at most 'last {n_layers - 1}'")
        return {i: None for i in range(n_layers - int(count), n_layers)}
    sources: dict[int, int | None] = {}
    for entry in spec.split(","):
        parts = [p.strip() for p in entry.split("from")]
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise ValueError(f"kv_shared_layers={text!r} does not parse: write 'none', 'last N', or pairs 'layer "
                             "from layer' separated by commas, e.g. '5 from 3, 6 from 4'")
        reader, source = int(parts[0]), int(parts[1])
        if reader in sources:
            raise ValueError(f"kv_shared_layers={text!r} names layer {reader} twice; give each layer one source")
        beyond = max(reader, source)
        if beyond >= n_layers:
            raise ValueError(f"kv_shared_layers={text!r} names layer {beyond}, but n_layers={n_layers} numbers "
                             f"them 0 to {n_layers - 1}")
        sources[reader] = source
    return sources


@dataclass(frozen=True)
class LayerSpec:
    """One layer of the plan."""

    index: int
    kind: str  # its attention kind: a key of AXES["attention"] (``row`` is its row)
    window: int | None  # it sees at most this many keys, itself included; None = every key the mask allows
    chunk: int | None  # it sees only the keys of its own chunk of this many tokens (Llama 4); None = no chunks
    rotates: bool  # RoPE turns its q and k (False on a NoPE layer, and in a model without RoPE)
    rope_theta: float | None  # RoPE's base on this layer (Gemma 3's local layers have their own); None without RoPE
    rope_scaling: str  # the RoPE scaling on this layer ("none" on Gemma 3's local layers)
    kv_from: int  # the layer whose K and V it reads: its own, or an earlier layer's of its type (Gemma 4)
    norm_position: str  # where its block's norms sit: a key of AXES["norm_position"] (``placement`` is its row)
    index_top_k: int | None = None  # its lightning indexer keeps this many keys per query (DeepSeek-V3.2); None = all
    # DeepSeek-V4 (transformer/compressed_attention.py): its keys are pooled in blocks of this many tokens beside its
    # window; 0 = the window alone (still DeepSeek-V4's attention); None = ordinary attention
    compress_rate: int | None = None
    indexes_blocks: bool = False  # an indexer keeps index_top_k of those blocks per query (DeepSeek-V4's rate 4)
    routed: bool = False  # its FFN routes each token to experts (moe_layers, past first_dense_layers); else dense

    @property
    def row(self) -> AttentionChoice:
        """Its attention kind's row of the table: ``spec.row.keeps_state``."""
        return AXES["attention"].row(self.kind)

    @property
    def placement(self) -> PlacementChoice:
        """Its norm placement's row of the table: ``spec.placement.after``."""
        return AXES["norm_position"].row(self.norm_position)

    @property
    def bound(self) -> str | None:
        """The row of AXES["mask"] that bounds its keys ("sliding_window", "chunked", "top_k"), or None: every key."""
        if self.window is not None:
            return "sliding_window"
        if self.chunk is not None:
            return "chunked"
        return "top_k" if self.selects_keys else None

    @property
    def selects_keys(self) -> bool:
        """A lightning indexer picks each query's keys (``index_top_k``): its own module, keys and cache."""
        return self.index_top_k is not None

    @property
    def compresses(self) -> bool:
        """DeepSeek-V4's attention builds it: a window of keys, and pooled blocks where compress_rate > 0."""
        return self.compress_rate is not None

    @property
    def reuses_kv(self) -> bool:
        """It computes q alone and attends over an earlier layer's K and V (``kv_from``), which the cache holds once."""
        return self.kv_from != self.index

    @property
    def hf_layer_type(self) -> str:
        """Its name in a Hugging Face config's ``layer_types``."""
        if self.compress_rate:  # DeepSeek-V4's names: blocks an indexer chooses, or every finished block
            return "compressed_sparse_attention" if self.indexes_blocks else "heavily_compressed_attention"
        bound = self.bound
        return self.row.hf_layer_type if bound is None else AXES["mask"].row(bound).hf_layer_type

    @property
    def inputs_key(self) -> tuple:
        """Layers with the same key share one mask and one set of RoPE tables (or, keeping a state, one padding
        check) per forward pass."""
        return self.row.keeps_state, self.window, self.chunk, self.rotates, self.rope_theta, self.rope_scaling


def build_plan(cfg) -> tuple[LayerSpec, ...]:
    """Every layer's row, from the config's attention_layers, layer_pattern, sliding_window, nope_layers,
    moe_layers (with first_dense_layers), attention_chunk, chunked_layers, kv_shared_layers, RoPE settings and norm placements (norm_position;
    linear_norm_position on the layers that keep a state, where it is set)."""
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
    # which layers RoPE turns: not a NoPE layer, nor one that keeps a state (it has no keys to turn: Qwen3-Next)
    turning = [rotates and i not in nope and not AXES["attention"].row(kind).keeps_state
               for i, kind in enumerate(kinds)]
    chunked = parse_chunked_layers(cfg.chunked_layers, cfg.attention_chunk, turning)
    linear_placement = cfg.norm_position if cfg.linear_norm_position is None else cfg.linear_norm_position
    check_deepseek_v4(cfg)
    compressed = parse_compress_layers(cfg.compress_layers, cfg.n_layers)
    routed = (parse_moe_layers(cfg.moe_layers, cfg.n_layers) - set(range(cfg.first_dense_layers))
              if cfg.row("ffn").routed else frozenset())
    plan = []
    for i, (kind, window, turns) in enumerate(zip(kinds, windows, turning)):
        chunk = cfg.attention_chunk if i in chunked else None
        keeps_state = AXES["attention"].row(kind).keeps_state
        if keeps_state and (window is not None or chunk is not None):
            cut = (f"layer_pattern={cfg.layer_pattern!r} with sliding_window={cfg.sliding_window} gives it a window "
                   f"of {window} keys" if window is not None else
                   f"chunked_layers={cfg.chunked_layers!r} cuts it into chunks of attention_chunk={chunk} tokens")
            raise ValueError(f"layer {i} is {kind}, but {cut}; its state holds every past token (faded, never cut "
                             "off): make that layer global in layer_pattern and leave it out of chunked_layers, or "
                             "set sliding_window=None and attention_chunk=None")
        if window is not None and chunk is not None:
            raise ValueError(f"layer {i} has a window of {window} keys (layer_pattern={cfg.layer_pattern!r}, "
                             f"sliding_window={cfg.sliding_window}) and chunks of attention_chunk={chunk} tokens "
                             f"(chunked_layers={cfg.chunked_layers!r}); a layer's keys are a window or a chunk: make "
                             "it global in layer_pattern or leave it out of chunked_layers (a list of layers, or "
                             "'rope')")
        local_base = window is not None and cfg.rope_local_theta is not None  # Gemma 3: local layers keep a plain base
        plan.append(LayerSpec(
            index=i, kind=kind, window=window, chunk=chunk, rotates=turns,
            rope_theta=(cfg.rope_local_theta if local_base else cfg.rope_theta) if turns else None,
            rope_scaling=("none" if local_base else cfg.rope_scaling) if turns else "none",
            kv_from=i, norm_position=linear_placement if keeps_state else cfg.norm_position,
            index_top_k=None if keeps_state else cfg.index_top_k, routed=i in routed))
        if compressed is not None:
            plan[i] = compressed_spec(cfg, plan[i], *compressed[i])
    if compressed is not None and cfg.index_top_k is not None and not any(indexed for _, indexed in compressed):
        raise ValueError(f"index_top_k={cfg.index_top_k} is how many blocks an 'indexed' layer keeps, but "
                         f"compress_layers={cfg.compress_layers!r} has none; make a layer 'indexed 4' or set "
                         "index_top_k=None")
    readers = parse_kv_shared_layers(cfg.kv_shared_layers, cfg.n_layers)
    for i, source in readers.items():
        plan[i] = replace(plan[i], kv_from=kv_source(cfg, plan, i, source, readers))
    check_kind_fields(cfg, plan)
    return tuple(plan)


def compressed_spec(cfg, spec: LayerSpec, rate: int, indexed: bool) -> LayerSpec:
    """A layer of DeepSeek-V4: its window, its blocks' rate (0: none), an indexer only where it chooses blocks, and
    the compressed layers' own RoPE base (compress_rope_theta)."""
    if spec.row.keeps_state or spec.window is None:
        why = (f"layer {spec.index} is {spec.kind}" if spec.row.keeps_state else
               f"layer {spec.index} has no window (sliding_window={cfg.sliding_window}, "
               f"layer_pattern={cfg.layer_pattern!r})")
        raise ValueError(f"compress_layers={cfg.compress_layers!r} gives every layer DeepSeek-V4's attention, a "
                         f"sliding window beside pooled blocks, but {why}; set sliding_window (DeepSeek-V4: 128) "
                         "with softmax layers, or compress_layers='none'")
    if rate and spec.window % rate:
        raise ValueError(f"compress_layers={cfg.compress_layers!r}: layer {spec.index} pools blocks of {rate} "
                         f"tokens, which does not divide its window of {spec.window}; a block must end where a "
                         f"window can start: choose a rate among {[d for d in range(1, spec.window + 1) if spec.window % d == 0]} "
                         f"or a window that is a multiple of {rate}")
    if indexed and cfg.index_top_k is None:
        raise ValueError(f"compress_layers={cfg.compress_layers!r}: layer {spec.index} is 'indexed', but "
                         "index_top_k=None keeps no count of blocks; set index_top_k (DeepSeek-V4: 512) or make it "
                         "'pooled'")
    theta = cfg.compress_rope_theta if rate and cfg.compress_rope_theta is not None else spec.rope_theta
    return replace(spec, compress_rate=rate, indexes_blocks=indexed, index_top_k=cfg.index_top_k if indexed else None,
                   rope_theta=theta if spec.rotates else None)


def check_deepseek_v4(cfg) -> None:
    """What DeepSeek-V4's attention (compress_layers) and hyper-connections (hyper_streams) need from the rest."""
    if cfg.hyper_streams < 1:
        raise ValueError(f"hyper_streams={cfg.hyper_streams} must be at least 1: the residual is this many streams "
                         "(1 = the ordinary residual, DeepSeek-V4: 4)")
    if cfg.hyper_sinkhorn_iters < 1 or not cfg.hyper_eps > 0:
        raise ValueError(f"hyper_sinkhorn_iters={cfg.hyper_sinkhorn_iters} must be at least 1 and hyper_eps="
                         f"{cfg.hyper_eps} above 0 (DeepSeek-V4: 20 and 1e-6)")
    placement = cfg.row("norm_position")
    if cfg.hyper_streams > 1 and (cfg.row("block").parallel or cfg.row("arch").cross or placement.after
                                  or placement.on_sum or placement.skips_normed):
        raise ValueError(f"hyper_streams={cfg.hyper_streams} mixes the streams around each sublayer of a pre-norm "
                         f"block, as DeepSeek-V4 does; norm_position={cfg.norm_position!r}, parallel_block="
                         f"{cfg.parallel_block} and arch={cfg.arch!r} need norm_position='pre', parallel_block=False "
                         "and a decoder or encoder; or set hyper_streams=1")
    for field in ("o_groups", "o_rank"):
        if getattr(cfg, field) is not None and getattr(cfg, field) < 1:
            raise ValueError(f"{field}={getattr(cfg, field)} must be at least 1, or None")
    if (cfg.o_groups is None) != (cfg.o_rank is None):
        raise ValueError(f"o_groups={cfg.o_groups} and o_rank={cfg.o_rank} go together: the heads in o_groups groups, "
                         "each projected to o_rank numbers (DeepSeek-V4: 8 and 1024); set both or neither")
    compressed = cfg.compress_layers.strip().lower() != "none"
    if not compressed:
        for field, off in (("compress_rope_theta", None), ("o_groups", None)):
            if getattr(cfg, field) != off:
                raise ValueError(f"{field}={getattr(cfg, field)} is a setting of DeepSeek-V4's attention, which is "
                                 f"off (compress_layers='none'); set compress_layers or {field}={off}")
        return
    if cfg.o_groups is not None and cfg.n_heads % cfg.o_groups:
        raise ValueError(f"o_groups={cfg.o_groups} does not divide n_heads={cfg.n_heads}; pick o_groups among "
                         f"{[d for d in range(1, cfg.n_heads + 1) if cfg.n_heads % d == 0]}")
    needs = {"q_rank": (cfg.q_rank is not None, "its queries come from a latent: set q_rank (DeepSeek-V4: 1024)"),
             "n_kv_heads": (cfg.n_kv_heads == 1, "one head is both its key and its value: set n_kv_heads=1"),
             "kv_rank": (not cfg.row("kv_heads").latent, "its K = V head is no MLA latent: set kv_rank=None"),
             "arch": (cfg.row("arch").next_token, "its blocks end where a query may look: set arch='decoder'"),
             "position": (cfg.row("position").rotates_qk, "it turns q, k and the blocks: set position='rope'")}
    for field, (met, fix) in needs.items():
        if not met:
            raise ValueError(f"compress_layers={cfg.compress_layers!r} is DeepSeek-V4's attention, but "
                             f"{field}={getattr(cfg, field)!r}; {fix}")


def _turn(spec: LayerSpec) -> str:
    """How RoPE turns a layer's q and k, in the words of a message."""
    if not spec.rotates:
        return "not at all (no RoPE)"
    scaled = AXES["rope_scaling"].row(spec.rope_scaling).rescales
    return f"by RoPE at base {spec.rope_theta:g}" + (f", scaled ({spec.rope_scaling})" if scaled else "")


def kv_source(cfg, plan: list[LayerSpec], i: int, source: int | None, readers: dict) -> int:
    """The layer whose K and V layer i reuses (`source`, or None: the last earlier layer of its own type that makes
    its own, as Gemma 4 picks it), once it is checked: an earlier softmax layer of the same type that makes its own
    K and V and turns its keys as layer i turns its queries."""
    reader = plan[i]
    if source is None:
        earlier = [s.index for s in plan[:i] if s.index not in readers and s.hf_layer_type == reader.hf_layer_type]
        if not earlier:
            raise ValueError(f"kv_shared_layers={cfg.kv_shared_layers!r} has layer {i} ({reader.hf_layer_type}) reuse "
                             "the K and V of the last earlier layer of its own type, but no layer before it that "
                             "makes its own is one; set fewer shared layers, or give an earlier layer that type")
        source = earlier[-1]
    made = plan[source]
    where = f"kv_shared_layers={cfg.kv_shared_layers!r} has layer {i} reuse the K and V of layer {source}"
    if source >= i:
        raise ValueError(f"{where}, which {'is the layer itself' if source == i else 'comes after it'}: a layer can "
                         f"only reuse K and V made below it in the same pass; set a layer below {i} as its source")
    if source in readers:
        raise ValueError(f"{where}, which reuses another layer's itself; set a layer that makes its own as its source")
    kept = next((s for s in (reader, made) if s.row.keeps_state), None)
    if kept is not None:
        raise ValueError(f"{where}, but layer {kept.index} is {kept.kind}: it keeps a state, not keys and values "
                         "to share; set kv_shared_layers between softmax layers only")
    if made.hf_layer_type != reader.hf_layer_type:
        raise ValueError(f"{where}, but layer {i} is {reader.hf_layer_type} and layer {source} "
                         f"{made.hf_layer_type}: a layer reuses the K and V of a layer of its own type (Gemma 4); set "
                         f"an earlier {reader.hf_layer_type} layer as its source")
    if (made.rotates, made.rope_theta, made.rope_scaling) != (reader.rotates, reader.rope_theta, reader.rope_scaling):
        raise ValueError(f"{where}, but layer {source} turns its keys {_turn(made)} and layer {i} turns its queries "
                         f"{_turn(reader)}: q·k would mix two position codes; set a source whose keys turn as "
                         f"layer {i}'s queries do")
    return source
