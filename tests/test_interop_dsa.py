"""DeepSeek-V3.2 and GLM-5 (DeepSeek Sparse Attention) open and compute what Hugging Face computes: DeepSeek-V3's
latent attention and MoE, and in every layer a lightning indexer that keeps each query's top-k keys (GLM-5's
indexer turns interleaved rotary pairs, reordered on loading; its latent norms keep 1e-6 beside rms_norm_eps 1e-5).

Each factory is a small random-init model with every 1-D parameter moved off its initial value. In float32, on a
right-padded batch: logits within 1e-4 and every layer's attention weights within 1e-5 of HF's eager attention;
greedy generation with our cache gives HF's tokens without a cache. The factories' indexers have 16 heads, so no
two keys tie at the k-th place (checked): where they tie, HF's torch.topk picks by the row's length and ours the
earlier key, and HF's own cached generate can leave its uncached forward (docs/interop.md).
"""
import pytest
import torch
import transformers as tf

from hf_factories import COMMON, V, _build, _DS_SIZES, right_padded_batch, run_both
from transformer.axes.attention import WITHOUT_INDEXER
from transformer.indexer import LightningIndexer
from transformer.interop import describe_hf, from_hf
from transformer.model import KVCache

LOGITS_TOL, PATTERN_TOL = 1e-4, 1e-5


def deepseek_v32_yarn():
    # q_lora 24; YaRN (mscale in the softmax scale); 8 experts in 4 groups, top-2, x2.5; layer 0 dense
    return _build(tf.DeepseekV32ForCausalLM, tf.DeepseekV32Config(
        **_DS_SIZES, num_hidden_layers=3, q_lora_rank=24, n_routed_experts=8, n_group=4, topk_group=2,
        num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1, norm_topk_prob=True,
        routed_scaling_factor=2.5, index_topk=4, index_n_heads=16, index_head_dim=16,
        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                         "original_max_position_embeddings": 2048, "beta_fast": 32.0, "beta_slow": 1.0,
                         "mscale": 1.0, "mscale_all_dim": 1.0},
        max_position_embeddings=8192, initializer_range=0.2, experts_implementation="eager", **COMMON),
        big={"e_score_correction_bias": 0.3})


def glm5_small():
    # GLM-5's own eps (rms_norm_eps 1e-5, latent norms 1e-6); one group; top-2 of 6; indexer head 12 wide
    return _build(tf.GlmMoeDsaForCausalLM, tf.GlmMoeDsaConfig(
        **_DS_SIZES, num_hidden_layers=2, q_lora_rank=24, n_routed_experts=6, n_group=1, topk_group=1,
        num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1, norm_topk_prob=True,
        routed_scaling_factor=2.5, index_topk=5, index_n_heads=16, index_head_dim=12,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        max_position_embeddings=64, initializer_range=0.2, experts_implementation="eager", **COMMON),
        big={"e_score_correction_bias": 0.3})


FACTORIES = {fn.__name__: fn for fn in (deepseek_v32_yarn, glm5_small)}


def no_tie_at_the_kth_place(trace, k: int) -> bool:
    """No query's k-th and (k+1)-th highest indexer scores are equal, in any layer (where the tie rule decides)."""
    for event in trace.events:
        T = event.tensor.shape[-1]
        ranked = event.tensor.masked_fill(~torch.ones(T, T).tril().bool(), float("-inf")).sort(-1, descending=True).values
        kth, next_ = ranked[:, k:, k - 1], ranked[:, k:, k]  # rows that see more than k keys
        if (kth == next_).any():
            return False
    return True


@pytest.mark.parametrize("name", list(FACTORIES))
def test_the_config_maps_onto_an_indexed_plan(name):
    hf = FACTORIES[name]()
    cfg = from_hf(hf).cfg
    c = hf.config
    assert (cfg.index_top_k, cfg.index_heads, cfg.index_head_dim) == (c.index_topk, c.index_n_heads, c.index_head_dim)
    assert [spec.hf_layer_type for spec in cfg.layer_plan()] == c.layer_types == ["indexed_attention"] * c.num_hidden_layers
    assert cfg.kv_rank == c.kv_lora_rank and cfg.q_rank == c.q_lora_rank
    assert cfg.latent_norm_eps == (1e-6 if name == "glm5_small" else None)


@pytest.mark.parametrize("name", list(FACTORIES))
def test_logits_and_every_layers_attention_weights_match(name):
    hf_model = FACTORIES[name]()
    ours = from_hf(hf_model)
    ids, mask = right_padded_batch()
    out, logits, trace, fused = run_both(hf_model, ours, ids, mask)
    real = mask.bool()
    assert (out.logits - logits)[real].abs().max() <= LOGITS_TOL
    assert (out.logits - fused)[real].abs().max() <= LOGITS_TOL
    assert len(out.attentions) == ours.cfg.n_layers
    for layer, hf_pattern in enumerate(out.attentions):
        difference = (hf_pattern - trace[f"blocks.{layer}.attn.hook_pattern"]).transpose(1, 2)[real].abs().max()
        assert difference <= PATTERN_TOL, (layer, difference.item())
        sparse = trace[f"blocks.{layer}.attn.hook_pattern"][0]  # the full row: beyond k keys, some weights are 0
        assert ((sparse > 0).sum(-1)[:, -1] == ours.cfg.index_top_k).all()
    assert out.logits[real].std() > 1000 * LOGITS_TOL  # the comparison has teeth


def test_the_indexer_and_its_reordered_rows_each_change_the_numbers():
    """Without the indexer, or with GLM-5's indexer rows left in HF's interleaved order, the logits leave the
    tolerance: each mapped piece matters at this length."""
    hf_model = glm5_small()
    ours = from_hf(hf_model)
    ids, _ = right_padded_batch()
    with torch.no_grad():
        reference = hf_model(ids).logits
        dense = type(ours)(ours.cfg.replace(**WITHOUT_INDEXER), device="cpu").eval()
        dense.load_state_dict({n: t for n, t in ours.state_dict().items() if ".indexer." not in n})
        assert (dense(ids) - reference).abs().max() > 100 * LOGITS_TOL
        indexer = ours.blocks[0].attn.indexer
        indexer.k_proj.weight.copy_(hf_model.model.layers[0].self_attn.indexer.wk.weight)
        indexer.q_proj.weight.copy_(hf_model.model.layers[0].self_attn.indexer.wq_b.weight)
        assert (ours(ids) - reference).abs().max() > 100 * LOGITS_TOL


@pytest.mark.parametrize("name", list(FACTORIES))
def test_greedy_generation_with_our_cache_gives_hugging_faces_uncached_tokens(name):
    hf_model = FACTORIES[name]()
    ours = from_hf(hf_model)
    ids = torch.randint(1, V, (2, 6), generator=torch.Generator().manual_seed(2))
    uncached = hf_model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=14,
                                 use_cache=False)
    _, trace = ours.run_with_trace(uncached, names="*hook_index_scores")
    assert no_tie_at_the_kth_place(trace, ours.cfg.index_top_k)
    assert torch.equal(ours.generate(ids, 14, use_cache=True), uncached)
    cache = KVCache()
    with torch.no_grad():
        reference = hf_model(uncached).logits[:, 5:-1]
        steps = [ours(ids, cache=cache)[:, -1]]
        for t in range(6, uncached.shape[1] - 1):
            steps.append(ours(uncached[:, t:t + 1], position_ids=torch.tensor([[t]]), cache=cache)[:, -1])
    assert (torch.stack(steps, 1) - reference).abs().max() <= LOGITS_TOL
    kept = [torch.cat(keys, -1) for layer, keys in cache.layers.items() if isinstance(layer, LightningIndexer)]
    assert [tuple(k.shape) for k in kept] == [(2, 1, 19, ours.cfg.index_head_dim)] * ours.cfg.n_layers  # its keys

def test_a_directory_written_by_save_pretrained_opens_with_the_same_plan_and_numbers(tmp_path):
    hf_model = glm5_small()
    hf_model.save_pretrained(tmp_path)
    assert describe_hf(str(tmp_path)).config == from_hf(hf_model).cfg
    ids = torch.randint(1, V, (1, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert (hf_model(ids).logits - from_hf(str(tmp_path))(ids)).abs().max() <= LOGITS_TOL


def test_describe_hf_names_the_indexed_layers():
    v32, glm = describe_hf(deepseek_v32_yarn()), describe_hf(glm5_small())
    assert (v32.family, glm.family) == ("DeepSeek-V3.2", "GLM-5")
    assert v32.axes["mask"] == "causal, indexer top-k (4 keys per query; 16 indexer heads of 16) on every layer"
    assert glm.axes["mask"] == "causal, indexer top-k (5 keys per query; 16 indexer heads of 12) on every layer"
    assert glm.axes["norm"] == "pre-RMSNorm, eps = 1e-05, MLA latent norms eps = 1e-06"


def test_glm_5s_shared_indexer_layers_are_refused_by_name():
    config = glm5_small().config
    config.indexer_types = ["full", "shared"]
    hf = tf.GlmMoeDsaForCausalLM(config)
    with pytest.raises(ValueError, match=r"indexer_types 'shared' on layers \[1\] is not supported"):
        from_hf(hf)
