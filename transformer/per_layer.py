"""Per-layer input embeddings (Gemma 4): besides the one embedding at the bottom, every layer gets its own small
vector for each token, and adds it to the residual stream through a gate after its FFN.

The stack looks the token up once in a table of L x P numbers per token (L layers, P = per_layer_dim) and mixes
in a projection of the token's main embedding, so what layer i reads knows both the token and its context:

    e_i = (RMSNorm(x W_proj / sqrt(D))_i + E_pl[id]_i * sqrt(P)) / sqrt(2)        (B, T, L, P) -> layer i's (B, T, P)

Block i then adds   RMSNorm(GELU(h W_gate) * e_i W_up)   to its stream h: the gate reads where the stream is, e_i
says how much of each of its P channels passes. The table is large (vocabulary x L x P: with a 262k vocabulary and
P = 256, over 67M numbers per layer) but only looked up, never multiplied: Gemma counts it apart from the
"effective" parameters of its small models.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .config import TransformerConfig
from .hooks import HookPoint
from .norms import make_norm


class PerLayerEmbedding(nn.Module):
    """The stack's table of per-layer embeddings and the projection of the main embedding that joins it."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.n_layers, self.width, self.d_model = cfg.n_layers, cfg.per_layer_dim, cfg.d_model
        self.table = nn.Embedding(cfg.vocab_size, cfg.n_layers * cfg.per_layer_dim)
        self.projection = nn.Linear(cfg.d_model, cfg.n_layers * cfg.per_layer_dim, bias=False)
        self.norm = make_norm(cfg, cfg.per_layer_dim, "rmsnorm", hook=False)
        self.hook_per_layer_embed = HookPoint("hook_per_layer_embed")

    def forward(self, ids: torch.Tensor, embedded: torch.Tensor) -> torch.Tensor:
        """ids (B, T) and the main embedding as the first block reads it (B, T, D): every layer's input (B, T, L, P)."""
        B, T = ids.shape
        # the scales are rounded to the table's dtype, as Gemma rounds them
        scale = torch.tensor(self.width ** 0.5, dtype=self.table.weight.dtype)
        from_tokens = (self.table(ids) * scale).view(B, T, self.n_layers, self.width)  # (B, T, L, P)
        context = self.projection(embedded) * self.d_model ** -0.5  # (B, T, L * P)
        from_context = self.norm(context.view(B, T, self.n_layers, self.width))  # (B, T, L, P)
        return self.hook_per_layer_embed((from_context + from_tokens) * 2 ** -0.5)  # (B, T, L, P)


class PerLayerInput(nn.Module):
    """One block's gate: its stream h picks, through GELU(h W_gate), how much of each channel of its e_i passes."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.approximate = cfg.gelu_approximate
        self.gate = nn.Linear(cfg.d_model, cfg.per_layer_dim, bias=False)
        self.up = nn.Linear(cfg.per_layer_dim, cfg.d_model, bias=False)
        self.norm = make_norm(cfg, kind="rmsnorm", hook=False)
        self.hook_per_layer_gate = HookPoint("hook_per_layer_gate")

    def forward(self, h: torch.Tensor, per_layer_input: torch.Tensor) -> torch.Tensor:
        """h (B, T, D) and this layer's e_i (B, T, P): what the block adds to its stream (B, T, D)."""
        gated = self.hook_per_layer_gate(F.gelu(self.gate(h), approximate=self.approximate) * per_layer_input)  # (B, T, P)
        return self.norm(self.up(gated))  # (B, T, D)
