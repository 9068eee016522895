"""What each hook site means, written once.

A site is a hook point's last name part (``hook_q``, ``hook_pattern`` ...): every block records the
same sites, so one row describes ``blocks.0.attn.hook_q`` and ``decoder.blocks.3.cross_attn.hook_q``
alike. ``HookPoint(site)`` takes its named dims and the library's words from the row; the stepper
shows the rest; docs/hooks.md lists every site a model records (tests/test_hooks.py checks it).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .axes import AXES

if TYPE_CHECKING:
    from .config import TransformerConfig


@dataclass(frozen=True)
class FromRows:
    """A formula that the config's choices word their own way: the first of these axes whose row has one
    for the site (``Choice.formulas``), else the default."""

    axes: tuple[str, ...]
    default: str | None = None

    def choose(self, cfg: "TransformerConfig", site: str) -> str | None:
        for axis in self.axes:
            formula = cfg.row(axis).formulas.get(site)
            if formula is not None:
                return formula
        return self.default


@dataclass(frozen=True)
class FromLayer:
    """A formula that each attention kind words its own way: the one its layer's row has for the site
    (``AXES["attention"]``: a linear layer's implied weights are no softmax), else the default. The layer is
    read off the hook's name (``blocks.{i}.``)."""

    default: str | None = None

    def choose(self, cfg: "TransformerConfig", site: str, name: str | None) -> str | None:
        layer = _layer_of(name)
        if layer is None:
            return self.default
        kind = cfg.layer_plan()[layer].kind
        return AXES["attention"].row(kind).formulas.get(site, self.default)


@dataclass(frozen=True)
class FromBlock:
    """A residual step each block words by its own rows: the block's (a parallel block says it once), then its
    layer's norm placement (``LayerSpec.placement``: OLMo hybrid's linear layers put their norms before each
    sublayer, its full layers after). The layer is read off the hook's name; without one, norm_position's row."""

    def choose(self, cfg: "TransformerConfig", site: str, name: str | None) -> str | None:
        layer = _layer_of(name)
        placement = cfg.row("norm_position") if layer is None else cfg.layer_plan()[layer].placement
        return next((row.formulas[site] for row in (cfg.row("block"), placement) if site in row.formulas), None)


def _layer_of(name: str | None) -> int | None:
    """The layer a hook's whole name sits in (``blocks.{i}.``), or None."""
    layer = re.search(r"(?:^|\.)blocks\.(\d+)\.", name or "")
    return None if layer is None else int(layer.group(1))


@dataclass(frozen=True)
class HookSite:
    dims: tuple[str, ...]  # named dims, e.g. ("B", "H", "T_q", "T_kv"); a module may rename one (cross: T_kv -> S)
    op: str | None  # the library's words for the operation; None = the recording module's choice words it (``Choice.ops``)
    explain: str = ""  # what the step is, in one sentence
    formula: str | FromRows | FromLayer | FromBlock | None = None  # LaTeX
    # what the step reads: a sentence when it is no recorded tensor, else sibling sites (a tuple inside = the first
    # of these that was recorded; "<input>" = the module's input); None = the step before it
    reads: str | tuple | None = None
    on_request: bool = False  # too large for every trace: recorded only when its exact name is asked for

    def latex(self, cfg: "TransformerConfig", site: str, name: str | None = None) -> str | None:
        """Its formula for this config; ``name``, the hook's whole name, finds the layer of a per-layer formula."""
        if isinstance(self.formula, (FromLayer, FromBlock)):
            return self.formula.choose(cfg, site, name)
        return self.formula.choose(cfg, site) if isinstance(self.formula, FromRows) else self.formula


RESID = ("B", "T", "d_model")
HIDDEN = ("B", "T", "d_ff")
SCORES = ("B", "H", "T_q", "T_kv")

SITES: dict[str, HookSite] = {
    # --- a stack: embeddings; the model: logits ---
    "hook_embed": HookSite(
        RESID, "E[token ids]",
        "Each token id picks its row of the embedding matrix: the model's first vector per token.",
        r"x_t = E[\mathrm{id}_t]",
        reads="the token ids"),
    "hook_pos_embed": HookSite(
        RESID, None,
        "Position vectors, added to the token embeddings so attention can tell places apart.",
        FromRows(("position",)),
        reads="the position ids"),
    "hook_logits": HookSite(
        ("B", "T", "vocab"), "h W_U",
        "Scores over the vocabulary for the next token (or the masked one).",
        r"\text{logits} = h\,W_U"),
    # --- a norm (ln1, ln2, ln_cross, ln_final ...) ---
    "hook_normalized": HookSite(
        RESID, None,
        "The norm rescales each token's vector so the next sublayer sees a steady scale.",
        FromRows(("norm",))),
    # --- a block's residual stream ---
    "hook_resid_pre": HookSite(
        RESID, "residual stream entering the block",
        "The residual stream entering the block: every sublayer reads it and adds its result to it.",
        r"x = \text{the previous block's output (block 0: } E[\mathrm{id}] + P\text{)}"),
    "hook_attn_out": HookSite(
        RESID, "attention output",
        "Line 5: the heads are concatenated and projected back to d_model.",
        r"\mathrm{Attn}(x) = \mathrm{concat}(Z_1, \dots, Z_H)\,W_O"),
    "hook_resid_mid": HookSite(
        RESID, "residual after attention",
        "The residual stream after the attention sublayer.",
        FromBlock()),
    "hook_cross_attn_out": HookSite(
        RESID, "cross-attention output",
        "Cross-attention's output: decoder queries read the encoder's keys and values.",
        r"\mathrm{CrossAttn}(x, m) = \mathrm{softmax}\!\left(\frac{(x W_Q)(m W_K)^\top}{\sqrt{d_{head}}}\right) m W_V\, W_O"),
    "hook_resid_cross": HookSite(
        RESID, "residual after cross-attention",
        "The residual stream after cross-attention.",
        FromBlock()),
    "hook_mlp_out": HookSite(
        RESID, "FFN output",
        "The FFN sublayer's output.",
        FromRows(("ffn",)),
        reads=(("mlp.hook_post", "mlp.hook_expert_weights"),)),  # MoE: the weights that mix the experts
    "hook_resid_post": HookSite(
        RESID, "residual stream leaving the block",
        "The residual stream leaving the block.",
        FromBlock()),
    # --- per-layer input embeddings (Gemma 4, transformer/per_layer.py) ---
    "hook_per_layer_embed": HookSite(
        ("B", "T", "L", "P"), "(RMSNorm(x W_proj / sqrt(D)) + E_pl[id] sqrt(P)) / sqrt(2)",
        "Every layer's own input for each token: its row of the per-layer table, joined by a projection of the "
        "token's main embedding; layer i reads slice i.",
        r"e_{t,i} = \tfrac{1}{\sqrt 2}\left(\mathrm{RMSNorm}\!\left(\tfrac{x_t W_{proj}}{\sqrt D}\right)_i "
        r"+ \sqrt P\,E_{pl}[\mathrm{id}_t]_i\right)",
        reads="the token ids and hook_embed, the main embedding"),
    "hook_per_layer_gate": HookSite(
        ("B", "T", "P"), "GELU(h W_gate) * e_i",
        "The block's gate on its own per-layer input: the stream decides how much of each of its P channels passes.",
        r"g_t = \mathrm{GELU}(h_t W_{gate}) \odot e_{t,i}",
        reads="the stream after the FFN's residual step, and this layer's slice of hook_per_layer_embed"),
    "hook_per_layer_out": HookSite(
        RESID, "RMSNorm(gate W_up)",
        "What the per-layer input adds to the residual stream, after the FFN's residual step.",
        r"h \leftarrow h + \mathrm{RMSNorm}(g\,W_{up})",
        reads="per_layer.hook_per_layer_gate, the gated per-layer input"),
    # --- attention (attn, cross_attn), in forward order ---
    "hook_q": HookSite(
        ("B", "H", "T_q", "d_head"), "x W_q, split into H heads",
        "Queries: what each token is looking for, one vector per query head.",
        FromLayer(r"Q = x\,W_Q \quad \text{split into } H \text{ heads}"),
        reads=("<input>",)),
    "hook_k": HookSite(
        ("B", "G", "T_kv", "d_head"), "x W_k, split into G kv heads",
        "Keys: what each token offers to be found by, one vector per kv head (fewer with GQA/MQA).",
        FromLayer(r"K = x\,W_K \quad \text{split into } G \text{ kv heads}"),
        reads=("<input>",)),
    "hook_v": HookSite(
        ("B", "G", "T_kv", "d_v"), "x W_v, split into G kv heads",
        "Values: what each token hands over when it is attended to, one vector per kv head.",
        FromLayer(r"V = x\,W_V \quad \text{split into } G \text{ kv heads}"),
        reads=("<input>",)),
    "hook_q_norm": HookSite(
        ("B", "H", "T_q", "d_head"), "RMSNorm(q)",
        "QK-norm: each query normalised (per head, or over all heads) so scores cannot grow without bound.",
        FromRows(("qk_norm",), r"q \leftarrow \frac{q}{\mathrm{rms}(q)} \odot w_q"),
        reads=("hook_q",)),
    "hook_k_norm": HookSite(
        ("B", "G", "T_kv", "d_head"), "RMSNorm(k)",
        "QK-norm on the keys: with both normalised, a score is bounded by the norms' weights.",
        FromRows(("qk_norm",), r"k \leftarrow \frac{k}{\mathrm{rms}(k)} \odot w_k"),
        reads=("hook_k",)),
    "hook_v_norm": HookSite(
        ("B", "G", "T_kv", "d_v"), "v / rms(v), no weight",
        "The value norm (Gemma 4): each value head scaled to unit RMS, so no token hands over a louder value than "
        "another; nothing is learned.",
        r"v \leftarrow \frac{v}{\mathrm{rms}(v)}",
        reads=("hook_v",)),
    "hook_latent": HookSite(
        ("B", "T_q", "kv_rank"), "RMSNorm(x W_down)",
        "MLA's latent: each token squeezed into kv_rank numbers; the cache keeps only this and the RoPE key.",
        r"c_t = \mathrm{RMSNorm}(x_t W_{down})",
        reads=("<input>",)),
    "hook_rope_angles": HookSite(
        ("B", "T_q", "d_rope/2"), "position * theta^(-2i/d_head)",
        "RoPE's angles: position times a frequency per pair of dimensions.",
        r"\phi_{t,i} = t \cdot \theta^{-2i/d_{head}}",
        reads="the position ids and the frequencies θ_i"),
    "hook_rot_q": HookSite(
        ("B", "H", "T_q", "d_head"), "q * cos + rotate_half(q) * sin",
        "Queries rotated by their position (RoPE).",
        FromRows(("position",), r"q'_t = q_t \cos\phi_t + \mathrm{rotate\_half}(q_t) \sin\phi_t"),
        reads=("hook_q", "hook_rope_angles")),
    "hook_rot_k": HookSite(
        ("B", "G", "T_q", "d_head"), "k * cos + rotate_half(k) * sin",
        "Keys rotated by their position (RoPE): q·k now depends on the distance only.",
        FromRows(("position",), r"k'_t = k_t \cos\phi_t + \mathrm{rotate\_half}(k_t) \sin\phi_t"),
        reads=("hook_k", "hook_rope_angles")),
    "hook_k_rope": HookSite(
        ("B", "1", "T_q", "d_rope"), "x W_rope, rotated",
        "MLA's decoupled RoPE key: one rotated key part per token that every head shares.",
        r"k^{R}_t = \mathrm{RoPE}(x_t W_{rope})",
        reads=("<input>", "hook_rope_angles")),
    "hook_q_temperature": HookSite(
        ("B", "H", "T_q", "d_head"), "q * (1 + s * log(1 + floor((t + 1) / f)))",
        "Llama 4's temperature on a layer without positions: each query is scaled up with the log of its position, "
        "so a token far into the text, which sees many more keys, keeps a sharp softmax.",
        r"q_t \leftarrow q_t \left(1 + s \log\left(1 + \left\lfloor \tfrac{t + 1}{f} \right\rfloor\right)\right)",
        reads=(("hook_q_norm", "hook_q"),)),
    "hook_raw_scores": HookSite(
        SCORES, "Q K^T / sqrt(d_head)",
        "Line 1: every query is compared with every key; scaled so the scores keep unit variance.",
        r"S = \frac{Q K^\top}{\sqrt{d_{head}}}",
        reads=(("hook_q_temperature", "hook_rot_q", "hook_q_norm", "hook_q"), ("hook_rot_k", "hook_k_norm", "hook_k"))),
    "hook_capped_scores": HookSite(
        SCORES, "c * tanh(scores / c)",
        "Soft-capping: every score squeezed smoothly into (-c, c), so no single key can take all the weight.",
        r"S \leftarrow c \tanh(S / c)",
        reads=("hook_raw_scores",)),
    "hook_mask": HookSite(
        ("B", "1", "T_q", "T_kv"), "0 where allowed, -inf (most negative float) where masked",
        "Who may see whom: 0 where attention is allowed, the most negative number where it is not.",
        r"M_{ij} = \begin{cases} 0 & \text{query } i \text{ may see key } j \\ -\infty & \text{otherwise} \end{cases}",
        reads="the positions (causal, window, chunk) and the padding mask"),
    "hook_alibi_bias": HookSite(
        SCORES, "-slope_h * |i - j|",
        "ALiBi: a penalty growing with distance, its slope different for each head.",
        r"A_{h,ij} = -m_h\,|i - j|",
        reads="the positions and each head's slope"),
    "hook_rel_bias": HookSite(
        SCORES, "B[h, bucket(j - i)]",
        "T5: a learned bias per head and bucket of distance, one table per stack shared by its layers.",
        r"B_{h,ij} = b_{h,\,\mathrm{bucket}(j - i)}",
        reads="the positions and the stack's learned table"),
    "hook_attn_scores": HookSite(
        SCORES, "scores + mask + position bias",
        "Line 2: the scores softmax sees, with the mask (and any position bias) added.",
        FromRows(("position",), r"S' = S + M"),
        reads=(("hook_capped_scores", "hook_raw_scores"), "hook_mask", ("hook_rel_bias", "hook_alibi_bias"))),
    "hook_pattern": HookSite(
        SCORES, "softmax(scores)",
        "Line 3: softmax turns each query's scores into weights that sum to 1. In a layer that keeps a state "
        "(linear attention, DeltaNet) these are its implied weights instead: the output equals them times V, "
        "but they are not a softmax, and a row need not sum to 1 (it may hold negative weights).",
        FromLayer(r"W_{ij} = \mathrm{softmax}(S')_{ij} = \frac{e^{S'_{ij}}}{\sum_k e^{S'_{ik}}}"),
        reads=("hook_attn_scores",)),
    "hook_sink_share": HookSite(
        ("B", "H", "T_q"), "softmax([scores, sink])[sink]",
        "The sink's share: a learned logit per head joins each row's softmax and takes this much weight away.",
        r"s_{h,i} = \frac{e^{\sigma_h}}{e^{\sigma_h} + \sum_j e^{S'_{h,ij}}}",
        reads=("hook_attn_scores",)),
    # --- a lightning indexer (transformer/indexer.py, index_top_k): which keys each query keeps ---
    "hook_index_q": HookSite(
        ("B", "I", "T_q", "d_index"), "q_latent W_iq (first d_rope dims turned by RoPE)",
        "The indexer's queries: I narrow heads per token, made from the attention's q latent (or the input).",
        r"q^{I}_{t,h} = \mathrm{RoPE}(c^{Q}_t W^{I}_{Q,h})",
        reads=("<input>", "hook_rope_angles")),
    "hook_index_k": HookSite(
        ("B", "1", "T_kv", "d_index"), "LayerNorm(x W_ik) (first d_rope dims turned by RoPE)",
        "The indexer's keys: one per token for all its heads, cached beside the attention's own.",
        r"k^{I}_s = \mathrm{RoPE}(\mathrm{LayerNorm}(x_s W^{I}_K))",
        reads=("<input>", "hook_rope_angles")),
    "hook_index_weights": HookSite(
        ("B", "T_q", "I"), "x W_iw / sqrt(I)",
        "How much each indexer head counts for each query.",
        r"w_{t,h} = x_t W^{I}_{w,h} / \sqrt{I}",
        reads=("<input>",)),
    "hook_index_scores": HookSite(
        ("B", "T_q", "T_kv"), "sum_h w_h * ReLU(q_h . k / sqrt(d_index))",
        "The indexer's score of every key for every query, before the mask: ReLU instead of softmax, so it is cheap "
        "and a head that does not care scores 0.",
        r"I_{ts} = \textstyle\sum_h w_{t,h}\, \mathrm{ReLU}\!\left(q^{I}_{t,h} \cdot k^{I}_s / \sqrt{d_I}\right)",
        reads=("hook_index_q", "hook_index_k", "hook_index_weights")),
    "hook_index_chosen": HookSite(
        ("B", "1", "T_q", "T_kv"), "top-k of the scores among the keys the mask allows",
        "The keys each query keeps: the k its indexer scores highest of those it may see (all of them when it may "
        "see fewer than k). Attention's mask hides every other key.",
        r"\mathcal{S}_t = \operatorname{top-}k_{\,s \le t}\; I_{ts}",
        reads=("hook_index_scores",)),
    # --- DeepSeek-V4's attention (transformer/compressed_attention.py, compress_layers) ---
    "hook_window": HookSite(
        ("B", "1", "T_q", "T_kv"), "the sliding window's keys",
        "The sliding branch: the keys of the last `window` tokens each query sees, beside the pooled blocks.",
        r"\mathcal{W}_t = \{s : t - W < s \le t\}"),
    "hook_compressed_k": HookSite(
        ("B", "1", "n_blocks", "d_head"), "RMSNorm(sum_t softmax(gates) * x W_pool), turned by RoPE",
        "One key per finished block of `rate` tokens: the block's tokens pooled by learned softmax gates, per channel. "
        "It serves as key and value.",
        r"c_i = \mathrm{RoPE}\big(\mathrm{RMSNorm}(\textstyle\sum_{t \in i} \mathrm{softmax}_t(x_t W_g + B_t) \odot x_t W_p)\big)",
        reads=("<input>",)),
    "hook_block_scores": HookSite(
        ("B", "T_q", "n_blocks"), "sum_h w_h * ReLU(q_h . k_block / sqrt(d_index)), unfinished blocks -inf",
        "The block indexer's score of every finished block for every query.",
        r"I_{ti} = \textstyle\sum_h w_{t,h}\, \mathrm{ReLU}(q^{I}_{t,h} \cdot c^{I}_i / \sqrt{d_I})",
        reads=("<input>",)),
    "hook_blocks_chosen": HookSite(
        ("B", "1", "T_q", "n_blocks"), "top-k of the block scores among the finished blocks",
        "The blocks each query keeps: the index_top_k its indexer scores highest of those that have ended.",
        r"\mathcal{S}_t = \operatorname{top-}k_{\,i}\; I_{ti}",
        reads=("hook_block_scores",)),
    # --- hyper-connections (transformer/hyper_connections.py, hyper_streams) ---
    "hook_hyper_pre": HookSite(
        ("B", "T", "n"), "sigmoid(a W_pre x + b) + eps",
        "How much of each residual stream the sublayer (or, after the last block, the head) reads.",
        r"\mathrm{pre} = \sigma(\alpha\, W_{pre} \hat{x} + b) + \varepsilon",
        reads=("<input>",)),
    "hook_hyper_post": HookSite(
        ("B", "T", "n"), "2 sigmoid(a W_post x + b)",
        "How much of the sublayer's output each residual stream receives.",
        r"\mathrm{post} = 2\,\sigma(\alpha\, W_{post} \hat{x} + b)",
        reads=("<input>",)),
    "hook_hyper_comb": HookSite(
        ("B", "T", "n", "n"), "Sinkhorn(softmax(a W_comb x + b) + eps)",
        "How the streams pass on to each other: a doubly stochastic matrix (rows and columns sum to 1).",
        r"S'_k = \mathrm{post}_k\, f(\cdot) + \textstyle\sum_j C_{jk} S_j",
        reads=("<input>",)),
    "hook_dense_pattern": HookSite(
        SCORES, "softmax(scores) over every key the mask allows",
        "The weights this layer would give without its indexer, recorded beside the sparse ones to show what the "
        "dropped keys would have contributed.",
        r"W^{dense} = \mathrm{softmax}(S + M)",
        reads=("hook_rot_q", "hook_k")),
    "hook_kept_mass": HookSite(
        ("B", "H", "T_q"), "sum of the dense weights over the chosen keys",
        "How much of the dense softmax weight the indexer's keys hold: 1 means dropping the rest changes nothing.",
        r"m_{h,t} = \textstyle\sum_{s \in \mathcal{S}_t} W^{dense}_{h,ts}",
        reads=("hook_dense_pattern", "hook_index_chosen")),
    "hook_z": HookSite(
        ("B", "H", "T_q", "d_v"), "weights @ V",
        "Line 4: each query's output is the weighted average of the values it attends to. In a layer that keeps "
        "a state, it is the read q·S of the state: the same as the implied weights times V.",
        FromLayer(r"Z = W\,V"),
        reads=("hook_pattern", "hook_v")),
    "hook_attn_gate": HookSite(
        ("B", "T_q", "H*d_v"), "sigmoid(x W_gate)",
        "Gated attention: a sigmoid per output number decides how much of each head's result passes to W_o.",
        r"g = \sigma(x W_{gate}), \quad \mathrm{out} = (\mathrm{concat}(Z) \odot g)\, W_O",
        reads=("<input>",)),
    # --- attention that keeps a state (transformer/linear_attention.py), after hook_q, hook_k, hook_v ---
    "hook_phi_q": HookSite(
        ("B", "H", "T_q", "d_head"), None,
        "q as the state reads it: through the feature map φ (linear attention), or scaled to length 1 (the delta rule).",
        FromLayer(r"\phi(q_t)"),
        reads=("hook_q",)),
    "hook_phi_k": HookSite(
        ("B", "G", "T_kv", "d_head"), None,
        "k as the state writes it: through the feature map φ, or scaled to length 1 so that writing along it "
        "replaces rather than piles up.",
        FromLayer(r"\phi(k_t)"),
        reads=("hook_k",)),
    "hook_decay": HookSite(
        ("B", "H", "T_q"), None,
        "How much of the state each token keeps before it writes: the state is multiplied by this number "
        "(1 keeps everything, 0 forgets it all).",
        FromLayer(r"\alpha_t"),
        reads="each head's fixed γ, or the token's own vector (Gated DeltaNet: x W_a)"),
    "hook_channel_decay": HookSite(
        ("B", "H", "T_q", "d_head"), None,
        "How much of each row of the state each token keeps before it writes (Kimi delta attention): one factor per "
        "key channel, so some rows hold on to the past while others forget it.",
        FromLayer(r"\alpha_t \in (0, 1)^{d_k}"),
        reads="the token's own vector through a d_k-wide bottleneck (x W_f↓ W_f↑)"),
    "hook_beta": HookSite(
        ("B", "H", "T_q"), "delta_beta_max * sigmoid(x W_b)",
        "The delta rule's write strength β_t: how far the state moves from what it predicted toward the new value "
        "(0 writes nothing, 1 replaces the old value, up to 2 overshoots).",
        r"\beta_t = \beta_{max}\,\sigma(x_t W_b)",
        reads=("<input>",)),
    "hook_predicted": HookSite(
        ("B", "H", "T_q", "d_v"), "S_{t-1}^T k_t",
        "What the state already returns for this token's key, before the token writes: the delta rule's prediction.",
        FromLayer(r"\hat v_t = S_{t-1}^\top \bar k_t"),
        reads=("hook_phi_k",)),
    "hook_correction": HookSite(
        ("B", "H", "T_q", "d_v"), "beta_t * (v_t - predicted)",
        "What the delta rule stores along the key: the error between the new value and the prediction, times β_t. "
        "The state changes by k_t times this, so an old value under a similar key is overwritten, not added to.",
        r"u_t = \beta_t \left(v_t - \hat v_t\right)",
        reads=("hook_v", "hook_predicted", "hook_beta")),
    "hook_state": HookSite(
        ("B", "H", "T_q", "d_head", "d_v"), None,
        "Each head's state after each token: the d_head × d_v matrix that holds the whole past and that every "
        "later query reads. Recorded only when asked for by its exact name (T states per head).",
        FromLayer(r"S_t"),
        reads=(("hook_correction", "hook_v"), ("hook_phi_k", "hook_k"), ("hook_decay", "hook_channel_decay")),
        on_request=True),
    "hook_out_gate": HookSite(
        ("B", "H", "T_q", "d_v"), "SiLU(x W_z)",
        "The output gate: SiLU of one more projection decides, per number, how much of the normalised read "
        "passes to W_o.",
        FromLayer(r"g_t = \mathrm{SiLU}(x_t W_z)"),  # Kimi delta attention's row words its sigmoid
        reads=("<input>",)),
    "hook_read_gate": HookSite(
        ("B", "H", "T_q", "d_v"), "sigmoid(x W_g)",
        "Lightning attention's output gate (linear_sigmoid_gate): a sigmoid of one more projection decides, per "
        "number, how much of the normalised read passes to W_o.",
        r"g_t = \sigma(x_t W_g)",
        reads=("<input>",)),
    "hook_read_norm": HookSite(
        ("B", "H", "T_q", "d_v"), "RMSNorm(z)",
        "Each head's read at a steady size: a sum over the whole past would otherwise grow with the text.",
        FromLayer(r"\mathrm{RMSNorm}(z_t)"),
        reads=("hook_z", "hook_out_gate", "hook_read_gate")),
    # --- the gated short convolution (transformer/short_conv.py): LFM2's layers without attention ---
    "hook_conv_b": HookSite(
        RESID, "x W_B",
        "The input gate B: one number per channel and token that scales what the token puts into the convolution.",
        r"b_t = x_t W_B",
        reads=("<input>",)),
    "hook_conv_c": HookSite(
        RESID, "x W_C",
        "The output gate C: one number per channel and token that scales what the convolution returns to it.",
        r"c_t = x_t W_C",
        reads=("<input>",)),
    "hook_conv_in": HookSite(
        RESID, "(x W_B) * (x W_x)",
        "What each token puts into the convolution: its projection x̃ times the input gate. The cache keeps the "
        "last K - 1 of these per channel, and nothing else.",
        r"u_t = b_t \odot x_t W_x",
        reads=("hook_conv_b",)),
    "hook_conv_out": HookSite(
        RESID, "sum_i w_i * u_{t-i}, i < K",
        "The causal depthwise convolution: each channel adds its own last K inputs, each times a learned weight; "
        "a token K or more steps back does not reach it.",
        r"h_t = \textstyle\sum_{i<K} w_i \odot u_{t-i}",
        reads=("hook_conv_in",)),
    "hook_conv_read": HookSite(
        RESID, "(x W_C) * conv",
        "The convolution's output times the output gate, before W_out.",
        r"y_t = c_t \odot h_t",
        reads=("hook_conv_c", "hook_conv_out")),
    # --- the FFN (mlp): MLP, SwiGLU, GeGLU, MoE router ---
    "hook_pre": HookSite(
        HIDDEN, "x W_in + b_in",
        "The MLP's first projection, up to d_ff.",
        r"h = x\,W_{in} + b_{in}",
        reads=("<input>",)),
    "hook_gate": HookSite(
        HIDDEN, None,
        "SwiGLU's gate: SiLU of one projection decides, per hidden unit, how much passes.",
        r"\mathrm{SiLU}(x W_{gate}) = x W_{gate}\; \sigma(x W_{gate})",
        reads=("<input>",)),
    "hook_up": HookSite(
        HIDDEN, "x W_up",
        "SwiGLU's second projection: what the gate lets through.",
        r"x\,W_{up}",
        reads=("<input>",)),
    "hook_post": HookSite(
        HIDDEN, None,
        "The activation in the FFN's hidden layer.",
        FromRows(("ffn",)),
        reads=(("hook_gate", "hook_pre"), "hook_up")),
    "hook_router_logits": HookSite(
        ("B", "T", "E"), "x W_router",
        "The router scores every expert for every token.",
        r"r_t = x_t\,W_{router}",
        reads=("<input>",)),
    "hook_router_probs": HookSite(
        ("B", "T", "E"), "softmax(router logits)",
        "Softmax over experts: the router's probabilities.",
        r"p_t = \mathrm{softmax}(r_t)",
        reads=("hook_router_logits",)),
    "hook_expert_indices": HookSite(
        ("B", "T", "k"), "top-k experts per token",
        "Each token keeps its top-k experts.",
        r"\mathcal{E}_t = \operatorname{top-k}(p_t)",
        reads=("hook_router_probs",)),
    "hook_expert_weights": HookSite(
        ("B", "T", "k"), "top-k probabilities / their sum",
        "The chosen experts' probabilities, renormalised to sum to 1.",
        r"g_{t,e} = \frac{p_{t,e}}{\sum_{e' \in \mathcal{E}_t} p_{t,e'}}",
        reads=("hook_router_probs", "hook_expert_indices")),
    "hook_expert_load": HookSite(
        ("E",), "fraction of token slots sent to each expert",
        "How the token slots spread over the experts (1/E each when balanced).",
        r"f_e = \frac{\#\{t : e \in \mathcal{E}_t\}}{T\,k}",
        reads=("hook_expert_indices",)),
    "hook_aux_loss": HookSite(
        (), "E * sum_e load_e * mean_prob_e",
        "The load-balancing loss training adds, smallest when load and probability are even.",
        r"L_{aux} = E \sum_e f_e\, \bar p_e",
        reads=("hook_expert_load", "hook_router_probs")),
    # --- TiledAttention (transformer/flash.py), tile by tile: its own traces, drawn by the Flash page ---
    "hook_tile": HookSite(
        ("q_block, k_block, q_start, q_stop, k_start, k_stop, skipped",),
        "tile (query block i, key block j); skipped = 1 when the mask hides all of it"),
    "hook_tile_scores": HookSite(
        ("B", "H", "rows", "cols"), "S_ij = Q_i K_j^T / sqrt(d_head) + bias_ij, masked -> most negative float"),
    "hook_running_max": HookSite(("B", "H", "rows"), "m_new = max(m_old, rowmax(S_ij))"),
    "hook_rescale": HookSite(("B", "H", "rows"), "exp(m_old - m_new)"),
    "hook_tile_probs": HookSite(("B", "H", "rows", "cols"), "P_ij = exp(S_ij - m_new)"),
    "hook_running_sum": HookSite(("B", "H", "rows"), "l_new = l_old * exp(m_old - m_new) + rowsum(P_ij)"),
    "hook_partial_out": HookSite(("B", "H", "rows", "d_head"), "acc = acc * exp(m_old - m_new) + P_ij V_j"),
    "hook_out": HookSite(("B", "H", "T_q", "d_head"), "out = acc / l"),
}
