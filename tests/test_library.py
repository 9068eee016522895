"""Every combination of the axes builds, trains (forward + backward) and agrees with the explicit attention.

Every architecture, position, norm, placement and FFN the table lists, x 3 kv-head counts x 2 windows: 5,184
cases today, each on one tiny model built once for the case.
"""
import itertools

import pytest
import torch
import torch.nn.functional as F

from transformer import choices, param_counts
from transformer.hooks import recording

pytestmark = pytest.mark.slow

KV_HEADS = {"MHA": 4, "GQA": 2, "MQA": 1}
WINDOWS = {"full": None, "W3": 3}

AXES = list(itertools.product(
    choices("arch"), choices("position"), choices("norm"), choices("norm_position"), choices("ffn"), KV_HEADS, WINDOWS))


def padded_batch(T: int, seed: int):
    """(3, T) ids and mask: one full row, one right-padded row, one left-padded row."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 32, (3, T), generator=g)
    mask = torch.ones(3, T, dtype=torch.long)
    mask[1, T - 2:] = 0  # right padding
    mask[2, :2] = 0  # left padding
    return ids.masked_fill(mask == 0, 0), mask


def expert_params_without_tokens(model, load_per_layer):
    """Names of the parameters of MoE experts that got no token (they rightly get no gradient)."""
    idle = set()
    for layer_path, load in load_per_layer.items():
        for e in torch.nonzero(load == 0).flatten().tolist():
            prefix = f"{layer_path}.experts.{e}."
            idle |= {n for n, _ in model.named_parameters() if n.startswith(prefix)}
    return idle


@pytest.mark.parametrize("arch,position,norm,norm_position,ffn,kv,window", AXES,
                         ids=["-".join(case) for case in AXES])
def test_every_combination_trains_and_fused_equals_explicit(arch, position, norm, norm_position, ffn, kv, window,
                                                            tiny_model, logits_of):
    model = tiny_model(arch=arch, position=position, norm=norm, norm_position=norm_position, ffn=ffn,
                       n_kv_heads=KV_HEADS[kv], sliding_window=WINDOWS[window]).train()
    # the arithmetic of param_counts matches the built model (unique parameters: tied weights once)
    assert param_counts(model.cfg)["total"] == sum(p.numel() for p in model.parameters())

    src, src_mask = padded_batch(6, seed=1)
    tgt, tgt_mask = padded_batch(5, seed=2) if arch == "encoder-decoder" else (src, src_mask)

    # forward + backward on the fused path, recording only the expert loads (to know which experts saw tokens)
    with recording(names="*mlp.hook_expert_load") as recorder:
        fused = logits_of(model, src, src_mask, tgt, tgt_mask)  # (B, T, vocab)
    assert fused.shape == (3, tgt.shape[1], 32)
    real = tgt_mask.bool()
    loss = F.cross_entropy(fused[real], tgt[real]) + model.aux_loss
    assert torch.isfinite(loss)
    loss.backward()
    loads = {e.name.rsplit(".hook_expert_load", 1)[0]: e.tensor for e in recorder.trace.events}
    assert len(loads) == (model.cfg.n_layers * (2 if arch == "encoder-decoder" else 1) if ffn == "moe" else 0)
    idle = expert_params_without_tokens(model, loads)
    for name, p in model.named_parameters():
        if name in idle:
            assert p.grad is None, f"{name} belongs to an expert no token chose, yet has a gradient"
        else:
            assert p.grad is not None, f"{name} got no gradient"
            assert torch.isfinite(p.grad).all(), f"{name} has a non-finite gradient"

    # the explicit five lines give the same logits, padding rows and fully masked rows included
    with torch.no_grad():
        explicit = logits_of(model.set_fused(False), src, src_mask, tgt, tgt_mask)
    torch.testing.assert_close(explicit, fused.detach(), atol=1e-5, rtol=0)
