"""Layers that keep a state inside a model: the config and the layer plan that choose them (one to one with Hugging
Face's layer_types), the cache that carries their state, a hybrid that trains, and every bad input refused by name."""
import pytest
import torch

from transformer import AXES, KVCache, TransformerConfig, param_counts
from transformer.checkpoint import load, save
from transformer.hook_sites import SITES

KINDS = [key for key, row in AXES["attention"].choices.items() if row.keeps_state]
NEW_TOKENS = 10


@pytest.fixture
def lively_model(tiny_model):
    """A tiny model with larger random weights, so the next token depends on the context."""
    def build(**changes):
        model = tiny_model(**changes)
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() >= 2:
                    p.normal_(0.0, 0.3, generator=torch.Generator().manual_seed(p.numel()))
        return model
    return build


# --- the plan -----------------------------------------------------------------------------------------------------

def test_three_linear_layers_to_one_softmax_layer_as_qwen35():
    plan = TransformerConfig(n_layers=8, attention_layers="3:1", linear_kind="deltanet").layer_plan()
    assert [s.kind for s in plan] == ["deltanet"] * 3 + ["softmax"] + ["deltanet"] * 3 + ["softmax"]
    assert [s.hf_layer_type for s in plan[:4]] == ["linear_attention"] * 3 + ["full_attention"]
    assert [s.rotates for s in plan[:4]] == [False, False, False, True]  # a state has no keys to turn
    assert [s.row.keeps_state for s in plan[:4]] == [True, True, True, False]
    assert {s.norm_position for s in plan} == {"pre"}  # every layer the model's placement


def test_each_layer_puts_its_norms_where_its_row_of_the_plan_says(tiny_model):
    """OLMo hybrid: its full layers normalise each sublayer's output (norm_position='after'), its linear layers each
    sublayer's input (linear_norm_position='pre'); the linear layers' read norm has an eps of its own."""
    model = tiny_model(n_layers=4, attention_layers="3:1", norm_position="after", linear_norm_position="pre",
                       linear_read_norm_eps=1e-3, qk_norm="full")
    cfg = model.cfg
    assert [s.norm_position for s in cfg.layer_plan()] == ["pre"] * 3 + ["after"]
    assert [block.spec for block in model.blocks] == list(cfg.layer_plan())
    assert [(block.ln1 is not None, block.ln1_post is not None) for block in model.blocks] == \
        [(True, False)] * 3 + [(False, True)]
    assert [block.attn.eps for block in model.blocks[:3]] == [1e-3] * 3 and cfg.norm_eps == 1e-5
    assert sum(p.numel() for p in model.parameters()) == param_counts(cfg)["total"]
    assert cfg.has_final_norm
    ids = torch.randint(0, 32, (2, 7), generator=torch.Generator().manual_seed(0))
    _, trace = model.run_with_trace(ids, names=["*hook_resid_pre", "*hook_resid_mid", "*hook_attn_out",
                                                "*ln1.hook_normalized"])
    for block in model.blocks:  # x + attn(norm(x)) on a linear layer, x + norm(attn(x)) on the full one
        at = lambda site: trace[f"blocks.{block.spec.index}.{site}"]  # noqa: E731
        added = at("hook_attn_out") if block.spec.placement.before else block.ln1_post(at("hook_attn_out"))
        torch.testing.assert_close(at("hook_resid_mid"), at("hook_resid_pre") + added)
        if block.spec.placement.before:
            torch.testing.assert_close(at("ln1.hook_normalized"), block.ln1(at("hook_resid_pre")))
    for layer, placement in ((0, "pre"), (3, "after")):  # the stepper words each layer's step by its placement
        formula = SITES["hook_resid_mid"].latex(cfg, "hook_resid_mid", f"blocks.{layer}.hook_resid_mid")
        assert formula == AXES["norm_position"].row(placement).formulas["hook_resid_mid"]


def test_the_final_norm_follows_the_last_layers_placement():
    """None: a final norm unless the last block already ends on one (post-norm), whichever field placed it."""
    ends_on_a_norm = dict(n_layers=2, attention_layers="softmax,gated-deltanet", linear_norm_position="post")
    assert not TransformerConfig(**ends_on_a_norm).has_final_norm
    assert TransformerConfig(**ends_on_a_norm, final_norm=True).has_final_norm
    assert TransformerConfig(n_layers=2, attention_layers="gated-deltanet,softmax", linear_norm_position="post",
                             ).has_final_norm


def test_hugging_faces_layer_types_read_as_they_are_and_print_back():
    layer_types = ["linear_attention", "linear_attention", "full_attention", "linear_attention"]
    cfg = TransformerConfig(n_layers=4, attention_layers=", ".join(layer_types))
    assert [s.hf_layer_type for s in cfg.layer_plan()] == layer_types
    assert [s.kind for s in cfg.layer_plan()][:3] == ["gated-deltanet", "gated-deltanet", "softmax"]
    mixed = TransformerConfig(n_layers=3, attention_layers="linear, deltanet, softmax")
    assert [s.kind for s in mixed.layer_plan()] == ["linear", "deltanet", "softmax"]
    assert {s.kind for s in TransformerConfig(position="none", attention_layers="decayed-linear").layer_plan()} == \
        {"decayed-linear"}


def test_a_hybrid_mixes_windows_and_states_layer_by_layer():
    cfg = TransformerConfig(n_layers=4, attention_layers="1:1", sliding_window=8,
                            layer_pattern="global, local, global, global")
    assert [s.hf_layer_type for s in cfg.layer_plan()] == ["linear_attention", "sliding_attention",
                                                           "linear_attention", "full_attention"]


def test_every_new_field_goes_through_json_and_a_checkpoint(tiny_config, tiny_model, tmp_path):
    changes = dict(n_layers=4, attention_layers="linear,decayed-linear,deltanet,softmax", linear_chunk_size=3,
                   linear_value_heads=4, linear_key_heads=2, linear_key_head_dim=6, linear_value_head_dim=5,
                   linear_feature_map="identity", delta_beta_max=2.0, norm_position="after",
                   linear_norm_position="pre", linear_read_norm_eps=1e-3)
    cfg = tiny_config(**changes)
    assert TransformerConfig.from_json(cfg.to_json()) == cfg
    model = tiny_model(**changes)
    save(model, tmp_path / "hybrid", {"task": "test"})
    loaded, _ = load(tmp_path / "hybrid")
    ids = torch.randint(0, 32, (2, 7))
    torch.testing.assert_close(loaded.to("cpu").eval()(ids), model(ids))


# --- generation -----------------------------------------------------------------------------------------------------

GENERATION_CASES = [dict(attention_layers=kind, position="none") for kind in KINDS]
GENERATION_CASES += [dict(n_layers=4, attention_layers="3:1", linear_kind=kind) for kind in KINDS]
GENERATION_CASES += [dict(n_layers=4, attention_layers="3:1", linear_key_heads=2, linear_key_head_dim=6,
                          linear_value_head_dim=5, linear_conv_size=2, delta_beta_max=2.0, n_kv_heads=2),
                     dict(n_layers=4, attention_layers="3:1", norm_position="after", linear_norm_position="pre",
                          linear_read_norm_eps=1e-3, qk_norm="full", delta_beta_max=2.0)]  # OLMo hybrid's blocks


@pytest.mark.parametrize("changes", GENERATION_CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_generation_that_carries_the_state_equals_recomputing(changes, lively_model):
    model = lively_model(linear_chunk_size=3, **changes)
    ids = torch.randint(1, 32, (2, 5), generator=torch.Generator().manual_seed(0))
    mask = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]])
    ids = ids.masked_fill(mask == 0, 0)
    for attention_mask in (None, mask):
        cached = model.generate(ids, NEW_TOKENS, use_cache=True, attention_mask=attention_mask)
        recomputed = model.generate(ids, NEW_TOKENS, use_cache=False, attention_mask=attention_mask)
        assert torch.equal(cached, recomputed)
    alone = model.generate(ids[1:, 2:], NEW_TOKENS)  # left padding changes nothing for the padded row
    assert torch.equal(model.generate(ids, NEW_TOKENS, attention_mask=mask)[1, 2:], alone[0])


def test_the_cache_holds_a_state_whose_size_stays_flat(lively_model):
    model = lively_model(n_layers=4, attention_layers="3:1", linear_kind="gated-deltanet", linear_conv_size=3)
    ids = torch.randint(1, 32, (2, 5))
    sizes = []
    for steps in (1, 6):
        cache = KVCache()
        model.generate(ids, steps, cache=cache)
        sizes.append(cache.nbytes)
        channels = 3 * 4 * 4  # q, k, v: 4 heads of 4 each
        state = 2 * 4 * 4 * 4 * 4 + 2 * channels * 2 * 4  # (B, H, d_k, d_v) and (B, channels, K - 1), float32
        keys = 2 * (2 * 4 * (5 + steps - 1) * 4 * 4)  # the softmax layer's K and V for every token it saw
        assert cache.nbytes == 3 * state + keys
        assert cache.shapes()[:3] == [(2, 4, 4, 4)] * 3
    assert sizes[1] - sizes[0] == 5 * 2 * 2 * 4 * 4 * 4  # only the softmax layer grew


# --- training -------------------------------------------------------------------------------------------------------

def test_a_hybrid_learns(tiny_model):
    """Three Gated DeltaNet layers to one softmax layer, as Qwen3.5: a few steps of Adam on a repeating text."""
    model = tiny_model(n_layers=4, attention_layers="3:1", linear_chunk_size=4).train()
    text = torch.arange(24).remainder(6)[None].repeat(4, 1)  # (4, 24): 0 1 2 3 4 5 0 1 ...
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        logits = model(text[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 32), text[:, 1:].reshape(-1))
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.5 * losses[0], losses
    assert all(p.grad is not None for name, p in model.named_parameters() if ".attn." in name), \
        "every weight of every layer gets a gradient"


def test_a_bfloat16_hybrid_runs(tiny_model):
    model = tiny_model(n_layers=4, attention_layers="3:1", dtype="bfloat16")
    logits = model(torch.randint(0, 32, (2, 9)))
    assert logits.dtype == torch.bfloat16 and torch.isfinite(logits.float()).all()


# --- bad input ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("changes, message", [
    (dict(attention_layers="3:1", n_layers=4, linear_chunk_size=0), "linear_chunk_size=0 must be at least 1"),
    (dict(attention_layers="3:1", n_layers=4, linear_chunk_size=-8), "linear_chunk_size=-8 must be at least 1"),
    (dict(attention_layers="3:1", n_layers=4, delta_beta_max=2.5), "delta_beta_max=2.5 must be above 0 and at most 2"),
    (dict(attention_layers="3:1", n_layers=4, delta_beta_max=0.0), "delta_beta_max=0.0 must be above 0"),
    (dict(attention_layers="3:1", n_layers=4, linear_conv_size=0), "linear_conv_size=0 must be at least 1"),
    (dict(attention_layers="3:1", n_layers=4, linear_value_heads=4, linear_key_heads=3),
     "linear_value_heads=4 is not divisible by linear_key_heads=3.*among \\[1, 2, 4\\]"),
    (dict(attention_layers="3:1", n_layers=4, linear_key_head_dim=0), "linear_key_head_dim=0 must be at least 1"),
    (dict(attention_layers="deltanet", position="none", arch="encoder"), "cannot give an 'encoder' bidirectional"),
    (dict(attention_layers="1:1", arch="encoder-decoder"), "cannot give an 'encoder-decoder' bidirectional"),
    (dict(attention_layers="3:1", n_layers=4, sliding_window=4), "layer 0 is gated-deltanet.*window of 4 keys"),
    (dict(attention_layers="1:1", attention_pattern="block-local"), "attention_pattern='block-local' hides"),
    (dict(attention_layers="linear,softmax,deltanet"), "names 3 layers but n_layers=2"),
    (dict(attention_layers="linear,mamba"), "'mamba' is no attention kind"),
    (dict(attention_layers="3:one"), "does not parse: write 'N:M'"),
    (dict(linear_kind="softmax"), "linear_kind='softmax' keeps no state"),
    (dict(linear_feature_map="relu"), "linear_feature_map='relu' is not a valid choice"),
    (dict(linear_chunk_size=32), "linear_chunk_size=32 is a setting of linear layers.*has none"),
    (dict(attention_layers="3:1", n_layers=4, linear_feature_map="identity"), "is a setting of 'linear' layers"),
    (dict(attention_layers="deltanet", position="none", linear_conv_size=2), "layers with a short convolution"),
    (dict(attention_layers="linear", position="none", delta_beta_max=2.0), "delta-rule layers"),
    (dict(attention_layers="gated-deltanet"), "position='rope' is a setting of softmax layers.*position='none'"),
    (dict(attention_layers="gated-deltanet", position="none", sinks=True), "sinks=True is a setting of softmax"),
    (dict(linear_norm_position="pre"), "linear_norm_position='pre' is a setting of linear layers.*attention_layers="
                                       "'softmax' has none.*set linear_norm_position=None"),
    (dict(linear_read_norm_eps=1e-5), "linear_read_norm_eps=1e-05 is a setting of linear layers.*has none"),
    (dict(attention_layers="3:1", n_layers=4, linear_norm_position="middle"),
     "linear_norm_position='middle' is not a valid choice; choose one of 'pre', 'post', 'sandwich', 'after'"),
    (dict(attention_layers="3:1", n_layers=4, linear_read_norm_eps=0.0),
     "linear_read_norm_eps=0.0 must be greater than 0.*or None for norm_eps"),
    (dict(attention_layers="3:1", n_layers=4, parallel_block=True, linear_norm_position="after"),
     "parallel_block=True needs linear_norm_position='pre' or None \\(now 'after'\\)"),
])
def test_a_linear_kind_that_cannot_work_is_refused_with_the_numbers_and_the_fix(changes, message, tiny_config):
    with pytest.raises(ValueError, match=message):
        tiny_config(**changes)


def test_padding_between_real_tokens_is_refused(lively_model):
    model = lively_model(n_layers=4, attention_layers="3:1")
    ids = torch.randint(1, 32, (2, 6))
    with pytest.raises(ValueError, match="row 1 has padding between real tokens.*position 4.*pad on the left"):
        model(ids, attention_mask=torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 1, 1]]))
    right_padded = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])  # nothing real comes after the padding
    torch.testing.assert_close(model(ids, attention_mask=right_padded)[1, :4], model(ids[1:, :4])[0])
