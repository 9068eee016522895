"""Kimi Linear opens and computes what Hugging Face computes: Kimi delta attention layers (a decay per key channel)
between latent-attention layers without positions, in DeepSeek-V3's blocks with its routed MoE.

Each factory is a small random-init model with every 1-D parameter (norm weights, biases, dt_bias, the router's
correction bias) and A_log moved off its initial value. Hugging Face runs its PyTorch fallbacks (the Kimi delta rule
chunked and token by token, the causal convolution), never an optional kernel. In float32, on a right-padded batch:
logits within 1e-4, every latent-attention layer's weights within 1e-5 of HF's eager attention; greedy generation
with our cache (the states, the convolution's last inputs and the latents) gives HF's tokens without a cache.
"""

import pytest
import torch
import transformers as tf

from hf_factories import COMMON, V, _hybrid, right_padded_batch, run_both, use_pytorch_fallbacks
from transformer.interop import describe_hf, from_hf
from transformer.model import KVCache, Transformer

LOGITS_TOL, PATTERN_TOL = 1e-4, 1e-5
FALLBACKS = ("chunk_kimi_delta_attention", "recurrent_kimi_delta_attention", "causal_conv1d_fn",
             "causal_conv1d_update")
_SIZES = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=16, qk_rope_head_dim=8,
              qk_nope_head_dim=8, v_head_dim=12, intermediate_size=96, moe_intermediate_size=16,
              max_position_embeddings=64, initializer_range=0.2, experts_implementation="eager")


def kimi_default_plan():
    # HF's default layer_types on 5 layers (full at index 4 only); no q latent; 6 experts in 2 groups, 1 group kept,
    # top-2 renormalised x2.4, 1 shared expert; layer 0 dense (first_k_dense_replace's default); rms_norm_eps 1e-5
    # against the latent norm's 1e-6; linear heads 4 x 8 and a 4-token convolution
    return _hybrid(tf.KimiLinearForCausalLM, tf.KimiLinearConfig(
        **_SIZES, num_hidden_layers=5, q_lora_rank=None, linear_num_heads=4, linear_head_dim=8,
        linear_conv_kernel_dim=4, num_local_experts=6, num_experts_per_tok=2, n_group=2, topk_group=1,
        n_shared_experts=1, norm_topk_prob=True, routed_scaling_factor=2.4, **COMMON), seed=6)


def kimi_checkpoint_lists():
    # the checkpoint's own form: linear_attn_config with 1-based kda_layers / full_attn_layers (3:1 on 8 layers);
    # q from its latent (q_lora_rank 24); attention biases; 2 shared experts, one group, unnormalised x1.5;
    # every layer routed; a 3-token convolution; linear heads 2 x 16
    return _hybrid(tf.KimiLinearForCausalLM, tf.KimiLinearConfig(
        **_SIZES, num_hidden_layers=8, q_lora_rank=24, attention_bias=True, num_local_experts=4,
        num_experts_per_tok=2, n_group=1, topk_group=1, n_shared_experts=2, norm_topk_prob=False,
        routed_scaling_factor=1.5, first_k_dense_replace=0,
        linear_attn_config={"kda_layers": [1, 2, 3, 5, 6, 7], "full_attn_layers": [4, 8], "head_dim": 16,
                            "num_heads": 2, "short_conv_kernel_size": 3}, **COMMON), seed=7)


FACTORIES = {fn.__name__: fn for fn in (kimi_default_plan, kimi_checkpoint_lists)}
PLANS = {
    "kimi_default_plan": dict(
        attention_layers="4:1", linear_kind="kimi-delta", nope_layers="4", linear_value_heads=4, linear_key_head_dim=8,
        linear_conv_size=4, kv_rank=16, q_rank=None, latent_norm_eps=1e-6, norm_eps=1e-5, n_experts=6, n_expert_groups=2, top_groups=1,
        first_dense_layers=1, router_norm=True, n_shared_experts=1, bias=False),
    "kimi_checkpoint_lists": dict(
        attention_layers="3:1", linear_kind="kimi-delta", nope_layers="3, 7", linear_value_heads=2,
        linear_key_head_dim=16, linear_conv_size=3, kv_rank=16, q_rank=24, latent_norm_eps=1e-6, n_experts=4,
        first_dense_layers=0, router_norm=False, n_shared_experts=2, bias=True, tie_embeddings=False),
}


@pytest.fixture(autouse=True)
def hugging_faces_pytorch_fallbacks(monkeypatch):
    """Make Kimi Linear's modeling module call the plain PyTorch functions its kernel wrappers fall back to, even
    where an optional kernel package (fla, causal-conv1d) is installed."""
    from transformers.models.kimi_linear import modeling_kimi_linear as module

    use_pytorch_fallbacks(monkeypatch, module, FALLBACKS)


@pytest.mark.parametrize("name", FACTORIES)
def test_logits_and_every_latent_attention_layers_weights_match(name):
    hf_model = FACTORIES[name]()
    ours = from_hf(hf_model)
    ids, mask = right_padded_batch()
    out, logits, trace, fused = run_both(hf_model, ours, ids, mask)
    real = mask.bool()  # padded positions' logits are not compared: HF and we fill their rows differently
    assert (out.logits - logits)[real].abs().max() <= LOGITS_TOL
    assert (out.logits - fused)[real].abs().max() <= LOGITS_TOL
    assert out.logits[real].std() > 1000 * LOGITS_TOL  # the comparison has teeth
    layers = [spec.index for spec in ours.cfg.layer_plan() if not spec.row.keeps_state]
    assert len(out.attentions) == len(layers) > 0  # HF records its full-attention layers only
    for layer, hf_pattern in zip(layers, out.attentions):
        ours_pattern = trace[f"blocks.{layer}.attn.hook_pattern"]
        difference = (hf_pattern - ours_pattern).transpose(1, 2)[real].abs().max()  # real query rows
        assert difference <= PATTERN_TOL, (layer, difference.item())


@pytest.mark.parametrize("name", FACTORIES)
def test_greedy_generation_with_our_cache_gives_hugging_faces_uncached_tokens(name):
    hf_model = FACTORIES[name]()
    ours = from_hf(hf_model)
    ids = torch.randint(1, V, (2, 6), generator=torch.Generator().manual_seed(2))
    uncached = hf_model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=14,
                                 use_cache=False, output_logits=True, return_dict_in_generate=True)
    assert torch.equal(ours.generate(ids, 14, use_cache=True), uncached.sequences)
    cache = KVCache()  # every step's logits, ours one token at a time through the cache
    with torch.no_grad():
        steps = [ours(ids, cache=cache)[:, -1]]
        for t in range(ids.shape[1], uncached.sequences.shape[1] - 1):
            steps.append(ours(uncached.sequences[:, t:t + 1], position_ids=torch.tensor([[t]]), cache=cache)[:, -1])
    assert (torch.stack(steps, 1) - torch.stack(uncached.logits, 1)).abs().max() <= LOGITS_TOL


@pytest.mark.parametrize("name", FACTORIES)
def test_the_config_maps_onto_the_layer_plan_and_reads_back_as_hugging_faces_layer_types(name):
    hf = FACTORIES[name]()
    cfg = from_hf(hf).cfg
    assert {field: getattr(cfg, field) for field in PLANS[name]} == PLANS[name]
    assert [spec.hf_layer_type for spec in cfg.layer_plan()] == hf.config.layer_types
    assert not any(spec.rotates for spec in cfg.layer_plan()), "no layer turns by position"


@pytest.mark.parametrize("name", FACTORIES)
def test_every_one_dimensional_parameter_is_off_its_initial_value(name):
    """HF starts norm weights at 1, biases at 0: a vector with a repeated entry is one left there. A_log is
    (1, 1, H, 1), and the router's correction bias a buffer: both moved too."""
    hf = FACTORIES[name]()
    vectors = {n: p for n, p in hf.named_parameters() if p.ndim == 1}
    assert any(n.endswith("dt_bias") for n in vectors) and any("o_norm" in n for n in vectors)
    assert all(p.unique().numel() == p.numel() for p in vectors.values())
    for name_, tensor in [*hf.named_parameters(), *hf.named_buffers()]:
        if name_.endswith(("A_log", "e_score_correction_bias")):
            assert tensor.unique().numel() == tensor.numel(), name_


def test_describe_hf_names_each_layers_kind():
    axes = describe_hf(FACTORIES["kimi_checkpoint_lists"]()).axes
    assert axes["layers"] == ("layers 0-2, 4-6: linear_attention (Kimi delta attention); "
                              "layers 3, 7: full_attention, no positions (NoPE)")
    assert axes["linear layers"] == ("Kimi delta attention: 2 value heads, each a 16 x 16 state, read by 2 q/k heads; "
                                     "a decay per key channel (16 per head); short convolution of 3 tokens; β up to 1")
    assert "latent of 16" in axes["KV heads"]
    assert axes["position"] == "none: no layer turns q and k (layers 3, 7 leave RoPE out, the others keep a state)"
    axes = describe_hf(FACTORIES["kimi_default_plan"]()).axes
    assert axes["layers"] == "layers 0-3: linear_attention (Kimi delta attention); layer 4: full_attention, no " \
                             "positions (NoPE)"


def test_a_directory_written_by_save_pretrained_opens_with_the_same_plan_and_numbers(tmp_path):
    hf_model = kimi_checkpoint_lists()
    hf_model.save_pretrained(tmp_path)
    assert describe_hf(str(tmp_path)).config == from_hf(hf_model).cfg  # the config alone gives the plan
    ours = from_hf(str(tmp_path))
    ids = torch.randint(1, V, (1, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert (hf_model(ids).logits - ours(ids)).abs().max() <= LOGITS_TOL


def test_a_setting_not_built_is_refused_by_name():
    hf = kimi_default_plan()
    hf.config.mlp_layer_types = ["dense", "sparse", "dense", "sparse", "sparse"]
    with pytest.raises(ValueError, match=r"KimiLinearForCausalLM with dense MLP layers \[0, 2\]"):
        describe_hf(hf)
    hf = kimi_default_plan()
    hf.config.hidden_act = "gelu"
    with pytest.raises(ValueError, match="KimiLinearForCausalLM with hidden_act='gelu' is not supported"):
        from_hf(hf)


def test_a_model_of_kimi_delta_layers_only_opens_without_latent_attention():
    """No full layer: the latent attention's settings are left out (none of its layers is built), and the logits are
    Hugging Face's (which it computes without a cache: its cache asks a full layer for the length)."""
    hf = _hybrid(tf.KimiLinearForCausalLM, tf.KimiLinearConfig(
        **_SIZES, num_hidden_layers=2, layer_types=["linear_attention"] * 2, linear_num_heads=4, linear_head_dim=8,
        num_local_experts=4, num_experts_per_tok=2, **COMMON), seed=8)
    ours = from_hf(hf)
    assert ours.cfg.attention_layers == "linear_attention,linear_attention"
    assert (ours.cfg.position, ours.cfg.kv_rank, ours.cfg.latent_norm_eps) == ("none", None, None)
    ids = torch.randint(1, V, (1, 12), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        assert (hf(ids, use_cache=False).logits - ours(ids)).abs().max() <= LOGITS_TOL


def test_the_latent_norm_keeps_its_own_eps():
    """HF builds the latent's RMSNorm with eps 1e-6 whatever rms_norm_eps (1e-5) says: on a latent of small size the
    difference shows, and latent_norm_eps carries it."""
    hf = kimi_default_plan()
    with torch.no_grad():
        hf.model.layers[4].self_attn.kv_a_proj_with_mqa.weight.mul_(0.003)  # a latent of RMS about 0.005
    ours = from_hf(hf)
    assert ours.blocks[4].attn.kv_norm.eps == hf.model.layers[4].self_attn.kv_a_layernorm.variance_epsilon == 1e-6
    one_eps = Transformer(ours.cfg.replace(latent_norm_eps=None)).eval()
    one_eps.load_state_dict(ours.state_dict())
    ids = torch.randint(1, V, (1, 12), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        expected = hf(ids).logits
        assert (expected - ours(ids)).abs().max() <= LOGITS_TOL
        assert (expected - one_eps(ids)).abs().max() > 100 * LOGITS_TOL
