"""Positions: RoPE depends only on relative position; ALiBi's slopes and bias follow the paper."""
import math

import pytest
import torch

from transformer.positions import alibi_slopes, apply_rope, rope_angles, rope_inv_freq, rope_tables

D_HEAD = 8


def rotate(vector: torch.Tensor, position: int, theta: float = 10000.0) -> torch.Tensor:
    """A (d_head,) vector rotated to `position` with the library's RoPE functions."""
    angles = rope_angles(torch.tensor([[position]]), rope_inv_freq(vector.numel(), theta))  # (1, 1, d_head/2)
    cos, sin = rope_tables(angles, torch.float32)  # (1, 1, 1, d_head)
    return apply_rope(vector.view(1, 1, 1, -1), cos, sin).flatten()


def test_rope_dot_product_depends_only_on_the_offset():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(D_HEAD, generator=g), torch.randn(D_HEAD, generator=g)
    by_offset: dict[int, list[float]] = {}
    for m in range(0, 12):
        for n in range(0, 12):
            by_offset.setdefault(m - n, []).append(float(rotate(q, m) @ rotate(k, n)))
    for offset, dots in by_offset.items():
        assert max(dots) - min(dots) < 1e-4, f"offset {offset}: q.k varies with absolute position: {dots}"
    # and the offset itself matters: different offsets give different dot products
    representatives = [dots[0] for dots in by_offset.values()]
    assert len({round(d, 3) for d in representatives}) > len(representatives) // 2


def test_rope_preserves_norms_and_position_zero_is_the_identity():
    v = torch.randn(D_HEAD, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(rotate(v, 0), v)
    for position in (1, 5, 100, 4000):
        torch.testing.assert_close(rotate(v, position).norm(), v.norm(), atol=1e-5, rtol=1e-5)


def test_rope_rotates_each_pair_by_position_times_its_frequency():
    """Pair (i, i + d/2) turns by position * theta^(-2i/d): check one vector against a hand-made 2-D rotation."""
    v = torch.randn(D_HEAD, generator=torch.Generator().manual_seed(2))
    position, half = 3, D_HEAD // 2
    rotated = rotate(v, position)
    for i in range(half):
        angle = position * 10000.0 ** (-2 * i / D_HEAD)
        x, y = v[i], v[i + half]
        expected = (x * math.cos(angle) - y * math.sin(angle), x * math.sin(angle) + y * math.cos(angle))
        torch.testing.assert_close(rotated[i], expected[0])
        torch.testing.assert_close(rotated[i + half], expected[1])


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
@pytest.mark.parametrize("position", ["rope", "alibi", "none"])
def test_relative_positions_ignore_a_shift_of_every_position(arch, position, tiny_model):
    """RoPE and ALiBi only see offsets, so moving the whole sequence 5 places on changes no logit."""
    model = tiny_model(arch=arch, position=position, n_kv_heads=2)
    ids = torch.randint(0, 32, (2, 6), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        at_zero = model(ids)
        shifted = model(ids, position_ids=torch.arange(5, 11)[None])
    torch.testing.assert_close(shifted, at_zero, atol=1e-5, rtol=0)


def test_learned_positions_do_see_a_shift(tiny_model):
    model = tiny_model(position="learned")
    ids = torch.randint(0, 32, (1, 6), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert not torch.allclose(model(ids), model(ids, position_ids=torch.arange(5, 11)[None]), atol=1e-5)


def test_recorded_rope_hooks_are_the_rotation_of_q_and_k(tiny_model):
    model = tiny_model(position="rope", n_kv_heads=2)
    ids = torch.randint(0, 32, (1, 5), generator=torch.Generator().manual_seed(4))
    _, trace = model.run_with_trace(ids, names="blocks.0.attn.*")
    angles = trace["blocks.0.attn.hook_rope_angles"]  # (B, T, d_head/2)
    d_head = model.cfg.d_head
    expected_angles = torch.arange(5.0)[:, None] * 10000.0 ** (-torch.arange(0, d_head, 2) / d_head)
    torch.testing.assert_close(angles[0], expected_angles)
    cos, sin = rope_tables(angles, torch.float32)
    torch.testing.assert_close(trace["blocks.0.attn.hook_rot_q"], apply_rope(trace["blocks.0.attn.hook_q"], cos, sin))
    torch.testing.assert_close(trace["blocks.0.attn.hook_rot_k"], apply_rope(trace["blocks.0.attn.hook_k"], cos, sin))


# --- ALiBi ----------------------------------------------------------------------

def paper_slopes(n_heads: int) -> list[float]:
    """Press et al. (2022): for n a power of two, the slopes are 2^(-8/n), 2^(-16/n), ..., 2^(-8).
    Otherwise take the 2^floor(log2 n) slopes, then the odd-numbered slopes of twice that many heads."""
    def geometric(n):
        return [2.0 ** (-8.0 * i / n) for i in range(1, n + 1)]
    power = 1
    while power * 2 <= n_heads:
        power *= 2
    extra = [s for i, s in enumerate(geometric(2 * power)) if i % 2 == 0]
    return geometric(power) + extra[: n_heads - power]


def test_alibi_slopes_for_eight_heads_are_one_half_to_one_256th():
    assert alibi_slopes(8).tolist() == [2.0 ** -e for e in range(1, 9)]


@pytest.mark.parametrize("n_heads", [1, 2, 4, 6, 12, 16, 20])
def test_alibi_slopes_follow_the_papers_rule(n_heads):
    torch.testing.assert_close(alibi_slopes(n_heads), torch.tensor(paper_slopes(n_heads)))


def test_alibi_slopes_for_six_heads_written_out():
    # four heads' slopes 2^-2, 2^-4, 2^-6, 2^-8, then eight heads' 2^-1, 2^-3
    assert alibi_slopes(6).tolist() == [2.0 ** -e for e in (2, 4, 6, 8, 1, 3)]


@pytest.mark.parametrize("arch,n_heads", [("decoder", 4), ("encoder", 8), ("decoder", 2)])
def test_recorded_alibi_bias_is_minus_slope_times_distance(arch, n_heads, tiny_model):
    model = tiny_model(arch=arch, position="alibi", n_heads=n_heads)
    T = 6
    ids = torch.randint(0, 32, (2, T), generator=torch.Generator().manual_seed(5))
    _, trace = model.run_with_trace(ids, names="blocks.*.attn.hook_alibi_bias")
    slopes = torch.tensor(paper_slopes(n_heads))
    distance = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).abs().float()
    expected = -slopes[:, None, None] * distance  # (H, T_q, T_kv)
    assert len(trace.events) == model.cfg.n_layers
    for event in trace.events:
        assert event.tensor.shape[-3:] == (n_heads, T, T)
        torch.testing.assert_close(event.tensor.expand(2, -1, -1, -1), expected.expand(2, -1, -1, -1))
