"""transformer/interpret.py against an independent computation.

The reference side uses plain torch hooks (``register_forward_pre_hook`` / ``register_forward_hook``)
on the model's own nn.Modules -- the blocks, ``attn.o_proj`` -- and none of the project's hook points
or interventions; it patches one cell per forward pass, as TransformerLens does. The two agree within
1e-5 on MHA, GQA, MQA and MoE models across the axes, on models converted from Hugging Face, and on
the Hugging Face models themselves (through their own modules, to the interop tolerance).
"""
import math

import pytest
import torch
import transformers as tf
from torch import nn

from transformer import Transformer, TransformerConfig
from transformer.interop import from_hf
from transformer.interpret import (direct_logit_attribution, logit_difference, logit_lens, patch_heads,
                                   patch_residual, residual_labels)

TOL = 1e-5
HF_TOL = 1e-4  # ours against Hugging Face's own modules: the interop tolerance (tests/test_interop.py)
V, T = 40, 9

# name -> config fields: each model takes other choices on the other axes too
MODELS = {
    "MHA learned layernorm gelu bias": dict(position="learned", norm="layernorm", ffn="gelu", bias=True),
    "GQA rope rmsnorm swiglu": dict(n_kv_heads=2),
    "MQA alibi parallel": dict(n_kv_heads=1, position="alibi", norm="layernorm", ffn="gelu", parallel_block=True),
    "MoE GQA window": dict(n_kv_heads=2, ffn="moe", n_experts=4, top_k=2, sliding_window=5),
    "MHA sinusoidal post-norm": dict(position="sinusoidal", norm="layernorm", norm_position="post", ffn="relu"),
    "MLA sandwich MoE shared dense-first sinks": dict(kv_rank=8, rope_dim=2, v_head_dim=3, norm_position="sandwich",
                                                      ffn="moe", n_experts=4, top_k=2, n_shared_experts=1,
                                                      first_dense_layers=1, sinks=True, attn_softcap=5.0),
    "GQA after-norm geglu qk-norm (1+w)": dict(n_kv_heads=2, head_dim=6, norm_position="after", ffn="geglu",
                                              qk_norm="head", norm_plus_one=True, scale_embeddings=True),
}


def sharpen(model: nn.Module, seed: int = 0) -> nn.Module:
    """Every matrix N(0, 1/fan_in): attention far from uniform and logits far apart, so the checks have teeth."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))
            elif p.dim() == 1:
                p.add_(0.1 * torch.randn(p.shape, generator=g))  # norms' weights and biases, projection biases
    return model


def build(name: str) -> Transformer:
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=V, d_model=16, n_heads=4, n_layers=2, max_len=32, **MODELS[name])
    return sharpen(Transformer(cfg, device="cpu")).eval()


HF_CASES = {
    "LLaMA GQA (Hugging Face)": lambda: tf.LlamaForCausalLM(tf.LlamaConfig(
        vocab_size=V, hidden_size=32, intermediate_size=40, num_attention_heads=4, num_key_value_heads=2,
        num_hidden_layers=2, max_position_embeddings=64, attn_implementation="eager", initializer_range=0.2,
        bos_token_id=None, eos_token_id=None, pad_token_id=0)),
    "GPT-2 (Hugging Face)": lambda: tf.GPT2LMHeadModel(tf.GPT2Config(
        vocab_size=V, n_embd=16, n_head=4, n_layer=2, n_positions=32, attn_implementation="eager",
        initializer_range=0.2, bos_token_id=None, eos_token_id=None, pad_token_id=0)),
}


def hf_model(name: str):
    torch.manual_seed(0)
    return HF_CASES[name]().eval()


def converted(name: str) -> Transformer:
    return from_hf(hf_model(name)) if name in HF_CASES else build(name)


ALL = [*MODELS, *HF_CASES]


def prompts(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A clean prompt and a corrupted one that differs from it at two positions."""
    g = torch.Generator().manual_seed(seed)
    clean = torch.randint(1, V, (1, T), generator=g)
    corrupt = clean.clone()
    corrupt[0, [2, 5]] = (clean[0, [2, 5]] + 7) % (V - 1) + 1
    return clean, corrupt


def metric_for(model: Transformer, clean: torch.Tensor):
    """Logit difference at the last position between the clean run's top token and its second."""
    with torch.no_grad():
        right, wrong = model(clean)[0, -1].topk(2).indices.tolist()
    return logit_difference(right, wrong)


# --- the reference: plain torch hooks on the model's modules ---------------------------------------


def with_hooks(run, *registrations):
    """Run `run()` with the given hook registrations, removing every handle afterwards."""
    handles = [register() for register in registrations]
    try:
        with torch.no_grad():
            return run()
    finally:
        for handle in handles:
            handle.remove()


def residuals(model: Transformer, ids: torch.Tensor) -> list[torch.Tensor]:
    """The input of every block and the output of the last one, caught by torch hooks."""
    caught = []
    keep_input = lambda module, args: caught.append(args[0].clone())  # noqa: E731
    with_hooks(lambda: model(ids),
               *[lambda b=b: b.register_forward_pre_hook(keep_input) for b in model.blocks],
               lambda: model.blocks[-1].register_forward_hook(lambda m, args, out: caught.append(out.clone())))
    return caught


def lens_by_hand(model: Transformer, ids: torch.Tensor) -> torch.Tensor:
    rows = []
    for resid in residuals(model, ids):
        with torch.no_grad():
            h = model.ln_final(resid) if model.cfg.has_final_norm else resid
            rows.append(model.unembed(h)[0].log_softmax(-1))
    return torch.stack(rows)


def replace_position(clean: torch.Tensor, position: int):
    def put(x: torch.Tensor) -> torch.Tensor:
        x = x.clone()
        x[:, position] = clean[:, position]
        return x
    return put


def patch_residual_by_hand(model: Transformer, clean, corrupt, metric) -> torch.Tensor:
    """One forward per (layer, position): a pre-hook on block i swaps its input, a hook on the last block its output."""
    clean_resid = residuals(model, clean)
    L = model.cfg.n_layers
    out = torch.zeros(L + 1, T)
    for row in range(L + 1):
        for pos in range(T):
            put = replace_position(clean_resid[row], pos)
            if row < L:
                register = lambda b=model.blocks[row]: b.register_forward_pre_hook(  # noqa: E731
                    lambda m, args: (put(args[0]), *args[1:]))
            else:
                register = lambda b=model.blocks[-1]: b.register_forward_hook(lambda m, args, o: put(o))  # noqa: E731
            out[row, pos] = with_hooks(lambda: metric(model(corrupt)), register)
    return out


def patch_heads_by_hand(model: Transformer, clean, corrupt, metric, projections=None) -> torch.Tensor:
    """One forward per (layer, head): a pre-hook on W_o swaps that head's slice of concat(heads)."""
    projections = projections or [block.attn.o_proj for block in model.blocks]
    n_heads = model.cfg.n_heads
    concat = []
    with_hooks(lambda: model(clean), *[lambda p=p: p.register_forward_pre_hook(
        lambda m, args: concat.append(args[0].clone())) for p in projections])
    out = torch.zeros(len(projections), n_heads)
    for layer, projection in enumerate(projections):
        d_head = concat[layer].shape[-1] // n_heads
        for head in range(n_heads):
            cols = slice(head * d_head, (head + 1) * d_head)

            def swap(m, args, clean_concat=concat[layer], cols=cols):
                x = args[0].clone()
                x[..., cols] = clean_concat[..., cols]
                return (x, *args[1:])
            out[layer, head] = with_hooks(lambda: metric(model(corrupt)),
                                          lambda p=projection: p.register_forward_pre_hook(swap))
    return out


# --- the cross-checks ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_logit_lens_matches_torch_hooks_and_ends_on_the_models_own_prediction(name):
    model = converted(name)
    ids, _ = prompts()
    lens = logit_lens(model, ids)
    assert lens.shape == (model.cfg.n_layers + 1, T, V) == (len(residual_labels(model.cfg.n_layers)), T, V)
    torch.testing.assert_close(lens, lens_by_hand(model, ids), atol=TOL, rtol=0)
    with torch.no_grad():
        torch.testing.assert_close(lens[-1], model(ids)[0].log_softmax(-1), atol=TOL, rtol=0)
    assert (lens[0].argmax(-1) != lens[-1].argmax(-1)).any()  # the rows say different things: the check has teeth


PATCHINGS = {  # kind -> (ours, the torch-hook reference, the grid's shape)
    "residual": (patch_residual, patch_residual_by_hand, lambda cfg: (cfg.n_layers + 1, T)),
    "heads": (patch_heads, patch_heads_by_hand, lambda cfg: (cfg.n_layers, cfg.n_heads)),
}


@pytest.mark.parametrize("kind", PATCHINGS)
@pytest.mark.parametrize("name", ALL)
def test_patching_matches_one_torch_hook_per_cell(name, kind):
    batched, by_hand, shape = PATCHINGS[kind]
    model = converted(name)
    clean, corrupt = prompts()
    metric = metric_for(model, clean)
    ours = batched(model, clean, corrupt, metric)
    assert ours.shape == shape(model.cfg)
    torch.testing.assert_close(ours, by_hand(model, clean, corrupt, metric), atol=TOL, rtol=0)
    assert ours.max() - ours.min() > 0.01  # patching moved the metric: the check has teeth


def test_query_heads_of_one_kv_group_are_patched_apart():
    """In GQA two query heads read one kv head, yet each has its own effect."""
    model = build("GQA rope rmsnorm swiglu")
    clean, corrupt = prompts()
    effects = patch_heads(model, clean, corrupt, metric_for(model, clean))  # (L, H); heads 0, 1 share kv head 0
    assert (effects[:, 0] - effects[:, 1]).abs().max() > 1e-3


@pytest.mark.parametrize("name", ["LLaMA GQA (Hugging Face)"])
def test_lens_and_patching_match_the_hugging_face_models_own_modules(name):
    """Ours on the converted model against torch hooks on Hugging Face's decoder layers and o_proj."""
    source = hf_model(name)
    model = from_hf(source)
    clean, corrupt = prompts()
    with torch.no_grad():
        out = source(clean, output_hidden_states=True)
        body = source.model
        # hidden_states: the input of every layer, then the final norm's output
        hf_lens = [source.lm_head(body.norm(h)) for h in out.hidden_states[:-1]] + [out.logits]
        hf_lens = torch.cat(hf_lens).log_softmax(-1)
    torch.testing.assert_close(logit_lens(model, clean), hf_lens, atol=HF_TOL, rtol=0)

    metric = metric_for(model, clean)
    hf_metric = lambda out: metric(out.logits)  # noqa: E731
    projections = [layer.self_attn.o_proj for layer in body.layers]
    reference = patch_heads_by_hand(_Logits(source, hf_metric), clean, corrupt, lambda value: value, projections)
    torch.testing.assert_close(patch_heads(model, clean, corrupt, metric), reference, atol=HF_TOL, rtol=0)


class _Logits:
    """A Hugging Face model seen as patch_heads_by_hand needs it: model(ids) -> the metric, and the head count."""

    def __init__(self, source, metric):
        self.source, self.metric = source, metric
        self.cfg = type("cfg", (), {"n_heads": source.config.num_attention_heads})

    def __call__(self, ids):
        return self.metric(self.source(ids))


# --- direct logit attribution ---------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in ALL if "post-norm" not in n])
def test_attribution_adds_up_to_the_logit(name):
    model = converted(name)
    ids, _ = prompts()
    with torch.no_grad():
        token = int(model(ids)[0, -1].argmax())
    parts = direct_logit_attribution(model, ids, token)
    assert parts.heads.shape == (model.cfg.n_layers, model.cfg.n_heads) and parts.ffn.shape == (model.cfg.n_layers,)
    assert parts.total == pytest.approx(parts.logit, abs=1e-4)
    cfg = model.cfg
    if parts.experts is not None:
        routed = [cfg.layer_is_moe(layer) for layer in range(cfg.n_layers)]  # a dense first layer has no experts
        chosen = (parts.experts != 0).sum(-1)  # top_k experts per routed layer write, the others do not
        assert chosen.tolist() == [cfg.top_k if r else 0 for r in routed]
        if not cfg.n_shared_experts:  # the routed experts are the whole FFN
            torch.testing.assert_close(parts.experts.sum(-1)[routed], parts.ffn[routed], atol=1e-5, rtol=0)


@pytest.mark.parametrize("fields", [dict(attn_gate=True, n_kv_heads=2), dict(logit_softcap=3.0, norm="layernorm"),
                                    dict(norm_position="after", ffn="moe", n_experts=4, top_k=2, bias=True),
                                    dict(parallel_block=True, parallel_norms=2, ffn="moe", n_experts=4, top_k=1),
                                    # a hybrid: a state layer's heads write their read, normalised and gated
                                    dict(attention_layers="linear,softmax", linear_value_heads=8,
                                         linear_key_heads=4, linear_kind="gated-deltanet"),
                                    dict(attention_layers="deltanet,softmax", norm_position="after"),
                                    # LFM2: a gated short convolution writes its whole width as one part
                                    dict(attention_layers="short-conv,softmax", linear_kind="short-conv",
                                         linear_conv_size=3)])
def test_attribution_adds_up_with_gates_caps_and_norms_after_the_sublayer(fields):
    """A gated head's write is z times its gate; soft-capped logits split before the cap; a norm on each
    sublayer's output is frozen like the final one; a parallel block's FFN reads its own norm."""
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=V, d_model=16, n_heads=4, n_layers=2, max_len=32, **fields)
    model = sharpen(Transformer(cfg, device="cpu")).eval()
    ids, _ = prompts()
    parts = direct_logit_attribution(model, ids, 3, 4)
    assert parts.total == pytest.approx(parts.logit, abs=1e-4)
    with torch.no_grad():
        out = float(model(ids)[0, 4, 3])
    if cfg.logit_softcap is None:
        assert parts.capped_logit is None and parts.logit == pytest.approx(out, abs=1e-5)
    else:
        assert parts.capped_logit == pytest.approx(out, abs=1e-5)
        assert out == pytest.approx(cfg.logit_softcap * math.tanh(parts.logit / cfg.logit_softcap), abs=1e-5)
    if parts.experts is not None:
        torch.testing.assert_close(parts.experts.sum(-1), parts.ffn, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", ["MHA learned layernorm gelu bias", "GQA rope rmsnorm swiglu"])
def test_each_heads_attribution_matches_torch_hooks(name):
    """Head h's write, caught at W_o's input, through the final norm's scale, onto the token's unembedding."""
    model = build(name)
    ids, _ = prompts()
    token, position = 3, 4
    concat, final = [], []
    with_hooks(lambda: model(ids),
               *[lambda b=b: b.attn.o_proj.register_forward_pre_hook(lambda m, a: concat.append(a[0][0, position]))
                 for b in model.blocks],
               lambda: model.blocks[-1].register_forward_hook(lambda m, a, out: final.append(out[0, position])))
    norm = model.ln_final
    centre = (lambda v: v - v.mean()) if model.cfg.norm == "layernorm" else (lambda v: v)
    scale = 1 / torch.sqrt(centre(final[0]).pow(2).mean() + norm.eps)
    d_head = model.cfg.d_head
    expected = torch.zeros(model.cfg.n_layers, model.cfg.n_heads)
    for layer, block in enumerate(model.blocks):
        for head in range(model.cfg.n_heads):
            cols = slice(head * d_head, (head + 1) * d_head)
            write = block.attn.o_proj.weight[:, cols] @ concat[layer][cols]  # (d_model,)
            expected[layer, head] = (centre(write) * scale * norm.weight) @ model.unembed.weight[token]
    parts = direct_logit_attribution(model, ids, token, position)
    torch.testing.assert_close(parts.heads, expected.detach(), atol=TOL, rtol=0)


def test_attribution_refuses_a_post_norm_model_with_the_reason():
    with pytest.raises(ValueError, match="normalises after every block"):
        direct_logit_attribution(build("MHA sinusoidal post-norm"), prompts()[0], 0)


# --- batching, subsets, budgets and bad input -----------------------------------------------------


def test_subsets_and_batch_sizes_give_the_same_cells():
    model = build("GQA rope rmsnorm swiglu")
    clean, corrupt = prompts()
    metric = metric_for(model, clean)
    full = patch_residual(model, clean, corrupt, metric)
    part = patch_residual(model, clean, corrupt, metric, layers=[2, 0], positions=[5, 8, 2], batch_size=2)
    torch.testing.assert_close(part, full[[2, 0]][:, [5, 8, 2]], atol=TOL, rtol=0)
    torch.testing.assert_close(patch_heads(model, clean, corrupt, metric, layers=[1]),
                               patch_heads(model, clean, corrupt, metric)[1:], atol=TOL, rtol=0)


def test_a_row_costs_one_forward_pass_batched_from_its_hook_on():
    model = build("MHA learned layernorm gelu bias")
    clean, corrupt = prompts()
    batches = []  # (block, batch size it saw)
    with_hooks(lambda: patch_residual(model, clean, corrupt, metric_for(model, clean)),
               *[lambda i=i, b=b: b.register_forward_pre_hook(lambda m, args: batches.append((i, args[0].shape[0])))
                 for i, b in enumerate(model.blocks)])
    # the metric's own clean run and the recorded clean run; then per row r one forward pass: blocks up to r
    # read the one corrupted prompt (row r's hook point is block r's first step), later blocks T patched copies
    runs = [[(i, 1) for i in range(2)]] * 2 + [[(i, T if i > r else 1) for i in range(2)] for r in range(3)]
    assert batches == [call for run in runs for call in run]


def test_a_grid_over_the_budget_is_refused_with_its_size_and_the_way_out():
    model = build("GQA rope rmsnorm swiglu")
    clean, corrupt = prompts()
    grid = r"3 layers x 9 positions runs the corrupted prompt 27 times .* pass fewer layers=\[\.\.\.\] or positions"
    with pytest.raises(ValueError, match=grid):
        patch_residual(model, clean, corrupt, metric_for(model, clean), max_forwards=20)
    fewer = patch_residual(model, clean, corrupt, metric_for(model, clean), positions=[7, 8], max_forwards=20)
    assert fewer.shape == (3, 2)
    with pytest.raises(ValueError, match="2 layers x 4 heads"):
        patch_heads(model, clean, corrupt, metric_for(model, clean), max_forwards=5)


@pytest.mark.parametrize("call, message", [
    (lambda m, c: patch_residual(m, c, c[:, :-1], logit_difference(0, 1)), "9 tokens and the corrupted one 8"),
    (lambda m, c: patch_heads(m, c, torch.zeros(1, 0, dtype=torch.long), logit_difference(0, 1)), "at least one token"),
    (lambda m, c: logit_lens(m, c.repeat(2, 1)), r"one prompt .* shape \(1, T\)"),
    (lambda m, c: patch_residual(m, c, c, logit_difference(0, 1), layers=[5]), "indices from 0 to 2"),
    (lambda m, c: patch_residual(m, c, c, logit_difference(0, 1), positions=[]), "non-empty"),
    (lambda m, c: direct_logit_attribution(m, c, V), "outside 0"),
])
def test_bad_input_is_a_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call(build("GQA rope rmsnorm swiglu"), prompts()[0])


def test_an_encoder_decoder_is_refused():
    model = Transformer(TransformerConfig(arch="encoder-decoder", vocab_size=V, d_model=16, n_heads=4), device="cpu")
    with pytest.raises(ValueError, match="encoder-decoder"):
        logit_lens(model, prompts()[0])


def test_nothing_is_left_behind():
    model = build("MoE GQA window")
    clean, corrupt = prompts()
    patch_heads(model, clean, corrupt, metric_for(model, clean))
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())
    with torch.no_grad():
        assert torch.equal(model(clean), model(clean))


def test_the_patching_benchmark_runs_and_both_sides_agree(capsys):
    from benchmarks import interpret as benchmark

    rows = benchmark.main(["--smoke"])
    assert [r.row for r in rows] == ["R.tiny", "H.tiny", "G.1", "G.2"]
    assert all(math.isfinite(r.ratio) and r.ours > 0 and r.reference > 0 for r in rows)
    assert all(r.details.get("max_abs_difference", 0.0) <= TOL for r in rows)  # batched = one cell per pass
    assert rows[0].target == "ours <= 1 s" and "| R.tiny |" in capsys.readouterr().out
