"""The families whose layers keep a state open and compute what Hugging Face computes: Qwen3-Next, Qwen3.5 (its
dense and MoE text models) and OLMo hybrid, Gated DeltaNet layers between full-attention ones; OLMo hybrid's layers
each put their norms where their own block does (after each sublayer on its full layers, before on its linear ones).

Each factory (hf_factories.HYBRID_FACTORIES) is a small random-init model with every 1-D parameter (norm weights,
biases, A_log, dt_bias) moved off its initial value. Hugging Face runs its PyTorch fallbacks (the gated delta rule
chunked and token by token, the causal convolution), never an optional kernel. In float32, on a right-padded batch:
logits within 1e-4, and every full-attention layer's weights within 1e-5 of HF's eager attention; greedy generation
with our cache (the state and the convolution's last inputs) gives HF's tokens without a cache, and every step's
logits within 1e-4 of HF's.
"""

import pytest
import torch

from hf_factories import HYBRID_FACTORIES, V, right_padded_batch, run_both, use_pytorch_fallbacks
from transformer.interop import describe_hf, from_hf
from transformer.model import KVCache

LOGITS_TOL, PATTERN_TOL = 1e-4, 1e-5
OPENED = list(HYBRID_FACTORIES)
FALLBACKS = ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule", "causal_conv1d_fn",
             "causal_conv1d_update")

# what each config becomes
QWEN = dict(norm_plus_one=True, qk_norm="head", delta_beta_max=1.0, norm_position="pre", linear_norm_position=None,
            linear_read_norm_eps=None)
OLMO = dict(norm_plus_one=False, qk_norm="full", norm_position="after", linear_norm_position="pre",
            linear_read_norm_eps=1e-5, norm_eps=1e-6, attn_gate=False)
PLANS = {
    "qwen3_next_moe": dict(attention_layers="3:1", linear_key_heads=2, linear_value_heads=4, linear_key_head_dim=8,
                           linear_value_head_dim=12, linear_conv_size=4, rope_dim=4, n_shared_experts=2,
                           shared_expert_gate=True, first_dense_layers=0, router_norm=True, attn_gate=True, **QWEN),
    "qwen3_next_list_dense_first": dict(
        attention_layers="linear_attention,full_attention,linear_attention,linear_attention,full_attention",
        linear_key_heads=4, linear_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8, linear_conv_size=3,
        rope_dim=8, n_shared_experts=1, shared_expert_gate=True, first_dense_layers=1, router_norm=False,
        attn_gate=True, **QWEN),
    "qwen3_5_dense": dict(attention_layers="3:1", linear_key_heads=2, linear_value_heads=4, linear_key_head_dim=8,
                          linear_value_head_dim=8, linear_conv_size=4, rope_dim=4, n_shared_experts=0,
                          shared_expert_gate=False, first_dense_layers=0, router_norm=True, attn_gate=True, **QWEN),
    "qwen3_5_moe": dict(attention_layers="3:1", linear_key_heads=1, linear_value_heads=2, linear_key_head_dim=16,
                        linear_value_head_dim=8, linear_conv_size=4, rope_dim=4, n_shared_experts=1,
                        shared_expert_gate=True, first_dense_layers=0, router_norm=True, attn_gate=True, **QWEN),
    "olmo_hybrid_small": dict(attention_layers="3:1", linear_key_heads=2, linear_value_heads=4, linear_key_head_dim=8,
                              linear_value_head_dim=8, linear_conv_size=4, position="rope", rope_theta=10000.0,
                              delta_beta_max=2.0, n_kv_heads=4, bias=False, tie_embeddings=False, **OLMO),
    "olmo_hybrid_nope_list": dict(
        attention_layers="linear_attention,full_attention,linear_attention,linear_attention,full_attention",
        linear_key_heads=4, linear_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=16, linear_conv_size=3,
        position="none", delta_beta_max=1.0, n_kv_heads=2, bias=True, tie_embeddings=True, **OLMO),
}


@pytest.fixture(autouse=True)
def hugging_faces_pytorch_fallbacks(monkeypatch):
    """Make each modeling module call the plain PyTorch functions its kernel wrappers fall back to, even where an
    optional kernel package (fla, causal-conv1d) is installed."""
    from transformers.models.olmo_hybrid import modeling_olmo_hybrid
    from transformers.models.qwen3_5 import modeling_qwen3_5
    from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe
    from transformers.models.qwen3_next import modeling_qwen3_next

    for module in (modeling_qwen3_next, modeling_qwen3_5, modeling_qwen3_5_moe, modeling_olmo_hybrid):
        use_pytorch_fallbacks(monkeypatch, module, FALLBACKS)


def full_layers(ours) -> list[int]:
    return [spec.index for spec in ours.cfg.layer_plan() if not spec.row.keeps_state]


@pytest.mark.parametrize("name", OPENED)
def test_logits_and_every_full_attention_layers_weights_match(name):
    hf_model = HYBRID_FACTORIES[name]()
    ours = from_hf(hf_model)
    ids, mask = right_padded_batch()
    out, logits, trace, fused = run_both(hf_model, ours, ids, mask)
    real = mask.bool()  # padded positions' logits are not compared: HF and we fill their rows differently
    assert (out.logits - logits)[real].abs().max() <= LOGITS_TOL
    assert (out.logits - fused)[real].abs().max() <= LOGITS_TOL
    assert out.logits[real].std() > 1000 * LOGITS_TOL  # the comparison has teeth
    layers = full_layers(ours)
    assert len(out.attentions) == len(layers)  # HF records its full-attention layers only
    for layer, hf_pattern in zip(layers, out.attentions):
        ours_pattern = trace[f"blocks.{layer}.attn.hook_pattern"]
        assert ours_pattern.shape == hf_pattern.shape
        difference = (hf_pattern - ours_pattern).transpose(1, 2)[real].abs().max()  # real query rows
        assert difference <= PATTERN_TOL, (layer, difference.item())


@pytest.mark.parametrize("name", OPENED)
def test_greedy_generation_with_our_cache_gives_hugging_faces_uncached_tokens(name):
    hf_model = HYBRID_FACTORIES[name]()
    ours = from_hf(hf_model)
    ids = torch.randint(1, V, (2, 6), generator=torch.Generator().manual_seed(2))
    # 14 new tokens: the state and the convolution's last inputs carried through every step
    uncached = hf_model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=14,
                                 use_cache=False, output_logits=True, return_dict_in_generate=True)
    assert torch.equal(ours.generate(ids, 14, use_cache=True), uncached.sequences)
    cache = KVCache()  # every step's logits, ours one token at a time through the cache
    with torch.no_grad():
        steps = [ours(ids, cache=cache)[:, -1]]
        for t in range(ids.shape[1], uncached.sequences.shape[1] - 1):
            steps.append(ours(uncached.sequences[:, t:t + 1], position_ids=torch.tensor([[t]]), cache=cache)[:, -1])
    assert (torch.stack(steps, 1) - torch.stack(uncached.logits, 1)).abs().max() <= LOGITS_TOL


@pytest.mark.parametrize("name", OPENED)
def test_the_config_maps_onto_the_layer_plan_and_reads_back_as_hugging_faces_layer_types(name):
    hf = HYBRID_FACTORIES[name]()
    cfg = from_hf(hf).cfg
    assert {field: getattr(cfg, field) for field in PLANS[name]} == PLANS[name]
    assert [spec.hf_layer_type for spec in cfg.layer_plan()] == hf.config.layer_types


@pytest.mark.parametrize("name", ["olmo_hybrid_small", "olmo_hybrid_nope_list"])
def test_each_olmo_hybrid_layer_puts_its_norms_where_its_hugging_face_block_does(name):
    """A linear layer is LLaMA's block (input_layernorm, post_attention_layernorm: before each sublayer), a full layer
    OLMo 3's (post_attention_layernorm, post_feedforward_layernorm: after): the plan's placement, and the blocks."""
    hf = HYBRID_FACTORIES[name]()
    ours = from_hf(hf)
    for spec, block, layer in zip(ours.cfg.layer_plan(), ours.blocks, hf.model.layers):
        after = hasattr(layer, "post_feedforward_layernorm")
        assert (spec.placement.before, spec.placement.after) == (not after, after)
        assert (block.ln1 is None, block.ln1_post is None) == (after, not after)
        assert (block.ln2 is None, block.ln2_post is None) == (after, not after)
        if spec.row.keeps_state:  # HF's gated read norm keeps its own eps, not rms_norm_eps
            assert block.attn.eps == layer.linear_attn.o_norm.variance_epsilon == 1e-5 != hf.config.rms_norm_eps


@pytest.mark.parametrize("name", OPENED)
def test_every_one_dimensional_parameter_is_off_its_initial_value(name):
    """HF starts norm weights at 0 or 1, biases at 0, dt_bias at 1: a vector with a repeated entry is one left there."""
    hf = HYBRID_FACTORIES[name]()
    vectors = {n: p for n, p in hf.named_parameters() if p.ndim == 1}
    assert any(n.endswith("A_log") for n in vectors) and any(n.endswith("dt_bias") for n in vectors)
    assert all(p.unique().numel() == p.numel() for p in vectors.values())


def test_describe_hf_names_each_layers_kind():
    axes = describe_hf(HYBRID_FACTORIES["qwen3_next_list_dense_first"]()).axes
    assert axes["layers"] == ("layers 0, 2, 3: linear_attention (Gated DeltaNet); "
                              "layers 1, 4: full_attention, RoPE theta 500000")
    assert axes["linear layers"] == ("Gated DeltaNet: 4 value heads, each a 8 x 8 state, read by 4 q/k heads; "
                                     "short convolution of 3 tokens; β up to 1")
    assert axes["scores"] == "gated output" and "8 of 16 dimensions turn" in axes["position"]
    assert axes["FFN"] == "MoE: 6 SwiGLU experts, top-3, 1 shared (gated by sigmoid(x W)), the first 1 layers dense"
    axes = describe_hf(HYBRID_FACTORIES["qwen3_5_dense"]()).axes
    assert axes["layers"] == ("layers 0-2, 4-6: linear_attention (Gated DeltaNet); "
                              "layers 3, 7: full_attention, RoPE theta 10000")


def test_describe_hf_names_each_olmo_hybrid_layers_norm_placement():
    axes = describe_hf(HYBRID_FACTORIES["olmo_hybrid_small"]()).axes
    assert axes["layers"] == ("layers 0-2: linear_attention (Gated DeltaNet), norms pre; "
                              "layer 3: full_attention, RoPE theta 10000, norms after the sublayer")
    assert axes["norm"] == ("pre-RMSNorm (layers 0-2); RMSNorm, after the sublayer (layer 3), eps = 1e-06, "
                            "QK-norm over the projection")
    assert axes["linear layers"] == ("Gated DeltaNet: 4 value heads, each a 8 x 8 state, read by 2 q/k heads; "
                                     "short convolution of 4 tokens; β up to 2; read norm eps = 1e-05")
    axes = describe_hf(HYBRID_FACTORIES["olmo_hybrid_nope_list"]()).axes
    assert axes["layers"] == ("layers 0, 2, 3: linear_attention (Gated DeltaNet), norms pre; "
                              "layers 1, 4: full_attention, norms after the sublayer")
    assert axes["position"] == "none"


@pytest.mark.parametrize("name", ["qwen3_next_moe", "qwen3_5_dense", "olmo_hybrid_nope_list"])
def test_a_directory_written_by_save_pretrained_opens_with_the_same_plan_and_numbers(name, tmp_path):
    hf_model = HYBRID_FACTORIES[name]()
    hf_model.save_pretrained(tmp_path)
    assert describe_hf(str(tmp_path)).config == from_hf(hf_model).cfg  # the config alone gives the plan
    ours = from_hf(str(tmp_path))
    ids = torch.randint(1, V, (1, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert (hf_model(ids).logits - ours(ids)).abs().max() <= LOGITS_TOL
