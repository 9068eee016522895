"""A new FFN kind is its row in the table, its builder, and this test: ReGLU, the GLU with a ReLU gate."""
import torch
import torch.nn.functional as F

from transformer import AXES, Transformer, TransformerConfig
from transformer.ffn import GatedFFN
from ui.compute.stepper import formula


def test_reglu_gates_the_up_projection_with_a_relu():
    cfg = TransformerConfig(vocab_size=16, d_model=16, n_layers=1, ffn="reglu")
    assert cfg.d_ff == 48  # gated: 8/3 d_model = 42, rounded up to a multiple of 8
    model = Transformer(cfg, device="cpu")
    ffn = model.blocks[0].mlp
    assert isinstance(ffn, GatedFFN)
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(0))
    expected = (F.relu(x @ ffn.gate.weight.T) * (x @ ffn.up.weight.T)) @ ffn.down.weight.T
    torch.testing.assert_close(ffn(x), expected, atol=1e-6, rtol=0)
    assert (F.relu(x @ ffn.gate.weight.T) == 0).any()  # the hard zero a SiLU gate never reaches


def test_reglu_records_its_gate_in_its_own_words_and_generates_with_a_cache():
    cfg = TransformerConfig(vocab_size=16, d_model=16, n_layers=2, ffn="reglu")
    model = Transformer(cfg, device="cpu").eval()
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    _, trace = model.run_with_trace(ids, names="*mlp.hook_*")
    ops = {event.name.rsplit(".", 1)[1]: event.op for event in trace.events if event.name.startswith("blocks.0")}
    assert ops == {"hook_gate": "max(0, x W_gate)", "hook_up": "x W_up", "hook_post": "max(0, x W_gate) * x W_up"}
    assert (trace["blocks.0.mlp.hook_gate"] >= 0).all()
    assert formula("blocks.0.mlp.hook_post", cfg) == AXES["ffn"].row("reglu").formulas["hook_post"]
    cached = model.generate(ids, max_new_tokens=6, use_cache=True)
    recomputed = model.generate(ids, max_new_tokens=6, use_cache=False)
    assert torch.equal(cached, recomputed)
