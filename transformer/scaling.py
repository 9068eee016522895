"""How models grow: compute-optimal sizes, a published scaling law, and a sweep measured here.

Training N parameters on D tokens costs about C = 6 N D FLOPs (transformer.costs.training_flops).
For a fixed budget C, a bigger model sees fewer tokens; Hoffmann et al. (2022, "Training
Compute-Optimal Large Language Models", the Chinchilla paper) trained over 400 models to find the
best split, and fitted the loss of a model of N parameters trained on D tokens as

    L(N, D) = E + A / N^alpha + B / D^beta,   E = 1.69, A = 406.4, B = 410.7, alpha = 0.34, beta = 0.28

(their equation 10, "Approach 3"; the loss is in nats per token of their MassiveText corpus). Their
rule of thumb, from the same paper: about 20 tokens per parameter. Chinchilla itself, 70B
parameters on 1.4T tokens, beat the 280B Gopher trained with the same compute on 300B tokens.

    compute_optimal(1e21)            -> Allocation(params, tokens) with D = 20 N and 6 N D = C
    fitted_optimal(1e21)             -> the minimum of the fitted L(N, D) along 6 N D = C
    chinchilla_loss(70e9, 1.4e12)    -> 1.94 nats per token

    python -m transformer.training.scaling_sweep   # the sweep: writes assets/measurements/scaling-sweep.json
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from .config import TransformerConfig
from .costs.flops import training_flops

# Hoffmann et al. 2022, equation 10
CHINCHILLA = dict(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)
CHINCHILLA_SOURCE = ("Hoffmann et al. 2022, \"Training Compute-Optimal Large Language Models\", equation 10: "
                     "L(N, D) = E + A/N^α + B/D^β with E = 1.69, A = 406.4, B = 410.7, α = 0.34, β = 0.28")
TOKENS_PER_PARAM = 20  # the same paper's rule of thumb for a compute-optimal model
MIN_BUDGET, MAX_BUDGET = 1e6, 1e30  # FLOPs: from a model of about a hundred parameters to a million GPT-3s
GPT3_FLOPS = 3.14e23  # Brown et al. 2020, Table D.1: GPT-3 175B's training compute


@dataclass(frozen=True)
class Allocation:
    budget: float  # FLOPs
    params: float
    tokens: float

    @property
    def tokens_per_param(self) -> float:
        return self.tokens / self.params


def check_budget(budget: float | str) -> float:
    """The budget as a float, or a ValueError that names it and the range this module answers for.

    Text is read as a number ("3.14e23", "1,000,000") or a power ("10^21")."""
    try:
        if isinstance(budget, str):
            base, _, exponent = budget.replace(",", "").replace(" ", "").partition("^")
            budget = float(base) ** float(exponent) if exponent else float(base)
        budget = float(budget)
    except (TypeError, ValueError):
        raise ValueError(f"a compute budget is a number of FLOPs, such as 1e21 or 10^21; got {budget!r}") from None
    except OverflowError:
        raise ValueError(f"{budget!r} FLOPs is too large to compute with; choose at most {MAX_BUDGET:g} FLOPs"
                         ) from None
    if not math.isfinite(budget):
        raise ValueError(f"a compute budget must be a finite number of FLOPs, got {budget}; try 1e21")
    if budget <= 0:
        raise ValueError(f"a compute budget must be positive, got {budget:g} FLOPs; try 1e21 (a model of about "
                         "3 billion parameters)")
    if budget < MIN_BUDGET:
        raise ValueError(f"{budget:g} FLOPs trains less than a hundred parameters on a handful of tokens; choose at "
                         f"least {MIN_BUDGET:g} FLOPs")
    if budget > MAX_BUDGET:
        raise ValueError(f"{budget:.3g} FLOPs is far beyond any training run (GPT-3 used {GPT3_FLOPS:.3g}) and beyond "
                         f"what a fit measured on real runs can say; choose at most {MAX_BUDGET:g} FLOPs")
    return budget


def compute_optimal(budget: float, tokens_per_param: float = TOKENS_PER_PARAM) -> Allocation:
    """The rule of thumb: D = 20 N and 6 N D = C, so N = sqrt(C / 120)."""
    budget = check_budget(budget)
    params = math.sqrt(budget / (training_flops(1, 1) * tokens_per_param))
    return Allocation(budget, params, tokens_per_param * params)


def chinchilla_loss(params, tokens):
    """The fitted loss L(N, D) in nats per token (numbers or numpy arrays)."""
    c = CHINCHILLA
    return c["E"] + c["A"] / params ** c["alpha"] + c["B"] / tokens ** c["beta"]


def fitted_optimal(budget: float) -> Allocation:
    """Where the fitted L(N, D) is lowest on 6 N D = C: N = G (C/6)^(β/(α+β)), D = (C/6)^(α/(α+β)) / G,
    G = (α A / (β B))^(1/(α+β)) (Hoffmann et al. 2022, equation 4 with the fit of equation 10)."""
    budget = check_budget(budget)
    c = CHINCHILLA
    g = (c["alpha"] * c["A"] / (c["beta"] * c["B"])) ** (1 / (c["alpha"] + c["beta"]))
    per = budget / training_flops(1, 1)  # N D
    params = g * per ** (c["beta"] / (c["alpha"] + c["beta"]))
    return Allocation(budget, params, per / params)


# published runs to place on the chart: (name, parameters, training tokens), from each model's paper
PUBLISHED_RUNS = [
    ("GPT-3 175B", 175e9, 300e9),  # Brown et al. 2020
    ("Gopher 280B", 280e9, 300e9),  # Rae et al. 2021
    ("Chinchilla 70B", 70e9, 1.4e12),  # Hoffmann et al. 2022
    ("LLaMA 2 7B", 6.74e9, 2e12),  # Touvron et al. 2023
    ("LLaMA 2 70B", 68.98e9, 2e12),
]


def frontier_loss(budgets) -> list[float]:
    """The fitted loss of the compute-optimal model at each budget: the line the published runs sit above."""
    return [float(chinchilla_loss(best.params, best.tokens)) for best in map(fitted_optimal, budgets)]


def published_points() -> list[dict]:
    """Each run of PUBLISHED_RUNS at its compute 6 N D and the fit's loss for its N and D, with how far (nats) it
    lies above the loss of the compute-optimal model of the same budget."""
    points = []
    for name, params, tokens in PUBLISHED_RUNS:
        flops = training_flops(params, tokens)
        loss = float(chinchilla_loss(params, tokens))
        points.append({"name": name, "params": params, "tokens": tokens, "flops": flops, "loss": loss,
                       "above_optimum": loss - frontier_loss([flops])[0]})
    return points


# --- a sweep measured on this machine (trained by transformer.training.scaling_sweep) -----------------

SWEEP_PATH = Path(__file__).resolve().parent.parent / "assets" / "measurements" / "scaling-sweep.json"
SWEEP_WIDTHS = (16, 32, 64, 128)  # d_model of the sweep's models; everything else is fixed
SWEEP_BASE = dict(arch="decoder", n_layers=2, position="rope", norm="rmsnorm", ffn="swiglu")  # LLaMA's recipe


def sweep_config(d_model: int, vocab_size: int, context: int) -> TransformerConfig:
    return TransformerConfig(**SWEEP_BASE, vocab_size=vocab_size, d_model=d_model, n_heads=max(1, d_model // 16),
                             max_len=context + 1)
