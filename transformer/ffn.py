"""The feed-forward sublayer: an MLP (ReLU/GELU), SwiGLU, or a routed mixture of experts."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .config import TransformerConfig
from .hooks import HookPoint


class MLP(nn.Module):
    """act(x W_in + b_in) W_out + b_out, with act = ReLU or GELU."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.up = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias)
        self.down = nn.Linear(cfg.d_ff, cfg.d_model, bias=cfg.bias)
        if cfg.ffn == "relu":
            self.act, activation = F.relu, "relu"
        else:
            approximate = cfg.gelu_approximate
            self.act = lambda x: F.gelu(x, approximate=approximate)
            activation = "gelu" if approximate == "none" else "gelu-tanh"
        self.hook_pre = HookPoint("hook_pre")
        self.hook_post = HookPoint("hook_post", activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pre = self.hook_pre(self.up(x))  # (B, T, d_ff)
        post = self.hook_post(self.act(pre))  # (B, T, d_ff)
        return self.down(post)  # (B, T, d_model)


class SwiGLU(nn.Module):
    """(SiLU(x W_gate) * x W_up) W_down: a gate decides, per hidden unit, how much passes."""

    def __init__(self, cfg: TransformerConfig, d_ff: int | None = None, hooks: bool = True):
        super().__init__()
        d_ff = d_ff or cfg.d_ff
        self.gate = nn.Linear(cfg.d_model, d_ff, bias=cfg.bias)
        self.up = nn.Linear(cfg.d_model, d_ff, bias=cfg.bias)
        self.down = nn.Linear(d_ff, cfg.d_model, bias=cfg.bias)
        self.hooks = hooks
        if hooks:
            self.hook_gate = HookPoint("hook_gate")
            self.hook_up = HookPoint("hook_up")
            self.hook_post = HookPoint("hook_post", "swiglu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.hooks:  # a MoE expert: its tensors have a ragged token count
            return self.down(F.silu(self.gate(x)) * self.up(x))
        gate = self.hook_gate(F.silu(self.gate(x)))  # (B, T, d_ff)
        up = self.hook_up(self.up(x))  # (B, T, d_ff)
        return self.down(self.hook_post(gate * up))  # (B, T, d_model)


class MoE(nn.Module):
    """Router -> softmax -> top-k -> renormalised weights -> the chosen SwiGLU experts.

    Each token goes to exactly top_k experts. The loop runs over experts (a handful),
    never over tokens: each expert processes all of its tokens in one batch.
    """

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.n_experts, self.top_k = cfg.n_experts, cfg.top_k
        self.router = nn.Linear(cfg.d_model, cfg.n_experts, bias=False)
        self.experts = nn.ModuleList(SwiGLU(cfg, hooks=False) for _ in range(cfg.n_experts))
        self.hook_router_logits = HookPoint("hook_router_logits")
        self.hook_router_probs = HookPoint("hook_router_probs")
        self.hook_expert_indices = HookPoint("hook_expert_indices")
        self.hook_expert_weights = HookPoint("hook_expert_weights")
        self.hook_expert_load = HookPoint("hook_expert_load")
        self.hook_aux_loss = HookPoint("hook_aux_loss")
        self.aux_loss = torch.zeros(())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        logits = self.hook_router_logits(self.router(x))  # (B, T, E)
        probs = self.hook_router_probs(logits.float().softmax(dim=-1))  # (B, T, E)
        top_p, top_i = probs.topk(self.top_k, dim=-1)  # (B, T, k)
        top_i = self.hook_expert_indices(top_i)
        weights = self.hook_expert_weights(top_p / top_p.sum(-1, keepdim=True)).to(x.dtype)  # (B, T, k)

        flat_x = x.reshape(-1, D)  # (N, D), N = B*T
        flat_i, flat_w = top_i.reshape(-1, self.top_k), weights.reshape(-1, self.top_k)  # (N, k)
        slots = flat_x.new_zeros(flat_x.shape[0], self.top_k, D)  # (N, k, D): each token's k weighted expert outputs
        for e, expert in enumerate(self.experts):
            token, slot = torch.where(flat_i == e)  # the tokens that chose expert e, and in which slot
            if token.numel():  # each (token, slot) pair belongs to one expert: plain writes, no accumulation
                slots[token, slot] = expert(flat_x[token]) * flat_w[token, slot, None]
        out = slots.sum(dim=1)  # (N, D)

        # Switch-Transformer load balancing: smallest when load and probability are uniform
        load = torch.bincount(top_i.reshape(-1), minlength=self.n_experts).float() / top_i.numel()  # (E,)
        load = self.hook_expert_load(load)
        self.aux_loss = self.hook_aux_loss(self.n_experts * (load * probs.reshape(-1, self.n_experts).mean(0)).sum())
        return out.reshape(B, T, D)


FFNS = {"relu": MLP, "gelu": MLP, "swiglu": SwiGLU, "moe": MoE}
