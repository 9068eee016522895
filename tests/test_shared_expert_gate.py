"""Qwen3-Next's gate on the shared experts: each token takes sigmoid(x W_shared_gate) of their output, and the routed
experts are untouched; the field is a mixture-of-experts setting, refused where it gates nothing."""
import pytest
import torch

from transformer import Transformer, TransformerConfig
from transformer.checkpoint import load, save
from transformer.ffn import MoE

MOE = dict(vocab_size=32, d_model=16, n_heads=4, n_layers=2, ffn="moe", n_experts=4, top_k=2, d_expert=8,
           n_shared_experts=2)


def test_the_shared_experts_output_is_scaled_by_each_tokens_gate():
    torch.manual_seed(0)
    gated = MoE(TransformerConfig(**MOE, shared_expert_gate=True))
    plain = MoE(TransformerConfig(**MOE))
    plain.load_state_dict({k: v for k, v in gated.state_dict().items() if not k.startswith("shared_gate.")})
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        gated.shared_gate.weight.normal_(0.0, 1.0)
        shared = gated.shared(x)  # (B, T, D)
        gate = torch.sigmoid(x @ gated.shared_gate.weight.T)  # (B, T, 1): one number per token
        assert gate.std() > 0.1  # tokens differ in how much they take
        expected = plain(x) - shared + gate * shared
        torch.testing.assert_close(gated(x), expected, atol=1e-6, rtol=0)
        gated.shared_gate.weight.fill_(0.0)  # sigmoid(0): every token takes half
        torch.testing.assert_close(gated(x), plain(x) - shared / 2, atol=1e-6, rtol=0)


def test_the_gate_is_a_parameter_of_each_routed_layer_and_survives_a_checkpoint(tmp_path):
    torch.manual_seed(1)
    model = Transformer(TransformerConfig(**MOE, first_dense_layers=1, shared_expert_gate=True)).eval()
    names = [name for name, _ in model.named_parameters() if "shared_gate" in name]
    assert names == ["blocks.1.mlp.shared_gate.weight"]  # the dense first layer has no experts to gate
    save(model, tmp_path / "gated")
    loaded, _ = load(tmp_path / "gated")
    assert loaded.cfg.shared_expert_gate
    ids = torch.randint(0, 32, (1, 7))
    torch.testing.assert_close(loaded(ids), model(ids))


@pytest.mark.parametrize("changes, words", [
    (dict(ffn="swiglu", shared_expert_gate=True), ["shared_expert_gate=True", "ffn='moe'"]),
    (dict(ffn="moe", shared_expert_gate=True), ["shared_expert_gate=True", "n_shared_experts=0"]),
])
def test_a_gate_with_nothing_to_gate_is_refused_by_name(changes, words):
    with pytest.raises(ValueError) as error:
        TransformerConfig(vocab_size=32, d_model=16, n_heads=4, **changes)
    assert all(word in str(error.value) for word in words), str(error.value)
