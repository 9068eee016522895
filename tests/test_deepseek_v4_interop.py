"""DeepSeek-V4 opens from Hugging Face (an instance or a saved directory) and computes what it computes: the window
beside blocks pooled at two rates (one chosen by an indexer), the K = V head with its interleaved RoPE reordered,
the grouped output projection, sinks, hyper-connections, hash-routed first MoE layers and sqrt-softplus scores.

The factory is a small random-init model with every 1-D parameter (and the pooling biases, the token-id table and
the choice bias) moved off its initial value. In float32: logits within 1e-4 and every layer's attention weights
within 1e-5 of HF's eager attention; greedy generation with our cache gives HF's tokens without a cache. Its indexer
has 8 heads, so the ReLU scores of two blocks seldom tie at 0 (where they tie, torch.topk and our stable sort may
keep different blocks).
"""
import pytest
import torch
import transformers as tf

from hf_factories import COMMON, V, _build
from transformer.interop import describe_hf, from_hf
from transformer.interop.hf_deepseek_v4 import rope_order

LOGITS_TOL, PATTERN_TOL = 1e-4, 1e-5
SIZES = dict(hidden_size=32, moe_intermediate_size=16, num_attention_heads=4, head_dim=16, q_lora_rank=16,
             num_experts_per_tok=2, n_routed_experts=4, n_shared_experts=1, max_position_embeddings=128, hc_mult=3,
             sliding_window=8, o_groups=2, o_lora_rank=8, index_n_heads=8, index_head_dim=16, index_topk=2,
             partial_rotary_factor=0.5, compress_rates={"compressed_sparse_attention": 4,
                                                        "heavily_compressed_attention": 8})
KINDS = ["heavily_compressed_attention", "compressed_sparse_attention", "sliding_attention",
         "compressed_sparse_attention"]


def deepseek_v4_small(**changes):
    config = tf.DeepseekV4Config(**{**SIZES, "num_hidden_layers": 4, "layer_types": KINDS,
                                    "mlp_layer_types": ["hash_moe", "moe", "moe", "moe"], **COMMON, **changes})
    model = _build(tf.DeepseekV4ForCausalLM, config, big={"position_bias": 0.5})
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, t in model.named_buffers():
            if name.endswith("tid2eid"):  # each token id's experts: zeros out of the box, a table in a checkpoint
                t.copy_(torch.randint(0, config.n_routed_experts, t.shape, generator=g))
            if name.endswith("position_bias") or name.endswith("e_score_correction_bias"):
                t.add_(0.3 * torch.randn(t.shape, generator=g))
    return model


@pytest.fixture(scope="module")
def pair():
    model = deepseek_v4_small()
    return model, from_hf(model)


def ids(B=2, T=29, seed=0):
    return torch.randint(1, V, (B, T), generator=torch.Generator().manual_seed(seed))


def test_logits_and_every_layers_attention_weights_match(pair):
    model, ours = pair
    x = ids()
    with torch.no_grad():
        out = model(x, use_cache=False, output_attentions=True)
        logits, trace = ours.run_with_trace(x, names="*hook_pattern")
        fused = ours(x)
    assert (out.logits - logits).abs().max() <= LOGITS_TOL
    assert (out.logits - fused).abs().max() <= LOGITS_TOL
    for i, theirs in enumerate(out.attentions):  # (B, H, T, T + blocks): the window's keys, then the blocks
        mine = trace[f"blocks.{i}.attn.hook_pattern"]
        assert mine.shape == theirs.shape
        assert (mine - theirs).abs().max() <= PATTERN_TOL, f"layer {i}"


def test_greedy_generation_with_our_cache_equals_hf_without_one(pair):
    model, ours = pair
    prompt = ids(T=6, seed=1)
    with torch.no_grad():
        theirs = model.generate(prompt, max_new_tokens=26, do_sample=False, use_cache=False)
    assert torch.equal(ours.generate(prompt, 26, use_cache=True), theirs)  # past the window and many blocks


def test_a_saved_directory_opens_alike(pair, tmp_path):
    model, ours = pair
    model.save_pretrained(tmp_path)
    loaded = from_hf(str(tmp_path))
    x = ids(seed=2)
    with torch.no_grad():
        assert (model(x, use_cache=False).logits - loaded(x)).abs().max() <= LOGITS_TOL


def test_the_plan_names_each_layers_kind(pair):
    model, ours = pair
    cfg = ours.cfg
    assert [spec.hf_layer_type for spec in cfg.layer_plan()] == KINDS
    assert cfg.hash_layers == 1 and cfg.hyper_streams == 3 and cfg.router == "sqrt-softplus"
    words = describe_hf(model).axes
    assert "heavily_compressed_attention of 8 keys and blocks of 8" in words["layers"]
    assert "layers 1, 3: compressed_sparse_attention of 8 keys and blocks of 4 keeping the top 2 blocks" in words["layers"]
    assert "sliding_attention of 8 keys, RoPE theta 10000" in words["layers"]
    assert "3 hyper-connected residual streams" in words["block"]


def test_rope_order_moves_hf_pairs_to_our_halves():
    assert rope_order(8, 4).tolist() == [4, 6, 5, 7, 0, 1, 2, 3]


@pytest.mark.parametrize("changes,named", [
    (dict(n_shared_experts=2), "n_shared_experts=2"),
    (dict(mlp_layer_types=["moe", "hash_moe", "moe", "moe"]), "mlp_layer_types"),
    (dict(hc_mult=1), "hc_mult=1"),
    (dict(rope_parameters={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}),
     "rope_type='yarn'"),
    (dict(compress_rates={"compressed_sparse_attention": 3, "heavily_compressed_attention": 8}),
     "does not divide its window of 8"),
])
def test_a_setting_not_built_is_refused_by_name(changes, named):
    config = tf.DeepseekV4Config(**{**SIZES, "num_hidden_layers": 4, "layer_types": KINDS, **COMMON, **changes})
    model = tf.DeepseekV4ForCausalLM(config).eval()
    with pytest.raises(ValueError, match=named.replace("[", r"\[").replace("(", r"\(")):
        from_hf(model)
