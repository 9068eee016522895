"""A new position scheme is its row in the table, its builder, this test and its tab on the Positions page:
xPos, RoPE whose turn also decays with distance."""
import torch

from transformer import AXES, Transformer, TransformerConfig
from transformer.positions import ROTATIONS, apply_rope, rope_angles, rope_inv_freq, xpos_decay
from ui.compute.stepper import formula

D = 8  # a head of four pairs


def score(scheme: str, q: torch.Tensor, k: torch.Tensor, n: int, m: int) -> float:
    """q at position n against k at position m, both turned by the scheme's tables."""
    positions = torch.tensor([[n, m]])
    turn = ROTATIONS[scheme](positions, rope_angles(positions, rope_inv_freq(D)), torch.float32)
    q_turned = apply_rope(q.view(1, 1, 1, D).expand(1, 1, 2, D), turn.q_cos, turn.q_sin)[0, 0, 0]
    k_turned = apply_rope(k.view(1, 1, 1, D).expand(1, 1, 2, D), turn.k_cos, turn.k_sin)[0, 0, 1]
    return float(q_turned @ k_turned)


def test_an_xpos_score_depends_on_the_distance_only():
    q, k = torch.randn(2, D, generator=torch.Generator().manual_seed(0))
    for n, m in ((5, 2), (9, 1), (40, 40)):
        assert abs(score("xpos", q, k, n, m) - score("xpos", q, k, n + 100, m + 100)) < 1e-4


def test_each_pair_of_dimensions_decays_by_its_own_zeta_per_distance():
    zeta = xpos_decay(D)
    assert torch.allclose(zeta, torch.tensor([0.4, 0.25 + 0.4, 0.5 + 0.4, 0.75 + 0.4]) / 1.4)
    for pair in range(D // 2):
        q = torch.zeros(D)
        q[pair], q[pair + D // 2] = 1.0, 0.5  # one pair only (half-split layout)
        k = q.clone()
        for distance in (0, 7, 300):
            rope, xpos = score("rope", q, k, distance, 0), score("xpos", q, k, distance, 0)
            assert abs(xpos - rope * float(zeta[pair]) ** (distance / 512)) < 1e-5


def test_an_xpos_model_runs_fused_explicit_and_cached_alike_and_records_its_own_formula():
    cfg = TransformerConfig(vocab_size=16, d_model=32, n_layers=2, position="xpos", rope_dim=4)
    assert AXES["position"].row("xpos").rotates_qk and cfg.d_rope == 4
    model = Transformer(cfg, device="cpu").eval()
    ids = torch.tensor([[1, 2, 3, 4, 5, 6, 7]])
    with torch.no_grad():
        fused = model(ids)
        torch.testing.assert_close(model.set_fused(False)(ids), fused, atol=1e-5, rtol=0)
    assert torch.equal(model.generate(ids, max_new_tokens=6, use_cache=True),
                       model.generate(ids, max_new_tokens=6, use_cache=False))
    _, trace = model.run_with_trace(ids, names="*hook_rot_[qk]")
    assert trace["blocks.0.attn.hook_rot_q"].shape == (1, 4, 7, 8)
    assert formula("blocks.0.attn.hook_rot_k", cfg) == AXES["position"].row("xpos").formulas["hook_rot_k"]
    assert "zeta" not in formula("blocks.0.attn.hook_rot_k", cfg.replace(position="rope"))  # RoPE's plain turn
