"""Llama 4's text model opens and computes what Hugging Face computes: chunked attention on the layers RoPE turns,
full layers without positions between them whose queries warm with the position, the L2 norm on q and k, and RoPE
on interleaved pairs (q's and k's rows reordered on loading).

Each factory (hf_factories.LLAMA4_FACTORIES) is a small random-init model with every 1-D parameter (norm weights,
biases) moved off its initial value. In float32, on a right-padded batch: logits within 1e-4 and every layer's
attention weights within 1e-5 of HF's eager attention; greedy generation with our cache gives HF's tokens without
a cache, past several chunks, and every step's logits within 1e-4 of HF's forward over the whole text. The MoE
variants (every layer routed as Scout, every second as Maverick) open too: the router's sigmoid weight scales the
token before its expert, and the fused experts are split and transposed.
"""
import pytest
import torch

from hf_factories import LLAMA4_FACTORIES, right_padded_batch, run_both, V
from transformer.interop import describe_hf, from_hf
from transformer.model import KVCache

LOGITS_TOL, PATTERN_TOL = 1e-4, 1e-5
OPENED = ["llama4_dense", "llama4_listed_llama3_rope", "llama4_moe", "llama4_interleaved_moe"]

# what each config becomes: HF's layer_types and no_rope_layers copied onto chunked_layers and nope_layers
PLANS = {
    "llama4_dense": dict(attention_chunk=4, chunked_layers="rope", nope_layers="every 4", qk_norm="l2",
                         attn_temperature_scale=0.5, attn_temperature_floor=2.0, n_kv_heads=2, d_head=16, d_ff=96,
                         rope_theta=500000.0, rope_scaling="none", bias=False, tie_embeddings=False),
    "llama4_listed_llama3_rope": dict(attention_chunk=5, chunked_layers="0, 2, 4", nope_layers="every 3",
                                      qk_norm="none", attn_temperature_scale=0.3, attn_temperature_floor=3.0,
                                      n_kv_heads=1, d_head=16, d_ff=96, rope_theta=10000.0, rope_scaling="llama3",
                                      bias=True, tie_embeddings=True),
    "llama4_moe": dict(ffn="moe", n_experts=4, top_k=1, d_expert=48, d_ff=96, n_shared_experts=1, router="sigmoid",
                       router_norm=False, router_scales_input=True, moe_layers="all", nope_layers="every 4",
                       chunked_layers="rope", bias=False),
    "llama4_interleaved_moe": dict(ffn="moe", n_experts=4, top_k=2, d_expert=48, d_ff=96, n_shared_experts=1,
                                   router="sigmoid", router_norm=False, router_scales_input=True,
                                   moe_layers="every 2", first_dense_layers=0, bias=True),
}


@pytest.mark.parametrize("name", OPENED)
def test_the_config_maps_onto_the_layer_plan_and_reads_back_as_hugging_faces_lists(name):
    hf = LLAMA4_FACTORIES[name]()
    cfg = from_hf(hf).cfg
    assert {field: getattr(cfg, field) for field in PLANS[name]} == PLANS[name]
    plan = cfg.layer_plan()
    assert [spec.hf_layer_type for spec in plan] == hf.config.layer_types
    assert [int(spec.rotates) for spec in plan] == hf.config.no_rope_layers


@pytest.mark.parametrize("name", OPENED)
def test_logits_and_every_layers_attention_weights_match(name):
    hf_model = LLAMA4_FACTORIES[name]()
    ours = from_hf(hf_model)
    ids, mask = right_padded_batch()
    out, logits, trace, fused = run_both(hf_model, ours, ids, mask)
    real = mask.bool()  # padded positions' logits are not compared: HF and we fill their rows differently
    assert (out.logits - logits)[real].abs().max() <= LOGITS_TOL
    assert (out.logits - fused)[real].abs().max() <= LOGITS_TOL
    assert len(out.attentions) == ours.cfg.n_layers
    for layer, hf_pattern in enumerate(out.attentions):
        difference = (hf_pattern - trace[f"blocks.{layer}.attn.hook_pattern"]).transpose(1, 2)[real].abs().max()
        assert difference <= PATTERN_TOL, (layer, difference.item())
    assert out.logits[real].std() > 1000 * LOGITS_TOL  # the comparison has teeth


def test_the_chunks_the_temperature_and_the_reordered_rows_each_change_the_numbers():
    """Each mapped setting matters at this length: left out, the logits leave the tolerance."""
    hf_model = LLAMA4_FACTORIES["llama4_dense"]()
    ours = from_hf(hf_model)
    ids, _ = right_padded_batch()
    with torch.no_grad():
        reference = hf_model(ids).logits
        for changes in (dict(attention_chunk=None, chunked_layers="all"), dict(attn_temperature_scale=None,
                                                                                attn_temperature_floor=8192.0)):
            other = type(ours)(ours.cfg.replace(**changes), device="cpu").eval()
            other.load_state_dict(ours.state_dict())
            assert (other(ids) - reference).abs().max() > 100 * LOGITS_TOL, changes
        hf_model.model.layers[0].self_attn.q_proj.weight.copy_(ours.blocks[0].attn.q_proj.weight)
        hf_model.model.layers[0].self_attn.k_proj.weight.copy_(ours.blocks[0].attn.k_proj.weight)
        assert (hf_model(ids).logits - reference).abs().max() > 100 * LOGITS_TOL  # HF's rows in HF's order differ


@pytest.mark.parametrize("name", OPENED)
def test_greedy_generation_with_our_cache_gives_hugging_faces_uncached_tokens(name):
    hf_model = LLAMA4_FACTORIES[name]()
    ours = from_hf(hf_model)
    ids = torch.randint(1, V, (2, 6), generator=torch.Generator().manual_seed(2))
    # 14 new tokens: 20 in all, four or five chunks, and the temperature stepping up every 2 or 3 positions
    uncached = hf_model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=14,
                                 use_cache=False)
    assert torch.equal(ours.generate(ids, 14, use_cache=True), uncached)
    # every step's logits, ours one token at a time through the cache, against HF's forward over the whole text
    cache = KVCache()
    with torch.no_grad():
        reference = hf_model(uncached).logits[:, 5:-1]
        steps = [ours(ids, cache=cache)[:, -1]]
        for t in range(6, uncached.shape[1] - 1):
            steps.append(ours(uncached[:, t:t + 1], position_ids=torch.tensor([[t]]), cache=cache)[:, -1])
    assert (torch.stack(steps, 1) - reference).abs().max() <= LOGITS_TOL


def test_a_directory_written_by_save_pretrained_opens_with_the_same_plan_and_numbers(tmp_path):
    hf_model = LLAMA4_FACTORIES["llama4_listed_llama3_rope"]()
    hf_model.save_pretrained(tmp_path)
    assert describe_hf(str(tmp_path)).config == from_hf(hf_model).cfg  # the config alone gives the plan
    ids = torch.randint(1, V, (1, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert (hf_model(ids).logits - from_hf(str(tmp_path))(ids)).abs().max() <= LOGITS_TOL


def test_describe_hf_names_the_chunked_and_the_nope_layers():
    axes = {name: describe_hf(LLAMA4_FACTORIES[name]()).axes for name in OPENED}
    dense, listed = axes["llama4_dense"], axes["llama4_listed_llama3_rope"]
    assert dense["mask"] == "causal, chunked (4 tokens) on layers 0-2, 4-6"
    assert dense["position"] == "RoPE, theta = 500000; layers 3, 7: no positions (NoPE)"
    assert dense["layers"] == ("layers 0-2, 4-6: chunked_attention in chunks of 4 tokens, RoPE theta 500000; "
                               "layers 3, 7: full_attention, no positions (NoPE)")
    assert dense["norm"] == "pre-RMSNorm, eps = 1e-05, QK-norm L2, RoPE layers"
    assert dense["scores"] == "temperature by position (s = 0.5, f = 2)"
    assert listed["layers"] == (
        "layers 0, 4: chunked_attention in chunks of 5 tokens, RoPE theta 10000, LLaMA 3 x4; "
        "layers 1, 3: full_attention, RoPE theta 10000, LLaMA 3 x4; "
        "layer 2: chunked_attention in chunks of 5 tokens, no positions (NoPE); "
        "layer 5: full_attention, no positions (NoPE)")
    assert describe_hf(LLAMA4_FACTORIES["llama4_dense"]()).family == "Llama 4"


@pytest.mark.parametrize("name", ["llama4_moe", "llama4_interleaved_moe"])
def test_the_routed_layers_are_hugging_faces_and_weighing_the_input_is_what_matches(name):
    """HF's moe_layers are ours; with the weight on the expert's output instead of its input the logits leave the
    tolerance, and so they do with one expert's gate and up halves swapped."""
    hf_model = LLAMA4_FACTORIES[name]()
    ours = from_hf(hf_model)
    assert [i for i in range(ours.cfg.n_layers) if ours.cfg.layer_is_moe(i)] == hf_model.config.moe_layers
    for layer, block in enumerate(ours.blocks):  # a routed layer holds experts, a dense one the wider SwiGLU
        assert hasattr(block.mlp, "experts") == (layer in hf_model.config.moe_layers)
    ids, _ = right_padded_batch()
    with torch.no_grad():
        reference = hf_model(ids).logits
        assert (ours(ids) - reference).abs().max() <= LOGITS_TOL
        after = type(ours)(ours.cfg.replace(router_scales_input=False), device="cpu").eval()
        after.load_state_dict(ours.state_dict())
        assert (after(ids) - reference).abs().max() > 100 * LOGITS_TOL
        routed = next(block.mlp for block in ours.blocks if hasattr(block.mlp, "experts"))
        expert = routed.experts[0]
        gate = expert.gate.weight.clone()  # (F_e, D)
        expert.gate.weight.copy_(expert.up.weight)  # gate_up_proj's halves taken the wrong way round
        expert.up.weight.copy_(gate)
        assert (ours(ids) - reference).abs().max() > 100 * LOGITS_TOL


def test_describe_hf_names_the_routed_layers_and_where_the_weight_goes():
    ffn = describe_hf(LLAMA4_FACTORIES["llama4_interleaved_moe"]()).axes["FFN"]
    assert ffn == ("MoE: 4 SwiGLU experts, top-2, sigmoid router, 1 shared, routed on layers 1, 3 (the others "
                   "dense), the weight scaling each expert's input")
    assert describe_hf(LLAMA4_FACTORIES["llama4_moe"]()).axes["FFN"] == (
        "MoE: 4 SwiGLU experts, top-1, sigmoid router, 1 shared, the weight scaling each expert's input")


def test_a_model_without_a_layer_that_turns_has_no_positions_and_refuses_a_temperature_it_cannot_place():
    hf_model = LLAMA4_FACTORIES["llama4_dense"]()
    hf_model.config.no_rope_layers = [0] * hf_model.config.num_hidden_layers  # HF still builds RoPE's tables
    with pytest.raises(ValueError, match="attn_temperature_tuning and no layer that turns by RoPE is not supported"):
        from_hf(hf_model)
    hf_model.config.attn_temperature_tuning = False
    ours = from_hf(hf_model)
    assert not ours.cfg.row("position").rotates_qk and ours.cfg.qk_norm == "none"
    assert ours.cfg.chunked_layers == "0, 1, 2, 4, 5, 6"  # the chunked layers, listed: none of them turns
    for layer in hf_model.model.layers:  # what HF's layers read from the config when they are built
        attention = layer.self_attn
        attention.use_rope, attention.attn_temperature_tuning = 0, False
        if hasattr(attention, "qk_norm"):
            del attention.qk_norm
    ids, _ = right_padded_batch()
    with torch.no_grad():
        assert (hf_model(ids).logits - ours(ids)).abs().max() <= LOGITS_TOL
