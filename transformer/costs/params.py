"""Parameters term by term, from a model's dimensions alone (no model is built).

    param_terms(cfg) -> [ParamTerm]          every weight matrix, bias and norm, with its formula
    param_counts(cfg) -> {"total", "active", "embedding", "attention", "ffn", "norms", "head"}
    multiplied_params(cfg)                    the active parameters a token multiplies by (no embedding lookup)
    matmul_weights_per_token(cfg)             the weights in the matrix products one token goes through
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..axes import AXES
from ..config import TransformerConfig

# the letters the formulas are written in
SYMBOLS = {"V": "vocabulary size", "D": "d_model", "L": "layers", "H": "query heads", "G": "kv heads",
           "d_h": "d_head: a head's q and k width (head_dim, else D / H)",
           "d_v": "a head's value width (v_head_dim, else d_h)",
           "F": "d_ff (the FFN's hidden width)", "E": "experts", "k": "experts per token",
           "F_e": "d_expert (an expert's hidden width, else F)", "S": "shared experts (every token uses them)",
           "r_kv": "kv_rank (MLA: the latent K and V are rebuilt from)",
           "r_q": "q_rank (MLA: the latent q is rebuilt from)",
           "d_r": "d_rope (MLA: the rotated part of each key, shared by all heads)",
           "P": "max_len (positions in the learned table)",
           "R": "relative_buckets (T5: learned bias rows per head)",
           "H_k": "a state layer's q and k heads", "H_s": "a state layer's value heads (one state each)",
           "d_k": "a state's rows (its key width)", "d_s": "a state's columns (its value width)",
           "c": "the short convolution's width (tokens)",
           "p": "per_layer_dim (each layer's own input per token, Gemma 4)",
           "I": "the lightning indexer's heads (index_heads)", "d_I": "an indexer head's width (index_head_dim)",
           "m": "a compressed layer's block of tokens (compress_rate, DeepSeek-V4)",
           "g": "the output projection's groups (o_groups)", "r_o": "each group's rank (o_rank)",
           "n": "residual streams (hyper_streams)"}
PARTS = ("embedding", "attention", "ffn", "norms", "head")


@dataclass(frozen=True)
class ParamTerm:
    """One kind of weight: its formula for one copy, how many copies the model holds, and where they live."""

    part: str  # one of PARTS
    name: str  # e.g. "W_q"
    formula: str  # parameters of one copy, in the letters of SYMBOLS
    per_copy: int
    copies: int  # 1, or one per block (x 2 stacks in an encoder-decoder)
    where: tuple[str, ...]  # the model's parameter names that hold it (fnmatch patterns)
    active_per_copy: int | None = None  # MoE experts: the parameters of the top-k experts one token uses
    # of one copy, the weights a token's matrix products multiply by: biases, norms, sinks and lookups none;
    # MoE experts the top-k's; a token embedding that the output head is tied to, all of it
    matmul_per_copy: int = 0

    @property
    def count(self) -> int:
        return self.per_copy * self.copies

    @property
    def active(self) -> int:
        return (self.per_copy if self.active_per_copy is None else self.active_per_copy) * self.copies

    @property
    def matmul_weights(self) -> int:
        return self.matmul_per_copy * self.copies


def _matrices(part: str, name: str, formula: str, weights: int, biases: int, copies: int, where: tuple[str, ...]
              ) -> ParamTerm:
    """A term of weight matrices and their biases: a token multiplies by the weights and adds the biases."""
    return ParamTerm(part, name, formula, weights + biases, copies, where, matmul_per_copy=weights)


def _with_bias(formula: str, bias: str, has_bias: bool) -> str:
    return f"{formula} + {bias}" if has_bias else formula


def _times(n: int, formula: str) -> str:
    """'2·D' for n = 2, 'D' for n = 1."""
    return formula if n == 1 else f"{n}·{formula}"


def param_terms(cfg: TransformerConfig) -> list[ParamTerm]:
    """Every parameter of ``Transformer(cfg)``, grouped into terms with their formulas.

    The terms add up to the built model's parameter count (tied weights once), and each term's
    ``where`` names exactly the parameters it counts, so a test can hold every formula against the
    live model. Each choice is read off its row in the table (``cfg.row("ffn")``, ``cfg.row("norm")``,
    ``cfg.row("position")``; a layer's kind and norm placement off its row of the layer plan), never off its
    name. Buffers (the sigmoid router's choice bias, RoPE and sinusoidal tables) are no parameters and count
    nowhere.
    """
    d, V, L = cfg.d_model, cfg.vocab_size, cfg.n_layers
    n_stacks = 2 if cfg.row("arch").cross else 1
    blocks = n_stacks * L  # blocks with self-attention and an FFN
    cross_layers = L if cfg.row("arch").cross else 0  # decoder blocks that also cross-attend
    norm, norm_formula = (2 * d, "2·D") if cfg.row("norm").centres else (d, "D")  # LayerNorm: a scale and a shift
    table = V * d  # the token embedding; the output head multiplies by a matrix of the same size, or by this one
    terms = [ParamTerm("embedding", "token embedding", "V·D", table, 1, ("embed.weight",),
                       matmul_per_copy=table if cfg.tie_embeddings else 0)]
    if cfg.row("position").table_param_terms:
        terms.append(ParamTerm("embedding", "position table", "P·D", cfg.max_len * d, n_stacks,
                               ("*pos.table.weight",)))
    if cfg.row("position").learned_bias:  # T5: one bias per bucket and head, looked up, in each stack
        terms.append(ParamTerm("embedding", "relative position bias", "R·H", cfg.relative_buckets * cfg.n_heads,
                               n_stacks, ("*rel_bias.table.weight",)))
    if cfg.embed_norm:  # always a LayerNorm (BERT, BLOOM)
        terms.append(ParamTerm("norms", "embedding LayerNorm", "2·D", 2 * d, n_stacks, ("*ln_embed.*",)))
    # the layer plan decides who holds what: a hybrid's softmax layers the attention terms, its state-keeping
    # layers their own (``_state_terms``); a layer that reuses an earlier one's K and V no W_k, W_v or k_norm
    plan = cfg.layer_plan()
    softmax = [spec for spec in plan if not AXES["attention"].row(spec.kind).keeps_state]
    everywhere = len(softmax) == len(plan)
    compressing = [spec for spec in softmax if spec.compresses]  # DeepSeek-V4's attention: terms of its own
    softmax = [spec for spec in softmax if not spec.compresses]

    def at(specs: list) -> tuple[str, ...]:  # the attention modules of these layers (of both stacks)
        return ("*blocks.*.attn.",) if len(specs) == len(plan) else tuple(f"*blocks.{s.index}.attn." for s in specs)

    # a layer's own head sizes (Gemma 4's global layers) give it its own terms: one group per layer config
    groups: dict[tuple, tuple[TransformerConfig, list]] = {}
    for spec in softmax:
        layer_cfg = cfg.layer_config(spec)
        key = (layer_cfg.d_head, layer_cfg.n_kv_heads, layer_cfg.k_eq_v)
        groups.setdefault(key, (layer_cfg, []))[1].append(spec)
    for group, (layer_cfg, specs) in enumerate(groups.values()):
        named = "" if len(groups) == 1 else (" (global layers)" if specs[0].window is None else " (local layers)")
        makes_kv = [spec for spec in specs if not spec.reuses_kv]
        kv = (n_stacks * len(makes_kv), at(makes_kv))
        group_terms = (_latent_attention_terms(cfg, n_stacks * len(specs), at(specs)) if cfg.row("kv_heads").latent
                       else _attention_terms(layer_cfg, n_stacks * len(specs), at(specs), kv))
        group_terms += _qk_norm_terms(layer_cfg, specs, everywhere and len(groups) == 1, n_stacks,
                                      0 if group else cross_layers, at)  # cross-attention's norms: once
        terms += [replace(term, name=term.name + named) for term in group_terms]
    selecting = [spec for spec in softmax if spec.selects_keys]
    if selecting:
        terms += _indexer_terms(cfg, n_stacks * len(selecting), at(selecting))
    if compressing:
        terms += _compressed_attention_terms(cfg, compressing)
    if not everywhere:
        terms += _state_terms(cfg, [spec.index for spec in plan if spec not in softmax])
    if cfg.row("arch").cross:  # the decoder's blocks read the encoder through a second attention
        terms += _cross_attention_terms(cfg, cross_layers)
    terms += _per_layer_terms(cfg)
    terms += _block_norm_terms(cfg, n_stacks, norm, norm_formula)
    terms += _ffn_terms(cfg, n_stacks)
    if cfg.hyper_streams > 1:
        terms += _hyper_terms(cfg, blocks)
    if cfg.has_final_norm:
        terms.append(ParamTerm("norms", "final norm", norm_formula, norm, n_stacks, ("*ln_final.*",)))
    if cfg.head_transform:  # BERT's masked-LM head: dense -> GELU -> LayerNorm before the unembedding
        dense = d * d
        terms.append(ParamTerm("head", "head transform", "D·D + D + 2·D", dense + 3 * d, 1,
                               ("head_dense.*", "head_norm.*"), matmul_per_copy=dense))
    if not cfg.tie_embeddings:
        terms.append(_matrices("head", "unembedding W_U", "D·V", table, 0, 1, ("unembed.weight",)))
    if cfg.head_bias:
        terms.append(ParamTerm("head", "output bias", "V", V, 1, ("unembed.bias",)))
    return terms


def _qk_norm_terms(cfg: TransformerConfig, softmax: list, everywhere: bool, n_stacks: int, cross_layers: int,
                   at) -> list[ParamTerm]:
    """QK-norm's weights on these softmax layers (`at` names their modules), and in cross-attention; `everywhere`:
    they are all the model's layers."""
    qk = cfg.row("qk_norm")
    if not (qk.normalises and qk.weighted):  # an RMSNorm, in self- and cross-attention alike
        return []
    q_normed = [spec for spec in softmax if spec.rotates or not qk.rope_layers_only]
    k_normed = [spec for spec in q_normed if not spec.reuses_kv]
    q_width, k_width = (cfg.d_head, cfg.d_head) if qk.per_head else (cfg.n_heads * cfg.d_head,
                                                                     cfg.n_kv_heads * cfg.d_head)
    if q_normed == k_normed == softmax and everywhere:  # every layer both: one term
        return [ParamTerm("norms", f"QK-norm ({cfg.qk_norm}: q_norm and k_norm)",
                          "2·d_h" if qk.per_head else "H·d_h + G·d_h", q_width + k_width,
                          n_stacks * len(softmax) + cross_layers,
                          tuple(f"*blocks.*.{attention}.{n}.*" for attention in ("attn", "cross_attn")
                                for n in ("q_norm", "k_norm")))]
    terms = []
    for name, layers, width, formula in (("q_norm", q_normed, q_width, "d_h" if qk.per_head else "H·d_h"),
                                         ("k_norm", k_normed, k_width, "d_h" if qk.per_head else "G·d_h")):
        if layers:
            terms.append(ParamTerm("norms", f"QK-norm ({cfg.qk_norm}: {name})", formula, width,
                                   n_stacks * len(layers) + cross_layers,
                                   _at(at(layers), f"{name}.*") + ((f"*blocks.*.cross_attn.{name}.*",)
                                                                   if cross_layers else ())))
    return terms


def _per_layer_terms(cfg: TransformerConfig) -> list[ParamTerm]:
    """Gemma 4: the per-layer table (looked up), the projection of the main embedding that joins it and its norm;
    each block's gate, W_up and norm; each block's scalar (transformer/per_layer.py)."""
    d, V, L, p = cfg.d_model, cfg.vocab_size, cfg.n_layers, cfg.per_layer_dim
    terms = []
    if p is not None:
        terms += [
            ParamTerm("embedding", "per-layer embedding table", "V·L·p", V * L * p, 1, ("per_layer_embed.table.*",)),
            _matrices("ffn", "per-layer input projection (D -> L·p)", "D·L·p", d * L * p, 0, 1,
                      ("per_layer_embed.projection.*",)),
            ParamTerm("norms", "per-layer input norm", "p", p, 1, ("per_layer_embed.norm.*",)),
            _matrices("ffn", "per-layer gate W_gate and W_up", "2·D·p", 2 * d * p, 0, L,
                      ("*blocks.*.per_layer.gate.*", "*blocks.*.per_layer.up.*")),
            ParamTerm("norms", "per-layer output norm", "D", d, L, ("*blocks.*.per_layer.norm.*",)),
        ]
    if cfg.layer_scalar:
        terms.append(ParamTerm("norms", "layer scalar", "1", 1, L, ("*blocks.*.layer_scalar",)))
    return terms


def _attention_terms(cfg: TransformerConfig, blocks: int, attn: tuple[str, ...],
                     kv: tuple[int, tuple[str, ...]]) -> list[ParamTerm]:
    """MHA, GQA, MQA: W_q, W_k, W_v, W_o (q, k, v biases with has_qkv_bias; W_o's with bias), gate and sinks.
    `kv`: how many layers make their own K and V, and where (the others reuse an earlier layer's)."""
    return _projection_terms(cfg, blocks, attn, kv) + _sink_terms(cfg, blocks, attn)


def _at(prefixes: tuple[str, ...], *names: str) -> tuple[str, ...]:
    """The parameter-name patterns of these names under every module prefix."""
    return tuple(prefix + name for name in names for prefix in prefixes)


def _projection_terms(cfg: TransformerConfig, copies: int, prefix: tuple[str, ...],
                      kv: tuple[int, tuple[str, ...]] | None = None) -> list[ParamTerm]:
    """W_q, W_k and W_v, W_o, and with attn_gate W_gate: one term each, for the attention modules under `prefix`
    (W_k and W_v under `kv`'s, where some layers reuse another's K and V)."""
    kv_copies, kv_prefix = kv or (copies, prefix)
    d, H, G, dh, dv = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.d_head, cfg.d_v
    qkv_b, b = int(cfg.has_qkv_bias), int(cfg.bias)
    v = _value_width(cfg)
    kv, kv_bias = _kv_formulas(cfg)
    value_weights = 0 if cfg.k_eq_v else dv  # K = V: W_k's output serves as the values too
    terms = [
        _q_term(cfg, copies, prefix),
        _matrices("attention", "W_k (K = V)" if cfg.k_eq_v else "W_k and W_v", _with_bias(kv, kv_bias, qkv_b),
                  d * G * (dh + value_weights), qkv_b * G * (dh + value_weights), kv_copies,
                  _at(kv_prefix, "k_proj.*", "v_proj.*")),
        _o_term(cfg, copies, prefix),
    ]
    if cfg.attn_gate:  # gated attention: concat(heads) * sigmoid(x W_gate)
        terms.append(_matrices("attention", "W_gate (output gate)", _with_bias(f"D·H·{v}", f"H·{v}", b), d * H * dv,
                               b * H * dv, copies, _at(prefix, "gate_proj.*")))
    return terms


def _q_term(cfg: TransformerConfig, copies: int, prefix: tuple[str, ...]) -> ParamTerm:
    """W_q, D -> H·d_h, with a bias when has_qkv_bias."""
    d, H, dh, qkv_b = cfg.d_model, cfg.n_heads, cfg.d_head, int(cfg.has_qkv_bias)
    return _matrices("attention", "W_q", _with_bias("D·H·d_h", "H·d_h", qkv_b), d * H * dh, qkv_b * H * dh, copies,
                     _at(prefix, "q_proj.*"))


def _o_term(cfg: TransformerConfig, copies: int, prefix: tuple[str, ...]) -> ParamTerm:
    """W_o, H·d_v -> D, with a bias when bias."""
    d, H, dv, b = cfg.d_model, cfg.n_heads, cfg.d_v, int(cfg.bias)
    return _matrices("attention", "W_o", _with_bias(f"H·{_value_width(cfg)}·D", "D", b), H * dv * d, b * d, copies,
                     _at(prefix, "o_proj.*"))


def _value_width(cfg: TransformerConfig) -> str:
    """The letter of a head's value width in the formulas: d_v only where it differs from d_h."""
    return "d_h" if cfg.d_v == cfg.d_head else "d_v"


def _kv_formulas(cfg: TransformerConfig) -> tuple[str, str]:
    """W_k and W_v's weights and biases in letters: 2·D·G·d_h and 2·G·d_h, spelt out when d_v differs."""
    if cfg.k_eq_v:
        return "D·G·d_h", "G·d_h"
    if _value_width(cfg) == "d_h":
        return "2·D·G·d_h", "2·G·d_h"
    return "D·G·d_h + D·G·d_v", "G·d_h + G·d_v"


def _sink_terms(cfg: TransformerConfig, blocks: int, attn: tuple[str, ...]) -> list[ParamTerm]:
    if not cfg.sinks:  # self-attention only: cross-attention has no sinks
        return []
    return [ParamTerm("attention", "attention sinks", "H", cfg.n_heads, blocks, _at(attn, "sinks"))]


def _latent_attention_terms(cfg: TransformerConfig, blocks: int, attn: tuple[str, ...]) -> list[ParamTerm]:
    """MLA: q (full, or down -> norm -> up), the latent kv_down, the shared rope key, k_up and v_up, W_o."""
    d, H, dh, dv, r, dr = cfg.d_model, cfg.n_heads, cfg.d_head, cfg.d_v, cfg.kv_rank, cfg.d_rope
    qkv_b = int(cfg.has_qkv_bias)
    if cfg.q_rank is not None:
        rq = cfg.q_rank
        terms = [_matrices("attention", "W_q down and up (MLA)", _with_bias("D·r_q + r_q·H·d_h", "r_q", qkv_b),
                           d * rq + rq * H * dh, qkv_b * rq, blocks, _at(attn, "q_down.*", "q_up.*"))]
    else:
        terms = [_q_term(cfg, blocks, attn)]
    terms.append(_matrices("attention", "W_kv down (MLA: the latent the cache keeps)",
                           _with_bias("D·r_kv", "r_kv", qkv_b), d * r, qkv_b * r, blocks, _at(attn, "kv_down.*")))
    if dr:
        terms.append(_matrices("attention", "W_k rope (MLA: one rotated key for all heads)",
                               _with_bias("D·d_r", "d_r", qkv_b), d * dr, qkv_b * dr, blocks, _at(attn, "k_rope.*")))
    terms += [
        _matrices("attention", "W_k up and W_v up (MLA)",
                  "r_kv·H·(d_h - d_r) + r_kv·H·d_v" if dr else "r_kv·H·d_h + r_kv·H·d_v",
                  r * H * (dh - dr) + r * H * dv, 0, blocks, _at(attn, "k_up.*", "v_up.*")),
        _o_term(cfg, blocks, attn),
        ParamTerm("norms", "MLA latent norms", "r_kv + r_q" if cfg.q_rank is not None else "r_kv",
                  r + (cfg.q_rank or 0), blocks, _at(attn, "kv_norm.*", "q_down_norm.*")),
    ]
    return terms + _sink_terms(cfg, blocks, attn)


def _indexer_terms(cfg: TransformerConfig, blocks: int, attn: tuple[str, ...]) -> list[ParamTerm]:
    """A lightning indexer (index_top_k): its queries (from the q latent r_q where MLA has one, else from D), one
    key and the heads' weights from D, and its key's LayerNorm."""
    d, heads, width = cfg.d_model, cfg.index_heads, cfg.index_head_dim
    source, letter = (cfg.q_rank, "r_q") if cfg.q_rank is not None else (d, "D")
    indexer = _at(attn, "indexer.")
    return [_matrices("attention", "indexer W_q, W_k and head weights", f"{letter}·I·d_I + D·d_I + D·I",
                      source * heads * width + d * width + d * heads, 0, blocks,
                      _at(indexer, "q_proj.*", "k_proj.*", "head_weights.*")),
            ParamTerm("norms", "indexer key LayerNorm", "2·d_I", 2 * width, blocks, _at(indexer, "k_norm.*"))]


def _compressed_attention_terms(cfg: TransformerConfig, specs: list) -> list[ParamTerm]:
    """DeepSeek-V4's layers: q through a latent, one head that is both key and value, the (grouped) output, sinks,
    and where blocks are pooled (rate m) the pooling weights; at rate 4 each token writes two overlapping series,
    and the block indexer pools keys of its own. Layers alike share terms."""
    d, H, dh, rq = cfg.d_model, cfg.n_heads, cfg.d_head, cfg.q_rank
    every = len(specs) == cfg.n_layers
    attn = ("*blocks.*.attn.",) if every else tuple(f"*blocks.{s.index}.attn." for s in specs)
    blocks = len(specs)
    terms = [_matrices("attention", "W_q down and up, W_kv (one head, key and value)", "D·r_q + r_q·H·d_h + D·d_h",
                       d * rq + rq * H * dh + d * dh, 0, blocks, _at(attn, "q_down.*", "q_up.*", "kv_proj.*")),
             ParamTerm("norms", "q latent and kv norms", "r_q + d_h", rq + dh, blocks,
                       _at(attn, "q_down_norm.*", "kv_norm.*"))]
    if cfg.o_groups is not None:
        g, ro = cfg.o_groups, cfg.o_rank
        terms.append(_matrices("attention", "W_o grouped: each group's H·d_h / g down to r_o, then g·r_o to D",
                               "r_o·H·d_h + g·r_o·D", ro * H * dh + g * ro * d, 0, blocks,
                               _at(attn, "o_group_proj", "o_proj.*")))
    else:
        terms.append(_matrices("attention", "W_o", "H·d_h·D", H * dh * d, 0, blocks, _at(attn, "o_proj.*")))
    terms += _sink_terms(cfg, blocks, attn)
    kinds: dict[tuple, list] = {}
    for spec in specs:
        if spec.compress_rate:
            kinds.setdefault((spec.compress_rate, spec.indexes_blocks), []).append(spec)
    for (rate, indexed), alike in kinds.items():
        where = tuple(f"*blocks.{s.index}.attn." for s in alike)
        series, named = (2, f"rate {rate}, blocks overlapping, chosen by an indexer") if indexed else (1, f"rate {rate}")
        terms += _pool_terms(f"block pooling ({named})", rate, series, "d_h", dh, d, len(alike), _at(where, "pool."))
        if indexed:
            heads, width = cfg.index_heads, cfg.index_head_dim
            indexer = _at(where, "block_indexer.")
            terms.append(_matrices("attention", f"block indexer W_q and head weights (rate {rate})", "r_q·I·d_I + D·I",
                                   rq * heads * width + d * heads, 0, len(alike),
                                   _at(indexer, "q_proj.*", "head_weights.*")))
            terms += _pool_terms(f"block indexer's own pooling (rate {rate})", rate, 2, "d_I", width, d, len(alike),
                                 _at(indexer, "pool."))
    return terms


def _pool_terms(name: str, rate: int, series: int, letter: str, width: int, d: int, copies: int,
                pool: tuple[str, ...]) -> list[ParamTerm]:
    """A BlockPool: values and gates from D (series of width each), a gate bias per slot of the block, its norm."""
    times = "2·" if series == 2 else ""
    return [_matrices("attention", f"{name}: W_pool and W_gate", f"2·D·{times}{letter}", 2 * d * series * width, 0,
                      copies, _at(pool, "pool_proj.*", "gate_proj.*")),
            ParamTerm("attention", f"{name}: each slot's gate bias", f"m·{times}{letter}", rate * series * width, copies,
                      _at(pool, "position_bias")),
            ParamTerm("norms", f"{name}: norm", letter, width, copies, _at(pool, "norm.*"))]


def _hyper_terms(cfg: TransformerConfig, blocks: int) -> list[ParamTerm]:
    """Hyper-connections (hyper_streams n): before each sublayer, weights read off all n streams (n·D) make its
    n pre, n post and n·n mixing numbers, with a bias and three scales; the head collapses the streams once."""
    n, d = cfg.hyper_streams, cfg.d_model
    mixing = n * (n + 2) * n * d
    return [ParamTerm(part, f"hyper-connection around the {sublayer}", "n·(n + 2)·n·D + n·(n + 2) + 3",
                      mixing + n * (n + 2) + 3, blocks, (f"*blocks.*.{module}.*",), matmul_per_copy=mixing)
            for part, sublayer, module in (("attention", "attention", "attn_hyper"), ("ffn", "FFN", "mlp_hyper"))] + [
            ParamTerm("head", "hyper-connection head", "n·n·D + n + 1", n * n * d + n + 1, 1, ("hyper_head.*",),
                      matmul_per_copy=n * n * d)]


def _state_terms(cfg: TransformerConfig, layers: list[int]) -> list[ParamTerm]:
    """The layers that keep a state, by their rows' flags. A state matrix (transformer/linear_attention.py): W_q, W_k
    (H_k·d_k wide), W_v (H_s·d_s), W_o; the read's RMSNorm; a short convolution over q, k, v; the delta rule's β; a
    gated decay's W_a, A and dt (Kimi's per channel: W_f↓, W_f↑, A per head, dt per channel); an output gate's W_z
    (Kimi's W_z↓ and W_z↑); a fixed decay's sigmoid gate W_g (and, in lightning's form, one read norm over all heads).
    A gated short convolution alone (``conv_only``, transformer/short_conv.py): W_B, W_C and W_x in one projection,
    the depthwise convolution, W_out. Kinds may differ from layer to layer, so a term per layer and flag."""
    d, b = cfg.d_model, int(cfg.bias)
    wk, wv = cfg.state_key_heads * cfg.state_d_k, cfg.state_heads * cfg.state_d_v
    plan = cfg.layer_plan()
    matrix = lambda flag: lambda row: not row.conv_only and (flag is None or getattr(row, flag))  # noqa: E731
    conv_only = lambda row: row.conv_only  # noqa: E731
    lightning = lambda row: matrix("fixed_decay")(row) and cfg.linear_lightning  # noqa: E731  (one norm, every head)
    terms = []
    for holds, name, formula, count, parts, weights in (
            (matrix(None), "W_q, W_k and W_v (state)", "2·D·H_k·d_k + D·H_s·d_s", d * (2 * wk + wv),
             ("q_proj", "k_proj", "v_proj"), True),
            (matrix(None), "W_o (state)", _with_bias("H_s·d_s·D", "D", b), wv * d + b * d, ("o_proj",), True),
            (lambda row: matrix(None)(row) and not lightning(row), "read norm (state)", "d_s", cfg.state_d_v,
             ("norm_weight",), False),
            (lightning, "read norm over all heads (lightning)", "H_s·d_s", wv, ("norm_weight",), False),
            (matrix("short_conv"), "short convolution on q, k, v", "(2·H_k·d_k + H_s·d_s)·c",
             (2 * wk + wv) * cfg.linear_conv_size, ("conv",), False),
            (matrix("delta_rule"), "W_β (write strength)", "D·H_s", d * cfg.state_heads, ("b_proj",), True),
            (matrix("gated_decay"), "W_a (gated decay)", "D·H_s", d * cfg.state_heads, ("a_proj",), True),
            (matrix("gated_decay"), "A and dt (gated decay)", "2·H_s", 2 * cfg.state_heads, ("A_log", "dt_bias"),
             False),
            (matrix("channel_decay"), "W_f↓ and W_f↑ (decay per channel)", "D·d_k + d_k·H_s·d_k",
             d * cfg.state_d_k + cfg.state_d_k * cfg.state_heads * cfg.state_d_k, ("a_down", "a_up"), True),
            (matrix("channel_decay"), "A and dt (decay per channel)", "H_s + H_s·d_k",
             cfg.state_heads * (1 + cfg.state_d_k), ("A_log", "dt_bias"), False),
            (matrix("silu_gate"), "W_z (output gate)", "D·H_s·d_s", d * wv, ("z_proj",), True),
            (matrix("sigmoid_gate"), "W_z↓ and W_z↑ (output gate)", "D·d_s + d_s·H_s·d_s",
             d * cfg.state_d_v + cfg.state_d_v * wv, ("z_down", "z_up"), True),
            (lambda row: matrix("fixed_decay")(row) and cfg.linear_sigmoid_gate, "W_g (sigmoid read gate)",
             "D·H_s·d_s", d * wv, ("g_proj",), True),
            (conv_only, "W_B, W_C and W_x (short conv)", _with_bias("3·D·D", "3·D", b), 3 * d * d + 3 * b * d,
             ("in_proj",), True),
            (conv_only, "W_out (short conv)", _with_bias("D·D", "D", b), d * d + b * d, ("o_proj",), True),
            (conv_only, "depthwise convolution (short conv)", "D·c", d * cfg.linear_conv_size, ("conv",), False)):
        held = [spec.index for spec in plan if spec.index in layers and holds(AXES["attention"].row(spec.kind))]
        if held:
            prefixes = tuple(f"*blocks.{i}.attn." for i in held)
            biases = 3 * b * d if parts == ("in_proj",) else b * d if "o_proj" in parts else 0
            matmul = count - biases if weights else 0
            terms.append(ParamTerm("attention", name, formula, count, len(held),
                                   _at(prefixes, *(part + ("" if part in ("A_log", "dt_bias", "norm_weight") else ".*")
                                                   for part in parts)), matmul_per_copy=matmul))
    return terms


def _cross_attention_terms(cfg: TransformerConfig, layers: int) -> list[ParamTerm]:
    """The decoder's cross-attention: self-attention's projections (no sinks), in one term."""
    cross = ("*blocks.*.cross_attn.",)
    projections = _projection_terms(cfg, layers, cross)
    weights = sum(term.matmul_per_copy for term in projections)
    biases = sum(term.per_copy for term in projections) - weights
    qkv_b, b, gate = int(cfg.has_qkv_bias), int(cfg.bias), int(cfg.attn_gate)
    v = _value_width(cfg)
    kv, kv_bias = _kv_formulas(cfg)
    formula = f"D·H·d_h + {kv} + H·{v}·D" + (f" + D·H·{v}" if gate else "")
    bias_formula = " + ".join([*([f"H·d_h + {kv_bias}"] if qkv_b else []), *(["D"] if b else []),
                               *([f"H·{v}"] if b and gate else [])])
    name = "cross-attention W_q, W_k, W_v, W_o" + (" and W_gate" if gate else "")
    return [_matrices("attention", name, f"{formula} + {bias_formula}" if bias_formula else formula, weights, biases,
                      layers, _at(cross, *(m + ".*" for m in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj"))))]


def _block_norm_terms(cfg: TransformerConfig, n_stacks: int, norm: int, norm_formula: str) -> list[ParamTerm]:
    """The norms around each sublayer, as each layer's placement says: before it (or on the sum) and after it."""
    block = "*blocks.*."
    if cfg.parallel_block:  # one norm both sublayers read, or one each (parallel_norms = 2)
        n = cfg.parallel_norms
        return [ParamTerm("norms", "block norms (parallel)", _times(n, norm_formula), n * norm, n_stacks * cfg.n_layers,
                          (block + "ln1.*", block + "ln2.*"))]
    # each layer's norms sit as its row of the plan says (OLMo hybrid: its linear layers' before, its full ones'
    # after): a term per placement, which names the placement and holds its own layers only where they differ
    placed: dict[str, list[int]] = {}
    for spec in cfg.layer_plan():
        placed.setdefault(spec.norm_position, []).append(spec.index)
    terms = []
    for key, layers in placed.items():
        placement = AXES["norm_position"].row(key)
        per_sublayer = int(placement.before or placement.on_sum) + int(placement.after)
        where, named = ((block,), "") if len(placed) == 1 else (tuple(f"*blocks.{i}." for i in layers),
                                                                  f" ({placement.label})")
        terms.append(ParamTerm("norms", "block norms" + named, _times(2 * per_sublayer, norm_formula),
                               2 * per_sublayer * norm, n_stacks * len(layers),
                               _at(where, "ln1.*", "ln2.*", "ln1_post.*", "ln2_post.*")))
        if cfg.row("arch").cross:  # the decoder's blocks: a norm (or two) around cross-attention too
            terms.append(ParamTerm("norms", "cross-attention norms" + named, _times(per_sublayer, norm_formula),
                                   per_sublayer * norm, len(layers), _at(where, "ln_cross.*", "ln_cross_post.*")))
    return terms


def _ffn_terms(cfg: TransformerConfig, n_stacks: int) -> list[ParamTerm]:
    """The FFN of every block, read off its row in the table: one term per matrix of an MLP, one for a gated
    FFN's three; a routed kind's router, experts and shared experts, and its dense first layers."""
    d, f = cfg.d_model, cfg.d_ff
    b = int(cfg.bias)
    row = cfg.row("ffn")
    mlp = "*blocks.*.mlp."
    if not row.routed:
        wide = [spec.index for spec in cfg.layer_plan() if cfg.layer_config(spec).d_ff != f]  # wide_shared_ffn
        if not wide:
            return _dense_ffn_terms(cfg, f, "F", n_stacks * cfg.n_layers, (mlp,), "")
        others = [i for i in range(cfg.n_layers) if i not in wide]
        return (_dense_ffn_terms(cfg, f, "F", n_stacks * len(others), tuple(f"*blocks.{i}.mlp." for i in others), "")
                + _dense_ffn_terms(cfg, 2 * f, "2·F", n_stacks * len(wide), tuple(f"*blocks.{i}.mlp." for i in wide),
                                   " (2·F wide: the layers that reuse K and V)"))
    # routed: the first layers, and those moe_layers leaves out, keep a dense gated FFN of width F; the others route
    dense_layers = n_stacks * sum(not cfg.layer_is_moe(i) for i in range(cfg.n_layers))
    routed_layers = n_stacks * cfg.n_layers - dense_layers
    E, k, fe, S = cfg.n_experts, cfg.top_k, cfg.d_expert or cfg.d_ff, cfg.n_shared_experts
    n = _expert_matrices(row)  # each expert is a gated FFN (SwiGLU, GeGLU or gpt-oss's clamped SwiGLU)
    expert_weights = n * d * fe
    expert = expert_weights + b * ((n - 1) * fe + d)
    expert_formula = _with_bias(f"{n}·D·F_e", f"{n - 1}·F_e + D", b)
    terms = []
    if dense_layers:  # a dense gated FFN, built as an expert is
        terms.append(_gated_term(f"dense FFN of the {dense_layers // n_stacks} layers that do not route "
                                 "(W_gate, W_up, W_down)",
                                 d, f, "F", b, dense_layers, mlp, n=n))
    if routed_layers:
        terms += [
            _matrices("ffn", "router", _with_bias("D·E", "E", b), d * E, b * E, routed_layers, (mlp + "router.*",)),
            ParamTerm("ffn", f"experts (each a gated FFN: {cfg.expert_activation})", f"E·({expert_formula})",
                      E * expert, routed_layers, (mlp + "experts.*",), active_per_copy=k * expert,
                      matmul_per_copy=k * expert_weights),
        ]
        if S:  # one gated FFN S experts wide that every token passes through
            terms.append(_gated_term("shared experts", d, S * fe, "S·F_e", b, routed_layers, mlp + "shared.",
                                     where=(mlp + "shared.*",), n=n))
        if S and cfg.shared_expert_gate:  # Qwen3-Next: one number per token scales the shared experts' output
            terms.append(_matrices("ffn", "shared experts' gate", "D", d, 0, routed_layers, (mlp + "shared_gate.*",)))
    return terms


def _dense_ffn_terms(cfg: TransformerConfig, width: int, letter: str, copies: int, prefixes: tuple[str, ...],
                     named: str) -> list[ParamTerm]:
    """A dense FFN `width` wide (`letter` in the formulas) in the blocks under `prefixes`: one term per matrix of an
    MLP, one for a gated FFN's matrices; `named` follows each term's name."""
    d, b, row = cfg.d_model, int(cfg.bias), cfg.row("ffn")
    if row.gated:
        name = f"W_{', W_'.join(row.matrices[:-1])} and W_{row.matrices[-1]} ({row.activation})" + named
        return [_gated_term(name, d, width, letter, b, copies, prefixes[0], n=len(row.matrices),
                            where=_at(prefixes, "gate.*", "up.*", "down.*"))]
    # an MLP: every matrix but the last widens D -> F, the last narrows F -> D
    *widen, narrow = row.matrices
    return [*(_matrices("ffn", f"W_{m}" + named, _with_bias(f"D·{letter}", letter, b), d * width, b * width, copies,
                        _at(prefixes, m + ".*")) for m in widen),
            _matrices("ffn", f"W_{narrow}" + named, _with_bias(f"{letter}·D", "D", b), width * d, b * d, copies,
                      _at(prefixes, narrow + ".*"))]


def _expert_matrices(row) -> int:
    """A routed kind's row lists its router, then the matrices of each expert."""
    return len(row.matrices) - 1


def _gated_term(name: str, d: int, width: int, width_formula: str, b: int, copies: int, prefix: str,
                where: tuple[str, ...] | None = None, n: int = 3) -> ParamTerm:
    """A gated FFN's n = 3 matrices: W_gate, W_up (D -> width) and W_down (width -> D), with their biases."""
    w = width_formula if width_formula.isalpha() else f"({width_formula})"
    formula = _with_bias(f"{n}·D·{w}", f"{n - 1}·{w} + D", b)
    return _matrices("ffn", name, formula, n * d * width, b * ((n - 1) * width + d), copies,
                     where or (prefix + "gate.*", prefix + "up.*", prefix + "down.*"))


def param_counts(cfg: TransformerConfig) -> dict[str, int]:
    """Parameters by part, the sums of ``param_terms`` (no model is built).

    'total' counts every weight; 'active' the ones one token uses (MoE: top_k of the routed experts,
    every shared expert and dense layer).
    """
    terms = param_terms(cfg)
    return {"total": sum(t.count for t in terms), "active": sum(t.active for t in terms),
            **{part: sum(t.count for t in terms if t.part == part) for part in PARTS}}


def multiplied_params(cfg: TransformerConfig) -> int:
    """The active parameters a token multiplies by: the embedding table is looked up, not multiplied, so it is
    left out, except that a tied output head multiplies by the same matrix. 2 x this is the weights' share of
    a token's forward FLOPs; some publishers count "active parameters" this way (gpt-oss)."""
    terms = param_terms(cfg)
    tied_head = sum(t.matmul_weights for t in terms if t.part == "embedding")  # the token table, when tied
    return sum(t.active for t in terms if t.part != "embedding") + tied_head


def matmul_weights_per_token(cfg: TransformerConfig) -> int:
    """Weights in the matrix products one token goes through (biases, norms and lookups left out): every
    attention and FFN projection of every stack, MoE's router and its top-k experts only, and the output head,
    as ``param_terms`` counts them."""
    return sum(term.matmul_weights for term in param_terms(cfg))
