"""The Hugging Face families people run in 2024-2026 open, and compute what Hugging Face computes.

Each factory in hf_factories.py is a small random-init model with every norm weight, bias, sink and
routing bias moved off its initial value. In float32, on a right-padded batch: logits within 1e-4 and
every layer's attention weights within 1e-5 of HF's eager attention (sinks included: rows that sum to
less than 1); greedy generation with our KV cache gives HF's tokens; bfloat16 loads too.
"""
import pytest
import torch

from hf_factories import FACTORIES, right_padded_batch, run_both, V
from transformer.interop import describe_hf, from_hf
from transformer.model import KVCache

LOGITS_TOL, PATTERN_TOL = 1e-4, 1e-5
# DeepSeek-V2's group-limited routing scores a group by its best expert; ours (V3's) by its best two
REFUSED = {"deepseek_v2_group_limited": "topk_method='group_limited_greedy'"}
OPENED = [name for name in FACTORIES if name not in REFUSED]


@pytest.mark.parametrize("name", OPENED)
def test_logits_and_every_layers_attention_weights_match(name):
    hf_model = FACTORIES[name]()
    ours = from_hf(hf_model)
    ids, mask = right_padded_batch()
    out, logits, trace, fused = run_both(hf_model, ours, ids, mask)
    real = mask.bool()  # padded positions' logits are not compared: HF and we fill their rows differently
    assert (out.logits - logits)[real].abs().max() <= LOGITS_TOL
    assert (out.logits - fused)[real].abs().max() <= LOGITS_TOL
    for layer, hf_pattern in enumerate(out.attentions):
        ours_pattern = trace[f"blocks.{layer}.attn.hook_pattern"]
        assert ours_pattern.shape == hf_pattern.shape
        difference = (hf_pattern - ours_pattern).transpose(1, 2)[real].abs().max()  # real query rows
        assert difference <= PATTERN_TOL, (layer, difference.item())
    assert out.logits[real].std() > 1000 * LOGITS_TOL  # the comparison has teeth


@pytest.mark.parametrize("name", OPENED)
def test_greedy_generation_with_the_cache_gives_hugging_faces_tokens_and_logits(name):
    hf_model = FACTORIES[name]()
    ours = from_hf(hf_model)
    ids = torch.randint(1, V, (2, 6), generator=torch.Generator().manual_seed(1))
    out = hf_model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=12,
                            output_logits=True, return_dict_in_generate=True)
    assert torch.equal(ours.generate(ids, 12, use_cache=True), out.sequences)
    # every step's logits, ours one token at a time through the KV cache, past every sliding window
    cache = KVCache()
    with torch.no_grad():
        steps = [ours(ids, cache=cache)[:, -1]]
        for t in range(6, out.sequences.shape[1] - 1):
            steps.append(ours(out.sequences[:, t:t + 1], position_ids=torch.tensor([[t]]), cache=cache)[:, -1])
    assert (torch.stack(steps, 1) - torch.stack(out.logits, 1)).abs().max() <= LOGITS_TOL


@pytest.mark.parametrize("name", OPENED)
def test_bfloat16_loads_and_rounds_about_as_much_as_hugging_face(name):
    hf_model = FACTORIES[name]()
    ids, mask = right_padded_batch()
    real = mask.bool()
    with torch.no_grad():
        reference = hf_model(ids, attention_mask=mask).logits
        hf_bf16 = hf_model.to(torch.bfloat16)
        ours = from_hf(hf_bf16)
        assert ours.cfg.dtype == "bfloat16"
        hf_error = (hf_bf16(ids, attention_mask=mask).logits.float() - reference)[real].abs().max()
        our_error = (ours(ids, attention_mask=mask).float() - reference)[real].abs().max()
    assert our_error <= 3 * hf_error + 0.05, (our_error.item(), hf_error.item())


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_setting_still_not_built_is_refused_by_name(name):
    with pytest.raises(ValueError, match=REFUSED[name] + ".*is not supported"):
        from_hf(FACTORIES[name]())


def test_describe_hf_names_the_new_choices_in_words():
    axes = {name: describe_hf(FACTORIES[name]()).axes for name in
            ("gemma3_pattern", "deepseek_v3_q_lora", "gpt_oss_small", "olmo2_small", "llama31_llama3_rope",
             "gpt_neox_partial", "gemma2_small")}
    assert axes["gemma3_pattern"]["mask"] == "causal, 5 local layers (sliding window of 4 keys) and 1 global (5:1)"
    assert axes["gemma3_pattern"]["position"] == "RoPE, theta = 1e+06 (local layers 10000)"
    assert "QK-norm per head" in axes["gemma3_pattern"]["norm"] and "sandwich" in axes["gemma3_pattern"]["norm"]
    assert axes["deepseek_v3_q_lora"]["KV heads"].startswith("MLA (latent): 4 heads rebuilt from a latent of 16")
    assert "sigmoid router, 1 shared" in axes["deepseek_v3_q_lora"]["FFN"]
    assert axes["gpt_oss_small"]["scores"] == "with a sink" and "YaRN" in axes["gpt_oss_small"]["position"]
    assert axes["olmo2_small"]["norm"].startswith("RMSNorm, after the sublayer") and "over the projection" in axes["olmo2_small"]["norm"]
    assert "LLaMA 3 scaling x8" in axes["llama31_llama3_rope"]["position"]
    assert "4 of 16 dimensions turn" in axes["gpt_neox_partial"]["position"]
    assert axes["gemma2_small"]["scores"] == "soft-capped at 5" and "soft-capped at 3" in axes["gemma2_small"]["head"]


def test_gpt_oss_from_a_transformers_release_whose_config_has_no_clamp_limit_reads_its_fixed_7(monkeypatch):
    """transformers 5.17's GptOssConfig has no swiglu_limit: its experts clamp at 7.0 in code (seen on a GPU machine)."""
    hf = FACTORIES["gpt_oss_small"]()
    assert hf.config.swiglu_limit == 7.0
    vars(hf.config).pop("swiglu_limit", None)
    for cls in type(hf.config).__mro__:  # the field's default lives on the class
        monkeypatch.delattr(cls, "swiglu_limit", raising=False)
    assert not hasattr(hf.config, "swiglu_limit")
    assert from_hf(hf).cfg.expert_limit == 7.0
