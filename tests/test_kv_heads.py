"""KV heads: G = H is MHA, GQA stores H/G times fewer kv weights, and a group's query heads share one kv head."""
import pytest
import torch

from transformer import Transformer


def ids_for(arch, seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, 32, (2, 6), generator=g)
    return (src, torch.randint(0, 32, (2, 5), generator=g)) if arch == "encoder-decoder" else (src,)


@pytest.mark.parametrize("arch", ["decoder", "encoder", "encoder-decoder"])
def test_n_kv_heads_equal_to_n_heads_is_mha(arch, tiny_model):
    explicit_mha = tiny_model(arch=arch, n_kv_heads=4)
    default_mha = tiny_model(arch=arch, n_kv_heads=None)
    assert default_mha.cfg.n_kv_heads == 4 and default_mha.cfg.attention_kind == "MHA"
    with torch.no_grad():
        torch.testing.assert_close(explicit_mha(*ids_for(arch)), default_mha(*ids_for(arch)), atol=0, rtol=0)


@pytest.mark.parametrize("n_kv_heads,kind", [(2, "GQA"), (1, "MQA")])
def test_kv_projection_parameters_shrink_by_h_over_g(n_kv_heads, kind, tiny_model):
    mha, grouped = tiny_model(n_kv_heads=4), tiny_model(n_kv_heads=n_kv_heads)
    assert grouped.cfg.attention_kind == kind

    def kv_params(model):
        return sum(p.numel() for n, p in model.named_parameters() if ".k_proj." in n or ".v_proj." in n)

    assert kv_params(mha) == kv_params(grouped) * (4 // n_kv_heads)
    q_params = [sum(p.numel() for n, p in m.named_parameters() if ".q_proj." in n) for m in (mha, grouped)]
    assert q_params[0] == q_params[1], "query heads do not shrink"


@pytest.mark.parametrize("arch", ["decoder", "encoder", "encoder-decoder"])
@pytest.mark.parametrize("n_kv_heads", [2, 1])
@pytest.mark.parametrize("position", ["rope", "alibi", "learned"])
def test_gqa_equals_mha_with_each_kv_head_repeated_for_its_group(arch, n_kv_heads, position, tiny_model):
    grouped = tiny_model(arch=arch, n_kv_heads=n_kv_heads, position=position, bias=True)
    torch.manual_seed(1)
    mha = Transformer(grouped.cfg.replace(n_kv_heads=4), device="cpu").eval()
    group_size, d_head = 4 // n_kv_heads, grouped.cfg.d_head
    mha_state = {}
    for name, tensor in grouped.state_dict().items():
        if ".k_proj." in name or ".v_proj." in name:
            # rows come in kv heads of d_head; query heads g*group_size ... share kv head g
            per_head = tensor.view(n_kv_heads, d_head, *tensor.shape[1:])
            tensor = per_head.repeat_interleave(group_size, dim=0).reshape(4 * d_head, *tensor.shape[1:])
        mha_state[name] = tensor
    mha.load_state_dict(mha_state)
    mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2])
    with torch.no_grad():
        for fused in (True, False):
            expected = grouped.set_fused(fused)(*ids_for(arch), attention_mask=mask)
            torch.testing.assert_close(mha.set_fused(fused)(*ids_for(arch), attention_mask=mask), expected,
                                       atol=1e-6, rtol=0)
    # and the grouped model's recorded keys really hold G heads, repeated per group inside attention
    _, trace = grouped.run_with_trace(*ids_for(arch), names=["*blocks.0.attn.hook_k", "*blocks.0.attn.hook_q"])
    for name in trace.names():
        if name.endswith("hook_k"):
            assert trace[name].shape[1] == n_kv_heads
        else:
            assert trace[name].shape[1] == 4
