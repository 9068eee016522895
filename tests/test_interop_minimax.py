"""MiniMax-01 opens and computes what Hugging Face computes: lightning-attention layers (decayed linear in
MiniMax's form) between GQA softmax layers, an MoE in every layer, blocks whose residual path carries the normed input.

Each factory is a small random-init MiniMaxForCausalLM with every 1-D parameter moved off its initial value, its
weights at initializer_range 0.1: at 0.2 these random models amplify a relative difference of 1e-7 (HF keeps the
decays and the router's softmax in float32) about 2.5 times per layer, to 2e-4 at the logits even in float64. In
float32, on a right-padded batch: logits within 1e-4, every full-attention layer's weights within 1e-5 of HF's eager
attention; greedy generation with our cache (the lightning states, the full layers' keys and values) gives HF's tokens
without a cache.
"""
import pytest
import torch
import transformers as tf

from hf_factories import COMMON, V, _build, right_padded_batch, run_both
from transformer import KVCache
from transformer.interop import describe_hf, from_hf

LOGITS_TOL, PATTERN_TOL = 1e-4, 1e-5
SIZES = dict(hidden_size=64, num_attention_heads=4, head_dim=16, intermediate_size=32, num_local_experts=4,
             num_experts_per_tok=2, max_position_embeddings=64, initializer_range=0.1, block_size=4,
             experts_implementation="eager")


def minimax_3_to_1():
    # HF's default alternation would be 1:1; here three lightning layers then a full one, twice; GQA 4/2; 4 experts
    return _build(tf.MiniMaxForCausalLM, tf.MiniMaxConfig(
        **SIZES, num_hidden_layers=8, num_key_value_heads=2,
        layer_types=(["linear_attention"] * 3 + ["full_attention"]) * 2, **COMMON), seed=0)


def minimax_default_list():
    # HF's default layer_types (full, linear, full, linear, full): listed; MHA; RoPE at base 1e5; tied head
    return _build(tf.MiniMaxForCausalLM, tf.MiniMaxConfig(
        **SIZES, num_hidden_layers=5, num_key_value_heads=4, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 100000.0}, **COMMON), seed=1)


FACTORIES = {fn.__name__: fn for fn in (minimax_3_to_1, minimax_default_list)}


@pytest.mark.parametrize("name", list(FACTORIES))
def test_logits_and_every_full_attention_layers_weights_match(name):
    hf_model = FACTORIES[name]()
    ours = from_hf(hf_model)
    ids, mask = right_padded_batch()
    out, logits, trace, fused = run_both(hf_model, ours, ids, mask)
    real = mask.bool()
    assert (out.logits - logits)[real].abs().max() <= LOGITS_TOL
    assert (out.logits - fused)[real].abs().max() <= LOGITS_TOL
    assert out.logits[real].std() > 1000 * LOGITS_TOL  # the comparison has teeth
    full = [spec.index for spec in ours.cfg.layer_plan() if spec.row.softmax]
    hf_full = [i for i, t in enumerate(hf_model.config.layer_types) if t == "full_attention"]
    assert full == hf_full
    for layer in full:  # HF records every layer's second output; a full layer's is its weights
        hf_pattern = out.attentions[layer]
        difference = (hf_pattern - trace[f"blocks.{layer}.attn.hook_pattern"]).transpose(1, 2)[real].abs().max()
        assert difference <= PATTERN_TOL, (layer, difference.item())


@pytest.mark.parametrize("name", list(FACTORIES))
def test_greedy_generation_with_our_cache_gives_hugging_faces_uncached_tokens(name):
    hf_model = FACTORIES[name]()
    ours = from_hf(hf_model)
    ids = torch.randint(1, V, (2, 6), generator=torch.Generator().manual_seed(2))
    uncached = hf_model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=12,
                                 use_cache=False, output_logits=True, return_dict_in_generate=True)
    assert torch.equal(ours.generate(ids, 12, use_cache=True, cache=KVCache()), uncached.sequences)
    cache = KVCache()  # every step's logits, ours one token at a time through the cache
    with torch.no_grad():
        steps = [ours(ids, cache=cache)[:, -1]]
        for t in range(ids.shape[1], uncached.sequences.shape[1] - 1):
            steps.append(ours(uncached.sequences[:, t:t + 1], position_ids=torch.tensor([[t]]), cache=cache)[:, -1])
    assert (torch.stack(steps, 1) - torch.stack(uncached.logits, 1)).abs().max() <= LOGITS_TOL
    moves = torch.stack(uncached.logits, 1).diff(dim=1).abs().amax(-1)  # (B, steps - 1): each step's largest change
    assert moves.min() > 100 * LOGITS_TOL  # the state and the cache carry new tokens: the comparison has teeth


@pytest.mark.parametrize("name", list(FACTORIES))
def test_the_plan_reads_back_as_layer_types_and_describe_names_each_kind(name):
    hf = FACTORIES[name]()
    cfg = from_hf(hf).cfg
    assert [spec.hf_layer_type for spec in cfg.layer_plan()] == hf.config.layer_types
    described = describe_hf(hf)
    assert described.family == "MiniMax-01"
    assert "linear_attention (decayed linear attention)" in described.axes["layers"]
    assert (cfg.norm_position, cfg.linear_lightning, cfg.linear_sigmoid_gate) == ("normed-skip", True, True)
    assert described.axes["norm"].startswith("RMSNorm, normed skip")
    assert "lightning's form" in described.axes["linear layers"] and "sigmoid(x W_g)" in described.axes["linear layers"]
    assert cfg.attention_layers == ("3:1" if name == "minimax_3_to_1" else ",".join(hf.config.layer_types))


def test_every_one_dimensional_parameter_is_off_its_initial_value_and_a_directory_opens(tmp_path):
    hf = minimax_3_to_1()
    for name, p in hf.named_parameters():
        if p.ndim == 1:
            assert p.unique().numel() == p.numel(), name
    hf.save_pretrained(tmp_path)
    ids = torch.randint(1, V, (1, 9), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert (from_hf(str(tmp_path))(ids) - hf(ids).logits).abs().max() <= LOGITS_TOL


@pytest.mark.parametrize("changes,named", [(dict(mlp_alpha_factor=3.5), "mlp_alpha_factor=3.5"),
                                           (dict(sliding_window=8), "sliding_window=8")])
def test_a_setting_not_built_is_refused_by_name(changes, named):
    config = tf.MiniMaxConfig(**(SIZES | dict(hidden_size=32, num_local_experts=2)), num_hidden_layers=2,
                              **changes, **COMMON)
    with pytest.raises(ValueError, match=named):
        from_hf(tf.MiniMaxForCausalLM(config))
