"""Layers without positions measured (Positions page, NoPE tab): distance profiles and summaries by hand, and the
view of a model whose last layer has no RoPE, beside random-init weights."""
import numpy as np
import pytest
import torch

from transformer import Transformer, TransformerConfig
from ui.compute.nope_measure import distance_profile, layer_kind, layer_summary, nope_view
from ui.figures.modern import distance_profiles


def uniform_causal(T: int, H: int = 2) -> np.ndarray:
    allowed = np.tril(np.ones((T, T)))
    return np.repeat((allowed / allowed.sum(-1, keepdims=True))[None], H, axis=0)  # (H, T, T)


def test_the_profile_is_the_mean_weight_at_each_distance():
    T = 6
    profile = distance_profile(uniform_causal(T))
    by_hand = [np.mean([1 / (q + 1) for q in range(d, T)]) for d in range(T)]
    np.testing.assert_allclose(profile, by_hand)


def test_a_previous_token_pattern_puts_everything_one_back():
    T = 5
    pattern = np.zeros((1, T, T))
    pattern[0, 0, 0] = 1
    pattern[0, np.arange(1, T), np.arange(T - 1)] = 1
    summary = layer_summary(pattern)
    assert summary["token before"] == 1 and summary["mean distance back"] == 1
    assert summary["first token"] == pytest.approx(1 / (T - 1))  # only query 1's token before is the first
    np.testing.assert_allclose(distance_profile(pattern)[:3], [1 / T, 1, 0])


def test_the_view_names_each_layer_and_measures_random_weights_beside():
    cfg = TransformerConfig(vocab_size=32, d_model=32, n_heads=2, n_layers=4, max_len=64, nope_layers="every 4",
                            attention_chunk=8, chunked_layers="rope", n_kv_heads=1)
    torch.manual_seed(3)
    model = Transformer(cfg).eval()
    ids = torch.randint(0, 32, (1, 20), generator=torch.Generator().manual_seed(1))
    view = nope_view(model, ids)
    assert view["nope"] == [3] and view["rope"] == [0, 1, 2]
    assert [l["kind"] for l in view["layers"]] == ["RoPE, chunk of 8"] * 3 + ["NoPE"]
    assert layer_kind(model, 3) == "NoPE"
    chunked = view["layers"][0]["profile"]
    assert chunked[8:].max() == 0 and view["layers"][3]["profile"][8:].min() > 0  # its mask, not learning
    # a model's own weights seeded alike are its random-init control: the summaries agree exactly
    torch.manual_seed(0)
    same = Transformer(cfg).eval()
    assert nope_view(same, ids)["layers"][3]["summary"] == nope_view(same, ids)["layers"][3]["random summary"]
    figure = distance_profiles({l["kind"] + str(l["layer"]): l["profile"] for l in view["layers"]}, limit=10)
    assert len(figure.data) == 4 and len(figure.data[0].x) == 11
