"""Measuring a model on the synthetic tasks: how much of each head's attention goes where the task's
solution looks (``head_scores``), and whether a mixture of experts routes digits and letters to different
experts (``expert_usage``, ``specialisation``), beside random-init routers of the same shape.

The tasks and the patterns that solve them are in tasks.py.
"""
from __future__ import annotations

import torch

from . import language
from ..hooks import attention_stacks, hook_name
from .tasks import Batch, Mixed, Task, previous_token_targets


def pattern_names(model, cross: bool = False) -> list[str]:
    """The attention-weight hook of every layer: self-attention, or the decoder's cross-attention."""
    stacks = attention_stacks(model.cfg.arch)
    if cross and stacks.cross_attention:
        stack, site = stacks.cross_attention[0], "cross_attn.hook_pattern"
    else:
        stack, site = stacks.output, "attn.hook_pattern"
    return [hook_name(i, site, stack) for i in range(model.cfg.n_layers)]


def attention_mass(pattern: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """(H,) the attention weight each head puts on the target keys, averaged over queries that have one.

    pattern: (B, H, T_q, T_k) softmax weights; targets: (B, T_q, T_k) bool.
    """
    targets = targets.to(pattern.device)
    mass = (pattern * targets[:, None].to(pattern.dtype)).sum(-1)  # (B, H, T_q)
    has_target = targets.any(-1)  # (B, T_q)
    return mass.transpose(0, 1)[:, has_target].mean(-1)  # (H,)


@torch.no_grad()
def head_scores(model, task: Task, batch: Batch) -> dict[str, torch.Tensor]:
    """Per layer and head, how much of its attention goes where the task's solution looks: name -> (L, H).

    "solution": the task's own pattern (induction, diagonal, anti-diagonal, pointer, twin).
    "previous_token" (decoder tasks): weight on the token just before the query.
    Encoder-decoder tasks are measured on the cross-attention.
    """
    targets = task.attention_targets(batch)
    if targets is None:
        raise ValueError(f"the {task.name} task has no single attention pattern to score; see expert_usage for MoE routing")
    cross = model.cfg.row("arch").cross
    names = pattern_names(model, cross=cross)
    batch = batch.to(model.device)
    _, trace = model.run_with_trace(*batch.model_args(), names=names)
    scores = {"solution": torch.stack([attention_mass(trace[n], targets) for n in names]).cpu()}
    if model.cfg.row("arch").next_token:
        B, T = batch.input_ids.shape
        previous = previous_token_targets(B, T)
        scores["previous_token"] = torch.stack([attention_mass(trace[n], previous) for n in names]).cpu()
    return scores


@torch.no_grad()
def expert_usage(model, task: Mixed, batch: Batch) -> list[dict[str, torch.Tensor]]:
    """Per MoE layer: kind -> (E,) the fraction of that kind's top-k routing slots each expert receives."""
    if not model.cfg.row("ffn").routed:
        raise ValueError(f"expert_usage needs a mixture-of-experts model (ffn='moe'), got ffn={model.cfg.ffn!r}")
    names = [hook_name(i, "mlp.hook_expert_indices") for i in range(model.cfg.n_layers) if model.cfg.layer_is_moe(i)]
    _, trace = model.run_with_trace(*batch.to(model.device).model_args(), names=names)
    kinds = task.kind_of(batch.input_ids)
    usage = []
    for name in names:
        chosen = trace[name].cpu()  # (B, T, k)
        usage.append({kind: torch.bincount(chosen[where].flatten(), minlength=model.cfg.n_experts).float() / chosen[where].numel()
                      for kind, where in kinds.items()})
    return usage


def specialisation(usage: dict[str, torch.Tensor]) -> float:
    """Total-variation distance between two kinds' expert distributions: 0 = same experts, 1 = disjoint."""
    first, second = usage.values()
    return 0.5 * (first - second).abs().sum().item()


def routing_specialisation(model, task: Mixed, batch: Batch) -> float:
    """The figure that says experts specialise by kind: the largest specialisation of any MoE layer."""
    return max(specialisation(layer) for layer in expert_usage(model, task, batch))


def random_router_specialisation(cfg, task: Mixed, batch: Batch, seeds=range(8)) -> list[float]:
    """routing_specialisation of untrained models of this config, one per seed: how far random routers
    already set digits and letters apart (a random router sends each token id its own way, so some
    separation comes for free). Experts specialise only where a trained model lies above all of these."""
    return [routing_specialisation(language.untrained(cfg, seed), task, batch) for seed in seeds]
