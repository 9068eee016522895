"""The families of 2025 whose layers differ in positions and windows: SmolLM3 (layers without RoPE) and OLMo 3
(sliding layers in a pattern, a RoPE per layer type).

Their factories are in hf_factories.FACTORIES, so tests/test_interop_modern.py checks them as it checks every
family (logits within 1e-4 and every layer's attention weights within 1e-5 of HF's eager attention on a
right-padded batch, greedy generation against HF's cached generation step by step, bfloat16). Here: the layer
plan each config maps onto, our cached generation against HF's greedy without a cache, loading from a directory,
and the plan in describe_hf's words.
"""
import pytest
import torch

from hf_factories import FACTORIES, smollm3_every_4
from transformer.interop import describe_hf, from_hf

LOGITS_TOL, PATTERN_TOL = 1e-4, 1e-5
V = 100
NAMES = ["smollm3_every_4", "smollm3_list_sliding_yarn", "olmo3_pattern", "olmo3_yarn_full_layers"]

# what each config becomes: HF's per-layer lists copied onto nope_layers and layer_pattern, RoPE per layer type
PLANS = {
    "smollm3_every_4": dict(nope_layers="every 4", layer_pattern="uniform", sliding_window=None, rope_theta=5e6,
                            rope_local_theta=None, rope_scaling="none"),
    "smollm3_list_sliding_yarn": dict(nope_layers="1, 4", layer_pattern="global,local,global,global,local,global",
                                      sliding_window=4, rope_theta=1e4, rope_local_theta=None, rope_scaling="yarn"),
    "olmo3_pattern": dict(nope_layers="none", layer_pattern="3:1", sliding_window=4, rope_theta=5e5,
                          rope_local_theta=None, rope_scaling="none"),
    "olmo3_yarn_full_layers": dict(nope_layers="none", layer_pattern="local,global,local,local,global",
                                   sliding_window=5, rope_theta=5e5, rope_local_theta=1e4, rope_scaling="yarn"),
}


@pytest.mark.parametrize("name", NAMES)
def test_the_config_maps_onto_the_layer_plan_and_reads_back_as_hugging_faces_lists(name):
    hf = FACTORIES[name]()
    cfg = from_hf(hf).cfg
    assert {field: getattr(cfg, field) for field in PLANS[name]} == PLANS[name]
    plan = cfg.layer_plan()
    assert [spec.hf_layer_type for spec in plan] == hf.config.layer_types
    uses_rope = getattr(hf.config, "no_rope_layers", [1] * cfg.n_layers)[:cfg.n_layers]
    assert [int(spec.rotates) for spec in plan] == uses_rope


@pytest.mark.parametrize("name", NAMES)
def test_greedy_generation_with_our_cache_gives_hugging_faces_uncached_tokens(name):
    hf_model = FACTORIES[name]()
    ours = from_hf(hf_model)
    ids = torch.randint(1, V, (2, 6), generator=torch.Generator().manual_seed(2))
    # 14 new tokens: 20 in all, past every window (4-5 keys) and every RoPE layer's share of the context
    uncached = hf_model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=14,
                                 use_cache=False)
    assert torch.equal(ours.generate(ids, 14, use_cache=True), uncached)


@pytest.mark.parametrize("name", ["smollm3_list_sliding_yarn", "olmo3_yarn_full_layers"])
def test_a_directory_written_by_save_pretrained_opens_with_the_same_plan_and_numbers(name, tmp_path):
    hf_model = FACTORIES[name]()
    hf_model.save_pretrained(tmp_path)
    assert describe_hf(str(tmp_path)).config == from_hf(hf_model).cfg  # the config alone gives the plan
    ours = from_hf(str(tmp_path))
    ids = torch.randint(1, V, (1, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        logits, trace = ours.run_with_trace(ids, names="*hook_pattern")
        out = hf_model(ids, output_attentions=True)
    assert (out.logits - logits).abs().max() <= LOGITS_TOL
    for layer, pattern in enumerate(out.attentions):
        assert (pattern - trace[f"blocks.{layer}.attn.hook_pattern"]).abs().max() <= PATTERN_TOL, layer


def test_describe_hf_names_each_layers_kind_and_positions():
    axes = {name: describe_hf(FACTORIES[name]()).axes for name in NAMES}
    assert axes["smollm3_every_4"]["position"] == "RoPE, theta = 5e+06; layers 3, 7: no positions (NoPE)"
    assert axes["smollm3_every_4"]["layers"] == ("layers 0-2, 4-6: full_attention, RoPE theta 5e+06; "
                                                 "layers 3, 7: full_attention, no positions (NoPE)")
    assert axes["smollm3_list_sliding_yarn"]["layers"] == (
        "layers 0, 2, 3, 5: full_attention, RoPE theta 10000, YaRN x4; "
        "layers 1, 4: sliding_attention of 4 keys, no positions (NoPE)")
    assert axes["olmo3_pattern"]["mask"] == "causal, 3 local layers (sliding window of 4 keys) and 1 global (3:1)"
    assert axes["olmo3_pattern"]["norm"].startswith("RMSNorm, after the sublayer")
    assert axes["olmo3_yarn_full_layers"]["position"] == "RoPE, theta = 500000 (local layers 10000), YaRN scaling x4"
    assert axes["olmo3_yarn_full_layers"]["layers"] == (
        "layers 0, 2, 3: sliding_attention of 5 keys, RoPE theta 10000; "
        "layers 1, 4: full_attention, RoPE theta 500000, YaRN x4")
    assert "layers" not in describe_hf(FACTORIES["llama_yarn_rope"]()).axes  # every layer alike: no plan to print


def test_smollm3_without_a_layer_that_turns_has_no_positions():
    hf = smollm3_every_4()
    hf.config.no_rope_layers = [0] * hf.config.num_hidden_layers  # HF still builds RoPE's tables; no layer reads them
    ours = from_hf(hf)
    assert not ours.cfg.row("position").rotates_qk
    ids = torch.randint(1, V, (1, 10), generator=torch.Generator().manual_seed(4))
    for layer in hf.model.layers:
        layer.self_attn.use_rope = 0
    with torch.no_grad():
        assert (hf(ids).logits - ours(ids)).abs().max() <= LOGITS_TOL


def test_olmo3_with_a_scaled_rope_on_its_sliding_layers_is_refused_by_name():
    hf = FACTORIES["olmo3_pattern"]()
    hf.config.rope_parameters["sliding_attention"] = {"rope_type": "linear", "factor": 2.0, "rope_theta": 5e5}
    with pytest.raises(ValueError, match="a scaled RoPE on the sliding layers .*is not supported"):
        from_hf(hf)
