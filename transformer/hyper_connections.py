"""Hyper-connections (DeepSeek-V4's manifold-constrained form): the residual widened into n streams.

The ordinary residual keeps one vector per token and adds each sublayer's output to it. Here each token keeps n
vectors, the streams S (n, d_model). Before a sublayer, one learned layer reads all the streams and gives three
sets of weights, each token its own:

    pre  = sigmoid(a_pre · W_pre x + b_pre) + ε             (n,)   how much of each stream the sublayer reads
    post = 2 sigmoid(a_post · W_post x + b_post)              (n,)   how much of its output each stream gets
    comb = Sinkhorn(softmax(a_comb · W_comb x + b_comb) + ε)  (n, n) how the streams pass on to each other

where x is all n streams flattened and scaled to unit RMS. The sublayer reads Σ_j pre_j S_j, and the streams become

    S'_k = post_k · sublayer(...) + Σ_j comb_jk S_j

Sinkhorn's iterations divide comb's columns, then its rows and columns in turn, by their sums, so it ends doubly
stochastic: every row and column sums to 1. Mixing by such a matrix never grows the streams' total, however deep
the stack (the "manifold constraint"). After the last block a head collapses the streams with weights of the same
kind as pre. With n = 1 none of this is built: the ordinary residual.
"""
from __future__ import annotations

import torch
from torch import nn

from .hooks import HookPoint
from .norms import UnitRMS


def sinkhorn(weights: torch.Tensor, iters: int, eps: float) -> torch.Tensor:
    """(..., n, n) positive weights -> nearly doubly stochastic: columns first, then rows and columns iters - 1 times."""
    weights = weights / (weights.sum(dim=-2, keepdim=True) + eps)  # (..., n, n): every column sums to 1
    for _ in range(iters - 1):
        weights = weights / (weights.sum(dim=-1, keepdim=True) + eps)  # rows
        weights = weights / (weights.sum(dim=-2, keepdim=True) + eps)  # columns
    return weights


class HyperConnection(nn.Module):
    """The weights around one sublayer: what it reads of the streams, what it writes back, how they mix."""

    def __init__(self, cfg):
        super().__init__()
        n, d = cfg.hyper_streams, cfg.d_model
        self.n, self.iters, self.eps = n, cfg.hyper_sinkhorn_iters, cfg.hyper_eps
        self.norm = UnitRMS(cfg.norm_eps)  # over all n streams at once, nothing to learn
        self.proj = nn.Parameter(torch.empty(n * (n + 2), n * d))  # rows: pre (n), post (n), comb (n * n)
        self.bias = nn.Parameter(torch.zeros(n * (n + 2)))
        self.scale = nn.Parameter(torch.ones(3))  # one for each of pre, post and comb
        nn.init.normal_(self.proj, 0.0, 0.02)
        self.hook_hyper_pre = HookPoint("hook_hyper_pre")
        self.hook_hyper_post = HookPoint("hook_hyper_post")
        self.hook_hyper_comb = HookPoint("hook_hyper_comb")

    def forward(self, streams: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """streams (B, T, n, d_model) -> the sublayer's input (B, T, d_model), post (B, T, n), comb (B, T, n, n)."""
        B, T, n, _ = streams.shape
        flat = self.norm(streams.reshape(B, T, -1).float())  # (B, T, n * d_model) at unit RMS
        mixes = flat @ self.proj.float().T  # (B, T, n * (n + 2))
        pre_w, post_w, comb_w = mixes.split((n, n, n * n), dim=-1)
        pre_b, post_b, comb_b = self.bias.float().split((n, n, n * n))
        pre_scale, post_scale, comb_scale = self.scale.float().unbind(0)
        pre = self.hook_hyper_pre(torch.sigmoid(pre_w * pre_scale + pre_b) + self.eps)  # (B, T, n)
        post = self.hook_hyper_post(2 * torch.sigmoid(post_w * post_scale + post_b))  # (B, T, n)
        comb = torch.softmax((comb_w * comb_scale + comb_b).view(B, T, n, n), dim=-1) + self.eps  # (B, T, n, n)
        comb = self.hook_hyper_comb(sinkhorn(comb, self.iters, self.eps))  # (B, T, n, n): rows and columns sum to 1
        read = (pre.unsqueeze(-1) * streams.float()).sum(dim=2).to(streams.dtype)  # (B, T, d_model)
        return read, post.to(streams.dtype), comb.to(streams.dtype)


def mix(streams: torch.Tensor, out: torch.Tensor, post: torch.Tensor, comb: torch.Tensor) -> torch.Tensor:
    """S'_k = post_k out + Σ_j comb_jk S_j: streams (B, T, n, d), out (B, T, d), post (B, T, n), comb (B, T, n, n)."""
    return post.unsqueeze(-1) * out.unsqueeze(-2) + comb.transpose(-1, -2) @ streams  # (B, T, n, d)


def widen(x: torch.Tensor, n: int) -> torch.Tensor:
    """The embeddings (B, T, d) copied into n streams (B, T, n, d): every stream starts alike."""
    return x.unsqueeze(2).expand(-1, -1, n, -1).contiguous()  # (B, T, n, d)


class HyperHead(nn.Module):
    """After the last block: the streams collapsed into one vector per token, by weights like a sublayer's pre."""

    def __init__(self, cfg):
        super().__init__()
        n = cfg.hyper_streams
        self.eps = cfg.hyper_eps
        self.norm = UnitRMS(cfg.norm_eps)
        self.proj = nn.Parameter(torch.empty(n, n * cfg.d_model))
        self.bias = nn.Parameter(torch.zeros(n))
        self.scale = nn.Parameter(torch.ones(1))
        nn.init.normal_(self.proj, 0.0, 0.02)
        self.hook_hyper_pre = HookPoint("hook_hyper_pre")

    def forward(self, streams: torch.Tensor) -> torch.Tensor:
        """streams (B, T, n, d_model) -> (B, T, d_model)."""
        B, T, _, _ = streams.shape
        flat = self.norm(streams.reshape(B, T, -1).float())  # (B, T, n * d_model)
        pre = self.hook_hyper_pre(torch.sigmoid(flat @ self.proj.float().T * self.scale.float()
                                                + self.bias.float()) + self.eps)  # (B, T, n)
        return (pre.unsqueeze(-1) * streams.float()).sum(dim=2).to(streams.dtype)  # (B, T, d_model)
