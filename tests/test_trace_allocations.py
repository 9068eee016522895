"""How many T x T tensors a forward pass allocates per layer, so the count cannot grow again unnoticed.

The scores, the masked scores and the weights are (B, H, T_q, T_kv): at classroom lengths they are
most of what a trace writes, and each one written to fresh memory costs more than its arithmetic
(docs/benchmarks.md, rows 2 and 10.2). Hugging Face's eager attention allocates four per layer
(the product, the scaled product, the masked scores, the weights). The counts below are torch's
CPU allocator events (the profiler's memory events) of exactly B * H * T * T float32 numbers, or
B * H * T * (T + 1) for scores with a sink's column; the model's sizes are chosen so that no other
tensor has either size.
"""
import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from transformer.hooks import recording

B, T = 2, 24
SIZES = dict(vocab_size=50, d_model=32, n_heads=4, n_kv_heads=2, n_layers=3, d_ff=40, max_len=32)
SQUARE = B * SIZES["n_heads"] * T * T * 4  # bytes of one (B, H, T, T) float32 tensor
WIDE = B * SIZES["n_heads"] * T * (T + 1) * 4  # ... and of one with a sink's column
HEADS_SQUARE = SIZES["n_heads"] * T * T * 4  # one (1, H, T, T) tensor: ALiBi's bias, made once per forward pass

# variant -> (full trace, a trace of the weights alone, the explicit path recording nothing) per layer.
# Full traces allocate only the T x T tensors they keep (raw scores, scores, weights), except soft-capping
# (tanh's input: the capped scores must stay differentiable) and sinks (the scores with the sink's column).
VARIANTS = {
    "LLaMA (RoPE, GQA)": (dict(position="rope", norm="rmsnorm", ffn="swiglu"), (3, 2, 2)),
    "GPT-2 (learned, MHA)": (dict(position="learned", norm="layernorm", ffn="gelu", n_kv_heads=4), (3, 2, 2)),
    "ALiBi, window": (dict(position="alibi", sliding_window=8), (3, 2, 2)),
    "padding": (dict(position="rope"), (3, 2, 2)),  # run with a padding mask below
    "soft-capping": (dict(position="rope", attn_softcap=5.0), (5, 4, 4)),
    "sinks": (dict(position="rope", sinks=True), (4, 3, 3)),
    "MLA": (dict(position="rope", n_kv_heads=None, kv_rank=16, rope_dim=4), (3, 2, 2)),
}


def allocations(fn, nbytes: set[int]) -> int:
    """Allocations of one of these sizes by torch's CPU allocator while fn runs (once untimed first)."""
    with torch.no_grad():
        fn()
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            fn()
    return sum(1 for e in prof.profiler.kineto_results.events()
               if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU and e.nbytes() in nbytes)


def build(tiny_model, changes):
    cfg_changes = {**SIZES, **changes}
    if cfg_changes.get("n_kv_heads", 0) is None:
        cfg_changes.pop("n_kv_heads")
    return tiny_model(**cfg_changes)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_t_by_t_tensors_allocated_per_layer(tiny_model, variant):
    changes, (full, weights_only, unrecorded) = VARIANTS[variant]
    model = build(tiny_model, changes)
    ids = torch.randint(0, SIZES["vocab_size"], (B, T), generator=torch.Generator().manual_seed(0))
    mask = None
    if variant == "padding":
        mask = torch.ones(B, T, dtype=torch.long)
        mask[1, :5] = 0
    n_layers, squares = SIZES["n_layers"], {SQUARE, WIDE}
    counted = {
        "full trace": allocations(lambda: model.run_with_trace(ids, attention_mask=mask), squares),
        "weights only": allocations(lambda: model.run_with_trace(ids, attention_mask=mask,
                                                                 names=["blocks.*.attn.hook_pattern"]), squares),
        "explicit, unrecorded": allocations(lambda: model.set_fused(False)(ids, attention_mask=mask), squares),
        "fused": allocations(lambda: model.set_fused(True)(ids, attention_mask=mask), squares),
    }
    per_layer = {what: n / n_layers for what, n in counted.items()}
    fused = unrecorded if "attn_softcap" in changes else 0  # soft-capped scores have no fused kernel
    expected = {"full trace": full, "weights only": weights_only, "explicit, unrecorded": unrecorded, "fused": fused}
    assert per_layer == expected, (
        f"{variant}: T x T tensors allocated per layer {per_layer}, expected {expected}; if a count went down, "
        "lower it here (and in docs/benchmarks.md)")


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v != "sinks"])
def test_a_full_trace_keeps_every_t_by_t_tensor_it_allocates_but_tanh_s_input(tiny_model, variant):
    changes, (full, _, _) = VARIANTS[variant]
    model = build(tiny_model, changes)
    ids = torch.randint(0, SIZES["vocab_size"], (B, T), generator=torch.Generator().manual_seed(0))
    _, trace = model.run_with_trace(ids)
    kept = {e.tensor.untyped_storage().data_ptr() for e in trace.events
            if e.tensor.untyped_storage().nbytes() == SQUARE}
    transient = 1 if "attn_softcap" in changes else 0
    assert len(kept) / SIZES["n_layers"] == full - transient


def test_alibi_s_bias_is_added_to_the_mask_once_per_forward_pass_not_once_per_layer(tiny_model):
    model = build(tiny_model, dict(position="alibi"))
    ids = torch.randint(0, SIZES["vocab_size"], (1, T), generator=torch.Generator().manual_seed(0))
    # B = 1 here: a (1, H, T, T) tensor is the bias itself, the mask + bias sum, or a layer's scores
    per_forward = allocations(lambda: model.set_fused(True)(ids), {HEADS_SQUARE})
    assert per_forward == 2  # the bias, and the mask + bias that every layer's SDPA is given
    traced = allocations(lambda: model.run_with_trace(ids), {HEADS_SQUARE})
    assert traced == 2 + 3 * SIZES["n_layers"]  # the same two, and each layer's raw scores, scores and weights


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_whatever_is_recorded_every_recorded_tensor_has_the_values_of_the_full_trace(tiny_model, variant):
    """The scores are masked in place only when nothing keeps them: recording any subset changes no value."""
    changes, _ = VARIANTS[variant]
    model = build(tiny_model, changes)
    ids = torch.randint(0, SIZES["vocab_size"], (B, T), generator=torch.Generator().manual_seed(0))
    _, full = model.run_with_trace(ids)
    sites = ["hook_raw_scores", "hook_capped_scores", "hook_mask", "hook_attn_scores", "hook_pattern"]  # each one
    # alone still runs the explicit path (hook_z alone would run the fused kernel: within 1e-5, checked below)
    for site in sites:
        names = [n for n in full.names() if n.endswith("attn." + site)]
        if not names:
            continue
        _, part = model.run_with_trace(ids, names=names)
        for name in names:
            assert torch.equal(part[name], full[name]), name
    with torch.no_grad():
        fused, explicit = model.set_fused(True)(ids), model.set_fused(False)(ids)
    model.set_fused(True)
    torch.testing.assert_close(explicit, full["hook_logits"], atol=0, rtol=0)
    if "attn_softcap" not in changes:
        torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)


def test_an_intervention_on_the_raw_scores_is_not_overwritten_by_the_mask(tiny_model):
    model = build(tiny_model, dict(position="rope"))
    ids = torch.randint(0, SIZES["vocab_size"], (B, T), generator=torch.Generator().manual_seed(0))
    held = {}

    def keep(tensor, event):
        held[event.name] = tensor  # the caller keeps what it returned
        return tensor

    name = "blocks.1.attn.hook_raw_scores"
    _, trace = model.run_with_trace(ids, interventions={name: keep}, names=[name, "blocks.1.attn.hook_attn_scores"])
    assert torch.equal(held[name], trace[name])  # still the raw scores, no mask added into them
    assert bool((trace[name] > -1e30).all())


@pytest.mark.parametrize("variant", ["LLaMA (RoPE, GQA)", "ALiBi, window", "soft-capping", "sinks", "MLA"])
def test_gradients_of_the_explicit_path_are_the_same_whether_or_not_its_scores_are_recorded(tiny_model, variant):
    """Unrecorded, the mask is added in place; recorded, into a new tensor: the gradients must not differ."""
    changes, _ = VARIANTS[variant]
    model = build(tiny_model, changes).set_fused(False)
    ids = torch.randint(0, SIZES["vocab_size"], (B, T), generator=torch.Generator().manual_seed(0))

    def grads(record: bool) -> dict[str, torch.Tensor]:
        model.zero_grad()
        names = ["blocks.*.attn.hook_raw_scores", "blocks.*.attn.hook_capped_scores"] if record else []
        with recording(names=names):
            model(ids).square().mean().backward()
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    unrecorded, recorded = grads(False), grads(True)
    assert unrecorded.keys() == recorded.keys() and len(unrecorded) > 0
    for name in unrecorded:
        torch.testing.assert_close(unrecorded[name], recorded[name], atol=0, rtol=0, msg=name)
