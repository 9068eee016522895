"""The gated short convolution: a layer that mixes tokens without attention (LFM2's "conv" layers).

    b, c, x̃ = x W_B, x W_C, x W_x                  three projections of the token, each d_model wide
    u_t     = b_t ⊙ x̃_t                             the input gate decides what the token puts in
    h_t     = Σ_{i<K} w_i ⊙ u_{t-i}                 a causal depthwise convolution: per channel, its last K inputs
    out_t   = (c_t ⊙ h_t) W_out                      the output gate decides what comes back

No query meets a key: a token reads exactly its K - 1 predecessors, each channel by fixed weights. So the cache
of such a layer is its convolution's last K - 1 inputs u, a constant (B, d_model, K - 1) however long the text,
and it has no attention weights to draw. Out of the gates it is still an exact linear map of x̃ per channel,
out_t = Σ_j c_t w_{t-j} b_j x̃_j, but one T x T matrix per channel (d_model of them), not per head.

Hugging Face's ``Lfm2ShortConv`` (its PyTorch path, ``causal_conv1d_fn``) is the reference.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .axes import AXES
from .config import TransformerConfig
from .hooks import HookPoint
from .linear_attention import StateInputs


class ShortConv(nn.Module):
    """x -> B, C, x̃ -> causal depthwise convolution of B ⊙ x̃ -> C ⊙ (that) -> W_out."""

    cache_token_dims = None  # it keeps only its last K - 1 inputs: a rolled-back token's predecessors are gone

    def __init__(self, cfg: TransformerConfig, kind: str):
        super().__init__()
        self.row = row = AXES["attention"].row(kind)
        width = cfg.d_model
        self.in_proj = nn.Linear(cfg.d_model, 3 * width, bias=cfg.bias)  # [B | C | x̃], as LFM2 stores it
        # depthwise: each channel convolves its own last K inputs; the current token is the last tap
        self.conv = nn.Conv1d(width, width, cfg.linear_conv_size, groups=width, bias=False)
        self.o_proj = nn.Linear(width, cfg.d_model, bias=cfg.bias)
        self.hook_conv_b, self.hook_conv_c = HookPoint("hook_conv_b", row), HookPoint("hook_conv_c", row)
        self.hook_conv_in, self.hook_conv_out = HookPoint("hook_conv_in", row), HookPoint("hook_conv_out", row)
        self.hook_conv_read = HookPoint("hook_conv_read", row)

    def reset_state_parameters(self) -> None:
        """The convolution as torch initialises one (``Transformer`` calls this after its N(0, 0.02) scheme,
        which would leave a convolution of K taps almost zero)."""
        self.conv.reset_parameters()

    def forward(self, x: torch.Tensor, inputs: StateInputs, cache: "dict | None" = None) -> torch.Tensor:
        if inputs.real is not None:
            x = x * inputs.real[..., None].to(x.dtype)  # (B, T, d_model): padding puts nothing into the convolution
        gate_in, gate_out, value = self.in_proj(x).chunk(3, dim=-1)  # (B, T, d_model) each
        gate_in, gate_out = self.hook_conv_b(gate_in), self.hook_conv_c(gate_out)
        conv_in = self.hook_conv_in(gate_in * value)  # (B, T, d_model)
        tail = cache[self][0] if cache is not None and self in cache else None  # (B, d_model, K - 1) or None
        conv_out, tail = self.convolve(conv_in, tail)  # (B, T, d_model), (B, d_model, K - 1)
        if cache is not None:
            cache[self] = (tail, tail.new_zeros(0))  # the second slot, a state matrix elsewhere, holds nothing here
        read = self.hook_conv_read(gate_out * self.hook_conv_out(conv_out))  # (B, T, d_model)
        return self.o_proj(read)  # (B, T, d_model)

    def convolve(self, conv_in: torch.Tensor, tail: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """The causal convolution over each channel's last K inputs: before the first token they are zeros, after a
        cached pass the inputs it kept; and the last K - 1 inputs, which the next pass must see."""
        seen = conv_in.transpose(1, 2)  # (B, d_model, T)
        size = self.conv.kernel_size[0]
        if tail is None:
            tail = seen.new_zeros(*seen.shape[:2], size - 1)  # (B, d_model, K - 1)
        seen = torch.cat((tail, seen), dim=-1)  # (B, d_model, K - 1 + T)
        out = F.conv1d(seen, self.conv.weight, groups=seen.shape[1])  # (B, d_model, T)
        return out.transpose(1, 2), seen[..., seen.shape[-1] - (size - 1):]
