"""The feed-forward sublayer's choices: the kind of FFN, and a mixture of experts' router and experts.

transformer/ffn.py builds each kind; costs and pages read the flags here (``gated``, ``routed``).
"""
from __future__ import annotations

from dataclasses import dataclass
from .base import Axis, Choice, divisors


def _check_experts(cfg) -> None:
    if cfg.n_experts < 1:
        raise ValueError(f"n_experts={cfg.n_experts} must be at least 1")
    if not 1 <= cfg.top_k <= cfg.n_experts:
        raise ValueError(f"top_k={cfg.top_k} must be between 1 and n_experts={cfg.n_experts}; "
                         f"raise n_experts or lower top_k")
    if cfg.n_expert_groups < 1 or cfg.n_experts % cfg.n_expert_groups:
        raise ValueError(f"n_expert_groups={cfg.n_expert_groups} must divide n_experts={cfg.n_experts}; "
                         f"pick one of {divisors(cfg.n_experts)}")
    if not 1 <= cfg.top_groups <= cfg.n_expert_groups:
        raise ValueError(f"top_groups={cfg.top_groups} must be between 1 and n_expert_groups={cfg.n_expert_groups}")
    per_group = cfg.n_experts // cfg.n_expert_groups
    if cfg.top_k > cfg.top_groups * per_group:
        raise ValueError(f"top_k={cfg.top_k} experts cannot come from top_groups={cfg.top_groups} groups of "
                         f"{per_group}; raise top_groups or lower top_k")
    if not 0 <= cfg.first_dense_layers <= cfg.n_layers:
        raise ValueError(f"first_dense_layers={cfg.first_dense_layers} must be between 0 and n_layers={cfg.n_layers}")
    if not 0 <= cfg.hash_layers <= cfg.n_layers:
        raise ValueError(f"hash_layers={cfg.hash_layers} must be between 0 and n_layers={cfg.n_layers} (DeepSeek-V4: "
                         "3, its first layers route each token id by a fixed table)")
    if cfg.hash_layers and cfg.n_expert_groups > 1:
        raise ValueError(f"hash_layers={cfg.hash_layers} chooses experts by a table, not by groups; set "
                         "n_expert_groups=1 or hash_layers=0")
    if cfg.shared_expert_gate and not cfg.n_shared_experts:
        raise ValueError("shared_expert_gate=True gates the shared experts' output, but n_shared_experts=0; "
                         "set n_shared_experts to at least 1 or shared_expert_gate=False")


# the mixture-of-experts fields and their values in a dense model
MOE_ONLY = {"n_shared_experts": 0, "first_dense_layers": 0, "router": "softmax", "n_expert_groups": 1,
            "expert_activation": "swiglu", "d_expert": None, "shared_expert_gate": False, "hash_layers": 0,
            "moe_layers": "all",
            "router_scales_input": False}


def _check_dense(cfg) -> None:
    for name, default in MOE_ONLY.items():
        if getattr(cfg, name) != default:
            raise ValueError(f"{name}={getattr(cfg, name)!r} is a mixture-of-experts setting, but "
                             f"ffn={cfg.ffn!r} is dense; set ffn='moe' or {name}={default!r}")


MLP_OUT = r"\mathrm{FFN}(x) = \mathrm{act}(x W_{in} + b_{in})\, W_{out} + b_{out}"
SWIGLU_POST = r"\mathrm{SiLU}(x W_{gate}) \odot x W_{up}"


@dataclass(frozen=True, kw_only=True)
class FFNChoice(Choice):
    matrices: tuple[str, ...]  # its weight matrices, by our parameter names
    gated: bool  # a third matrix gates the hidden layer (so the default d_ff is about 8/3 d_model)
    routed: bool = False  # a router sends each token to top_k experts
    activation: str = ""  # the hidden layer's nonlinearity, in words
    gelu: bool = False  # its nonlinearity is a GELU (``gelu_approximate`` applies)


FFN = Axis("FFN", {
    "relu": FFNChoice("ReLU", "max(0, x) MLP", "A nonlinearity between two projections: without it the stack "
                      "would be one linear map.", "2017",
                      matrices=("up", "down"), gated=False, activation="ReLU", check=_check_dense,
                      ops={"hook_post": "max(0, x)"},
                      formulas={"hook_mlp_out": MLP_OUT, "hook_post": r"\max(0, h)"}),
    "gelu": FFNChoice("GELU", "smooth MLP", "No hard corner at 0: small negative inputs still pass a gradient.",
                      "GPT-2, BERT",
                      matrices=("up", "down"), gated=False, activation="GELU", gelu=True, check=_check_dense,
                      ops={"hook_post": "x * Phi(x)"},
                      formulas={"hook_mlp_out": MLP_OUT, "hook_post": r"\mathrm{GELU}(h) = h\,\Phi(h)"}),
    "swiglu": FFNChoice("SwiGLU", "gated linear unit", "A gate per hidden unit; the lecture: \"better quality for same param count\" (measured here: Trade-offs).", "LLaMA, PaLM",
                        matrices=("gate", "up", "down"), gated=True, activation="SiLU gate", check=_check_dense,
                        ops={"hook_gate": "SiLU(x W_gate)", "hook_post": "SiLU(x W_gate) * x W_up"},
                        formulas={"hook_mlp_out": r"\mathrm{FFN}(x) = \left(\mathrm{SiLU}(x W_{gate}) \odot x W_{up}"
                                                  r"\right) W_{down}",
                                  "hook_post": SWIGLU_POST}),
    "geglu": FFNChoice("GeGLU", "gated linear unit with a GELU gate", "The same gate with GELU's smooth curve.", "Gemma",
                       matrices=("gate", "up", "down"), gated=True, activation="GELU gate", gelu=True,
                       check=_check_dense,
                       ops={"hook_gate": "GELU(x W_gate)", "hook_post": "GELU(x W_gate) * x W_up"},
                       formulas={"hook_mlp_out": r"\mathrm{FFN}(x) = \left(\mathrm{GELU}(x W_{gate}) \odot x W_{up}"
                                                 r"\right) W_{down}",
                                 "hook_post": r"\mathrm{GELU}(x W_{gate}) \odot x W_{up}"}),
    "reglu": FFNChoice("ReGLU", "gated linear unit with a ReLU gate",
                       "The gate with ReLU's hard zero: a hidden unit is shut exactly, not damped.",
                       "GLU variants (Shazeer 2020)",
                       matrices=("gate", "up", "down"), gated=True, activation="ReLU gate", check=_check_dense,
                       ops={"hook_gate": "max(0, x W_gate)", "hook_post": "max(0, x W_gate) * x W_up"},
                       formulas={"hook_mlp_out": r"\mathrm{FFN}(x) = \left(\max(0, x W_{gate}) \odot x W_{up}"
                                                 r"\right) W_{down}",
                                 "hook_post": r"\max(0, x W_{gate}) \odot x W_{up}"}),
    "moe": FFNChoice("MoE", "router picks top-k experts per token",
                     "Adds parameters while each token pays for only top-k of them.", "Mixtral",
                     matrices=("router", "gate", "up", "down"), gated=True, routed=True, activation="experts",
                     check=_check_experts,
                     formulas={"hook_mlp_out": r"\mathrm{FFN}(x_t) = \sum_{e \in \mathcal{E}_t} g_{t,e}\, "
                                               r"\mathrm{SwiGLU}_e(x_t)",
                               "hook_post": SWIGLU_POST}),  # a routed model's dense first layers are SwiGLU
}, problem="The per-token computation. Gates (SwiGLU) cost a third matrix; the lecture says they give \"better "
           "quality for same param count\", the Trade-offs page says what this lab measured. A mixture of experts adds "
           "parameters while each token pays for only top-k of them.", field="ffn")


@dataclass(frozen=True, kw_only=True)
class RouterChoice(Choice):
    # a score per expert, each on its own (a sigmoid, or DeepSeek-V4's sqrt(softplus)), and a bias for choosing;
    # else one softmax over the experts
    sigmoid: bool


ROUTER = Axis("Router", {
    "softmax": RouterChoice("softmax", "one softmax over all experts; the top-k probabilities weigh the chosen ones",
                            "Experts compete for each token.", "Mixtral, gpt-oss", sigmoid=False),
    "sigmoid": RouterChoice("sigmoid", "a sigmoid per expert; a bias used only for choosing keeps the load even",
                            "Balances experts mostly without an auxiliary loss: a bias steers the choice, "
                            "and DeepSeek-V3's report keeps only a small sequence-wise balance loss.", "DeepSeek-V3",
                            sigmoid=True),
    "sqrt-softplus": RouterChoice("sqrt-softplus", "sqrt(softplus) per expert; a bias used only for choosing",
                                  "A score per expert that grows like the square root of its logit, not saturating "
                                  "at 1 as a sigmoid does.", "DeepSeek-V4", sigmoid=True),
}, field="router")


@dataclass(frozen=True, kw_only=True)
class ExpertChoice(Choice):
    dense_kind: str  # the gated FFN kind of a routed model's dense first layers


EXPERT_ACTIVATION = Axis("Expert activation", {
    "swiglu": ExpertChoice("SwiGLU", "each expert is a SwiGLU", "The dense FFN's recipe, per expert.", "Mixtral",
                           dense_kind="swiglu"),
    "geglu": ExpertChoice("GeGLU", "each expert is a GeGLU", "A GELU gate per expert.", dense_kind="geglu"),
    "clamped-swiglu": ExpertChoice("clamped SwiGLU", "the gate clamped from above at 7, up to ±7, then (up + 1)·gate·σ(1.702·gate)",
                                   "Bounded activations, which gpt-oss uses to keep its low-precision experts stable.", "gpt-oss",
                                   dense_kind="swiglu"),
    "limited-swiglu": ExpertChoice("limited SwiGLU", "SiLU of the gate clamped from above, times up clamped to ±limit",
                                   "SwiGLU with both inputs bounded by expert_limit (DeepSeek-V4: 10), shared experts "
                                   "too.", "DeepSeek-V4", dense_kind="swiglu"),
}, field="expert_activation")


@dataclass(frozen=True, kw_only=True)
class GeluChoice(Choice):
    approximate: bool  # Φ through tanh rather than the exact normal CDF
    torch_name: str  # torch.nn.functional.gelu's `approximate`


GELU_APPROXIMATE = Axis("GELU", {
    "none": GeluChoice("exact", "x·Φ(x) with the exact normal CDF", "The definition.", "BERT", approximate=False, torch_name="none"),
    "tanh": GeluChoice("tanh approximation", "Φ approximated through tanh", "Cheaper on 2018 hardware; kept by the "
                       "models trained with it.", "GPT-2, BLOOM", approximate=True, torch_name="tanh",
                       ops={"hook_post": "GELU, tanh approximation"}),
}, field="gelu_approximate")
