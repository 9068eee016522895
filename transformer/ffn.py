"""The feed-forward sublayer: an MLP (ReLU/GELU), a gated one (SwiGLU, GeGLU), or a routed mixture of experts.

What each kind is (its matrices, gated? routed?) is its row in the table of choices
(transformer/axes/ffn.py); ``FFN_MODULES`` builds each one. Costs, pages and the block ask the row,
never the name.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import torch
import torch.nn.functional as F
from torch import nn

from .axes import AXES
from .hooks import HookPoint

if TYPE_CHECKING:
    from .config import TransformerConfig


def _gelu(cfg: "TransformerConfig") -> Callable[[torch.Tensor], torch.Tensor]:
    approximate = cfg.row("gelu_approximate").torch_name
    return lambda x: F.gelu(x, approximate=approximate)


# an MLP's nonlinearity, by its kind
MLP_ACTIVATIONS: dict[str, Callable[["TransformerConfig"], Callable]] = {"relu": lambda cfg: F.relu, "gelu": _gelu}


class MLP(nn.Module):
    """act(x W_in + b_in) W_out + b_out, with act = ReLU or GELU."""

    def __init__(self, cfg: "TransformerConfig", layer: int = 0):
        super().__init__()
        self.up = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias)
        self.down = nn.Linear(cfg.d_ff, cfg.d_model, bias=cfg.bias)
        self.act = MLP_ACTIVATIONS[cfg.ffn](cfg)
        kind = cfg.row("ffn")
        words = cfg.row("gelu_approximate") if kind.gelu and cfg.row("gelu_approximate").ops else kind
        self.hook_pre = HookPoint("hook_pre")
        self.hook_post = HookPoint("hook_post", words)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pre = self.hook_pre(self.up(x))  # (B, T, d_ff)
        post = self.hook_post(self.act(pre))  # (B, T, d_ff)
        return self.down(post)  # (B, T, d_model)


# the gate's nonlinearity, by the gated kind's name
GATES: dict[str, Callable[["TransformerConfig"], Callable]] = {"swiglu": lambda cfg: F.silu, "geglu": _gelu,
                                                               "reglu": lambda cfg: F.relu}


class GatedFFN(nn.Module):
    """(act(x W_gate) * x W_up) W_down: a gate decides, per hidden unit, how much passes.

    act = SiLU is SwiGLU (LLaMA), act = GELU is GeGLU (Gemma), act = ReLU is ReGLU.
    """

    def __init__(self, cfg: "TransformerConfig", d_ff: int | None = None, hooks: bool = True, kind: str = "swiglu"):
        super().__init__()
        words = AXES["ffn"].row(kind)
        d_ff = d_ff or cfg.d_ff
        self.gate = nn.Linear(cfg.d_model, d_ff, bias=cfg.bias)
        self.up = nn.Linear(cfg.d_model, d_ff, bias=cfg.bias)
        self.down = nn.Linear(d_ff, cfg.d_model, bias=cfg.bias)
        self.act = GATES[kind](cfg)
        self.hooks = hooks
        if hooks:
            self.hook_gate = HookPoint("hook_gate", words)
            self.hook_up = HookPoint("hook_up")
            self.hook_post = HookPoint("hook_post", words)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.hooks:  # a MoE expert: its tensors have a ragged token count
            return self.down(self.act(self.gate(x)) * self.up(x))
        gate = self.hook_gate(self.act(self.gate(x)))  # (B, T, d_ff)
        up = self.hook_up(self.up(x))  # (B, T, d_ff)
        return self.down(self.hook_post(gate * up))  # (B, T, d_model)


class ClampedSwiGLU(GatedFFN):
    """gpt-oss's expert: the gate clamped above at the limit (7), up to [-7, 7], then (up + 1) * gate * sigmoid(1.702 gate)."""

    alpha = 1.702  # gpt-oss's published constant

    def __init__(self, cfg: "TransformerConfig", d_ff: int | None = None, hooks: bool = False):
        super().__init__(cfg, d_ff, hooks=hooks)
        self.limit = cfg.expert_limit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = self.gate(x).clamp(max=self.limit)  # (N, d_expert)
        up = self.up(x).clamp(-self.limit, self.limit)
        return self.down((up + 1) * gate * torch.sigmoid(gate * self.alpha))  # (N, d_model)


class LimitedSwiGLU(GatedFFN):
    """DeepSeek-V4's expert: SiLU(gate clamped above at the limit) * (up clamped to ±limit), the limit 10."""

    def __init__(self, cfg: "TransformerConfig", d_ff: int | None = None, hooks: bool = False):
        super().__init__(cfg, d_ff, hooks=hooks)
        self.limit = cfg.expert_limit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = self.gate(x).clamp(max=self.limit)  # (N, d_expert)
        return self.down(F.silu(gate) * self.up(x).clamp(-self.limit, self.limit))  # (N, d_model)


EXPERTS: dict[str, Callable[["TransformerConfig", int], nn.Module]] = {
    "swiglu": lambda cfg, width: GatedFFN(cfg, width, hooks=False, kind="swiglu"),
    "geglu": lambda cfg, width: GatedFFN(cfg, width, hooks=False, kind="geglu"),
    "clamped-swiglu": lambda cfg, width: ClampedSwiGLU(cfg, width, hooks=False),
    "limited-swiglu": lambda cfg, width: LimitedSwiGLU(cfg, width, hooks=False),
}

# each router's scores from its logits (float32), by its row of AXES["router"]
ROUTER_SCORES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "softmax": lambda logits: logits.softmax(dim=-1),
    "sigmoid": torch.sigmoid,
    "sqrt-softplus": lambda logits: F.softplus(logits).sqrt(),
}


class MoE(nn.Module):
    """Router -> probabilities -> top-k -> weights -> the chosen experts (+ shared experts every token uses).

    softmax router (Mixtral, gpt-oss): weights are the chosen softmax probabilities, renormalised.
    sigmoid router (DeepSeek-V3): a sigmoid per expert; a bias used only for choosing (never for the
    weights) keeps the load even; experts sit in groups and a token first picks its top groups.
    shared_expert_gate (Qwen3-Next): the shared experts' output times sigmoid(x W_shared_gate), one number per token.
    router_scales_input (Llama 4): the weight scales the token before its expert, expert(g·x), not after it,
    g·expert(x); a SwiGLU expert is not linear in its input, so the two differ.
    Each token goes to exactly top_k experts. The loop runs over experts (a handful), never over
    tokens: each expert processes all of its tokens in one batch.
    """

    def __init__(self, cfg: "TransformerConfig", layer: int = 0):
        super().__init__()
        self.n_experts, self.top_k = cfg.n_experts, cfg.top_k
        self.sigmoid = cfg.row("router").sigmoid
        self.score = ROUTER_SCORES[cfg.router]
        self.renormalise, self.routed_scale = cfg.router_norm, cfg.routed_scale
        self.scales_input = cfg.router_scales_input
        self.n_groups, self.top_groups = cfg.n_expert_groups, cfg.top_groups
        width = cfg.d_expert or cfg.d_ff
        self.router = nn.Linear(cfg.d_model, cfg.n_experts, bias=cfg.bias)
        if self.sigmoid:
            self.register_buffer("choice_bias", torch.zeros(cfg.n_experts))  # (E,) shifts the choice, not the weights
        if layer < cfg.hash_layers:  # DeepSeek-V4's first layers: each token id's experts fixed by a table
            self.register_buffer("expert_table", torch.zeros(cfg.vocab_size, cfg.top_k, dtype=torch.long))
        self.experts = nn.ModuleList(EXPERTS[cfg.expert_activation](cfg, width) for _ in range(cfg.n_experts))
        if cfg.n_shared_experts:
            self.shared = EXPERTS[cfg.expert_activation](cfg, cfg.n_shared_experts * width)
        if cfg.shared_expert_gate:  # Qwen3-Next: each token takes only as much of the shared experts as it wants
            self.shared_gate = nn.Linear(cfg.d_model, 1, bias=False)
        self.hook_router_logits = HookPoint("hook_router_logits")
        self.hook_router_probs = HookPoint("hook_router_probs")
        self.hook_expert_indices = HookPoint("hook_expert_indices")
        self.hook_expert_weights = HookPoint("hook_expert_weights")
        self.hook_expert_load = HookPoint("hook_expert_load")
        self.hook_aux_loss = HookPoint("hook_aux_loss")
        self.aux_loss = torch.zeros(())

    def choose(self, probs: torch.Tensor) -> torch.Tensor:
        """(B, T, k) the experts each token picks: top-k of the probabilities (+ choice bias), in its top groups."""
        choice = probs + self.choice_bias if self.sigmoid else probs  # (B, T, E)
        if self.n_groups > 1:
            grouped = choice.unflatten(-1, (self.n_groups, -1))  # (B, T, groups, E / groups)
            group_score = grouped.topk(min(2, grouped.shape[-1]), dim=-1).values.sum(-1)  # (B, T, groups)
            best = group_score.topk(self.top_groups, dim=-1).indices  # (B, T, top_groups)
            keep = torch.zeros_like(group_score, dtype=torch.bool).scatter_(-1, best, True)
            choice = grouped.masked_fill(~keep[..., None], 0.0).flatten(-2)  # (B, T, E)
        return choice.topk(self.top_k, dim=-1).indices

    @property
    def hashes(self) -> bool:
        """It chooses by token id (``expert_table``), so it needs the ids beside x."""
        return hasattr(self, "expert_table")

    def forward(self, x: torch.Tensor, token_ids: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, T, D); `token_ids` (B, T) where the layer chooses by its table (``hash_layers``)."""
        B, T, D = x.shape
        logits = self.hook_router_logits(self.router(x))  # (B, T, E)
        probs = self.hook_router_probs(self.score(logits.float()))  # (B, T, E)
        if self.hashes:
            if token_ids is None:
                raise ValueError("hash_layers route each token id by a fixed table: pass input_ids (inputs_embeds "
                                 "are no token ids)")
            top_i = self.hook_expert_indices(self.expert_table[token_ids])  # (B, T, k)
        else:
            top_i = self.hook_expert_indices(self.choose(probs))  # (B, T, k)
        top_p = probs.gather(-1, top_i)  # (B, T, k)
        if self.renormalise:
            top_p = top_p / (top_p.sum(-1, keepdim=True) + (1e-20 if self.sigmoid else 0.0))
        weights = self.hook_expert_weights(top_p * self.routed_scale).to(x.dtype)  # (B, T, k)

        flat_x = x.reshape(-1, D)  # (N, D), N = B*T
        flat_i, flat_w = top_i.reshape(-1, self.top_k), weights.reshape(-1, self.top_k)  # (N, k)
        slots = flat_x.new_zeros(flat_x.shape[0], self.top_k, D)  # (N, k, D): each token's k weighted expert outputs
        for e, expert in enumerate(self.experts):
            token, slot = torch.where(flat_i == e)  # the tokens that chose expert e, and in which slot
            if not token.numel():
                continue
            weight = flat_w[token, slot, None]  # (n, 1)
            # each (token, slot) pair belongs to one expert: plain writes, no accumulation
            if self.scales_input:
                slots[token, slot] = expert(flat_x[token] * weight)  # (n, D): Llama 4 weighs what goes in
            else:
                slots[token, slot] = expert(flat_x[token]) * weight  # (n, D): the others weigh what comes out
        out = slots.sum(dim=1)  # (N, D)
        if hasattr(self, "shared"):
            shared = self.shared(flat_x)  # (N, D): every token's shared experts
            if hasattr(self, "shared_gate"):
                shared = torch.sigmoid(self.shared_gate(flat_x)) * shared  # (N, 1) * (N, D)
            out = out + shared

        # Switch-Transformer load balancing: smallest when load and probability are uniform
        load = torch.bincount(top_i.reshape(-1), minlength=self.n_experts).float() / top_i.numel()  # (E,)
        load = self.hook_expert_load(load)
        self.aux_loss = self.hook_aux_loss(self.n_experts * (load * probs.reshape(-1, self.n_experts).mean(0)).sum())
        return out.reshape(B, T, D)


# each kind's module: (cfg, layer index) -> the sublayer
FFN_MODULES: dict[str, Callable[["TransformerConfig", int], nn.Module]] = {
    "relu": MLP,
    "gelu": MLP,
    "swiglu": lambda cfg, layer: GatedFFN(cfg, kind="swiglu"),
    "geglu": lambda cfg, layer: GatedFFN(cfg, kind="geglu"),
    "reglu": lambda cfg, layer: GatedFFN(cfg, kind="reglu"),
    "moe": MoE,
}

def make_ffn(cfg: "TransformerConfig", layer: int) -> nn.Module:
    """Layer `layer`'s FFN: the config's kind, or a dense gated FFN in a routed model's first dense layers."""
    if cfg.row("ffn").routed and not cfg.layer_is_moe(layer):
        return GatedFFN(cfg, kind=cfg.row("expert_activation").dense_kind)
    return FFN_MODULES[cfg.ffn](cfg, layer)
