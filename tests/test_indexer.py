"""DeepSeek-V3.2's lightning indexer (index_top_k): a validated field of the config and an entry of the layer plan,
mixing with the other axes (or refused by name), recorded through hooks (its scores, the chosen keys, the dense
weights beside the sparse ones and the mass the chosen keys hold), fused = explicit, cached generation =
recomputation with the indexer's own keys in the cache, and counted by transformer.costs."""
import pytest
import torch
import torch.nn.functional as F

from transformer import Transformer, TransformerConfig, choices, masks
from transformer.axes.attention import WITHOUT_INDEXER
from transformer.costs import kv_cache_bytes, kv_cache_bytes_per_token, param_counts
from transformer.indexer import matching_loss
from transformer.model import KVCache
from transformer.training.tasks import TASKS
from transformer.training.train import train

from test_chunked_and_shared import build as build_tiny, cached_logits, logits, padded

INDEXED = dict(index_top_k=3, index_heads=2, index_head_dim=8)
LATENT = dict(kv_rank=8, q_rank=8, rope_dim=2, head_dim=6)  # DeepSeek's shape: queries from a q latent
VARIANTS = {"GQA": dict(INDEXED, n_kv_heads=2), "MLA": dict(INDEXED, **LATENT),
            "MLA, one indexer head": dict(INDEXED, **LATENT, index_heads=1),  # many exact ties at 0
            "window": dict(INDEXED, layer_pattern="alternate", sliding_window=5)}
OTHER_AXES = {"arch": choices("arch"), "position": choices("position"), "norm_position": choices("norm_position"),
              "ffn": choices("ffn"), "n_kv_heads": (4, 2, 1), "qk_norm": choices("qk_norm"),
              "attention_pattern": choices("attention_pattern"),
              "extra": ("sinks", "softcap", "MLA", "gate", "hybrid", "shared K/V")}
EXTRAS = {"sinks": dict(sinks=True), "softcap": dict(attn_softcap=1.5), "gate": dict(attn_gate=True),
          "MLA": LATENT, "hybrid": dict(attention_layers="1:1"), "shared K/V": dict(kv_shared_layers="last 1")}
CASES = [(axis, value) for axis, values in OTHER_AXES.items() for value in values]


def build(changes: dict, seed: int = 0) -> Transformer:
    return build_tiny(changes, seed)


@pytest.mark.parametrize("axis,value", CASES, ids=[f"{a}={x}" for a, x in CASES])
def test_it_mixes_with_every_axis_and_fused_equals_explicit(axis, value):
    changes = {**INDEXED, **(EXTRAS[value] if axis == "extra" else {axis: value})}
    try:
        model = build(changes)
    except ValueError as error:  # a combination that makes no sense names a field and what to do
        message = str(error)
        assert "=" in message and any(w in message for w in ("set ", "use ", "choose", "give", "make")), message
        return
    ids, mask = padded(10, seed=1)
    model.train()
    out = logits(model, ids, mask)
    F.cross_entropy(out.flatten(0, 1), ids[:, :out.shape[1]].flatten()).backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    model.eval()
    with torch.no_grad():
        fused = logits(model, ids, mask)
        explicit = logits(model.set_fused(False), ids, mask)
        dense = logits(type(model)(model.cfg.replace(**WITHOUT_INDEXER),
                                   device="cpu").eval(), ids, mask)
    torch.testing.assert_close(explicit, fused, atol=1e-5, rtol=0)
    assert dense.shape == fused.shape


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("fused", [True, False])
def test_cached_generation_equals_recomputation(variant, fused):
    model = build(VARIANTS[variant]).set_fused(fused)
    ids = torch.randint(1, 32, (2, 13), generator=torch.Generator().manual_seed(3))
    mask = torch.ones(2, 13, dtype=torch.long)
    mask[1, :3] = 0  # left padding: the second row starts three tokens later
    with torch.no_grad():
        full = model(ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0))  # (B, T, vocab)
        step_by_step = cached_logits(model, ids, start=4, mask=mask)
        torch.testing.assert_close(step_by_step, full[:, 3:], atol=1e-5, rtol=0)
        assert torch.equal(model.generate(ids[:, :5], 10, use_cache=True), model.generate(ids[:, :5], 10, use_cache=False))
        assert torch.equal(model.generate(ids, 6, use_cache=True, attention_mask=mask),
                           model.generate(ids, 6, use_cache=False, attention_mask=mask))


def test_the_scores_are_relu_dot_products_weighted_per_head_and_each_query_keeps_its_top_k():
    model = build(VARIANTS["MLA"])
    ids = torch.randint(1, 32, (2, 12), generator=torch.Generator().manual_seed(4))
    _, trace = model.run_with_trace(ids)
    for layer in range(model.cfg.n_layers):
        at = f"blocks.{layer}.attn."
        q, k = trace[at + "indexer.hook_index_q"], trace[at + "indexer.hook_index_k"]  # (B, I, T, d), (B, 1, T, d)
        w = trace[at + "indexer.hook_index_weights"]  # (B, T, I)
        by_hand = sum(w[:, :, h, None] * torch.relu(q[:, h] @ k[:, 0].transpose(-2, -1) / 8 ** 0.5) for h in range(2))
        scores = trace[at + "indexer.hook_index_scores"]
        torch.testing.assert_close(scores, by_hand, atol=1e-6, rtol=0)
        chosen = trace[at + "indexer.hook_index_chosen"][:, 0]  # (B, T_q, T_kv) bool
        causal = torch.ones(12, 12).tril().bool()
        assert not (chosen & ~causal).any()  # never a later key
        assert chosen.sum(-1).tolist() == [[min(t + 1, 3) for t in range(12)]] * 2  # k keys, or all it may see
        for b in range(2):
            for t in range(3, 12):
                kept, dropped = scores[b, t][chosen[b, t]], scores[b, t, :t + 1][~chosen[b, t, :t + 1]]
                assert kept.min() >= dropped.max()  # the top scores
        pattern = trace[at + "hook_pattern"]
        assert (pattern.masked_fill(chosen[:, None], 0) == 0).all()  # attention reads the chosen keys only


def test_equal_scores_go_to_the_earlier_key_whatever_follows_in_the_row():
    scores = torch.tensor([[[0.0, 2.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]]])  # (1, 1, 8)
    whole = torch.ones(1, 1, 1, 8, dtype=torch.bool)
    assert masks.top_k(scores, whole, 4)[0, 0, 0].nonzero().flatten().tolist() == [0, 1, 2, 4]
    cut = whole.clone()
    cut[..., 6:] = False  # the same row with hidden keys after it picks the same keys
    assert torch.equal(masks.top_k(scores, cut, 4), masks.top_k(scores, whole, 4))
    assert masks.top_k(scores, cut, 7)[0, 0, 0].sum() == 6  # never a hidden key, even when k is more than it sees


def test_the_dense_weights_and_the_mass_kept_are_recorded_beside_the_sparse_ones():
    model = build(VARIANTS["GQA"])
    ids = torch.randint(1, 32, (1, 12), generator=torch.Generator().manual_seed(5))
    _, trace = model.run_with_trace(ids)
    dense_model = type(model)(model.cfg.replace(**WITHOUT_INDEXER), device="cpu")
    state = {name: t for name, t in model.state_dict().items() if ".indexer." not in name}
    dense_model.load_state_dict(state)
    _, dense_trace = dense_model.eval().run_with_trace(ids, names="*hook_pattern")
    dense = trace["blocks.0.attn.hook_dense_pattern"]
    # the first layer's input is the same with or without an indexer: its dense weights are the dense model's
    torch.testing.assert_close(dense, dense_trace["blocks.0.attn.hook_pattern"], atol=1e-6, rtol=0)
    chosen = trace["blocks.0.attn.indexer.hook_index_chosen"]
    kept = trace["blocks.0.attn.hook_kept_mass"]
    torch.testing.assert_close(kept, (dense * chosen).sum(-1), atol=0, rtol=0)
    assert torch.allclose(kept[..., :3], torch.ones(1, 4, 3))  # a query that sees at most k keys keeps them all
    assert kept[..., 3:].max() < 1 and kept.min() > 0
    # the sparse weights are the dense ones renormalised over the chosen keys
    sparse = trace["blocks.0.attn.hook_pattern"]
    torch.testing.assert_close(sparse, dense * chosen / kept[..., None], atol=1e-6, rtol=0)


def test_with_k_at_the_context_length_nothing_is_dropped():
    model = build(dict(INDEXED, index_top_k=32))
    dense = type(model)(model.cfg.replace(**WITHOUT_INDEXER), device="cpu").eval()
    dense.load_state_dict({n: t for n, t in model.state_dict().items() if ".indexer." not in n})
    ids = torch.randint(1, 32, (2, 12), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        torch.testing.assert_close(model(ids), dense(ids), atol=1e-6, rtol=0)


def test_the_plan_names_its_layers_as_hugging_face_and_the_fields_survive_json():
    cfg = TransformerConfig(**{**dict(vocab_size=32, d_model=16, n_heads=4, n_layers=4, max_len=32),
                               **VARIANTS["MLA"], "attention_layers": "1:1"})
    assert [spec.hf_layer_type for spec in cfg.layer_plan()] == ["linear_attention", "indexed_attention"] * 2
    assert [spec.index_top_k for spec in cfg.layer_plan()] == [None, 3] * 2
    assert TransformerConfig.from_json(cfg.to_json()) == cfg


@pytest.mark.parametrize("variant", ["GQA", "MLA"])
def test_costs_count_the_indexer_its_keys_and_match_the_built_model_and_its_cache(variant):
    model = build(VARIANTS[variant])
    cfg = model.cfg
    assert param_counts(cfg)["total"] == sum(p.numel() for p in model.parameters())
    indexer = sum(p.numel() for n, p in model.named_parameters() if ".indexer." in n)
    q_source = cfg.q_rank or cfg.d_model
    assert indexer == cfg.n_layers * (q_source * 2 * 8 + 16 * 8 + 2 * 8 + 16 * 2)  # W_q, W_k, LayerNorm, weights
    cache = KVCache()
    with torch.no_grad():
        model(torch.randint(1, 32, (1, 10)), cache=cache)
    held = kv_cache_bytes(cfg, 10, bytes_per_value=4)
    assert held["total"] == cache.nbytes
    assert held["index keys"] == cfg.n_layers * 10 * 8 * 4  # one key of d_I per token and layer
    assert kv_cache_bytes_per_token(cfg, 4) * 10 == cache.nbytes
    without = cfg.replace(**WITHOUT_INDEXER)
    assert kv_cache_bytes(cfg, 10, 4)["total"] - kv_cache_bytes(without, 10, 4)["total"] == held["index keys"]


@pytest.mark.parametrize("changes,words", [
    (dict(index_top_k=40), "index_top_k=40 must be from 1 to max_len=32"),
    (dict(index_top_k=0), "index_top_k=0 must be from 1"),
    (dict(index_heads=2), "index_heads=2 is a setting of the lightning indexer, which is off"),
    (dict(index_top_k=3, index_heads=0), "index_heads=0 must be at least 1"),
    (dict(index_top_k=3, index_head_dim=2), "index_head_dim=2 must be at least 1 and hold the d_rope=4"),
    (dict(index_top_k=3, arch="encoder"), "arch='encoder' is not a decoder"),
    (dict(index_top_k=3, attention_pattern="strided"), "attention_pattern='strided' chooses them"),
    (dict(index_top_k=3, attention_layers="linear", position="none"), "has none; give the model softmax layers"),
])
def test_bad_settings_name_the_numbers_and_the_fix(changes, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        TransformerConfig(**{**dict(vocab_size=32, d_model=16, n_heads=4, n_layers=2, max_len=32), **changes})


# --- the real sizes: DeepSeek-V3.2 and GLM-5 ---------------------------------------------------------------------------

@pytest.mark.parametrize("key,size,layers,latent,index_dim", [("deepseek-v3.2", "671B", 61, 512 + 64, 128),
                                                              ("glm-5", "744B", 78, 512 + 64, 128)])
def test_the_cards_cache_bytes_at_4k_128k_and_1m_count_the_indexers_keys(key, size, layers, latent, index_dim):
    from transformer import MODEL_CARDS
    cfg = MODEL_CARDS[key].real[size]
    for context in (4096, 131072, 1048576):
        held = kv_cache_bytes(cfg, context)  # bf16: 2 bytes a number
        assert held["index keys"] == layers * context * index_dim * 2
        assert held["total"] == layers * context * (latent + index_dim) * 2
    # at 128k: DeepSeek-V3.2 10.48 GiB of which 1.91 GiB are the indexer's keys; GLM-5 13.41 GiB, 2.44 GiB
    at_128k = kv_cache_bytes(cfg, 131072)
    assert round(at_128k["total"] / 2 ** 30, 2) == {"deepseek-v3.2": 10.48, "glm-5": 13.41}[key]
    assert round(at_128k["index keys"] / 2 ** 30, 2) == {"deepseek-v3.2": 1.91, "glm-5": 2.44}[key]


def test_attention_flops_count_k_keys_and_the_indexer_scoring_every_key():
    from transformer.costs import forward_flops_per_token, keys_seen_by_layer
    cfg = TransformerConfig(**{**dict(vocab_size=32, d_model=16, n_heads=4, n_layers=2, max_len=64), **INDEXED})
    dense = cfg.replace(**WITHOUT_INDEXER)
    assert keys_seen_by_layer(cfg, 40) == (3, 3) and keys_seen_by_layer(cfg, 2) == (2, 2)
    attention_saved = 2 * (40 - 3) * 4 * (4 + 4) * 2  # per layer: q·K and weights·V over 37 keys fewer
    indexer = 2 * 40 * 2 * (8 + 1) * 2  # per layer: 2 heads of 8 score 40 keys, then their weighted sum
    weights = 2 * (param_counts(cfg)["total"] - param_counts(dense)["total"])  # the indexer's own parameters
    assert forward_flops_per_token(cfg, 40) - forward_flops_per_token(dense, 40) == weights - attention_saved + indexer


def test_the_matching_loss_is_the_kl_from_the_heads_summed_weights_to_the_indexers_softmax():
    allowed = masks.causal(torch.arange(4), torch.arange(4))[None, None]  # (1, 1, 4, 4)
    dense = torch.softmax(torch.randn(1, 2, 4, 4).masked_fill(~allowed, float("-inf")), -1)  # (B, H, T, T)
    scores = torch.randn(1, 4, 4)
    target = dense.sum(1) / 2  # (1, 4, 4)
    log_q = torch.log_softmax(scores.masked_fill(~allowed[:, 0], float("-inf")), -1)
    by_hand = sum(float(target[0, t, s] * (target[0, t, s].log() - log_q[0, t, s]))
                  for t in range(4) for s in range(t + 1)) / 4
    assert matching_loss(scores, dense, allowed).item() == pytest.approx(by_hand, abs=1e-6)
    # an indexer whose softmax is the target loses nothing, wherever the hidden keys score
    exact = target.clamp_min(1e-30).log().masked_fill(~allowed[:, 0], 7.0)
    assert matching_loss(exact, dense, allowed).item() == pytest.approx(0.0, abs=1e-6)


def test_in_training_the_indexer_learns_from_its_own_loss_and_the_model_never_from_it():
    model = build(VARIANTS["MLA"]).train()
    ids = torch.randint(1, 32, (2, 12), generator=torch.Generator().manual_seed(7))
    out = model(ids)
    assert model.indexer_loss > 0
    indexer = {name for name, _ in model.named_parameters() if ".indexer." in name}
    model.indexer_loss.backward(retain_graph=True)
    assert {name for name, w in model.named_parameters() if w.grad is not None and w.grad.abs().sum() > 0} == indexer
    model.zero_grad(set_to_none=True)
    F.cross_entropy(out[:, :-1].flatten(0, 1), ids[:, 1:].flatten()).backward()  # the top-k choice passes no gradient
    assert all(model.get_parameter(name).grad is None for name in indexer)
    assert model.eval()(ids) is not None and model.indexer_loss == 0  # outside training nothing is computed


def test_a_warm_up_of_the_indexer_alone_raises_the_mass_it_keeps_and_moves_no_other_weight():
    cfg = TransformerConfig(vocab_size=len(TASKS["induction"].vocab), d_model=32, n_heads=4, n_layers=2, max_len=64,
                            position="rope", ffn="gelu", index_top_k=4, index_heads=2, index_head_dim=8)
    base, _ = train(cfg.replace(**WITHOUT_INDEXER), "induction", 150, batch_size=16, progress=False, device="cpu")
    dense = cfg.replace(index_top_k=64)  # every key kept while the indexer learns, as DeepSeek-V3.2's warm-up
    fresh, _ = train(dense, "induction", 1, lr=1e-12, batch_size=16, progress=False, device="cpu", start_from=base,
                     learning=".indexer.")
    warmed, history = train(dense, "induction", 150, lr=1e-2, batch_size=16, progress=False, device="cpu",
                            start_from=base, learning=".indexer.")
    assert history[-1]["indexer_loss"] < 0.5 * history[0]["indexer_loss"]
    for name, weight in base.state_dict().items():
        assert torch.equal(weight, warmed.state_dict()[name]), name
    ids = TASKS["induction"].sample(8, seed=1).input_ids

    def kept_mass(model) -> float:
        sparse = type(model)(cfg, device="cpu").eval()
        sparse.load_state_dict(model.state_dict())
        _, trace = sparse.run_with_trace(ids, names="*hook_kept_mass")
        return float(torch.stack([trace[f"blocks.{i}.attn.hook_kept_mass"] for i in range(2)]).mean())
    assert kept_mass(warmed) > kept_mass(fresh) + 0.05  # 0.70 against 0.61 when written
    with pytest.raises(ValueError, match="learning='nothing'"):
        train(dense, "induction", 1, progress=False, device="cpu", start_from=base, learning="nothing")


def test_the_measured_mass_of_k_keys_is_the_dense_weight_they_hold_and_the_best_k_bounds_every_ranking():
    from transformer.indexer import indexer_mass, mass_kept

    dense = torch.tensor([[[[1.0, 0, 0], [0.2, 0.8, 0], [0.5, 0.1, 0.4]]]])  # (1, 1, 3, 3)
    hidden = ~torch.tril(torch.ones(3, 3, dtype=torch.bool))
    recent = torch.arange(3.0).expand(1, 3, 3).masked_fill(hidden, float("-inf"))
    # k = 1: queries 1 and 2 keep their last key (0.8, 0.4); k = 2: query 2 keeps keys 2 and 1 (0.5)
    assert mass_kept(dense, recent, [1, 2]) == [pytest.approx(0.6), pytest.approx(0.5)]
    model = build(dict(INDEXED, n_layers=2))
    ids = torch.randint(1, 32, (2, 14), generator=torch.Generator().manual_seed(3))
    rows = indexer_mass(model, ids, [1, 3, 6])
    assert [r["layer"] for r in rows] == [0, 1]
    for row in rows:
        for label in ("indexer", "random indexer", "most recent k"):
            assert all(m <= best + 1e-6 for m, best in zip(row[label], row["best k"])), label
        assert row["best k"] == sorted(row["best k"]) and row["best k"][-1] <= 1
