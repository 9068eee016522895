"""Attention that keeps a state: linear attention, its decayed form, DeltaNet, Gated DeltaNet and Kimi delta attention.

Softmax attention keeps every past key and value and weighs them all again for each new query. Drop the
softmax and the weights factor: q_t · Σ_j k_j v_jᵀ, so the past adds up into one d_k × d_v matrix per
head, the state S, and the layer becomes an RNN whose hidden state is a matrix. Each kind writes it its
own way (o_t = q_tᵀ S_t reads it, q scaled by 1/sqrt(d_k) as softmax attention scales q·k):

    linear           S_t = S_{t-1} + φ(k_t) v_tᵀ                        (φ: elu+1 or the identity)
    decayed linear   S_t = γ S_{t-1} + k_t v_tᵀ                          (γ fixed per head: RetNet, lightning)
    DeltaNet         S_t = S_{t-1} + k_t β_t (v_t - S_{t-1}ᵀ k_t)ᵀ        (q and k of length 1)
    Gated DeltaNet   S_t = α_t S_{t-1} + k_t β_t (v_t - α_t S_{t-1}ᵀ k_t)ᵀ  (α_t, β_t from the token; Qwen3-Next)
    Kimi delta       the same with diag(α_t) S_{t-1}: α_t ∈ (0, 1)^{d_k}, one decay per row of S (Kimi Linear)

A decay (``log_decay``) is given per head, (B, H, T), or per key channel, (B, H, T, d_k); inside, one per head is
the channel case with a single channel that every row shares, (B, H, T, 1).

Two forms give the same numbers (tests/test_linear_attention.py):
- ``recurrent_form``: the state, token by token -- the one to read;
- ``chunked_form``: chunks of C tokens, the state carried from chunk to chunk and everything inside a
  chunk done by matrix products -- the one that runs, as SDPA runs for softmax attention.
``implied_weights`` is the (T, T) matrix the output equals times V, so every view of attention weights
works on these layers; it is no softmax, and its rows need not sum to 1.

Hugging Face's PyTorch fallbacks for Qwen3-Next (``torch_recurrent_gated_delta_rule``,
``torch_chunk_gated_delta_rule``, ``Qwen3NextGatedDeltaNet``) are the reference for Gated DeltaNet; Kimi Linear's
(``recurrent_kimi_delta_attention``, ``chunk_kimi_delta_attention``, ``KimiLinearDeltaAttention``) for Kimi delta
attention.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from .attention import merge_heads, split_heads
from .axes import AXES
from .config import TransformerConfig
from .hooks import HookPoint, active_recorder, wants_any

# φ of the "linear" kind, one per row of AXES["feature_map"] (``linear_feature_map``)
FEATURE_MAPS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"elu+1": lambda x: F.elu(x) + 1,
                                                                   "identity": lambda x: x}


class Pass(NamedTuple):
    """What one pass through the state gives: each token's read, the state after the last token, and, for the
    hooks, the delta rule's predictions and corrections and the state after every token (when kept)."""

    out: torch.Tensor  # (B, H, T, d_v): o_t = q_tᵀ S_t
    state: torch.Tensor  # (B, H, d_k, d_v)
    predicted: torch.Tensor | None = None  # (B, H, T, d_v): what the state said for k_t before writing
    correction: torch.Tensor | None = None  # (B, H, T, d_v): β_t (v_t - predicted), stored along k_t
    states: torch.Tensor | None = None  # (B, H, T, d_k, d_v)


def per_channel(log_decay: torch.Tensor) -> torch.Tensor:
    """log α as (B, H, T, d) with d = d_k (a decay per key channel) or 1 (one per head, shared by every row of S)."""
    return log_decay[..., None] if log_decay.dim() == 3 else log_decay


# --- the recurrent form: the state, token by token ------------------------------------------------------------

def recurrent_form(q, k, v, log_decay, beta, state, keep_states: bool = False) -> Pass:
    """q, k (B, H, T, d_k); v (B, H, T, d_v); log_decay (B, H, T) or (B, H, T, d_k) = log α_t, or None (no decay);
    beta (B, H, T) for the delta rule, or None (plain addition); state (B, H, d_k, d_v) before the first token."""
    decay = None if log_decay is None else per_channel(log_decay)  # (B, H, T, 1 or d_k)
    outs, predicted, corrections, states = [], [], [], []
    for t in range(q.shape[2]):
        q_t, k_t, v_t = q[:, :, t], k[:, :, t], v[:, :, t]  # (B, H, d_k), (B, H, d_k), (B, H, d_v)
        if decay is not None:
            state = state * decay[:, :, t, :, None].exp()  # (B, H, d_k, d_v): each row forgets a little first
        if beta is None:
            write = v_t  # (B, H, d_v): add the value as it comes
        else:
            guess = torch.einsum("bhkv,bhk->bhv", state, k_t)  # (B, H, d_v): what S already says for k_t
            write = beta[:, :, t, None] * (v_t - guess)  # (B, H, d_v): store only the correction
            predicted.append(guess)
            corrections.append(write)
        state = state + k_t[..., :, None] * write[..., None, :]  # (B, H, d_k, d_v): S += k_t writeᵀ
        outs.append(torch.einsum("bhk,bhkv->bhv", q_t, state))  # (B, H, d_v): read with q_t
        if keep_states:
            states.append(state)
    stack = lambda xs: torch.stack(xs, dim=2) if xs else None  # (B, H, T, ...)
    return Pass(stack(outs), state, stack(predicted), stack(corrections), stack(states))


# --- the chunked form: the same numbers, a chunk at a time ----------------------------------------------------

def _decay_within(b: torch.Tensor) -> torch.Tensor:
    """D_ij = exp(b_i - b_j) for j <= i, else 0: how much of token j's write is left at token i, for b the running
    sum of log α along the dim before last (..., C, d), per channel d. Upper entries are masked before exp so they
    cannot overflow. (..., C, C, d)"""
    gap = b[..., :, None, :] - b[..., None, :, :]  # (..., C, C, d)
    above = torch.ones(gap.shape[-3:-1], dtype=torch.bool, device=b.device).triu(1)
    return gap.masked_fill(above[..., None], float("-inf")).exp()


def _decayed_products(a: torch.Tensor, k: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Σ_c a_ic k_jc e^{b_ic - b_jc} for j <= i, else 0 (..., C, C), for a, k (..., C, d_k) and b (..., C, 1 or d_k).
    One decay per head factors out of the dot product: a matrix product, then a (C, C) mask. A decay per channel
    does not: each channel of each pair is decayed apart, as Kimi Linear's chunked form does it, a (C, C, d_k) product
    taken one slice of the dim before C at a time (a chunk, or a head) so that it never holds them all at once."""
    if b.shape[-1] == 1:
        return (a @ k.transpose(-1, -2)) * _decay_within(b)[..., 0]  # (..., C, C)
    slices = zip(a.unbind(-3), k.unbind(-3), b.unbind(-3))  # each (..., C, d_k), (..., C, d_k), (..., C, d_k)
    return torch.stack([(a_s[..., :, None, :] * k_s[..., None, :, :] * _decay_within(b_s)).sum(-1)  # (..., C, C)
                        for a_s, k_s, b_s in slices], dim=-3)  # (..., C, C)


def _chunk_matrices(q, k, b, beta):
    """Inside one chunk (q, k (..., C, d_k); b (..., C, 1 or d_k)), what token i reads of token j's write (scores),
    and for the delta rule, k_i · k_j decayed below the diagonal (overlap) and the triangular system
    (I + diag(β) overlap) whose solution turns every token's value into the correction it stores."""
    scores = _decayed_products(q, k, b)  # (..., C, C): q_i · k_j, decayed, j <= i
    if beta is None:
        return scores, None, None
    overlap = _decayed_products(k, k, b).tril(-1)  # (..., C, C): k_i · k_j decayed, j < i
    eye = torch.eye(b.shape[-2], dtype=b.dtype, device=b.device)
    return scores, overlap, eye + beta[..., :, None] * overlap


def chunked_form(q, k, v, log_decay, beta, state, size: int, predict: bool = False) -> Pass:
    """The same as ``recurrent_form`` (same arguments), C = `size` tokens at a time.

    Inside a chunk, with b_i = Σ_{s<=i} log α_s from the chunk's start and S_0 the state before it (a decay per
    channel: e^{b_i} is diag(e^{b_i}) on the rows of S, and e^{b_i - b_j} (q_i · k_j) sums channel by channel):
        o_i  = e^{b_i} q_iᵀ S_0 + Σ_{j<=i} e^{b_i - b_j} (q_i · k_j) u_j
        S_C  = e^{b_C} S_0 + Σ_j e^{b_C - b_j} k_j u_jᵀ
    where u_j is what token j writes: v_j for plain addition; for the delta rule the correction
    β_j (v_j - p_j), whose prediction p_j depends on the corrections before it in the chunk:
        (I + diag(β) tril_{-1}(K Kᵀ ⊙ D)) U = diag(β) (V - (K ⊙ e^b) S_0)
    a triangular system solved once per chunk (the UT transform of DeltaNet's chunked algorithm).
    """
    B, H, T, d_k = k.shape
    n = -(-T // size)
    pad = n * size - T  # zero tokens at the end: they write nothing and decay nothing
    q, k, v = (F.pad(x, (0, 0, 0, pad)).view(B, H, n, size, -1) for x in (q, k, v))  # (B, H, n, C, d)
    log_decay = torch.zeros(B, H, T, 1, dtype=q.dtype, device=q.device) if log_decay is None else log_decay
    decay = per_channel(log_decay)  # (B, H, T, d): d = 1 or d_k
    b = F.pad(decay, (0, 0, 0, pad)).view(B, H, n, size, -1).cumsum(-2)  # (B, H, n, C, d): log decay since it began
    beta = None if beta is None else F.pad(beta, (0, pad)).view(B, H, n, size)  # (B, H, n, C)
    scores, overlap, system = _chunk_matrices(q, k, b, beta)  # (B, H, n, C, C) each
    q_from_start = q * b.exp()  # (B, H, n, C, d_k): q_i reading S_0, decayed since the chunk began
    k_from_start = k * b.exp()  # (B, H, n, C, d_k): k_i predicting from S_0
    k_to_end = k * (b[..., -1:, :] - b).exp()  # (B, H, n, C, d_k): k_j's write, decayed to the chunk's end
    if beta is not None:  # what each token writes, split into a part without S_0 and a part times S_0
        u_alone = torch.linalg.solve_triangular(system, beta[..., None] * v, upper=False)  # (B, H, n, C, d_v)
        u_per_s0 = torch.linalg.solve_triangular(system, beta[..., None] * k_from_start, upper=False)  # (B, H, n, C, d_k)
    outs, predicted, corrections = [], [], []
    for c in range(n):
        u = v[:, :, c] if beta is None else u_alone[:, :, c] - u_per_s0[:, :, c] @ state  # (B, H, C, d_v)
        outs.append(q_from_start[:, :, c] @ state + scores[:, :, c] @ u)  # (B, H, C, d_v)
        if predict and beta is not None:
            predicted.append(k_from_start[:, :, c] @ state + overlap[:, :, c] @ u)  # (B, H, C, d_v)
            corrections.append(u)
        state = state * b[:, :, c, -1, :, None].exp() + k_to_end[:, :, c].transpose(-1, -2) @ u  # (B, H, d_k, d_v)
    unchunk = lambda xs: torch.stack(xs, dim=2).view(B, H, n * size, -1)[:, :, :T] if xs else None  # (B, H, T, d)
    return Pass(unchunk(outs), state, unchunk(predicted), unchunk(corrections))


def implied_weights(q, k, log_decay, beta) -> torch.Tensor:
    """(B, H, T, T): the matrix W with out = W V for a pass that starts from an empty state.

    It is the chunked form's matrices for one chunk as long as the text: the decayed scores, and for the
    delta rule the same triangular system, W = scores (I + diag(β) overlap)^{-1} diag(β). Not a softmax:
    a row need not sum to 1, and under the delta rule a weight may be negative (a later key overwrote it).
    """
    log_decay = torch.zeros(*q.shape[:3], 1, dtype=q.dtype, device=q.device) if log_decay is None else log_decay
    scores, _, system = _chunk_matrices(q, k, per_channel(log_decay).cumsum(-2), beta)  # (B, H, T, T)
    if beta is None:
        return scores
    return torch.linalg.solve_triangular(system, scores, upper=False, left=False) * beta[..., None, :]


# --- the layer ------------------------------------------------------------------------------------------------

@dataclass
class StateInputs:
    """What a stack works out once per forward pass for its layers that keep a state."""

    real: torch.Tensor | None  # bool (B, T): this pass's real tokens (None: no padding)


def state_inputs(attention_mask: torch.Tensor | None, length: int) -> StateInputs:
    """The padding of this pass's `length` tokens, from the mask of every token so far (B, T_past + T).

    A state is written token by token and cannot skip one, so padding may only come before a row's real
    tokens (or after them, where no real token reads it); a gap between real tokens is refused.
    """
    if attention_mask is None:
        return StateInputs(None)
    real = attention_mask.bool()  # (B, T_past + T)
    starts = real & ~F.pad(real, (1, 0))[:, :-1]  # (B, T_past + T): a real token right after padding
    gaps = (starts.sum(-1) > 1).nonzero()
    if len(gaps):
        row = int(gaps[0])
        resumes = int(starts[row].nonzero()[1])  # the first real token after a gap
        raise ValueError(f"attention_mask row {row} has padding between real tokens (just before position "
                         f"{resumes}): a layer that keeps a state reads the past through one state written token "
                         "by token, which cannot leave a token out; pad on the left only")
    return StateInputs(real[:, -length:])


def l2_normalise(x: torch.Tensor) -> torch.Tensor:
    """x / |x|, with FLA's and Hugging Face's epsilon inside the root."""
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6)


class LinearAttention(nn.Module):
    """x -> q, k, v (-> short convolution) -> φ or length 1 -> the state -> RMSNorm (* gate) -> W_o.

    What a kind adds is its row's flags (``AXES["attention"]``): a feature map, a fixed, gated or per-channel decay,
    the delta rule, a short convolution, an output gate (SiLU, or a sigmoid through a bottleneck). Projections have
    no bias, so a padding token (whose input is zeroed) writes nothing into a state that is still empty.
    """

    cache_token_dims = None  # its state has folded every token in: KVCache.truncate cannot take one back

    def __init__(self, cfg: TransformerConfig, kind: str, layer: int = 0):
        super().__init__()
        self.row = row = AXES["attention"].row(kind)
        # MiniMax-01's form of a fixed decay (``linear_lightning``): SiLU on q, k, v, q unscaled, a decay per head that
        # falls with the layer's depth, one RMSNorm over all heads
        self.lightning = row.fixed_decay and cfg.linear_lightning
        self.n_key_heads, self.n_heads = cfg.state_key_heads, cfg.state_heads
        self.d_k, self.d_v = cfg.state_d_k, cfg.state_d_v
        self.chunk_size, self.eps = cfg.linear_chunk_size, cfg.read_norm_eps
        self.fused = True  # the chunked form; False (``Transformer.set_fused``) runs the recurrent one
        width_k, width_v = self.n_key_heads * self.d_k, self.n_heads * self.d_v
        self.q_proj = nn.Linear(cfg.d_model, width_k, bias=False)
        self.k_proj = nn.Linear(cfg.d_model, width_k, bias=False)
        self.v_proj = nn.Linear(cfg.d_model, width_v, bias=False)
        self.o_proj = nn.Linear(width_v, cfg.d_model, bias=cfg.bias)
        # the read's RMSNorm, shared by the heads; lightning's spans every head at once
        self.norm_weight = nn.Parameter(torch.ones(width_v if self.lightning else self.d_v))
        self.hook_q, self.hook_k, self.hook_v = (HookPoint(site, row) for site in ("hook_q", "hook_k", "hook_v"))
        if row.short_conv:  # depthwise: each channel of q, k, v mixes its own last few tokens
            channels = 2 * width_k + width_v
            self.conv = nn.Conv1d(channels, channels, cfg.linear_conv_size, groups=channels, bias=False)
        if row.feature_map:
            self.phi = FEATURE_MAPS[cfg.linear_feature_map]
            words = cfg.row("feature_map")
            self.hook_phi_q, self.hook_phi_k = HookPoint("hook_phi_q", words), HookPoint("hook_phi_k", words)
        if row.delta_rule:
            self.phi = l2_normalise
            self.hook_phi_q, self.hook_phi_k = HookPoint("hook_phi_q", row), HookPoint("hook_phi_k", row)
            self.b_proj = nn.Linear(cfg.d_model, self.n_heads, bias=False)
            self.beta_max = cfg.delta_beta_max
            self.hook_beta = HookPoint("hook_beta", row)
            self.hook_predicted = HookPoint("hook_predicted", row)
            self.hook_correction = HookPoint("hook_correction", row)
        if self.lightning:  # γ_h = exp(-r^(h+1) (1 - l/(L-1))), r = 2^(-8/H): ALiBi's slopes, milder in deeper layers
            depth = 1 - layer / (cfg.n_layers - 1 + 1e-5) + 1e-5  # HF's epsilons, so the last layer still decays
            slopes = (2.0 ** (-8.0 / self.n_heads)) ** (torch.arange(self.n_heads) + 1.0)  # (H,)
            self.register_buffer("log_gamma", -slopes * depth, persistent=False)  # from the config, as RoPE tables are
        elif row.fixed_decay:  # RetNet's γ_h = 1 - 2^(-5-h): the first head forgets fastest
            log_gamma = torch.log(1 - 2.0 ** (-5.0 - torch.arange(self.n_heads)))  # (H,)
            self.register_buffer("log_gamma", log_gamma, persistent=False)
        if row.gated_decay:  # α_t = exp(-e^A softplus(x W_a + dt_bias)), Mamba-2's discretised decay
            self.a_proj = nn.Linear(cfg.d_model, self.n_heads, bias=False)
            self.A_log = nn.Parameter(torch.zeros(self.n_heads))
            self.dt_bias = nn.Parameter(torch.zeros(self.n_heads))
        if row.channel_decay:  # Kimi: α_t per key channel, exp(-e^A_h softplus(x W_f↓ W_f↑ + dt_bias)), A per head
            self.a_down = nn.Linear(cfg.d_model, self.d_k, bias=False)  # a bottleneck one key head wide
            self.a_up = nn.Linear(self.d_k, self.n_heads * self.d_k, bias=False)
            self.A_log = nn.Parameter(torch.zeros(self.n_heads))
            self.dt_bias = nn.Parameter(torch.zeros(self.n_heads * self.d_k))
            self.hook_channel_decay = HookPoint("hook_channel_decay", row)
        elif row.decays:
            self.hook_decay = HookPoint("hook_decay", row)
        if row.sigmoid_gate:  # Kimi: sigmoid(x W_z↓ W_z↑), a bottleneck one value head wide
            self.z_down = nn.Linear(cfg.d_model, self.d_v, bias=False)
            self.z_up = nn.Linear(self.d_v, width_v, bias=False)
        elif row.output_gate:
            self.z_proj = nn.Linear(cfg.d_model, width_v, bias=False)
        if row.output_gate:
            self.hook_out_gate = HookPoint("hook_out_gate", row)
        if row.fixed_decay and cfg.linear_sigmoid_gate:  # lightning attention's gate (MiniMax-01), after the norm
            self.g_proj = nn.Linear(cfg.d_model, width_v, bias=False)
            self.hook_read_gate = HookPoint("hook_read_gate", row)
        self.hook_state = HookPoint("hook_state", row)
        self.hook_pattern = HookPoint("hook_pattern", row)
        self.hook_z = HookPoint("hook_z", row)
        self.hook_read_norm = HookPoint("hook_read_norm", row)
        self.reset_state_parameters()

    def reset_state_parameters(self) -> None:
        """Start the decay, its time step and the convolution where Gated DeltaNet's authors start them (FLA):
        A uniform in (0, 16], softplus(dt_bias) log-uniform in [0.001, 0.1], so α_t = exp(-A dt) begins between
        about 0.2 and 1; the convolution as torch initialises one. ``Transformer`` calls this after its own
        N(0, 0.02) scheme, which fits matrices, not these."""
        if self.row.learned_decay:
            with torch.no_grad():
                self.A_log.copy_(torch.empty(self.n_heads).uniform_(0, 16).clamp_(min=1e-4).log())
                steps = self.dt_bias.numel()  # one per head, or one per key channel (Kimi)
                dt = torch.exp(torch.rand(steps) * (math.log(0.1) - math.log(0.001)) + math.log(0.001))
                dt = dt.clamp(min=1e-4)
                self.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # softplus⁻¹(dt)
        if self.row.short_conv:
            self.conv.reset_parameters()

    def forward(self, x: torch.Tensor, inputs: StateInputs, cache: "dict | None" = None) -> torch.Tensor:
        if inputs.real is not None:
            x = x * inputs.real[..., None].to(x.dtype)  # (B, T, d_model): padding's q, k, v and gates start at 0
        state, conv_tail = cache[self] if cache is not None and self in cache else (None, None)
        q, k, v, conv_tail = self.project(x, conv_tail)  # q, k (B, H_k, T, d_k); v (B, H, T, d_v)
        if hasattr(self, "phi"):
            q, k = self.hook_phi_q(self.phi(q)), self.hook_phi_k(self.phi(k))
        log_decay = self.log_decay(x)  # (B, H, T) or None
        beta = None
        if self.row.delta_rule:
            beta = self.hook_beta(self.beta_max * torch.sigmoid(self.b_proj(x).float()).transpose(1, 2))  # (B, H, T)
        # each q and k head serves H / H_k value heads (Qwen3-Next); the state works in float32, as Hugging Face's
        repeat = self.n_heads // self.n_key_heads
        q, k = (t.repeat_interleave(repeat, dim=1).float() for t in (q, k))  # (B, H, T, d_k)
        q, v = (q if self.lightning else q / math.sqrt(self.d_k)), v.float()  # lightning leaves q unscaled
        B, T = x.shape[:2]
        if state is None:
            state = q.new_zeros(B, self.n_heads, self.d_k, self.d_v)  # (B, H, d_k, d_v): nothing written yet
        keep_states = wants_any(self.hook_state)
        if keep_states:
            self.check_states_fit(B, T)
        if keep_states or not self.fused or T == 1:  # one generated token: a chunk would pad it to chunk_size
            result = recurrent_form(q, k, v, log_decay, beta, state, keep_states)
        else:
            predict = beta is not None and wants_any(self.hook_predicted, self.hook_correction)
            result = chunked_form(q, k, v, log_decay, beta, state, self.chunk_size, predict)
        if result.predicted is not None:
            self.hook_predicted(result.predicted)  # (B, H, T, d_v)
            self.hook_correction(result.correction)  # (B, H, T, d_v)
        if keep_states:
            self.hook_state(result.states)  # (B, H, T, d_k, d_v)
        if wants_any(self.hook_pattern):  # this pass's tokens: a carried state holds the earlier ones, not their values
            self.hook_pattern(implied_weights(q, k, log_decay, beta))  # (B, H, T, T)
        if cache is not None:
            cache[self] = (result.state, conv_tail)
        z = self.hook_z(result.out.to(x.dtype))  # (B, H, T, d_v): the read
        return self.o_proj(merge_heads(self.read_norm(z, x)))  # (B, T, d_model)

    def project(self, x: torch.Tensor, conv_tail: torch.Tensor | None):
        """q, k, v split into heads, through the short convolution where the kind has one; and the inputs the
        next pass's convolution must see (B, channels, K - 1), empty without one."""
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)  # (B, T, H_k d_k), (B, T, H_k d_k), (B, T, H d_v)
        if self.row.short_conv:
            q, k, v, conv_tail = self.convolve(q, k, v, conv_tail)
        else:
            conv_tail = x.new_zeros(x.shape[0], 0, 0)
        if self.lightning:
            q, k, v = F.silu(q), F.silu(k), F.silu(v)
        q = self.hook_q(split_heads(q, self.n_key_heads))  # (B, H_k, T, d_k)
        k = self.hook_k(split_heads(k, self.n_key_heads))  # (B, H_k, T, d_k)
        v = self.hook_v(split_heads(v, self.n_heads))  # (B, H, T, d_v)
        return q, k, v, conv_tail

    def convolve(self, q, k, v, conv_tail):
        """SiLU(causal depthwise conv) over each channel's last K inputs; before the first token they are zeros,
        after a cached pass the inputs it kept."""
        mixed = torch.cat((q, k, v), dim=-1).transpose(1, 2)  # (B, channels, T)
        size = self.conv.kernel_size[0]
        if conv_tail is None:
            conv_tail = mixed.new_zeros(*mixed.shape[:2], size - 1)  # (B, channels, K - 1)
        seen = torch.cat((conv_tail, mixed), dim=-1)  # (B, channels, K - 1 + T)
        mixed = F.silu(F.conv1d(seen, self.conv.weight, groups=seen.shape[1])).transpose(1, 2)  # (B, T, channels)
        width_k = self.n_key_heads * self.d_k
        q, k, v = mixed.split((width_k, width_k, self.n_heads * self.d_v), dim=-1)
        return q, k, v, seen[..., seen.shape[-1] - (size - 1):]

    def log_decay(self, x: torch.Tensor) -> torch.Tensor | None:
        """log α_t (B, H, T), float32: a fixed γ per head, or each token's own; (B, H, T, d_k) per key channel (Kimi);
        None for a kind without decay."""
        if self.row.channel_decay:
            step = F.softplus(self.a_up(self.a_down(x)).float() + self.dt_bias.float())  # (B, T, H d_k): dt per channel
            log_alpha = -self.A_log.float().exp()[:, None, None] * split_heads(step, self.n_heads)  # (B, H, T, d_k)
            self.hook_channel_decay(log_alpha.exp())
            return log_alpha
        if self.row.fixed_decay:
            log_alpha = self.log_gamma.float()[None, :, None].expand(x.shape[0], -1, x.shape[1])  # (B, H, T)
        elif self.row.gated_decay:
            step = F.softplus(self.a_proj(x).float() + self.dt_bias.float())  # (B, T, H): the time step dt
            log_alpha = (-self.A_log.float().exp() * step).transpose(1, 2)  # (B, H, T)
        else:
            return None
        self.hook_decay(log_alpha.exp())
        return log_alpha

    def read_norm(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Each head's read at a steady size (RMSNorm in float32), times SiLU(x W_z) where the kind gates it, or
        sigmoid(x W_g) where linear_sigmoid_gate gates a decayed-linear layer."""
        z32 = merge_heads(z.float()) if self.lightning else z.float()  # (B, T, H d_v) lightning, else (B, H, T, d_v)
        normed = (z32 * torch.rsqrt(z32.pow(2).mean(-1, keepdim=True) + self.eps) * self.norm_weight.float())
        if self.lightning:
            normed = split_heads(normed, self.n_heads)  # (B, H, T, d_v)
        if self.row.output_gate:
            normed = normed * self.hook_out_gate(self.out_gate(x))  # (B, H, T, d_v)
        if hasattr(self, "g_proj"):
            gate = torch.sigmoid(split_heads(self.g_proj(x), self.n_heads).float())  # (B, H, T, d_v)
            normed = normed * self.hook_read_gate(gate)
        return self.hook_read_norm(normed.to(z.dtype))  # (B, H, T, d_v)

    def out_gate(self, x: torch.Tensor) -> torch.Tensor:
        """(B, H, T, d_v) float32: SiLU(x W_z) (Gated DeltaNet), or sigmoid(x W_z↓ W_z↑) (Kimi), per read number."""
        if self.row.sigmoid_gate:
            return torch.sigmoid(split_heads(self.z_up(self.z_down(x)), self.n_heads).float())  # (B, H, T, d_v)
        return F.silu(split_heads(self.z_proj(x), self.n_heads).float())  # (B, H, T, d_v)

    def check_states_fit(self, B: int, T: int) -> None:
        """Refuse, before computing them, states per token that the trace's cap cannot hold."""
        recorder = active_recorder()
        if recorder is None or recorder.max_bytes is None:
            return
        per_head = B * T * self.d_k * self.d_v * 4  # float32
        room = recorder.max_bytes - recorder.kept_bytes
        if per_head * self.n_heads > room:
            raise MemoryError(
                f"{self.hook_state.name} holds a {self.d_k} x {self.d_v} state per head after each of {T} tokens: "
                f"{per_head / 2**20:.1f} MiB per head, {per_head * self.n_heads / 2**20:.1f} MiB for its {self.n_heads} "
                f"heads, but the trace's cap max_bytes={recorder.max_bytes} ({recorder.max_bytes / 2**20:.1f} MiB) has "
                f"{max(room, 0) / 2**20:.1f} MiB left; record the states of fewer layers (names=[one layer's "
                "hook_state]), a shorter text, or raise max_bytes")


# one builder per kind that keeps a state (the rows of AXES["attention"] with keeps_state); their flags say the rest
STATE_MODULES: dict[str, Callable[[TransformerConfig], nn.Module]] = {
    "linear": functools.partial(LinearAttention, kind="linear"),
    "decayed-linear": functools.partial(LinearAttention, kind="decayed-linear"),
    "deltanet": functools.partial(LinearAttention, kind="deltanet"),
    "gated-deltanet": functools.partial(LinearAttention, kind="gated-deltanet"),
    "kimi-delta": functools.partial(LinearAttention, kind="kimi-delta"),
}
