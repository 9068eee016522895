"""Speculative decoding: a draft proposes, the target verifies in one pass; the text is the target's greedy text."""
import math

import pytest
import torch

from transformer import KVCache, checkpoint
from transformer.checkpoint import SHIPPED_DIR
from transformer.speculative import early_exit_draft, speculative_generate
from transformer.training.tasks import get_task

LATENT = dict(kv_rank=8, q_rank=8, rope_dim=2, head_dim=6)
INDEXED = dict(index_top_k=3, index_heads=2, index_head_dim=8)
# a target of each kind of cache: plain K and V, fewer kv heads, a window, a latent (MLA), an indexer's keys
TARGETS = {"MHA rope": dict(position="rope"), "GQA learned": dict(position="learned", n_kv_heads=2),
           "MQA alibi window": dict(position="alibi", n_kv_heads=1, sliding_window=3),
           "MLA": dict(position="rope", **LATENT), "indexer": dict(position="rope", **INDEXED)}
PROMPTS = [[3, 7, 1], [5, 5, 9, 2, 30, 11, 4], [17]]


@pytest.fixture
def lively(tiny_model):
    """A tiny model with larger random weights, so its next token depends on the context."""
    def build(seed=0, **changes):
        model = tiny_model(seed=seed, **changes)
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() >= 2:
                    p.normal_(0.0, 0.3, generator=torch.Generator().manual_seed(p.numel() + seed))
        return model
    return build


def keys_after(model, ids):
    cache = KVCache()
    model(ids, cache=cache)
    return cache


@pytest.mark.parametrize("kind", TARGETS)
def test_a_truncated_cache_equals_the_cache_of_the_shorter_text(kind, lively):
    model = lively(**TARGETS[kind])
    ids = torch.tensor([[4, 8, 15, 16, 23, 9, 2]])  # (1, 7)
    cut = keys_after(model, ids)
    cut.truncate(4)
    short = keys_after(model, ids[:, :4])
    assert cut.length == short.length == 4
    assert torch.equal(cut.position_ids, short.position_ids)
    for layer, kept in short.layers.items():
        for got, want in zip(cut[layer], kept):
            torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)
    # and the model reads on from the truncated cache as from the short one
    torch.testing.assert_close(model(ids[:, 4:5], cache=cut), model(ids[:, 4:5], cache=short), atol=1e-5, rtol=1e-5)


def test_truncate_refuses_a_length_outside_the_cache_and_a_state(lively):
    cache = keys_after(lively(), torch.tensor([[1, 2, 3]]))
    with pytest.raises(ValueError, match="cache of 3 tokens to 5.*from 0 to 3"):
        cache.truncate(5)
    hybrid = keys_after(lively(attention_layers="1:1"), torch.tensor([[1, 2, 3]]))
    before = {layer: kept for layer, kept in hybrid.layers.items()}
    with pytest.raises(ValueError, match="LinearAttention.*cannot be truncated to 1 of its 3 tokens"):
        hybrid.truncate(1)
    assert hybrid.length == 3 and all(hybrid[layer] is kept for layer, kept in before.items())  # left as it was


@pytest.mark.parametrize("kind", TARGETS)
@pytest.mark.parametrize("k", [1, 2, 5])
def test_random_pairs_give_the_targets_greedy_text(kind, k, lively):
    target = lively(**TARGETS[kind], n_layers=3)
    draft = lively(seed=1, position="rope")  # another model altogether, the same 32 tokens
    for prompt in PROMPTS:
        ids = torch.tensor([prompt])
        result = speculative_generate(target, draft, ids, 12, k)
        assert torch.equal(result.ids, target.generate(ids, 12))
        assert sum(len(r.kept) for r in result.rounds) == result.new_tokens == 12
        assert all(len(r.proposed) <= k and 0 <= r.accepted <= len(r.proposed) for r in result.rounds)
        assert result.target_forwards == len(result.rounds) and result.greedy_forwards == 12


def test_the_first_proposal_is_the_drafts_own_greedy_text(lively):
    target, draft = lively(n_layers=3), lively(seed=1)
    ids = torch.tensor([PROMPTS[1]])
    first = speculative_generate(target, draft, ids, 10, 4).rounds[0]
    assert list(first.proposed) == draft.generate(ids, 4)[0, ids.shape[1]:].tolist()


@pytest.mark.parametrize("k", [1, 3, 4])
def test_a_draft_equal_to_the_target_is_always_accepted(k, lively):
    model = lively(position="rope", n_kv_heads=2)
    result = speculative_generate(model, model, torch.tensor([PROMPTS[0]]), 13, k)
    assert result.acceptance_rate == 1.0
    assert result.target_forwards == math.ceil(13 / (k + 1))  # each round adds its k proposals and one more


def test_a_draft_that_always_misses_costs_one_target_pass_per_token(lively):
    target = lively(tie_embeddings=False)
    draft = lively(tie_embeddings=False)
    with torch.no_grad():  # its output rows turned by one: its first guess is always the target's choice + 1
        draft.unembed.weight.copy_(target.unembed.weight.roll(1, dims=0))
    ids = torch.tensor([PROMPTS[1]])
    result = speculative_generate(target, draft, ids, 8, 3)
    assert torch.equal(result.ids, target.generate(ids, 8))
    assert result.accepted == 0 and result.target_forwards == result.greedy_forwards == 8


def test_bad_pairs_and_k_name_the_numbers(lively):
    target, ids = lively(), torch.tensor([PROMPTS[0]])
    with pytest.raises(ValueError, match="k=0.*k >= 1"):
        speculative_generate(target, lively(seed=1), ids, 5, 0)
    with pytest.raises(ValueError, match="draft's vocabulary has 40 tokens and the target's 32"):
        speculative_generate(target, lively(seed=1, vocab_size=40), ids, 5, 2)
    with pytest.raises(ValueError, match="'sort'.*'language'"):
        speculative_generate(target, lively(seed=1), ids, 5, 2, vocabularies=("language", "sort"))
    with pytest.raises(ValueError, match="arch='encoder'"):
        speculative_generate(target, lively(seed=1, arch="encoder"), ids, 5, 2)
    with pytest.raises(ValueError, match=r"\(2, 3\)"):
        speculative_generate(target, lively(seed=1), ids.repeat(2, 1), 5, 2)
    with pytest.raises(ValueError, match="n_layers=2.*from 1 to 1"):
        early_exit_draft(target, 2)


# --- the shipped checkpoints ------------------------------------------------------------------------------------

SHIPPED_PROMPTS = ["The cat sat on the mat because it was", "Attention is all you need, they said, and"]


@pytest.fixture(scope="module")
def shipped_language():
    load = lambda name: checkpoint.load(SHIPPED_DIR / f"{name}-language.safetensors")[0].eval()
    return {name: load(name) for name in ("llama2", "palm")}


@pytest.mark.parametrize("k", [1, 3, 8])
def test_shipped_pairs_give_the_targets_greedy_text_in_fewer_target_passes(k, shipped_language):
    target, task = shipped_language["llama2"], get_task("language")
    drafts = {"palm": shipped_language["palm"], "its first 2 layers": early_exit_draft(target, 2)}
    for text in SHIPPED_PROMPTS:
        ids = torch.tensor([task.encode(text)])
        greedy = target.generate(ids, 24)
        for name, draft in drafts.items():
            result = speculative_generate(target, draft, ids, 24, k)
            assert torch.equal(result.ids, greedy), name
        # the trained draft knows English well enough to save target passes
        assert speculative_generate(target, drafts["palm"], ids, 24, k).target_forwards < 24


def test_the_early_exit_draft_is_the_targets_first_layers(shipped_language):
    target = shipped_language["llama2"]
    draft = early_exit_draft(target, 2)
    assert draft.cfg.n_layers == 2
    torch.testing.assert_close(draft.blocks[1].attn.q_proj.weight, target.blocks[1].attn.q_proj.weight)
    torch.testing.assert_close(draft.unembed.weight, target.unembed.weight)
