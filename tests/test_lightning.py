"""A decayed-linear layer in MiniMax-01's lightning form (``linear_lightning`` with ``linear_sigmoid_gate``) computes
what the installed transformers' PyTorch ``MiniMaxLightningAttention`` computes, layer by layer: SiLU on q, k and v, q
unscaled, a decay per head that falls with the layer's depth, one RMSNorm over all heads, the sigmoid gate. HF runs
its blocks of ``block_size`` tokens; ours the chunked form and the recurrent one."""
import pytest
import torch
import transformers as tf

from transformer import Transformer, TransformerConfig
from transformer.interop.weights import split_interleaved
from transformer.linear_attention import StateInputs

H, D_HEAD, LAYERS = 4, 8, 4


def both(layer: int):
    hf_config = tf.MiniMaxConfig(hidden_size=32, num_attention_heads=H, head_dim=D_HEAD, num_hidden_layers=LAYERS,
                                 block_size=4, layer_types=["linear_attention"] * LAYERS, vocab_size=50)
    torch.manual_seed(layer)
    hf = tf.models.minimax.modeling_minimax.MiniMaxLightningAttention(hf_config, layer).eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0.0, 0.3 if p.ndim > 1 else 1.0)  # the norm's weight off its ones, too
    cfg = TransformerConfig(vocab_size=50, d_model=32, n_heads=H, n_layers=LAYERS, attention_layers="decayed-linear",
                            position="none", linear_lightning=True, linear_sigmoid_gate=True,
                            linear_read_norm_eps=1e-6, linear_chunk_size=3)
    ours = Transformer(cfg, device="cpu").blocks[layer].attn.eval()
    q, k, v = split_interleaved(hf.qkv_proj.weight, H, D_HEAD)
    ours.load_state_dict({"q_proj.weight": q, "k_proj.weight": k, "v_proj.weight": v,
                          "g_proj.weight": hf.output_gate.weight, "norm_weight": hf.norm.weight,
                          "o_proj.weight": hf.out_proj.weight}, strict=True)
    return hf, ours


@pytest.mark.parametrize("layer", range(LAYERS))
def test_a_lightning_layer_is_hugging_faces(layer):
    hf, ours = both(layer)
    x = torch.randn(2, 11, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected, state = hf(x, None, None)
        chunked = ours(x, StateInputs(None))
        ours.fused = False
        recurrent = ours(x, StateInputs(None))
    assert expected.std() > 1e-2  # the comparison has teeth
    assert (chunked - expected).abs().max() <= 1e-5 and (recurrent - expected).abs().max() <= 1e-5
    assert torch.allclose(ours.log_gamma.exp(), torch.exp(-hf.slope_rate.flatten()))  # the same decay per head
    assert (ours.log_gamma.diff() > 0).all()  # the first head forgets fastest, each next one more slowly


def test_deeper_layers_forget_more_slowly_and_the_switch_needs_a_decayed_linear_layer():
    gammas = [both(layer)[1].log_gamma for layer in range(LAYERS)]
    assert all((deeper > shallower).all() for shallower, deeper in zip(gammas, gammas[1:]))
    with pytest.raises(ValueError, match="linear_lightning=True is a setting of layers with a fixed decay"):
        TransformerConfig(attention_layers="3:1", n_layers=4, linear_kind="deltanet", linear_lightning=True)
