"""Hooks and traces: every name, in forward order, with the shapes its dims promise; filters, memory cap,
thread safety, nothing left behind, interventions; and docs/hooks.md documents every hook point."""
import fnmatch
import itertools
import re
import threading
from pathlib import Path

import pytest
import torch

from transformer import AXES, HookPoint, Transformer, choices
from transformer.flash import TiledAttention
from transformer.hook_sites import SITES
from transformer.hooks import active_recorder, attention_stacks, hook_name

DOC = Path(__file__).resolve().parent.parent / "docs" / "hooks.md"
STACKS = {"decoder": [""], "encoder": [""], "encoder-decoder": ["encoder.", "decoder."]}
ROPE_ONLY = ("attn.hook_rope_angles", "attn.hook_rot_q", "attn.hook_rot_k")
ALIBI_ONLY = ("attn.hook_alibi_bias",)

# the DESIGN table's names, per block and per stack; every model has them
CORE_BLOCK_NAMES = ["hook_resid_pre", "ln1.hook_normalized", "attn.hook_q", "attn.hook_k", "attn.hook_v",
                    "attn.hook_raw_scores", "attn.hook_mask", "attn.hook_attn_scores", "attn.hook_pattern",
                    "attn.hook_z", "hook_attn_out", "hook_resid_mid", "ln2.hook_normalized", "hook_mlp_out",
                    "hook_resid_post"]
CROSS_BLOCK_NAMES = ["ln_cross.hook_normalized", "cross_attn.hook_q", "cross_attn.hook_k", "cross_attn.hook_v",
                     "cross_attn.hook_raw_scores", "cross_attn.hook_mask", "cross_attn.hook_attn_scores",
                     "cross_attn.hook_pattern", "cross_attn.hook_z", "hook_cross_attn_out", "hook_resid_cross"]
GATED_NAMES = ["mlp.hook_gate", "mlp.hook_up", "mlp.hook_post"]
MLP_NAMES = ["mlp.hook_pre", "mlp.hook_post"]
ROUTER_NAMES = ["mlp.hook_router_logits", "mlp.hook_router_probs", "mlp.hook_expert_indices",
                "mlp.hook_expert_weights", "mlp.hook_expert_load", "mlp.hook_aux_loss"]


def ffn_names(ffn: str) -> list[str]:
    """What an FFN kind records, by its row's flags: a router's steps, a gate's, or an MLP's."""
    row = AXES["ffn"].row(ffn)
    return ROUTER_NAMES if row.routed else GATED_NAMES if row.gated else MLP_NAMES


def position_names(position: str, in_attention: bool) -> list[str]:
    """The hooks a position scheme's row says it fires: at the embeddings, or in every attention layer."""
    return [h for h in AXES["position"].row(position).hooks if h.startswith("attn.") == in_attention]


def inputs(arch, B=2, S=6, T=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, 32, (B, S), generator=g)
    return (src, torch.randint(0, 32, (B, T), generator=g)) if arch == "encoder-decoder" else (src,)


def documented_names(arch, position, ffn, n_layers=2):
    """Every name the documentation promises for this configuration."""
    names = ["hook_logits"]
    for stack in STACKS[arch]:
        names += [f"{stack}hook_embed", f"{stack}ln_final.hook_normalized"]
        names += [f"{stack}{n}" for n in position_names(position, in_attention=False)]
        per_block = CORE_BLOCK_NAMES + ffn_names(ffn) + position_names(position, in_attention=True)
        if stack == "decoder.":
            per_block = per_block + CROSS_BLOCK_NAMES
        names += [f"{stack}blocks.{i}.{n}" for i in range(n_layers) for n in per_block]
    return set(names)


TRACE_CASES = list(itertools.product(choices("arch"), ["rope", "alibi", "learned", "none"], choices("ffn")))


@pytest.mark.parametrize("arch,position,ffn", TRACE_CASES)
def test_trace_holds_every_documented_name_and_nothing_else(arch, position, ffn, tiny_model):
    model = tiny_model(arch=arch, position=position, ffn=ffn, n_kv_heads=2)
    _, trace = model.run_with_trace(*inputs(arch))
    assert set(trace.names()) == documented_names(arch, position, ffn)
    assert len(trace.events) == len(trace.names()), "one forward pass records each name once"
    # every hook point that did not fire belongs to a position scheme this model does not use
    silent = set(model.hook_points()) - set(trace.names())
    unused = (() if position == "rope" else ROPE_ONLY) + (() if position == "alibi" else ALIBI_ONLY)
    assert all(name.endswith(unused) for name in silent), silent


@pytest.mark.parametrize("arch", choices("arch"))
def test_events_come_in_forward_order(arch, tiny_model):
    model = tiny_model(arch=arch, position="rope", ffn="moe", n_kv_heads=2)
    _, trace = model.run_with_trace(*inputs(arch))
    assert [e.index for e in trace.events] == list(range(len(trace.events)))
    order = {e.name: e.index for e in trace.events}
    block_order = ["hook_resid_pre", "ln1.hook_normalized", "attn.hook_q", "attn.hook_k", "attn.hook_v",
                   "attn.hook_rope_angles", "attn.hook_rot_q", "attn.hook_rot_k", "attn.hook_raw_scores",
                   "attn.hook_mask", "attn.hook_attn_scores", "attn.hook_pattern", "attn.hook_z", "hook_attn_out",
                   "hook_resid_mid"]
    tail_order = ["ln2.hook_normalized", "mlp.hook_router_logits", "mlp.hook_router_probs",
                  "mlp.hook_expert_indices", "mlp.hook_expert_weights", "mlp.hook_expert_load",
                  "mlp.hook_aux_loss", "hook_mlp_out", "hook_resid_post"]
    sequence = []
    for stack in STACKS[arch]:
        sequence.append(f"{stack}hook_embed")
        for i in range(2):
            names = block_order + (CROSS_BLOCK_NAMES if stack == "decoder." else []) + tail_order
            sequence += [f"{stack}blocks.{i}.{n}" for n in names]
        sequence.append(f"{stack}ln_final.hook_normalized")
    sequence.append("hook_logits")
    indices = [order[name] for name in sequence]
    assert indices == sorted(indices), [n for n, i, j in zip(sequence, indices, indices[1:]) if i > j]
    assert trace.events[-1].name == "hook_logits"


def test_post_norm_normalises_after_the_sublayer(tiny_model):
    model = tiny_model(norm_position="post", norm="layernorm")
    _, trace = model.run_with_trace(*inputs("decoder"))
    order = {e.name: e.index for e in trace.events}
    assert order["blocks.0.hook_attn_out"] < order["blocks.0.ln1.hook_normalized"] < order["blocks.0.hook_resid_mid"]
    assert order["blocks.0.hook_mlp_out"] < order["blocks.0.ln2.hook_normalized"] < order["blocks.0.hook_resid_post"]
    assert "ln_final.hook_normalized" not in trace


@pytest.mark.parametrize("arch", choices("arch"))
@pytest.mark.parametrize("position", ["rope", "alibi"])
def test_recorded_shapes_match_their_named_dims(arch, position, tiny_model):
    model = tiny_model(arch=arch, position=position, ffn="moe", n_kv_heads=2)
    B, S, T = 3, 6, 4
    masks = {"attention_mask": torch.ones(B, S, dtype=torch.long)}  # with padding masks every mask has its B rows
    if arch == "encoder-decoder":
        masks["tgt_attention_mask"] = torch.ones(B, T, dtype=torch.long)
    _, trace = model.run_with_trace(*inputs(arch, B, S, T), **masks)
    cfg = model.cfg
    sizes = {"B": B, "H": 4, "G": 2, "d_head": 4, "d_v": 4, "d_rope/2": 2, "d_model": 16, "E": cfg.n_experts,
             "k": cfg.top_k, "vocab": 32, "1": 1, "S": S}
    broadcast_over_batch = ("hook_rope_angles", "hook_alibi_bias")  # positions shared by every row: B is 1
    for event in trace.events:
        on_source = arch != "encoder-decoder" or event.name.startswith("encoder.")
        length = S if on_source else T
        expected = tuple(length if d.startswith("T") else sizes[d] for d in event.dims)
        if event.name.endswith(broadcast_over_batch):
            expected = (1, *expected[1:])
        assert event.shape == expected, f"{event.name}: {event.named_shape}, dims promise {expected}"
        assert event.op, f"{event.name} does not say what made it"
    stack = "decoder." if arch == "encoder-decoder" else ""
    length = T if arch == "encoder-decoder" else S
    assert trace[f"{stack}blocks.0.attn.hook_q"].shape == (B, 4, length, 4)
    assert trace[f"{stack}blocks.0.attn.hook_k"].shape == (B, 2, length, 4)
    assert trace[f"{stack}blocks.0.attn.hook_v"].shape == (B, 2, length, 4)
    assert trace[f"{stack}blocks.1.attn.hook_pattern"].shape == (B, 4, length, length)
    if arch == "encoder-decoder":
        assert trace["decoder.blocks.0.cross_attn.hook_pattern"].shape == (B, 4, T, S)
        assert trace["decoder.blocks.0.cross_attn.hook_k"].shape == (B, 2, S, 4)


def test_names_filter_records_only_what_was_asked(tiny_model):
    model = tiny_model(ffn="moe")
    ids = inputs("decoder")
    full_logits, full = model.run_with_trace(*ids)
    asked = {
        "blocks.0.attn.hook_pattern": ["blocks.0.attn.hook_pattern"],
        "blocks.*.attn.hook_q": ["blocks.0.attn.hook_q", "blocks.1.attn.hook_q"],
        "*hook_resid_*": [n for n in full.names() if fnmatch.fnmatchcase(n, "*hook_resid_*")],
    }
    for pattern, expected in asked.items():
        logits, trace = model.run_with_trace(*ids, names=[pattern])
        assert trace.names() == expected
        for name in expected:  # unasked layers run the fused kernel, equal to 1e-6
            torch.testing.assert_close(trace[name], full[name], atol=1e-6, rtol=0)
        torch.testing.assert_close(logits, full_logits, atol=1e-6, rtol=0)
    _, mixed = model.run_with_trace(*ids, names=["hook_logits", "blocks.1.mlp.hook_*"])
    assert mixed.names() == [n for n in full.names() if n.startswith("blocks.1.mlp.")] + ["hook_logits"]
    _, nothing = model.run_with_trace(*ids, names=["blocks.7.*"])
    assert len(nothing) == 0


def recorder_seen_by_plain_forward(model, *args):
    """The active recorder as every hook point sees it during a plain forward pass."""
    seen = []
    handles = [m.register_forward_pre_hook(lambda module, inp: seen.append(active_recorder()))
               for m in model.modules() if isinstance(m, HookPoint)]
    try:
        with torch.no_grad():
            model(*args)
    finally:
        for handle in handles:
            handle.remove()
    return seen


def test_memory_cap_refuses_with_a_clear_message_and_leaves_no_recorder(tiny_model):
    model = tiny_model()
    ids = inputs("decoder")
    with pytest.raises(MemoryError) as error:
        model.run_with_trace(*ids, max_bytes=2_000)
    message = str(error.value)
    assert "max_bytes" in message and "cap" in message and "names=" in message
    assert active_recorder() is None
    seen = recorder_seen_by_plain_forward(model, *ids)
    assert seen and all(r is None for r in seen)
    # the same cap is enough for one small tensor
    _, trace = model.run_with_trace(*ids, names="blocks.0.attn.hook_pattern", max_bytes=2_000)
    assert trace.nbytes == 2 * 4 * 6 * 6 * 4 <= 2_000


def test_an_exception_inside_the_forward_leaves_no_recorder(tiny_model):
    model = tiny_model()
    ids = inputs("decoder")

    def broken(tensor, event):
        raise RuntimeError("intervention failed")

    with pytest.raises(RuntimeError, match="intervention failed"):
        model.run_with_trace(*ids, interventions={"blocks.1.attn.hook_z": broken})
    assert active_recorder() is None
    assert all(r is None for r in recorder_seen_by_plain_forward(model, *ids))
    with pytest.raises(RuntimeError):
        with model.intervene({"blocks.0.hook_resid_pre": broken}):
            model(*ids)
    assert active_recorder() is None


def test_two_threads_tracing_one_model_get_only_their_own_tensors(tiny_model):
    model = tiny_model(position="alibi", ffn="moe", n_kv_heads=2)
    work = {
        "short": dict(args=inputs("decoder", B=1, S=5, seed=1), interventions=None),
        "long": dict(args=inputs("decoder", B=3, S=8, seed=2),
                     interventions={"blocks.0.attn.hook_pattern": lambda t, e: t * 0.5}),
    }
    expected = {key: model.run_with_trace(*job["args"], interventions=job["interventions"]) for key, job in work.items()}
    barrier, rounds = threading.Barrier(len(work)), 6
    results, errors = {key: [] for key in work}, []

    def run(key):
        try:
            for _ in range(rounds):
                barrier.wait()
                results[key].append(model.run_with_trace(*work[key]["args"], interventions=work[key]["interventions"]))
        except Exception as error:  # reported below; a thread's exception would otherwise vanish
            errors.append(error)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(key,)) for key in work]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    for key, (expected_logits, expected_trace) in expected.items():
        assert len(results[key]) == rounds
        for logits, trace in results[key]:
            assert torch.equal(logits, expected_logits)
            assert [e.name for e in trace.events] == [e.name for e in expected_trace.events]
            for got, want in zip(trace.events, expected_trace.events):
                assert torch.equal(got.tensor, want.tensor), f"{key}: {got.name} differs"


def test_tracing_leaves_no_torch_hook_and_changes_nothing(tiny_model):
    model = tiny_model(arch="encoder-decoder", ffn="moe")
    ids = inputs("encoder-decoder")
    with torch.no_grad():
        before = model(*ids)
    model.run_with_trace(*ids)
    model.run_with_trace(*ids, names="*pattern", interventions={"decoder.blocks.0.attn.hook_z": lambda t, e: t * 0})
    with model.intervene({"encoder.blocks.0.hook_resid_pre": lambda t, e: t + 1}):
        model(*ids)
    for name, module in model.named_modules():
        for hooks in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks"):
            assert not getattr(module, hooks), f"{name or 'model'} kept {hooks}"
    assert not torch.nn.modules.module._global_forward_hooks
    assert all(m.fused for m in model.modules() if hasattr(m, "fused")), "recording must not switch the default path"
    with torch.no_grad():
        assert torch.equal(model(*ids), before)


@pytest.mark.parametrize("head", [0, 2])
def test_zeroing_one_heads_pattern_zeroes_only_that_heads_output(head, tiny_model):
    model = tiny_model(n_kv_heads=2)
    ids = inputs("decoder")
    baseline_logits, baseline = model.run_with_trace(*ids)

    def ablate(pattern, event):  # (B, H, T_q, T_kv)
        pattern = pattern.clone()
        pattern[:, head] = 0
        return pattern

    interventions = {"blocks.0.attn.hook_pattern": ablate}
    logits, trace = model.run_with_trace(*ids, interventions=interventions)
    z, baseline_z = trace["blocks.0.attn.hook_z"], baseline["blocks.0.attn.hook_z"]  # (B, H, T, d_head)
    assert (z[:, head] == 0).all()
    others = [h for h in range(4) if h != head]
    assert torch.equal(z[:, others], baseline_z[:, others])
    assert (baseline_z[:, head] != 0).any()
    assert (trace["blocks.0.attn.hook_pattern"][:, head] == 0).all()
    assert not torch.allclose(logits, baseline_logits)
    with model.intervene(interventions), torch.no_grad():  # block 1 runs fused here: equal to 1e-6
        torch.testing.assert_close(model(*ids), logits, atol=1e-6, rtol=0)
    with torch.no_grad():
        torch.testing.assert_close(model(*ids), baseline_logits, atol=1e-6, rtol=0)


# --- docs/hooks.md documents every hook point -------------------------------------

DOC_CONFIGS = [dict(arch=arch, position=position, ffn=ffn)
               for arch, position, ffn in itertools.product(choices("arch"), choices("position"), choices("ffn"))]
DOC_CONFIGS += [dict(parallel_block=True), dict(embed_norm=True, head_transform=True, head_bias=True),
                dict(qk_norm="head", attn_softcap=30.0, sinks=True, attn_gate=True, norm_position="sandwich"),
                dict(kv_rank=8, rope_dim=2, head_dim=6), dict(arch="encoder-decoder", norm_position="after"),
                dict(norm_position="post", final_norm=True),
                dict(arch="encoder", embed_norm=True, head_transform=True),
                dict(attention_layers="1:1"),  # a layer that keeps a state beside a softmax one
                dict(attention_layers="1:1", linear_kind="kimi-delta"),  # its decay per key channel
                dict(attention_layers="1:1", linear_kind="short-conv", linear_conv_size=3),  # LFM2's gated convolution
                dict(attention_layers="1:1", linear_kind="decayed-linear", linear_sigmoid_gate=True),  # lightning's gate
                # Llama 4: a NoPE layer's temperature, the L2 norm on the RoPE layer; a layer reading layer 0's K and V
                dict(n_layers=3, nope_layers="every 2", attn_temperature_scale=0.1, qk_norm="l2",
                     kv_shared_layers="2 from 0"),
                # Gemma 4: per-layer input embeddings, the value norm, K = V, a scalar per block
                dict(per_layer_dim=4, value_norm=True, k_eq_v=True, layer_scalar=True),
                # DeepSeek-V3.2's lightning indexer on latent attention: its scores, the chosen keys, the dense weights
                dict(kv_rank=8, q_rank=8, rope_dim=2, head_dim=6, index_top_k=3, index_heads=2, index_head_dim=4),
                # DeepSeek-V4: a window beside pooled blocks, an indexer choosing blocks, hyper-connections
                dict(n_kv_heads=1, q_rank=8, rope_dim=2, head_dim=6, sliding_window=4, sinks=True, hyper_streams=2,
                     compress_layers="pooled 4, indexed 2", index_top_k=2, index_heads=2, index_head_dim=4,
                     o_groups=2, o_rank=4)]


def hook_pattern(name: str) -> str:
    """A hook name with the stack prefix dropped and the block index replaced by {i}."""
    return re.sub(r"blocks\.\d+\.", "blocks.{i}.", re.sub(r"^(encoder|decoder)\.", "", name))


def test_docs_table_lists_every_hook_point_with_its_dims(tiny_config):
    doc = DOC.read_text()
    dims = {}  # pattern -> the dims its hook point declares
    for changes in DOC_CONFIGS:
        for name, point in Transformer(tiny_config(**changes), device="cpu").hook_points().items():
            dims[hook_pattern(name)] = "(" + ", ".join(point.dims) + ")"
    table = dict(re.findall(r"^\| `([^`]+)` \| (\([^)]*\)) \|", doc, flags=re.MULTILINE))  # name -> dims column
    assert not sorted(set(dims) - set(table)), f"docs/hooks.md does not document {sorted(set(dims) - set(table))}"
    assert not sorted(set(table) - set(dims)), f"docs/hooks.md lists hook points that do not exist: {sorted(set(table) - set(dims))}"
    wrong = {name: (table[name], dims[name]) for name in dims if table[name] != dims[name]}
    assert not wrong, f"documented dims differ from the hook points' dims: {wrong}"
    assert "`encoder.`" in doc and "`decoder.`" in doc, "the prefix rule for encoder-decoder models is stated"


# --- one row per site; names from hook_name and attention_stacks ----------------------------


def test_every_hook_point_is_named_after_its_site_and_every_site_is_recorded(tiny_config):
    recorded = set()
    for changes in DOC_CONFIGS + [dict(ffn="gelu", gelu_approximate="tanh")]:
        for name, point in Transformer(tiny_config(**changes), device="cpu").hook_points().items():
            assert name.rsplit(".", 1)[-1] == point.site, f"{name} takes its dims and op from the row of {point.site}"
            recorded.add(point.site)
    recorded |= {m.site for m in TiledAttention().modules() if isinstance(m, HookPoint)}
    assert recorded == set(SITES), f"rows of hook_sites.SITES no hook point records: {sorted(set(SITES) - recorded)}"
    with pytest.raises(KeyError, match="hook_sites"):
        HookPoint("hook_unknown")


@pytest.mark.parametrize("arch", choices("arch"))
def test_attention_stacks_name_every_attention_module_a_model_records(tiny_config, arch):
    names = Transformer(tiny_config(arch=arch), device="cpu").hook_points()
    stacks = attention_stacks(arch)
    expected = ({hook_name(1, "attn.hook_pattern", stack) for stack in stacks.self_attention}
                | {hook_name(1, "cross_attn.hook_pattern", stack) for stack in stacks.cross_attention})
    assert {name for name in names if re.fullmatch(r"(\w+\.)?blocks\.1\.\w+\.hook_pattern", name)} == expected
    assert stacks.input == ("encoder" if arch == "encoder-decoder" else "")
    assert stacks.output == ("decoder" if arch == "encoder-decoder" else "")
