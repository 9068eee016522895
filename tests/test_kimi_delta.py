"""Kimi delta attention: a decay per key channel. Its two forms agree, both are Kimi Linear's PyTorch reference, the
layer is Hugging Face's layer, cached generation is recomputation, and the hooks show the decay channel by channel."""
import json
import math

import numpy as np
import pytest
import torch

from transformer import AXES, KVCache
from transformer.costs import param_counts
from transformer.linear_attention import LinearAttention, StateInputs, chunked_form, implied_weights, l2_normalise, \
    recurrent_form

ROW = AXES["attention"].row("kimi-delta")


def channel_inputs(B=2, H=3, T=37, d_k=8, d_v=6, seed=0):
    """Unit q and k, a decay per head and key channel (some near 0, some near 1), β up to 1, a non-empty state."""
    g = torch.Generator().manual_seed(seed)
    q = l2_normalise(torch.randn(B, H, T, d_k, generator=g)) / math.sqrt(d_k)
    k = l2_normalise(torch.randn(B, H, T, d_k, generator=g))
    v = torch.randn(B, H, T, d_v, generator=g)
    log_decay = -torch.rand(B, H, T, d_k, generator=g) * torch.linspace(0.01, 3.0, d_k)  # (B, H, T, d_k)
    beta = torch.rand(B, H, T, generator=g)
    state = torch.randn(B, H, d_k, d_v, generator=g) * 0.1
    return q, k, v, log_decay, beta, state


@pytest.mark.parametrize("size", [1, 5, 16, 64])
def test_the_recurrent_form_equals_the_chunked_form_with_a_decay_per_channel(size):
    q, k, v, log_decay, beta, state = channel_inputs()
    slow = recurrent_form(q, k, v, log_decay, beta, state)
    fast = chunked_form(q, k, v, log_decay, beta, state, size, predict=True)
    for ours, theirs in ((slow.out, fast.out), (slow.state, fast.state), (slow.predicted, fast.predicted),
                         (slow.correction, fast.correction)):
        assert (ours - theirs).abs().max() <= 1e-5


def test_a_decay_per_channel_is_not_one_per_head():
    """The rows of the state fade at their own rates: the state after a pass differs from the one a single decay per
    head (the channels' mean) leaves, and a channel that keeps everything (log α = 0) keeps its row of S_0."""
    q, k, v, log_decay, beta, state = channel_inputs(T=5)
    log_decay[..., 0] = 0.0  # channel 0 never fades
    k[..., 0] = 0.0  # and no token writes along it
    per_channel = recurrent_form(q, k, v, log_decay, beta, state)
    per_head = recurrent_form(q, k, v, log_decay.mean(-1), beta, state)
    assert (per_channel.state - per_head.state).abs().max() > 1e-2
    torch.testing.assert_close(per_channel.state[:, :, 0], state[:, :, 0], atol=1e-6, rtol=0)


def test_the_kimi_delta_rule_is_hugging_faces():
    kimi = pytest.importorskip("transformers.models.kimi_linear.modeling_kimi_linear")
    B, T, H, d_k, d_v = 2, 37, 3, 8, 6
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(B, T, H, d_k, generator=g), torch.randn(B, T, H, d_k, generator=g)
    v, beta = torch.randn(B, T, H, d_v, generator=g), torch.rand(B, T, H, generator=g)
    decay = -torch.rand(B, T, H, d_k, generator=g) * 2  # (B, T, H, d_k): Hugging Face's g, per channel
    state = torch.randn(B, H, d_k, d_v, generator=g) * 0.1
    heads = lambda t: t.transpose(1, 2)  # Hugging Face's (B, T, H, ...) -> ours (B, H, T, ...)
    ours = (l2_normalise(heads(q)) / math.sqrt(d_k), l2_normalise(heads(k)), heads(v), heads(decay), heads(beta), state)
    theirs = dict(g=decay, beta=beta, initial_state=state, output_final_state=True, use_qk_l2norm_in_kernel=True)
    ref_out, ref_state = kimi.chunk_kimi_delta_attention(q, k, v, chunk_size=8, **theirs)
    fast = chunked_form(*ours, size=8)
    torch.testing.assert_close(heads(fast.out), ref_out, atol=1e-5, rtol=0)
    torch.testing.assert_close(fast.state, ref_state, atol=1e-5, rtol=0)
    ref_out, ref_state = kimi.recurrent_kimi_delta_attention(q, k, v, **theirs)
    slow = recurrent_form(*ours)
    torch.testing.assert_close(heads(slow.out), ref_out, atol=1e-5, rtol=0)
    torch.testing.assert_close(slow.state, ref_state, atol=1e-5, rtol=0)


def test_the_kimi_delta_layer_is_kimi_linears(tiny_config):
    """Its convolution, per-channel decay, β, sigmoid-gated norm and projections, on Kimi Linear's own layer with every
    weight moved, through the chunked and the recurrent form."""
    kimi = pytest.importorskip("transformers.models.kimi_linear.modeling_kimi_linear")
    from transformers import KimiLinearConfig

    D, H, d = 32, 4, 8
    theirs = kimi.KimiLinearDeltaAttention(KimiLinearConfig(
        hidden_size=D, linear_num_heads=H, linear_head_dim=d, linear_conv_kernel_dim=4, rms_norm_eps=1e-5,
        num_hidden_layers=1, layer_types=["linear_attention"]), 0).eval()
    with torch.no_grad():
        for p in theirs.parameters():
            p.normal_(0.0, 0.3, generator=torch.Generator().manual_seed(p.numel()))
    cfg = tiny_config(d_model=D, n_layers=1, attention_layers="kimi-delta", position="none", norm_eps=1e-5,
                      linear_value_heads=H, linear_key_head_dim=d, linear_value_head_dim=d, linear_chunk_size=8)
    ours = LinearAttention(cfg, "kimi-delta").eval()
    gate = theirs.forget_gate
    copies = {"q_proj.weight": theirs.q_proj.weight, "k_proj.weight": theirs.k_proj.weight,
              "v_proj.weight": theirs.v_proj.weight, "conv.weight": theirs.conv1d.weight,
              "b_proj.weight": theirs.b_proj.weight, "a_down.weight": gate.f_a_proj.weight,
              "a_up.weight": gate.f_b_proj.weight, "A_log": gate.A_log, "dt_bias": gate.dt_bias,
              "z_down.weight": theirs.g_a_proj.weight, "z_up.weight": theirs.g_b_proj.weight,
              "norm_weight": theirs.o_norm.weight, "o_proj.weight": theirs.o_proj.weight}
    ours.load_state_dict({name: t.reshape(ours.state_dict()[name].shape) for name, t in copies.items()})
    x = torch.randn(2, 21, D, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = theirs(x)
        torch.testing.assert_close(ours(x, StateInputs(None)), expected, atol=1e-5, rtol=0)
        ours.fused = False
        torch.testing.assert_close(ours(x, StateInputs(None)), expected, atol=1e-5, rtol=0)


def lively(tiny_model, **changes):
    model = tiny_model(**{"attention_layers": "kimi-delta", "position": "none", "linear_chunk_size": 4, **changes})
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.3, generator=torch.Generator().manual_seed(p.numel()))
    return model


def test_the_hooks_show_the_decay_per_channel_the_sigmoid_gate_and_implied_weights(tiny_model):
    model = lively(tiny_model)
    ids = torch.randint(0, 32, (2, 9), generator=torch.Generator().manual_seed(0))
    _, trace = model.run_with_trace(ids)
    decay = trace["blocks.0.attn.hook_channel_decay"]
    assert decay.shape == (2, 4, 9, 4) and trace.event("blocks.0.attn.hook_channel_decay").dims[-1] == "d_head"
    assert ((decay > 0) & (decay < 1)).all() and (decay.std(-1) > 0).all(), "each channel its own decay"
    gate = trace["blocks.0.attn.hook_out_gate"]
    assert ((gate > 0) & (gate < 1)).all(), "a sigmoid, not a SiLU"
    weights, v, z = (trace[f"blocks.0.attn.{site}"] for site in ("hook_pattern", "hook_v", "hook_z"))
    assert (weights @ v - z).abs().max() <= 1e-5 * max(1.0, float(z.abs().max()))
    assert "decayed channel by channel" in trace.event("blocks.0.attn.hook_pattern").op
    assert trace.event("blocks.0.attn.hook_out_gate").op.startswith("sigmoid")


def test_implied_weights_with_a_decay_per_channel_times_v_are_the_read():
    q, k, v, log_decay, beta, _ = channel_inputs(T=13)
    empty = torch.zeros(2, 3, 8, 6)
    read = recurrent_form(q, k, v, log_decay, beta, empty).out  # (B, H, T, d_v)
    torch.testing.assert_close(implied_weights(q, k, log_decay, beta) @ v, read, atol=1e-5, rtol=0)


def test_cached_generation_carries_the_state_and_conv_inputs_and_equals_recomputing(tiny_model):
    model = lively(tiny_model, n_layers=4, attention_layers="3:1", linear_kind="kimi-delta").eval()
    prompt = torch.randint(0, 32, (2, 6), generator=torch.Generator().manual_seed(3))
    cache = KVCache()
    with torch.no_grad():
        logits = model(prompt, cache=cache)
        tokens = [logits[:, -1].argmax(-1)]
        for _ in range(7):
            tokens.append(model(tokens[-1][:, None], cache=cache)[:, -1].argmax(-1))
        cached = torch.stack(tokens, dim=1)
        ids = prompt
        for _ in range(8):
            ids = torch.cat((ids, model(ids)[:, -1].argmax(-1, keepdim=True)), dim=1)
    assert torch.equal(cached, ids[:, 6:])
    state, conv_tail = cache[model.blocks[0].attn]
    assert state.shape == (2, 4, 4, 4) and conv_tail.shape == (2, 3 * 16, 3)


def test_the_parameter_count_is_every_live_tensor(tiny_config):
    cfg = tiny_config(n_layers=4, attention_layers="3:1", linear_kind="kimi-delta", position="none")
    from transformer import Transformer
    live = sum(p.numel() for p in Transformer(cfg).parameters())
    assert param_counts(cfg)["total"] == live
    assert ROW.channel_decay and ROW.sigmoid_gate and not ROW.gated_decay and not ROW.silu_gate


def test_the_state_page_steps_through_a_kimi_delta_layer_with_each_rows_own_decay():
    """The state a token found is diag(α_t) S_{t-1}: found + write = after, row by row, and the figure says so."""
    from apptest_helpers import assert_clean, open_page
    from ui.compute import state_measure

    at = assert_clean(open_page("pages/state.py", attention_layers="3:1", n_layers=4, position="rope",
                                linear_kind="kimi-delta", state_t=3, text="the cat sat on the mat"))
    assert at.selectbox(key="state_layer").options[0] == "0: Kimi delta attention"
    figure = next(c for c in at.get("plotly_chart") if c.proto.id.endswith("state_write"))
    # the spec is JSON, whose encoder may write non-ASCII as \u escapes (plotly 7 does): read it, not its bytes
    panels = [note["text"] for note in json.loads(figure.proto.spec)["layout"]["annotations"]]
    assert any("diag(αₜ)·Sₜ₋₁ (αₜ from" in panel for panel in panels), panels
    states = np.stack([np.ones((3, 2)), np.full((3, 2), 2.0)])  # the page's own arithmetic on a known decay per row
    head = state_measure.HeadState(np.zeros((2, 3)), np.zeros((2, 3)), np.zeros((2, 2)), states, None, None,
                          np.array([[1.0, 1.0, 1.0], [0.5, 0.25, 0.0]]), None, None, None)
    assert (head.before(1) == np.array([[0.5, 0.5], [0.25, 0.25], [0.0, 0.0]])).all()
