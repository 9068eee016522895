"""Impossible configurations and inputs raise ValueError naming the numbers and the fix."""
import json
import re

import pytest
import torch

from transformer import TransformerConfig, choices


def config_error(tiny_config, **fields) -> str:
    with pytest.raises(ValueError) as error:
        tiny_config(**fields)
    return str(error.value)


def test_d_model_not_divisible_by_n_heads(tiny_config):
    message = config_error(tiny_config, d_model=60, n_heads=8)
    assert "d_model=60" in message and "n_heads=8" in message
    assert "[1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60]" in message  # the head counts that would work


def test_n_heads_not_divisible_by_n_kv_heads(tiny_config):
    message = config_error(tiny_config, n_heads=4, n_kv_heads=3)
    assert "n_heads=4" in message and "n_kv_heads=3" in message and "[1, 2, 4]" in message


def test_more_kv_heads_than_query_heads(tiny_config):
    message = config_error(tiny_config, n_heads=4, n_kv_heads=8)
    assert "n_kv_heads=8" in message and "n_heads=4" in message


def test_zero_kv_heads(tiny_config):
    assert "n_kv_heads=0" in config_error(tiny_config, n_kv_heads=0)


def test_odd_head_dimension_with_rope(tiny_config):
    message = config_error(tiny_config, d_model=12, n_heads=4, position="rope")
    assert "12/4 = 3" in message and "odd" in message
    tiny_config(d_model=12, n_heads=4, position="alibi")  # fine without RoPE


def test_top_k_above_n_experts(tiny_config):
    message = config_error(tiny_config, ffn="moe", n_experts=4, top_k=5)
    assert "top_k=5" in message and "n_experts=4" in message


@pytest.mark.parametrize("window", [0, -2])
def test_sliding_window_below_one(window, tiny_config):
    assert f"sliding_window={window}" in config_error(tiny_config, sliding_window=window)


@pytest.mark.parametrize("field,value", [("position", "rotary"), ("arch", "gpt"), ("norm", "batchnorm"),
                                         ("norm_position", "middle"), ("ffn", "tanh"), ("dtype", "float16")])
def test_unknown_choice_lists_the_valid_ones(field, value, tiny_config):
    message = config_error(tiny_config, **{field: value})
    assert f"{field}='{value}'" in message
    for valid in choices(field):
        assert repr(valid) in message


def test_unknown_field_from_a_dict(tiny_config):
    with pytest.raises(ValueError, match=re.escape("['n_head']")):
        TransformerConfig.from_dict({**tiny_config().to_dict(), "n_head": 4})


def test_a_config_reads_back_from_its_json(tiny_config):
    cfg = tiny_config(position="alibi", n_kv_heads=2)
    assert TransformerConfig.from_json(cfg.to_json()) == cfg
    # the app's cache key: the same config always gives the same text, another config another text
    assert tiny_config(n_kv_heads=2, position="alibi").to_json() == cfg.to_json()
    assert cfg.replace(n_kv_heads=1).to_json() != cfg.to_json()
    assert list(json.loads(cfg.to_json())) == sorted(cfg.to_dict())
    with pytest.raises(ValueError, match=re.escape("['n_head']")):
        TransformerConfig.from_json(json.dumps({**cfg.to_dict(), "n_head": 4}))


@pytest.mark.parametrize("position", ["learned", "sinusoidal"])
@pytest.mark.parametrize("arch", ["decoder", "encoder", "encoder-decoder"])
def test_sequence_longer_than_max_len_for_absolute_positions(position, arch, tiny_model):
    model = tiny_model(max_len=8, position=position, arch=arch)
    too_long, fits = torch.zeros(1, 9, dtype=torch.long), torch.zeros(1, 8, dtype=torch.long)
    args = (too_long, fits) if arch == "encoder-decoder" else (too_long,)
    with pytest.raises(ValueError) as error:
        model(*args)
    assert "max_len=8" in str(error.value) and "position 8" in str(error.value)
    model(*((fits, fits) if arch == "encoder-decoder" else (fits,)))  # 8 tokens are fine


def test_generation_past_max_len_is_refused(tiny_model):
    model = tiny_model(max_len=8, position="learned")
    with pytest.raises(ValueError, match="max_len=8"):
        model.generate(torch.zeros(1, 6, dtype=torch.long), max_new_tokens=4)


@pytest.mark.parametrize("bad_id", [32, 100, -1])
@pytest.mark.parametrize("arch", ["decoder", "encoder", "encoder-decoder"])
def test_ids_outside_the_vocabulary(bad_id, arch, tiny_model):
    model = tiny_model(arch=arch)
    ids = torch.tensor([[1, 2, bad_id]])
    good = torch.tensor([[1, 2, 3]])
    calls = [(ids, good), (good, ids)] if arch == "encoder-decoder" else [(ids,)]
    for args in calls:
        with pytest.raises(ValueError) as error:
            model(*args)
        assert "vocab_size=32" in str(error.value) and str(bad_id) in str(error.value)


def test_group_size_is_query_heads_per_kv_head():
    assert TransformerConfig(n_heads=8).group_size == 1  # MHA
    assert TransformerConfig(n_heads=8, n_kv_heads=2).group_size == 4  # GQA
    assert TransformerConfig(n_heads=8, n_kv_heads=1).group_size == 8  # MQA


@pytest.mark.parametrize("ffn, wide", [("gelu", 512), ("relu", 512), ("swiglu", 344), ("moe", 344)])
def test_a_derived_ffn_width_follows_a_new_d_model_and_a_chosen_one_stays(ffn, wide):
    extra = dict(n_experts=4, top_k=2) if ffn == "moe" else {}
    derived = TransformerConfig(d_model=64, n_heads=4, ffn=ffn, **extra)
    assert derived.replace(d_model=128).d_ff == wide  # 4x, or 8/3 rounded up to a multiple of 8
    assert derived.replace(d_model=128, d_ff=100).d_ff == 100
    chosen = TransformerConfig(d_model=64, n_heads=4, ffn=ffn, d_ff=96, **extra)
    assert chosen.replace(d_model=128).d_ff == 96
    assert derived.replace(n_layers=3).d_ff == derived.d_ff


def test_changing_the_ffn_kind_rederives_a_derived_width():
    assert TransformerConfig(d_model=96, n_heads=4, ffn="gelu").replace(ffn="swiglu").d_ff == 256
    assert TransformerConfig(d_model=96, n_heads=4, ffn="swiglu").replace(ffn="relu").d_ff == 384
