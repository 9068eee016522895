"""Attention's choices: the kind of each layer, how many K/V heads, which keys a query sees, QK-norm, scores.

The modules that build them sit in transformer/attention.py (softmax attention, one per KV-heads kind),
transformer/linear_attention.py (the kinds that keep a state) and transformer/masks.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from .base import Axis, Choice, divisors
from .stack import NORM_POSITION


@dataclass(frozen=True, kw_only=True)
class AttentionChoice(Choice):
    keeps_state: bool  # a fixed-size state instead of a KV cache that grows with every token
    softmax: bool  # its weights come out of a softmax: each row sums to 1
    hf_layer_type: str  # its name in a Hugging Face config's ``layer_types`` (a local softmax layer: "sliding_attention")
    # --- what a kind that keeps a state does (transformer/linear_attention.py builds each from these flags) ---
    feature_map: bool = False  # φ on q and k before they meet the state (``linear_feature_map``: elu+1 or identity)
    fixed_decay: bool = False  # each token multiplies the state by a constant γ of its head (RetNet, lightning)
    gated_decay: bool = False  # each token sets its own decay α_t from its vector (Mamba-2, Gated DeltaNet)
    delta_rule: bool = False  # writes only the correction β_t (v_t - S^T k_t), with q and k scaled to length 1
    short_conv: bool = False  # a causal depthwise convolution over the last few tokens on q, k, v (Qwen3-Next)
    output_gate: bool = False  # the read's RMSNorm is multiplied by SiLU(x W_z) (Qwen3-Next's gated norm)
    channel_decay: bool = False  # a decay per key channel, not per head, from x through a d_k-wide bottleneck (Kimi)
    sigmoid_gate: bool = False  # the output gate is sigmoid(x W_z↓ W_z↑) through a d_v-wide bottleneck (Kimi)
    # mixes tokens by a gated short convolution alone (transformer/short_conv.py): no q, k or state matrix, and its
    # state is the convolution's last inputs (LFM2); the other flags above describe a state matrix and stay off
    conv_only: bool = False

    @property
    def decays(self) -> bool:
        """The state shrinks before each write, by a constant or by the token's own α_t (one per head or per channel)."""
        return self.fixed_decay or self.gated_decay or self.channel_decay

    @property
    def learned_decay(self) -> bool:
        """Its decay comes from the token through A_log and dt_bias (Gated DeltaNet, Kimi delta attention)."""
        return self.gated_decay or self.channel_decay

    @property
    def silu_gate(self) -> bool:
        """Its output gate is SiLU(x W_z), one full projection (Gated DeltaNet), not Kimi's sigmoid bottleneck."""
        return self.output_gate and not self.sigmoid_gate


# the config fields that only some kinds read: field -> (its default, the flag of the rows that read it)
KIND_FIELDS = {"linear_kind": ("gated-deltanet", "keeps_state"), "linear_chunk_size": (64, "keeps_state"),
               "linear_key_heads": (None, "keeps_state"), "linear_value_heads": (None, "keeps_state"),
               "linear_key_head_dim": (None, "keeps_state"), "linear_value_head_dim": (None, "keeps_state"),
               "linear_feature_map": ("elu+1", "feature_map"), "linear_conv_size": (4, "short_conv"),
               "delta_beta_max": (1.0, "delta_rule"), "linear_norm_position": (None, "keeps_state"),
               "linear_read_norm_eps": (None, "keeps_state"), "linear_sigmoid_gate": (False, "fixed_decay"),
               "linear_lightning": (False, "fixed_decay")}
# the settings of the lightning indexer, read only where index_top_k turns it on: field -> its default
INDEX_FIELDS = {"index_heads": 4, "index_head_dim": 32}
WITHOUT_INDEXER = {"index_top_k": None, **INDEX_FIELDS}  # cfg.replace(**WITHOUT_INDEXER): every key, no indexer
WITHOUT_LATENT = {"kv_rank": None, "q_rank": None, "latent_norm_eps": None}  # cfg.replace(**...): no MLA
FLAG_WORDS = {"keeps_state": "linear layers (a kind that keeps a state)", "feature_map": "'linear' layers",
              "short_conv": "layers with a short convolution ('gated-deltanet', 'kimi-delta', 'short-conv')",
              "delta_rule": "delta-rule layers ('deltanet', 'gated-deltanet', 'kimi-delta')",
              "fixed_decay": "layers with a fixed decay ('decayed-linear')"}

# settings that only softmax layers read: field -> (whether this config sets it, the value that leaves it out)
SOFTMAX_ONLY = {
    "position": (lambda cfg: cfg.row("position").rotates_qk or cfg.row("position").score_bias,
                 "'none' (or a position added to the embeddings)"),
    "n_kv_heads": (lambda cfg: cfg.n_kv_heads != cfg.n_heads, "None (linear layers count their own heads)"),
    "kv_rank": (lambda cfg: cfg.kv_rank is not None, "None"),
    "qk_norm": (lambda cfg: cfg.row("qk_norm").normalises, "'none'"),
    "attn_softcap": (lambda cfg: cfg.attn_softcap is not None, "None"),
    "sinks": (lambda cfg: cfg.sinks, "False"),
    "attn_gate": (lambda cfg: cfg.attn_gate, "False"),
}


def _layers_of(plan, wanted) -> str:
    layers = [spec for spec in plan if wanted(ATTENTION.choices[spec.kind])]
    return f"layer{'s' if len(layers) > 1 else ''} {', '.join(str(s.index) for s in layers)} " \
           f"({', '.join(dict.fromkeys(s.kind for s in layers))})"


def check_kind_fields(cfg, plan) -> None:
    """A setting that no layer of the plan reads is refused, as a MoE setting in a dense model is; so is a
    softmax setting in a model without a softmax layer."""
    rows = [ATTENTION.choices[spec.kind] for spec in plan]
    for field, (default, flag) in KIND_FIELDS.items():
        value = getattr(cfg, field)
        if value != default and not any(getattr(row, flag) for row in rows):
            raise ValueError(f"{field}={value!r} is a setting of {FLAG_WORDS[flag]}, but attention_layers="
                             f"{cfg.attention_layers!r} has none; choose such layers or set {field}={default!r}")
    if not any(spec.selects_keys for spec in plan):  # the indexer's settings without an indexer
        for field, default in INDEX_FIELDS.items():
            if getattr(cfg, field) != default:
                raise ValueError(f"{field}={getattr(cfg, field)!r} is a setting of the lightning indexer, which is "
                                 f"off (index_top_k=None); set index_top_k (DeepSeek-V3.2: 2048) or {field}={default!r}")
    if not any(row.softmax for row in rows):
        for field, (is_set, off) in SOFTMAX_ONLY.items():
            if is_set(cfg):
                raise ValueError(f"{field}={getattr(cfg, field)!r} is a setting of softmax layers, but "
                                 f"attention_layers={cfg.attention_layers!r} has none; set {field}={off}, or "
                                 "give the model softmax layers (attention_layers='3:1')")


def _check_state(cfg) -> None:
    """What every kind that keeps a state needs from the rest of the config."""
    plan = cfg.layer_plan()
    linear = _layers_of(plan, lambda row: row.keeps_state)
    if not cfg.row("arch").next_token:
        raise ValueError(f"{linear} keep a state that every token writes into, in order, and later tokens read: it "
                         f"can only see the past, so it cannot give an {cfg.arch!r} bidirectional attention; set "
                         "arch='decoder' or attention_layers='softmax'")
    if cfg.row("attention_pattern").sparse:
        raise ValueError(f"attention_pattern={cfg.attention_pattern!r} hides some keys from each query, but "
                         f"{linear} read every past token through their state and cannot leave one out; set "
                         "attention_pattern='dense' or attention_layers='softmax'")
    if cfg.linear_chunk_size < 1:
        raise ValueError(f"linear_chunk_size={cfg.linear_chunk_size} must be at least 1: the chunked form cuts "
                         "the text into chunks of that many tokens (64 is usual)")
    for field in ("linear_key_heads", "linear_value_heads", "linear_key_head_dim", "linear_value_head_dim"):
        if getattr(cfg, field) is not None and getattr(cfg, field) < 1:
            raise ValueError(f"{field}={getattr(cfg, field)} must be at least 1, or None for the default")
    if cfg.linear_read_norm_eps is not None and not cfg.linear_read_norm_eps > 0:
        raise ValueError(f"linear_read_norm_eps={cfg.linear_read_norm_eps} must be greater than 0: it keeps the read "
                         "norm's root away from 0 (OLMo hybrid: 1e-5); or None for norm_eps")
    placement = None if cfg.linear_norm_position is None else NORM_POSITION.row(cfg.linear_norm_position)
    if cfg.parallel_block and placement is not None and (placement.after or placement.on_sum or placement.skips_normed):
        raise ValueError(f"parallel_block=True needs linear_norm_position='pre' or None (now "
                         f"{cfg.linear_norm_position!r}): attention and FFN read normalised copies of one input")
    if cfg.state_heads % cfg.state_key_heads:
        raise ValueError(f"linear_value_heads={cfg.state_heads} is not divisible by linear_key_heads="
                         f"{cfg.state_key_heads}: each q and k head serves the same number of value heads "
                         f"(Qwen3-Next: 32 and 16); pick linear_key_heads among {divisors(cfg.state_heads)}")


def _check_delta(cfg) -> None:
    _check_state(cfg)
    if not 0 < cfg.delta_beta_max <= 2:
        raise ValueError(f"delta_beta_max={cfg.delta_beta_max} must be above 0 and at most 2: the state's step "
                         f"I - β k kᵀ has the eigenvalue 1 - β along k, which leaves [-1, 1] past β = 2 and "
                         "makes the state grow without bound (1: DeltaNet, Qwen3-Next; 2: OLMo hybrid)")


def _check_conv(cfg) -> None:
    _check_delta(cfg)
    if cfg.linear_conv_size < 1:
        raise ValueError(f"linear_conv_size={cfg.linear_conv_size} must be at least 1: the short convolution "
                         "reads that many tokens, the current one included (Qwen3-Next: 4)")


def _check_short_conv(cfg) -> None:
    _check_state(cfg)
    if cfg.linear_conv_size < 1:
        raise ValueError(f"linear_conv_size={cfg.linear_conv_size} must be at least 1: the short convolution "
                         "reads that many tokens, the current one included (LFM2: 3)")


SQRT_D = r"\tfrac{1}{\sqrt{d}}"
IMPLIED = "implied weights: the output is exactly these times V; not a softmax, a row need not sum to 1"

ATTENTION = Axis("Attention kind", {
    "softmax": AttentionChoice("softmax attention", "each query weighs every key it may see by softmax(q·k)",
                               "Any token reads any other exactly, at a cost and a cache that grow with the text.",
                               "2017, every model to 2024", keeps_state=False, softmax=True,
                               hf_layer_type="full_attention"),
    "linear": AttentionChoice(
        "linear attention", "attention without the softmax: φ(q)·φ(k) weighs each value, so the past adds up into "
        "one d×d state that every token writes φ(k) vᵀ into and reads with φ(q)",
        "A fixed-size state instead of a growing cache: the cost per token stays flat however long the text.",
        "Transformers are RNNs (Katharopoulos et al. 2020)", keeps_state=True, softmax=False,
        hf_layer_type="linear_attention", feature_map=True, check=_check_state,
        ops={"hook_state": "S_t = S_{t-1} + phi(k_t) v_t^T", "hook_z": "phi(q_t)^T S_t / sqrt(d_head): the read",
             "hook_pattern": "phi(q_i) . phi(k_j) / sqrt(d_head) for j <= i: " + IMPLIED},
        formulas={"hook_state": r"S_t = S_{t-1} + \phi(k_t)\, v_t^\top",
                  "hook_z": r"z_t = " + SQRT_D + r"\,\phi(q_t)^\top S_t",
                  "hook_pattern": r"W_{ij} = " + SQRT_D + r"\,\phi(q_i) \cdot \phi(k_j) \quad (j \le i)",
                  "hook_read_norm": r"\mathrm{RMSNorm}(z_t)"}),
    "decayed-linear": AttentionChoice(
        "decayed linear attention", "linear attention whose state shrinks by a fixed γ of its head before each "
        "write, so older tokens fade: a key j steps back weighs γʲ",
        "Recent tokens count most, and the state no longer piles up without bound.",
        "RetNet (2023), lightning attention (MiniMax-01)", keeps_state=True, softmax=False,
        hf_layer_type="linear_attention", fixed_decay=True, check=_check_state,
        ops={"hook_decay": "gamma_h = 1 - 2^(-5 - h), the same for every token",
             "hook_state": "S_t = gamma S_{t-1} + k_t v_t^T", "hook_z": "q_t^T S_t / sqrt(d_head): the read",
             "hook_pattern": "gamma^(i-j) q_i . k_j / sqrt(d_head) for j <= i: " + IMPLIED},
        formulas={"hook_decay": r"\gamma_h = 1 - 2^{-5-h}",
                  "hook_state": r"S_t = \gamma\, S_{t-1} + k_t v_t^\top",
                  "hook_z": r"z_t = " + SQRT_D + r"\, q_t^\top S_t",
                  "hook_pattern": r"W_{ij} = " + SQRT_D + r"\,\gamma^{\,i-j}\, q_i \cdot k_j \quad (j \le i)",
                  "hook_read_norm": r"\mathrm{RMSNorm}(z_t)"}),
    "deltanet": AttentionChoice(
        "DeltaNet", "the delta rule: each token first reads what the state says for its key, then writes only the "
        "correction β(v - Sᵀk), so a new value replaces the old one stored under a similar key",
        "Plain linear attention only adds, so similar keys blur together; correcting instead of adding makes the "
        "state a memory that overwrites.", "DeltaNet (Schlag et al. 2021; Yang et al. 2024)",
        keeps_state=True, softmax=False, hf_layer_type="linear_attention", delta_rule=True, check=_check_delta,
        ops={"hook_phi_q": "q / ||q||_2", "hook_phi_k": "k / ||k||_2",
             "hook_state": "S_t = S_{t-1} + k_t beta_t (v_t - S_{t-1}^T k_t)^T", "hook_z": "q_t^T S_t / sqrt(d_head): the read",
             "hook_pattern": "the chunked form's matrices over the whole text: " + IMPLIED},
        formulas={"hook_phi_q": r"\bar q_t = q_t / \lVert q_t \rVert_2",
                  "hook_phi_k": r"\bar k_t = k_t / \lVert k_t \rVert_2",
                  "hook_predicted": r"\hat v_t = S_{t-1}^\top \bar k_t",
                  "hook_state": r"S_t = S_{t-1} + \bar k_t\, \beta_t \left(v_t - S_{t-1}^\top \bar k_t\right)^\top",
                  "hook_z": r"z_t = " + SQRT_D + r"\, \bar q_t^\top S_t",
                  "hook_pattern": r"W = " + SQRT_D + r"\left(\bar Q \bar K^\top \odot L\right)\left(I + "
                                  r"\mathrm{tril}_{-1}(\mathrm{diag}(\beta)\, \bar K \bar K^\top)\right)^{-1}"
                                  r"\mathrm{diag}(\beta)",
                  "hook_read_norm": r"\mathrm{RMSNorm}(z_t)"}),
    "gated-deltanet": AttentionChoice(
        "Gated DeltaNet", "the delta rule with a decay α_t and a write strength β_t that each token sets; q, k and "
        "v pass a short causal convolution first, and the read a gated RMSNorm after",
        "The decay clears the state when the context changes, the delta rule overwrites single associations: "
        "three of these layers to one softmax layer keep most of the quality at a fraction of the cache.",
        "Gated DeltaNet (2024), Qwen3-Next, Qwen3.5, OLMo hybrid", keeps_state=True, softmax=False,
        hf_layer_type="linear_attention", gated_decay=True, delta_rule=True, short_conv=True, output_gate=True,
        check=_check_conv,
        ops={"hook_q": "SiLU(causal conv(x W_q)), split into heads",
             "hook_k": "SiLU(causal conv(x W_k)), split into heads",
             "hook_v": "SiLU(causal conv(x W_v)), split into heads",
             "hook_phi_q": "q / ||q||_2", "hook_phi_k": "k / ||k||_2",
             "hook_decay": "exp(-exp(A_log) * softplus(x W_a + dt_bias))",
             "hook_predicted": "(alpha_t S_{t-1})^T k_t",
             "hook_state": "S_t = alpha_t S_{t-1} + k_t beta_t (v_t - alpha_t S_{t-1}^T k_t)^T",
             "hook_z": "q_t^T S_t / sqrt(d_head): the read",
             "hook_pattern": "the chunked form's matrices over the whole text: " + IMPLIED,
             "hook_read_norm": "RMSNorm(z) * SiLU(x W_z)"},
        formulas={"hook_q": r"q_t = \mathrm{SiLU}\!\left(\textstyle\sum_{i<K} w_i \odot (x W_Q)_{t-i}\right)",
                  "hook_k": r"k_t = \mathrm{SiLU}\!\left(\textstyle\sum_{i<K} w_i \odot (x W_K)_{t-i}\right)",
                  "hook_v": r"v_t = \mathrm{SiLU}\!\left(\textstyle\sum_{i<K} w_i \odot (x W_V)_{t-i}\right)",
                  "hook_phi_q": r"\bar q_t = q_t / \lVert q_t \rVert_2",
                  "hook_phi_k": r"\bar k_t = k_t / \lVert k_t \rVert_2",
                  "hook_decay": r"\alpha_t = \exp\!\left(-e^{A}\, \mathrm{softplus}(x_t W_a + b_{dt})\right)",
                  "hook_predicted": r"\hat v_t = (\alpha_t S_{t-1})^\top \bar k_t",
                  "hook_state": r"S_t = \alpha_t S_{t-1} + \bar k_t\, \beta_t \left(v_t - \alpha_t S_{t-1}^\top "
                                r"\bar k_t\right)^\top",
                  "hook_z": r"z_t = " + SQRT_D + r"\, \bar q_t^\top S_t",
                  "hook_pattern": r"W = " + SQRT_D + r"\left(\bar Q \bar K^\top \odot D\right)\left(I + "
                                  r"\mathrm{tril}_{-1}(\mathrm{diag}(\beta)\, \bar K \bar K^\top \odot D)\right)^{-1}"
                                  r"\mathrm{diag}(\beta),\ D_{ij} = \textstyle\prod_{j<s\le i} \alpha_s",
                  "hook_read_norm": r"\mathrm{RMSNorm}(z_t) \odot \mathrm{SiLU}(x_t W_z)"}),
    "kimi-delta": AttentionChoice(
        "Kimi delta attention", "Gated DeltaNet with a decay per key channel: each token sets how fast each of the "
        "d_k rows of the state fades, instead of one number for the whole state; the output gate is a sigmoid",
        "Rows of the state can keep old facts while others turn over quickly: finer forgetting at the same size of "
        "state, which lets three of these layers to one latent-attention layer match full attention.",
        "Kimi Linear (Moonshot AI, 2025)", keeps_state=True, softmax=False, hf_layer_type="linear_attention",
        channel_decay=True, delta_rule=True, short_conv=True, output_gate=True, sigmoid_gate=True, check=_check_conv,
        ops={"hook_q": "SiLU(causal conv(x W_q)), split into heads",
             "hook_k": "SiLU(causal conv(x W_k)), split into heads",
             "hook_v": "SiLU(causal conv(x W_v)), split into heads",
             "hook_phi_q": "q / ||q||_2", "hook_phi_k": "k / ||k||_2",
             "hook_channel_decay": "exp(-exp(A_log) * softplus(x W_f_down W_f_up + dt_bias)), one per key channel",
             "hook_predicted": "(diag(alpha_t) S_{t-1})^T k_t",
             "hook_state": "S_t = diag(alpha_t) S_{t-1} + k_t beta_t (v_t - (diag(alpha_t) S_{t-1})^T k_t)^T",
             "hook_z": "q_t^T S_t / sqrt(d_head): the read",
             "hook_pattern": "the chunked form's matrices over the whole text, decayed channel by channel: " + IMPLIED,
             "hook_out_gate": "sigmoid(x W_z_down W_z_up)",
             "hook_read_norm": "RMSNorm(z) * sigmoid(x W_z_down W_z_up)"},
        formulas={"hook_q": r"q_t = \mathrm{SiLU}\!\left(\textstyle\sum_{i<K} w_i \odot (x W_Q)_{t-i}\right)",
                  "hook_k": r"k_t = \mathrm{SiLU}\!\left(\textstyle\sum_{i<K} w_i \odot (x W_K)_{t-i}\right)",
                  "hook_v": r"v_t = \mathrm{SiLU}\!\left(\textstyle\sum_{i<K} w_i \odot (x W_V)_{t-i}\right)",
                  "hook_phi_q": r"\bar q_t = q_t / \lVert q_t \rVert_2",
                  "hook_phi_k": r"\bar k_t = k_t / \lVert k_t \rVert_2",
                  "hook_channel_decay": r"\alpha_t = \exp\!\left(-e^{A}\, \mathrm{softplus}(x_t W_{f\downarrow} "
                                        r"W_{f\uparrow} + b_{dt})\right) \in (0, 1)^{d_k}",
                  "hook_predicted": r"\hat v_t = (\mathrm{diag}(\alpha_t) S_{t-1})^\top \bar k_t",
                  "hook_state": r"S_t = \mathrm{diag}(\alpha_t) S_{t-1} + \bar k_t\, \beta_t \left(v_t - \hat v_t"
                                r"\right)^\top",
                  "hook_z": r"z_t = " + SQRT_D + r"\, \bar q_t^\top S_t",
                  "hook_pattern": r"W = " + SQRT_D + r"\, A \left(I + \mathrm{tril}_{-1}(\mathrm{diag}(\beta)\, B)\right)^{-1}"
                                  r"\mathrm{diag}(\beta),\ A_{ij} = \textstyle\sum_c \bar q_{ic} \bar k_{jc} "
                                  r"\prod_{j<s\le i} \alpha_{s,c}\ (B: \bar k_i \text{ for } \bar q_i)",
                  "hook_out_gate": r"g_t = \sigma(x_t W_{z\downarrow} W_{z\uparrow})",
                  "hook_read_norm": r"\mathrm{RMSNorm}(z_t) \odot \sigma(x_t W_{z\downarrow} W_{z\uparrow})"}),
    "short-conv": AttentionChoice(
        "gated short convolution", "no attention at all: x is projected to B, C and x̃; each channel of B ⊙ x̃ is "
        "mixed with its own last few tokens by a causal depthwise convolution, and C gates the result",
        "Local mixing is cheap and needs no keys: a handful of past inputs per channel is the whole cache, and the "
        "few softmax layers between these carry the long range.", "LFM2 (Liquid AI, 2025)", keeps_state=True,
        softmax=False, hf_layer_type="conv", short_conv=True, conv_only=True, check=_check_short_conv),
}, problem="Softmax attention keeps every past key and value; a state that every token writes into keeps a fixed size "
           "instead.")  # a layer plan's row holds it (``TransformerConfig.layer_plan``)


@dataclass(frozen=True, kw_only=True)
class FeatureMapChoice(Choice):
    positive: bool  # φ(x) > 0 everywhere: every implied weight of linear attention is positive


# The feature map of "linear" layers (``linear_feature_map``); transformer/linear_attention.py keeps one function per row.
FEATURE_MAP = Axis("Feature map", {
    "elu+1": FeatureMapChoice("elu + 1", "φ(x) = elu(x) + 1: x + 1 above 0, eˣ below",
                              "Keeps every weight φ(q)·φ(k) positive, as softmax's are.",
                              "Transformers are RNNs (2020)", positive=True,
                              ops={"hook_phi_q": "elu(q) + 1", "hook_phi_k": "elu(k) + 1"}),
    "identity": FeatureMapChoice("identity", "φ(x) = x: q·k itself, unnormalised",
                                 "The plainest linear attention: weights may be negative.", positive=False,
                                 ops={"hook_phi_q": "q (identity)", "hook_phi_k": "k (identity)"}),
}, problem="Linear attention replaces exp(q·k) by φ(q)·φ(k); the feature map φ decides what the weights can be.")


def _check_not_latent(cfg) -> None:
    v4 = cfg.compress_layers.strip().lower() != "none"  # DeepSeek-V4's queries come from a q latent without MLA
    for field in ("latent_norm_eps",) if v4 else ("q_rank", "latent_norm_eps"):
        if getattr(cfg, field) is not None:
            raise ValueError(f"{field}={getattr(cfg, field)} is part of multi-head latent attention; set kv_rank too, "
                             f"or {field}=None")


def _check_latent(cfg) -> None:
    width = cfg.n_heads * cfg.d_head
    if not 1 <= cfg.kv_rank <= width:
        raise ValueError(f"kv_rank={cfg.kv_rank} must be between 1 and the heads' width n_heads * head_dim = "
                         f"{cfg.n_heads} * {cfg.d_head} = {width}: a latent wider than the keys saves nothing")
    if cfg.q_rank is not None and not 1 <= cfg.q_rank <= width:
        raise ValueError(f"q_rank={cfg.q_rank} must be between 1 and n_heads * head_dim = {width}")
    if cfg.latent_norm_eps is not None and not cfg.latent_norm_eps > 0:
        raise ValueError(f"latent_norm_eps={cfg.latent_norm_eps} must be greater than 0: it keeps the latent's norm "
                         "from dividing by zero (DeepSeek and Kimi Linear: 1e-6), or None for norm_eps")
    if cfg.n_kv_heads != cfg.n_heads:
        raise ValueError(f"multi-head latent attention rebuilds a key and a value for every head from its "
                         f"latent; set n_kv_heads={cfg.n_heads} (= n_heads), not {cfg.n_kv_heads}")
    if cfg.row("qk_norm").normalises or cfg.attn_gate:
        raise ValueError(f"multi-head latent attention (kv_rank={cfg.kv_rank}) normalises its own latent; "
                         f"qk_norm={cfg.qk_norm!r} and attn_gate={cfg.attn_gate} are not built for it: set "
                         "qk_norm='none' and attn_gate=False, or kv_rank=None")
    shared = [spec.index for spec in cfg.layer_plan() if spec.reuses_kv]
    if shared:
        raise ValueError(f"kv_shared_layers={cfg.kv_shared_layers!r} has layer {shared[0]} reuse an earlier layer's "
                         f"keys and values, but multi-head latent attention (kv_rank={cfg.kv_rank}) rebuilds them from "
                         "its latent in every layer; sharing that is not built: set kv_shared_layers='none' or "
                         "kv_rank=None")
    if not cfg.row("arch").next_token:
        raise ValueError(f"multi-head latent attention (kv_rank={cfg.kv_rank}) is built for decoders; "
                         f"set arch='decoder' (now {cfg.arch!r}) or kv_rank=None")
    if cfg.row("position").rotates_qk and (cfg.rope_dim is None or cfg.rope_dim == cfg.d_head):
        raise ValueError(f"MLA keeps RoPE off the latent: give it a decoupled rope_dim smaller than "
                         f"head_dim={cfg.d_head} (DeepSeek-V3: 64 of 192)")


@dataclass(frozen=True, kw_only=True)
class KVChoice(Choice):
    latent: bool = False  # K and V rebuilt from a cached low-rank latent (MLA): the cache holds the latent


KV_HEADS = Axis("KV heads", {
    "MHA": KVChoice("MHA", "every head has its own K and V",
                    "Each head can look for a different relation with keys and values of its own.", "2017, GPT-2, BERT",
                    check=_check_not_latent),
    "GQA": KVChoice("GQA", "each group of H/G query heads reads the same K and V",
                    "Shrinks the KV cache by H/G; the lecture: \"minimal quality loss\" (measured here: Trade-offs).", "LLaMA 2 70B, Mistral", check=_check_not_latent),
    "MQA": KVChoice("MQA", "all heads read one shared K and V",
                    "The smallest KV cache of K and V heads: H times smaller than MHA.", "PaLM, Falcon", check=_check_not_latent),
    "MLA": KVChoice("MLA (latent)", "every head's K and V are rebuilt from one small latent per token, plus one "
                    "RoPE key all heads share",
                    "A cache far smaller than MHA's or GQA's (about 2× MQA's at DeepSeek-V3's size) that still "
                    "gives every head keys and values of its own.",
                    "DeepSeek-V2, DeepSeek-V3", latent=True, check=_check_latent),
}, problem="At generation time every past token's keys and values sit in memory. Sharing one K/V head among "
           "several query heads (GQA, MQA) shrinks that cache by H/G — \"with almost no quality loss\", the lecture says; "
           "what it cost here is measured on the Trade-offs page. A latent (MLA) shrinks it far below MHA's (about "
           "2× MQA's) and keeps a key per head.")  # derived from n_kv_heads and kv_rank (``cfg.attention_kind``)

@dataclass(frozen=True, kw_only=True)
class MaskChoice(Choice):
    causal: bool = False  # hides every key after the query (transformer/masks.py builds each mask by its key)
    # a layer of the plan that this mask bounds is this type in Hugging Face's ``layer_types`` (``LayerSpec.hf_layer_type``)
    hf_layer_type: str | None = None
    switch: str | None = None  # the config field that turns it on for every softmax layer (None: the plan decides)



def _check_indexer(cfg) -> None:
    """What a lightning indexer (index_top_k) needs from the rest of the config."""
    k = cfg.index_top_k
    if not 1 <= k <= cfg.max_len:
        raise ValueError(f"index_top_k={k} must be from 1 to max_len={cfg.max_len}: a query never has more than "
                         f"max_len keys to choose from, so k={k} would keep them all; use at most {cfg.max_len} "
                         "(DeepSeek-V3.2: 2048 of 128k), or None for dense attention")
    if cfg.index_heads < 1:
        raise ValueError(f"index_heads={cfg.index_heads} must be at least 1 (DeepSeek-V3.2: 64)")
    if cfg.index_head_dim < max(1, cfg.d_rope):
        raise ValueError(f"index_head_dim={cfg.index_head_dim} must be at least 1 and hold the d_rope={cfg.d_rope} "
                         "dimensions RoPE turns in each indexer head (DeepSeek-V3.2: 128 with 64 turned); widen it or "
                         "set rope_dim smaller")
    arch = cfg.row("arch")
    if not arch.next_token or arch.cross:
        raise ValueError(f"index_top_k={k} lets each query keep its top {k} earlier keys, as DeepSeek-V3.2's decoder "
                         f"does; arch={cfg.arch!r} is not a decoder: set arch='decoder', or index_top_k=None")
    if cfg.row("attention_pattern").sparse:
        raise ValueError(f"index_top_k={k} chooses each query's keys, and attention_pattern={cfg.attention_pattern!r} "
                         "chooses them by a fixed pattern: one choice of keys at a time; set "
                         "attention_pattern='dense', or index_top_k=None")
    if not any(spec.row.softmax for spec in cfg.layer_plan()):
        raise ValueError(f"index_top_k={k} chooses keys for softmax layers, but attention_layers="
                         f"{cfg.attention_layers!r} has none; give the model softmax layers, or set index_top_k=None")


MASK = Axis("Mask", {
    "none": MaskChoice("none (bidirectional)", "every query sees every key, before and after it",
                       "An encoder reads the whole text at once.", "BERT"),
    "causal": MaskChoice("causal", "a query sees only itself and the keys before it",
                         "A decoder must not see the future it learns to predict.", "GPT-2, LLaMA", causal=True),
    "cross": MaskChoice("cross-attention", "the decoder's queries read the encoder's keys and values",
                        "Lets a decoder read the encoder.", "2017"),
    "padding": MaskChoice("padding", "keys at padding positions are hidden from every query",
                          "Padding must be invisible: a text in a batch gets the answer it gets alone."),
    "sliding_window": MaskChoice("sliding window", "a query sees at most W keys, itself included",
                                 "Bounds the cost of long inputs: W keys per query, however long the text.",
                                 "Mistral", hf_layer_type="sliding_attention"),
    "chunked": MaskChoice("chunked", "the text is cut into chunks of C tokens; a query sees only the keys of its own "
                          "chunk (in a decoder, those up to itself)",
                          "Bounds the cost like a window, and no chunk ever reads another: the first token of a chunk "
                          "starts afresh, so layers without positions in between carry the long range.",
                          "Llama 4 (chunks of 8192, every fourth layer full)", hf_layer_type="chunked_attention"),
    "top_k": MaskChoice("indexer top-k", "a lightning indexer scores every earlier key with a few small heads, "
                        "Σ_h w_h ReLU(q_h·k), and each query attends only to the k keys it scores highest",
                        "The indexer is cheap (a few narrow heads, no softmax), so attention itself pays for k keys "
                        "per query instead of the whole text.", "DeepSeek-V3.2, GLM-5 (k = 2048)",
                        hf_layer_type="indexed_attention", switch="index_top_k", check=_check_indexer),
}, problem="Decides who may look at whom: a decoder must not see the future, padding must be invisible, a window "
           "or a chunk bounds the cost of long inputs, an indexer keeps only the keys it scores highest, "
           "cross-attention lets a decoder read the encoder.")


def _check_pattern(cfg) -> None:
    if cfg.sliding_window is not None or cfg.layer_pattern != "uniform":
        raise ValueError(f"attention_pattern={cfg.attention_pattern!r} brings its own local keys; set "
                         f"sliding_window=None (now {cfg.sliding_window}) and layer_pattern='uniform' "
                         f"(now {cfg.layer_pattern!r}), or attention_pattern='dense' to keep the window")
    if cfg.attention_chunk is not None:
        raise ValueError(f"attention_pattern={cfg.attention_pattern!r} brings its own local keys; set "
                         f"attention_chunk=None (now {cfg.attention_chunk}), or attention_pattern='dense' to keep "
                         "the chunks")
    if cfg.pattern_size < 1:
        raise ValueError(f"pattern_size={cfg.pattern_size} must be at least 1 (the stride, block or window "
                         f"of the {cfg.attention_pattern} pattern)")
    if cfg.n_global < 0:
        raise ValueError(f"n_global={cfg.n_global} must be 0 or more (global tokens of the global-local pattern)")


@dataclass(frozen=True, kw_only=True)
class PatternChoice(Choice):
    sparse: bool  # scores only some of the pairs the mask allows (transformer/masks.py builds each pattern)
    global_tokens: bool = False  # a few tokens see and are seen by every token (n_global of them)
    whole_blocks: bool = False  # a query's keys are whole blocks, so a block-sparse kernel can skip the rest


ATTENTION_PATTERN = Axis("Sparse pattern", {
    "dense": PatternChoice("dense", "every pair the mask allows is scored: T² pairs for T tokens",
                           "Any token can read any other in one step.", "GPT-2, LLaMA", sparse=False),
    "strided": PatternChoice("strided", "a query sees the keys less than s away and every s-th key before them",
                             "About T·(s + T/s) pairs instead of T², and any two tokens are two steps apart.",
                             "Sparse Transformer (2019)", sparse=True, check=_check_pattern),
    "block-local": PatternChoice("block-local", "a query sees only the keys of its own block of b tokens",
                                 "T·b pairs: the cost grows linearly with the text, and blocks never talk to each "
                                 "other, in one layer or in a stack of them.", sparse=True, whole_blocks=True, check=_check_pattern),
    "global-local": PatternChoice("global + local", "a local window, plus a few global tokens that see and are seen "
                                  "by every token", "About T·(W + 2g) pairs, and every token is two steps from any "
                                  "other through a global token.", "Longformer, BigBird (2020)", sparse=True,
                                  global_tokens=True, check=_check_pattern),
}, problem="Dense attention scores T² pairs. A sparse pattern scores only some of them, so compute and memory "
           "can grow about linearly with T. Windows, strides and global tokens still pass information across the "
           "whole text over the layers; blocks that are the same in every layer never do.",
    field="attention_pattern")


@dataclass(frozen=True, kw_only=True)
class QKNormChoice(Choice):
    normalises: bool  # an RMSNorm on q and k before RoPE
    per_head: bool = False  # one norm of d_head per head, else one over the whole projection
    weighted: bool = True  # a learned scale w per dimension (q_norm.weight, k_norm.weight); False: none to learn
    rope_layers_only: bool = False  # only on the layers RoPE turns (Llama 4): a NoPE layer keeps q and k as projected


def _check_rope_layers(cfg) -> None:
    if not any(spec.rotates for spec in cfg.layer_plan()):
        raise ValueError(f"qk_norm={cfg.qk_norm!r} normalises q and k on the layers RoPE turns (Llama 4), but no "
                         f"layer of this model turns them (position={cfg.position!r}); set position='rope', or "
                         "qk_norm='head' to normalise every layer")


QK_NORM = Axis("QK-norm", {
    "none": QKNormChoice("none", "q and k as projected", "The plain recipe.", normalises=False),
    "head": QKNormChoice("per head", "an RMSNorm on each head's q and k, before RoPE",
                         "Bounds q and k by its learned weights, so the scores cannot grow without bound in training; Qwen3 and Gemma 3 "
                         "use it for stability (measured here at 10× the learning rate: Trade-offs).",
                         "Qwen3, Gemma 3", normalises=True, per_head=True),
    "full": QKNormChoice("over the projection", "an RMSNorm on all of q (and all of k) at once, before RoPE",
                         "The same bound, one norm across the heads.", "OLMo 2", normalises=True),
    "l2": QKNormChoice("L2, RoPE layers", "each head's q and k scaled to unit RMS, with no weight to learn, on the "
                       "layers RoPE turns (a turn keeps lengths, so before or after it is the same)",
                       "Bounds every score by √d_head on the RoPE layers, while the NoPE layers between them keep "
                       "their sharpness for the long range.", "Llama 4 (use_qk_norm)", normalises=True,
                       per_head=True, weighted=False, rope_layers_only=True, check=_check_rope_layers,
                       ops={"hook_q_norm": "q / rms(q), no weight", "hook_k_norm": "k / rms(k), no weight"},
                       formulas={"hook_q_norm": r"q \leftarrow \frac{q}{\mathrm{rms}(q)}",
                                 "hook_k_norm": r"k \leftarrow \frac{k}{\mathrm{rms}(k)}"}),
}, problem="Large q·k scores saturate softmax and make training unstable; normalising q and k bounds them.",
    field="qk_norm")

def _check_temperature(cfg) -> None:
    if not cfg.attn_temperature_floor >= 1:
        raise ValueError(f"attn_temperature_floor={cfg.attn_temperature_floor} must be at least 1: the temperature "
                         "steps up once every that many positions (Llama 4: 8192)")
    if not any(spec.row.softmax and not spec.rotates for spec in cfg.layer_plan()) or not cfg.row("position").rotates_qk:
        raise ValueError(f"attn_temperature_scale={cfg.attn_temperature_scale} scales q on the layers that leave "
                         f"RoPE out, but this model has none (position={cfg.position!r}, nope_layers="
                         f"{cfg.nope_layers!r}); set position='rope' with nope_layers (Llama 4: 'every 4'), or "
                         "attn_temperature_scale=None")


@dataclass(frozen=True, kw_only=True)
class ScoresChoice(Choice):
    switch: str | None = None  # the config field that turns it on (None: the plain recipe, on when nothing else is)


SCORES = Axis("Scores", {
    "plain": ScoresChoice("plain", "softmax of the scaled, masked scores", "The 2017 recipe.", "2017, LLaMA"),
    "softcap": ScoresChoice("soft-capped", "scores squeezed into (-c, c) by c·tanh(s/c) before the mask",
                            "Bounds the size of every score, not softmax's saturation: at c = 50 a capped 50 against "
                            "0 still takes the whole row.", "Gemma 2",
                            switch="attn_softcap"),
    "sinks": ScoresChoice("with a sink", "a learned logit per head joins each row's softmax and is dropped",
                          "A head can attend to nothing: the sink takes the weight it does not want to spend.",
                          "gpt-oss", switch="sinks"),
    "gate": ScoresChoice("gated output", "each head's output times sigmoid(x W_gate) before W_o",
                         "A head can switch itself off per token, without parking its weight on a token.",
                         "Qwen3-Next", switch="attn_gate"),
    "temperature": ScoresChoice("temperature by position", "on the layers without positions, q times "
                                "1 + s·log(1 + ⌊(t + 1) / f⌋): 1 for the first f - 1 tokens, then growing with the "
                                "log of the position", "A query that sees more keys spreads its softmax flatter; "
                                "scaling q up with the position (an inverse temperature: the softmax's temperature "
                                "falls) keeps it sharp far into a long text.",
                                "Llama 4 (s = 0.1, f = 8192)", switch="attn_temperature_scale",
                                check=_check_temperature),
}, problem="What happens between the scores and the output: capping them, letting a row attend to nothing, "
           "gating what a head returns, or sharpening it with the position.")  # switched on by their fields (``switch``)
