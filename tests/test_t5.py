"""T5's relative position buckets as a position scheme, and T5ForConditionalGeneration opened from Hugging Face.

The buckets are checked against Hugging Face's own bucket function over every distance from -300 to 300; the
scheme is checked as ALiBi's row is (fused = explicit, a cached step = recomputation, the hook records the bias
added). The factories are tiny random-init T5 models (v1.0: ReLU FFN, tied head rescaled by d_model**-0.5; v1.1:
gated-GELU FFN, no rescale, an untied head) with every 1-D parameter moved off its initial value by
hf_factories' ``_build``. On a right-padded source batch: logits within 1e-4, every attention layer's weights
(encoder, decoder self- and cross-attention) within 1e-5, and greedy generation equal to Hugging Face's.
"""
import math
from pathlib import Path

import pytest
import torch
import transformers as tf
from streamlit.testing.v1 import AppTest

from hf_factories import _build
from test_hf_page_modern import clean, save_with_tokenizer
from transformer.config import TransformerConfig
from transformer.interop import describe_hf, from_hf
from transformer.model import KVCache, Transformer
from transformer.positions import relative_buckets

LOGITS_TOL, PATTERN_TOL = 1e-4, 1e-5
APP = str(Path(__file__).resolve().parent.parent / "app.py")
SMALL = dict(arch="encoder-decoder", vocab_size=50, d_model=32, n_heads=4, n_layers=2, position="t5",
             relative_buckets=8, relative_max_distance=12, score_scale=1.0, norm="rmsnorm")


def tiny(**changes) -> Transformer:
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(**(SMALL | changes)), device="cpu").eval()
    with torch.no_grad():  # a bias table large enough that the buckets change the weights visibly
        for module in (model.encoder, model.decoder) if model.cfg.row("arch").cross else (model,):
            module.rel_bias.table.weight.normal_(0.0, 2.0)
    return model


# --- the buckets ------------------------------------------------------------------------

@pytest.mark.parametrize("bidirectional", [True, False], ids=["encoder", "decoder"])
@pytest.mark.parametrize("n_buckets,max_distance", [(32, 128), (8, 12), (6, 40), (5, 7)])
def test_buckets_are_hugging_faces(n_buckets, max_distance, bidirectional):
    distance = torch.arange(-300, 301)[None]  # (1, 601): key position - query position
    expected = tf.models.t5.modeling_t5.T5Attention._relative_position_bucket(
        distance, bidirectional=bidirectional, num_buckets=n_buckets, max_distance=max_distance)
    assert torch.equal(relative_buckets(distance, n_buckets, max_distance, bidirectional), expected)


def test_near_distances_have_a_bucket_each_and_far_ones_share_the_last():
    back = -torch.arange(0, 400)  # a decoder's keys at distance 0 .. 399 behind the query
    buckets = relative_buckets(back, 32, 128, bidirectional=False)
    assert buckets[:16].tolist() == list(range(16))  # half the buckets: one distance each
    assert (buckets[128:] == 31).all()  # from the maximum distance on: the last bucket, shared by all
    # the logarithmic half: bucket 16 + floor(16 log(d / 16) / log(128 / 16)) reaches 31 at d = 16 * 8^(15/16)
    assert (buckets == 31).nonzero()[0].item() == math.ceil(16 * 8 ** (15 / 16)) == 113
    assert (buckets.diff() >= 0).all()  # further never reads a nearer bucket
    # an encoder splits them by sign: keys after the query read the upper half
    both = relative_buckets(torch.tensor([-3, 3, -200, 200]), 32, 128, bidirectional=True)
    assert both.tolist() == [3, 16 + 3, 15, 31]


@pytest.mark.parametrize("bidirectional", [True, False], ids=["encoder", "decoder"])
def test_every_setting_of_one_or_more_reads_a_row_of_the_table(bidirectional):
    distance = torch.arange(-200, 201)  # (401,)
    for n_buckets in range(1, 10):
        for max_distance in range(1, 12):  # small ones too, where no logarithmic bucket fits
            buckets = relative_buckets(distance, n_buckets, max_distance, bidirectional)
            assert 0 <= int(buckets.min()) and int(buckets.max()) < n_buckets, (n_buckets, max_distance)
            assert (buckets[distance == 0] == 0).all()  # the query itself: bucket 0


@pytest.mark.parametrize("field", ["relative_buckets", "relative_max_distance"])
def test_a_bucket_setting_below_one_is_refused_with_the_fix(field):
    with pytest.raises(ValueError, match=rf"{field}=0 must be at least 1.*set {field} to"):
        TransformerConfig(position="t5", **{field: 0})
    with pytest.raises(ValueError, match=rf"{field}=-3 must be at least 1"):
        TransformerConfig(position="t5", **{field: -3})


# --- the scheme in the model -------------------------------------------------------------

def test_one_table_per_stack_is_added_to_every_layer_and_recorded():
    model = tiny()
    tables = [name for name, _ in model.named_parameters() if "rel_bias" in name]
    assert tables == ["encoder.rel_bias.table.weight", "decoder.rel_bias.table.weight"]
    src, tgt = torch.randint(0, 50, (2, 11)), torch.randint(0, 50, (2, 6))
    _, trace = model.run_with_trace(src, tgt, names=["*hook_rel_bias", "*hook_attn_scores", "*hook_raw_scores",
                                                     "*hook_mask"])
    assert not any("cross_attn.hook_rel_bias" in name for name in trace.keys())  # cross-attention has no position bias
    for stack, bidirectional, t_q, t_kv in (("encoder", True, 11, 11), ("decoder", False, 6, 6)):
        first, second = trace[f"{stack}.blocks.0.attn.hook_rel_bias"], trace[f"{stack}.blocks.1.attn.hook_rel_bias"]
        assert first.shape == (1, 4, t_q, t_kv) and torch.equal(first, second)  # computed once, shared
        positions = torch.arange(t_q)
        buckets = relative_buckets(positions[None, :] - positions[:, None], 8, 12, bidirectional)  # (T_q, T_kv)
        table = getattr(model, stack).rel_bias.table.weight  # (buckets, H)
        assert torch.equal(first[0], table[buckets].permute(2, 0, 1))
        for i in range(2):  # the bias is what the scores gain, besides the mask
            b = f"{stack}.blocks.{i}.attn."
            added = trace[b + "hook_attn_scores"] - trace[b + "hook_raw_scores"]  # (B, H, T_q, T_kv)
            allowed = (trace[b + "hook_mask"] == 0).expand_as(added)  # where the mask adds nothing
            assert torch.allclose(added[allowed], first.expand_as(added)[allowed], atol=1e-5)


@pytest.mark.parametrize("arch", ["encoder-decoder", "decoder", "encoder"])
def test_fused_attention_equals_the_explicit_five_lines(arch):
    model = tiny(arch=arch)
    ids = torch.randint(0, 50, (2, 13))
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0
    args = (ids, ids[:, :7]) if arch == "encoder-decoder" else (ids,)
    with torch.no_grad():
        fused = model(*args, attention_mask=mask)
        explicit = model.set_fused(False)(*args, attention_mask=mask)
    assert (fused - explicit).abs().max().item() <= 1e-5
    assert fused.std().item() > 0.1  # the bias moved the logits: the comparison has something to compare


@pytest.mark.parametrize("arch", ["encoder-decoder", "decoder"])
def test_a_cached_step_reads_the_bias_of_the_new_query_row(arch):
    model = tiny(arch=arch)
    ids = torch.randint(0, 50, (2, 9))
    assert torch.equal(model.generate(ids, 12, use_cache=True), model.generate(ids, 12, use_cache=False))
    # one decoder step with a cache: its bias is the last row of the full sequence's bias
    tokens = torch.randint(0, 50, (1, 8))
    stack = "decoder." if arch == "encoder-decoder" else ""
    full_args = (ids[:1], tokens) if arch == "encoder-decoder" else (tokens,)
    _, full = model.run_with_trace(*full_args, names=f"{stack}blocks.0.attn.hook_rel_bias")
    cache = KVCache()
    if arch == "encoder-decoder":
        memory = model.encode(ids[:1])
        model.decode(tokens[:, :7], memory, cache=cache)
        _, step = model.run_with_trace(ids[:1], tokens[:, 7:], cache=cache, names="decoder.blocks.0.attn.hook_rel_bias")
    else:
        model(tokens[:, :7], cache=cache)
        _, step = model.run_with_trace(tokens[:, 7:], cache=cache, names="blocks.0.attn.hook_rel_bias")
    name = f"{stack}blocks.0.attn.hook_rel_bias"
    assert step[name].shape == (1, 4, 1, 8)
    assert torch.equal(step[name][0, :, 0], full[name][0, :, -1])


# --- Hugging Face ------------------------------------------------------------------------

def t5_config(version: str, **changes):
    settings = {"v1.0": dict(feed_forward_proj="relu", tie_word_embeddings=True),
                "v1.1": dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False)}[version]
    return tf.T5Config(vocab_size=100, d_model=32, d_kv=8, d_ff=48, num_layers=2, num_heads=4,
                       relative_attention_num_buckets=8, relative_attention_max_distance=12, decoder_start_token_id=0,
                       pad_token_id=0, eos_token_id=None, attn_implementation="eager",
                       **dict(initializer_factor=2.0) | settings | changes)


def t5(version: str, seed: int = 0):
    model = _build(tf.T5ForConditionalGeneration, t5_config(version), seed)
    if version == "v1.1":  # v1.1's checkpoints keep a head of their own: give this one its own, different matrix
        with torch.no_grad():
            model.lm_head.weight = torch.nn.Parameter(model.shared.weight.flip(0) * 0.05)
    return model


def source_batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, 100, (3, 14), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 10:] = 0
    mask[2, 5:] = 0
    return ids.masked_fill(mask == 0, 0), mask


def largest_gaps(hf_model, ours) -> dict[str, float]:
    src, mask = source_batch()
    tgt = torch.randint(2, 100, (3, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        out = hf_model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt, output_attentions=True)
        logits, trace = ours.run_with_trace(src, tgt, attention_mask=mask, names="*hook_pattern")
        fused = ours(src, tgt, attention_mask=mask)
    real = mask.bool()
    gaps = {"logits": max((out.logits - logits).abs().max().item(), (out.logits - fused).abs().max().item()),
            "spread": out.logits.std().item()}
    patterns = []
    for i in range(ours.cfg.n_layers):  # encoder rows at real tokens; decoder rows all (its tokens are all real)
        patterns.append((out.encoder_attentions[i] - trace[f"encoder.blocks.{i}.attn.hook_pattern"])
                        .transpose(1, 2)[real].abs().max().item())
        patterns.append((out.decoder_attentions[i] - trace[f"decoder.blocks.{i}.attn.hook_pattern"]).abs().max().item())
        patterns.append((out.cross_attentions[i] - trace[f"decoder.blocks.{i}.cross_attn.hook_pattern"])
                        .abs().max().item())
    gaps["pattern"] = max(patterns)
    gaps["peak"] = trace["encoder.blocks.0.attn.hook_pattern"][0].max().item()
    return gaps


def assert_agree(gaps) -> None:
    assert gaps["logits"] <= LOGITS_TOL, gaps
    assert gaps["pattern"] <= PATTERN_TOL, gaps
    assert gaps["spread"] > 1000 * LOGITS_TOL and gaps["peak"] > 3 / 14, gaps  # far from uniform, far apart


def assert_same_greedy(hf_model, ours) -> None:
    src, mask = source_batch(seed=2)
    with torch.no_grad():
        expected = hf_model.generate(input_ids=src, attention_mask=mask, max_new_tokens=12, do_sample=False,
                                     num_beams=1)
    generated = ours.generate(src, 12, attention_mask=mask)
    assert torch.equal(generated, expected)
    assert len(set(generated[:, 1:].flatten().tolist())) > 3  # not one token repeated: the test can tell them apart


@pytest.mark.parametrize("version", ["v1.0", "v1.1"])
def test_logits_attention_weights_and_greedy_generation_match(version):
    hf_model = t5(version)
    ours = from_hf(hf_model)
    assert_agree(largest_gaps(hf_model, ours))
    assert_same_greedy(hf_model, ours)


def test_each_version_maps_to_its_own_ffn_and_head():
    v10, v11 = from_hf(t5("v1.0")), from_hf(t5("v1.1"))
    assert (v10.cfg.ffn, v10.cfg.tie_embeddings, v10.cfg.head_input_scale) == ("relu", True, 32 ** -0.5)
    assert (v11.cfg.ffn, v11.cfg.gelu_approximate, v11.cfg.tie_embeddings, v11.cfg.head_input_scale) == (
        "geglu", "tanh", False, None)
    for cfg in (v10.cfg, v11.cfg):
        assert (cfg.score_scale, cfg.bias, cfg.norm, cfg.norm_position, cfg.position) == (
            1.0, False, "rmsnorm", "pre", "t5")
    # without the rescale v1.0's logits would be sqrt(d_model) times larger: the knob is what makes them agree
    hf_model = t5("v1.0")
    unscaled = from_hf(hf_model)
    unscaled.cfg.head_input_scale = None
    assert largest_gaps(hf_model, unscaled)["logits"] > 100 * LOGITS_TOL


def test_a_saved_directory_opens_the_same_model(tmp_path):
    hf_model = t5("v1.0")
    hf_model.save_pretrained(tmp_path)
    ours = from_hf(str(tmp_path))
    assert_agree(largest_gaps(hf_model, ours))
    assert_same_greedy(hf_model, ours)
    mapping = describe_hf(tmp_path)  # reads only the config
    assert mapping.hf_class == "T5ForConditionalGeneration" and mapping.config == ours.cfg


def test_describe_hf_says_what_t5_is():
    mapping = describe_hf(t5("v1.1"))
    assert mapping.family == "T5"
    assert mapping.axes["position"] == ("T5 buckets: 8 buckets per stack (split by sign in the encoder), distances "
                                        "from 12 on share the last")
    assert mapping.axes["FFN"] == "GeGLU (tanh approximation)" and mapping.axes["head"] == "its own matrix"
    assert any("d_model**-0.5" in note for note in mapping.notes)


def test_settings_that_do_not_map_are_refused_by_name():
    with pytest.raises(ValueError, match=r"num_layers=2 and num_decoder_layers=3 is not supported"):
        from_hf(tf.T5ForConditionalGeneration(t5_config("v1.0", num_decoder_layers=3)))
    with pytest.raises(ValueError, match=r"activation 'silu' is not supported"):
        describe_hf(tf.T5ForConditionalGeneration(t5_config("v1.0", feed_forward_proj="gated-silu")))


def test_the_hugging_face_page_opens_it(tmp_path):
    save_with_tokenizer(t5("v1.0"), tmp_path)
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    at.switch_page("pages/hf_model.py").run()
    at.text_input(key="hf_path").set_value(str(tmp_path)).run()
    clean(at)
    assert any("T5ForConditionalGeneration" in h.value for h in at.subheader)
    shown = " ".join(str(getattr(e, "value", "")) for e in at.main)
    assert "T5 buckets" in shown
