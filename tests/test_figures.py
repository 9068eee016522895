"""Figure builders, the diagram, the stepper's registries and the downloads: each test reads the numbers back out."""
import io
import math
import re
import zipfile

import numpy as np
import pytest
import torch
from PIL import Image

from transformer import MODEL_CARDS, PRESETS, Transformer, TransformerConfig, checkpoint
from transformer.flash import TiledAttention
from transformer.hook_sites import SITES
from transformer.hooks import HookPoint
from transformer.attention import Attention
from transformer.positions import rope_angles, rope_inv_freq
from ui.app import export
from ui.figures import base as figures
from ui.compute import stepper
from ui.figures import playground as pf
from ui.figures.diagram import HIGHLIGHT, architecture_dot

TINY = dict(vocab_size=32, d_model=16, n_heads=4, n_layers=2, max_len=32)
LABELS = list("abcdef")


def run_trace(**changes):
    """(config, model, numpy arrays, events) of a tiny seeded model on six tokens."""
    torch.manual_seed(0)
    cfg = TransformerConfig(**{**TINY, **changes})
    model = Transformer(cfg, device="cpu").eval()
    ids = torch.tensor([[3, 1, 4, 1, 5, 9]])
    args = (ids, ids) if cfg.arch == "encoder-decoder" else (ids,)
    _, trace = model.run_with_trace(*args)
    events = [dict(index=e.index, name=e.name, dims=list(e.dims), op=e.op, shape=list(e.shape)) for e in trace.events]
    return cfg, model, trace.to_numpy(), events


def z_of(trace) -> np.ndarray:
    return np.asarray(trace.z, dtype=float)


# --- ui/figures/base.py --------------------------------------------------------------------------------

def test_heatmap_blanks_masked_cells_and_numbers_labels():
    lowest = np.finfo(np.float32).min
    matrix = np.array([[1.0, lowest], [0.5, -np.inf]])
    fig = figures.heatmap(matrix, ["k0", "k1"], ["q0", "q1"], signed=True)
    z = z_of(fig.data[0])
    assert z[0, 0] == 1.0 and z[1, 0] == 0.5
    assert np.isnan(z[0, 1]) and np.isnan(z[1, 1])
    assert list(fig.data[0].x) == ["0:k0", "1:k1"] and list(fig.data[0].y) == ["0:q0", "1:q1"]
    assert (fig.data[0].zmin, fig.data[0].zmax) == (-1.0, 1.0)  # symmetric around 0, set by the largest |value|
    assert fig.layout.xaxis.title.text == "key" and fig.layout.yaxis.title.text == "query"


def test_heatmap_downsamples_large_matrices():
    matrix = np.arange(300 * 10, dtype=float).reshape(300, 10)
    fig = figures.heatmap(matrix, [str(i) for i in range(10)], [str(i) for i in range(300)])
    z = z_of(fig.data[0])
    assert z.shape == (100, 10)  # every 3rd row keeps 300 rows under 128
    assert np.array_equal(z, matrix[::3])
    assert len(fig.data[0].y) == 100 and fig.data[0].y[1] == "1:3"


def test_head_grid_puts_each_kv_group_on_one_row():
    patterns = np.random.default_rng(0).random((8, 5, 5))
    fig = figures.head_grid(patterns, LABELS[:5], LABELS[:5], n_kv_heads=2)
    assert len(fig.data) == 8
    for h, trace in enumerate(fig.data):
        assert np.allclose(z_of(trace), patterns[h])
    rows = {}
    for h, trace in enumerate(fig.data):
        domain = tuple(fig.layout[trace.yaxis.replace("y", "yaxis")].domain)
        rows.setdefault(domain, []).append(h)
    assert sorted(rows.values()) == [[0, 1, 2, 3], [4, 5, 6, 7]]  # heads 0-3 share kv head 0, 4-7 kv head 1
    titles = [a.text for a in fig.layout.annotations]
    assert titles[5] == "head 5 · kv 1"
    pf.label_grid_axes(fig, "key", "query")
    titled_y = [h for h, t in enumerate(fig.data) if fig.layout[t.yaxis.replace("y", "yaxis")].title.text == "query"]
    titled_x = [h for h, t in enumerate(fig.data) if fig.layout[t.xaxis.replace("x", "xaxis")].title.text == "key"]
    assert titled_y == [0, 4] and titled_x == [4, 5, 6, 7]  # first column, bottom row


def test_bars_arcs_and_entropy():
    weights = np.array([0.5, 0.3, 0.2, 0.0])
    bar = figures.bars(weights, LABELS[:4])
    assert np.allclose(np.asarray(bar.data[0].y), weights)
    fig = figures.arcs(weights, LABELS[:4], query=2)
    arcs = [t for t in fig.data if t.mode == "lines"]
    assert len(arcs) == 2  # keys 0 and 1; the query itself and the zero weight draw no arc
    widths = sorted(t.line.width for t in arcs)
    assert widths == pytest.approx([1 + 12 * 0.3, 1 + 12 * 0.5])
    assert figures.entropy(np.full(8, 1 / 8)) == pytest.approx(math.log(8))
    assert figures.entropy(np.array([1.0, 0.0, 0.0])) == pytest.approx(0.0, abs=1e-9)


# --- ui/figures/diagram.py --------------------------------------------------------------------------------

def node_labels(dot: str) -> dict[str, str]:
    return {name: label for name, label in re.findall(r'^(\w+) \[label="([^"]*)"', dot, flags=re.M)}


def test_diagram_draws_the_config():
    cfg = TransformerConfig(**{**TINY, "n_heads": 8, "n_kv_heads": 2, "ffn": "moe", "n_experts": 6, "top_k": 2,
                               "sliding_window": 3, "position": "alibi"})
    dot = architecture_dot(cfg, highlight="ffn")
    labels = node_labels(dot)
    assert "GQA: 8 q heads / 2 kv heads" in labels["attn"]
    assert "causal, window 3" in labels["attn"] and "ALiBi" in labels["attn"]
    assert labels["ffn"] == "MoE: top-2 of 6 experts"
    assert "pos" not in labels  # ALiBi adds nothing to the embeddings
    highlighted = [line for line in dot.splitlines() if HIGHLIGHT in line]
    assert len(highlighted) == 1 and highlighted[0].startswith("ffn ")


def test_diagram_of_an_encoder_decoder_has_two_stacks_and_cross_attention():
    dot = architecture_dot(PRESETS["original"], highlight="enc_attn")
    labels = node_labels(dot)
    assert "bidirectional" in labels["enc_attn"] and "causal" in labels["attn"]
    assert "cross" in labels and "enc_ln2 -> cross" in dot  # memory leaves the encoder after its last norm
    assert "attn -> ln1;" in dot and "cross -> ln_cross;" in dot and "ffn -> ln2;" in dot  # post-norm: norm after
    assert labels["enc_pos"] == "+ sinusoidal positions"
    assert "ln_final" not in labels  # post-norm blocks end on their own norm
    parallel_dot = architecture_dot(PRESETS["falcon"])
    parallel = node_labels(parallel_dot)
    assert "ln2" not in parallel and "MQA" in parallel["attn"]
    assert "ln1 -> attn;" in parallel_dot and "ln1 -> ffn;" in parallel_dot  # one norm feeds both
    pre = architecture_dot(PRESETS["llama2"])
    assert "ln1 -> attn;" in pre and "ln2 -> ffn;" in pre  # pre-norm: norm before


@pytest.mark.parametrize("placement, chain", [
    ("pre", ["ln1 -> attn;", "attn -> ln2;", "ln2 -> ffn;", "ffn -> ln_final;"]),
    ("post", ["embed -> attn;", "attn -> ln1;", "ln1 -> ffn;", "ffn -> ln2;", "ln2 -> head;"]),
    ("sandwich", ["ln1 -> attn;", "attn -> ln1_post;", "ln1_post -> ln2;", "ln2 -> ffn;", "ffn -> ln2_post;"]),
    ("after", ["embed -> attn;", "attn -> ln1_post;", "ln1_post -> ffn;", "ffn -> ln2_post;", "ln2_post -> ln_final;"]),
])
def test_diagram_puts_the_norms_where_the_placement_row_says(placement, chain):
    dot = architecture_dot(TransformerConfig(**TINY, norm_position=placement))
    for edge in chain:
        assert edge in dot, (placement, edge)
    labels = node_labels(dot)
    assert ("ln1" in labels) == (placement in ("pre", "post", "sandwich"))  # a norm before or on the sum
    assert ("ln1_post" in labels) == (placement in ("sandwich", "after"))  # a norm on the sublayer's output


def test_diagram_words_the_attention_of_2024_2026():
    mla = TransformerConfig(**{**TINY, "d_model": 32}, kv_rank=8, head_dim=12, rope_dim=4, sinks=True,
                            attn_softcap=20.0, logit_softcap=30.0, sliding_window=4, layer_pattern="alternate",
                            ffn="moe", n_shared_experts=1, first_dense_layers=1, scale_embeddings=True)
    labels = node_labels(architecture_dot(mla))
    assert "MLA (latent): 4 heads, K and V from a latent of 8" in labels["attn"]
    assert "window 4 on 1 of 2 layers" in labels["attn"] and "first 4 of 12 dims" in labels["attn"]
    assert "soft-capped" in labels["attn"] and "with a sink" in labels["attn"]
    assert "+ 1 shared" in labels["ffn"] and "first 1 layer dense" in labels["ffn"]
    assert "√d_model" in labels["embed"] and "soft-capped at ±30" in labels["head"]
    gated = node_labels(architecture_dot(TransformerConfig(**TINY, n_kv_heads=2, qk_norm="head", attn_gate=True,
                                                           ffn="geglu", rope_scaling="yarn", rope_factor=2.0)))
    assert "QK-norm per head" in gated["attn"] and "gated output" in gated["attn"] and "YaRN ×2" in gated["attn"]
    assert gated["ffn"] == "GeGLU"  # gated: no "MLP (...)" around it


# --- ui/figures/playground.py -----------------------------------------------------------------------

def test_head_stages_are_the_recorded_tensors_in_order():
    cfg, _, arrays, _ = run_trace(position="alibi")
    view = pf.attention_view("self")
    stages = pf.head_stages(arrays, view, layer=1, head=2)
    assert [s.hook for s in stages] == ["hook_raw_scores", "hook_mask", "hook_alibi_bias", "hook_attn_scores",
                                        "hook_pattern"]
    by_hook = {s.hook: s.matrix for s in stages}
    assert np.array_equal(by_hook["hook_raw_scores"], arrays["blocks.1.attn.hook_raw_scores"][0, 2])
    assert np.array_equal(by_hook["hook_mask"], np.tril(np.ones((6, 6))))  # causal: 1 = may attend
    assert np.array_equal(by_hook["hook_pattern"], arrays["blocks.1.attn.hook_pattern"][0, 2])
    assert by_hook["hook_alibi_bias"][5, 2] == pytest.approx(by_hook["hook_alibi_bias"][3, 0])  # distance 3 both
    plain = pf.head_stages(run_trace(position="rope")[2], view, 0, 0)
    assert "hook_alibi_bias" not in [s.hook for s in plain]


def test_stage_figures_use_the_right_scale():
    _, _, arrays, _ = run_trace(sliding_window=2)
    stages = {s.hook: s for s in pf.head_stages(arrays, pf.attention_view("self"), 0, 1)}
    mask = pf.stage_figure(stages["hook_mask"], LABELS, LABELS, "key", "query")
    assert z_of(mask.data[0]).sum() == 6 + 5  # each query sees itself and, but the first, one key before
    scores = pf.stage_figure(stages["hook_attn_scores"], LABELS, LABELS, "key", "query")
    z = z_of(scores.data[0])
    assert np.isnan(z[5, 0]) and not np.isnan(z[5, 4])  # outside the window: blank
    assert scores.data[0].zmin == -scores.data[0].zmax
    weights = pf.stage_figure(stages["hook_pattern"], LABELS, LABELS, "key (input token)", "query (input token)")
    assert (weights.data[0].zmin, weights.data[0].zmax) == (0.0, 1.0)
    assert weights.layout.xaxis.title.text == "key (input token)"


def test_cross_attention_view_reads_decoder_queries_and_encoder_keys():
    _, _, arrays, _ = run_trace(arch="encoder-decoder")
    view = pf.attention_view("cross")
    assert view.hook(1, "hook_pattern") == "decoder.blocks.1.cross_attn.hook_pattern"
    assert (view.queries, view.keys) == ("tgt", "src")
    assert "decoder" in view.y_title and "input" in view.x_title
    stages = pf.head_stages(arrays, view, 1, 0)
    assert pf.STAGES["hook_mask"][0] in [s.title for s in stages]
    weights = arrays[view.hook(1, "hook_pattern")][0, 0, 3]
    fig = pf.cross_arcs(weights, list("ABCDEF"), LABELS, query=3)
    lines = [t for t in fig.data if t.mode == "lines"]
    assert len(lines) == int((weights >= 1e-3).sum())
    assert all(t.y == (0, 1) for t in lines)  # from the decoder row up to the encoder row
    assert pf.KINDS_OF_ARCH["encoder-decoder"] == ["encoder", "decoder", "cross"]


def test_query_bars_and_entropy_figure():
    _, _, arrays, _ = run_trace()
    patterns = arrays["blocks.0.attn.hook_pattern"][0]  # (H, T, T)
    bars = pf.query_bars(patterns[1, 4], LABELS, "e")
    assert np.allclose(np.asarray(bars.data[0].y), patterns[1, 4])
    n_visible = pf.visible_keys(arrays["blocks.0.attn.hook_mask"][0, 0, 4])
    assert n_visible == 5  # causal: query 4 sees keys 0..4
    fig = pf.entropy_figure(patterns, query=4, n_visible=n_visible)
    assert np.allclose(np.asarray(fig.data[0].y), figures.entropy(patterns[:, 4]))
    assert fig.layout.shapes[0].y0 == pytest.approx(math.log(5))
    assert fig.layout.xaxis.title.text and fig.layout.yaxis.title.text


def test_routing_strip_marks_the_chosen_experts():
    cfg, _, arrays, _ = run_trace(ffn="moe", n_experts=4, top_k=2)
    probs = arrays["blocks.0.mlp.hook_router_probs"][0]  # (T, E)
    chosen = arrays["blocks.0.mlp.hook_expert_indices"][0]  # (T, k)
    fig = pf.routing_figure(probs, chosen, LABELS)
    assert np.allclose(z_of(fig.data[0]), probs.T)
    marks = set(zip(fig.data[1].x, fig.data[1].y))
    expected = {(f"{t}:{LABELS[t]}", f"expert {e}") for t in range(6) for e in chosen[t]}
    assert marks == expected
    for t in range(6):  # the marks sit on each token's most probable experts
        assert set(chosen[t]) == set(np.argsort(probs[t])[-2:])


def test_rope_figure_draws_cos_of_position_times_frequency():
    angles = rope_angles(torch.arange(6)[None], rope_inv_freq(8))[0].numpy()  # (T, d_head/2)
    fig = pf.rope_figure(angles, LABELS)
    z = z_of(fig.data[0])
    assert z.shape == (6, 4)
    assert z[3, 0] == pytest.approx(math.cos(3.0))  # the fastest pair turns one radian per position
    assert z[2, 1] == pytest.approx(math.cos(2 * 10000 ** (-2 / 8)))
    assert np.allclose(np.asarray(fig.data[0].customdata), angles)


# --- ui/compute/stepper.py --------------------------------------------------------------------------------

@pytest.mark.parametrize("preset", ["gpt2", "llama2", "mixtral", "original", "bloom", "falcon", "bert"])
def test_every_step_has_words_a_formula_a_source_line_and_a_node(preset):
    torch.manual_seed(0)
    cfg = PRESETS[preset].replace(d_model=4 * PRESETS[preset].n_heads, n_layers=1, max_len=16)  # d_head 4
    model = Transformer(cfg, device="cpu").eval()
    ids = torch.tensor([[1, 2, 3]])
    _, trace = model.run_with_trace(*((ids, ids) if cfg.arch == "encoder-decoder" else (ids,)))
    events = [dict(index=e.index, name=e.name, dims=list(e.dims), op=e.op, shape=list(e.shape)) for e in trace.events]
    for i, event in enumerate(events):
        name = event["name"]
        assert stepper.explain(name) and stepper.formula(name, cfg), name
        found = stepper.source_line(model, name)
        call_line = [line for line in found.snippet.splitlines() if "◀ this step" in line][0]
        assert f".{stepper.suffix(name)}(" in call_line
        path = stepper.REPO / found.path
        assert f".{stepper.suffix(name)}(" in path.read_text().splitlines()[found.line - 1]
        reads = stepper.inputs_of(events, i)
        assert isinstance(reads, str) or all(0 <= j < i for j in reads)  # a step reads only earlier steps
    node_names = set(node_labels(architecture_dot(cfg)))
    for event in events:
        node = stepper.diagram_node(event["name"])
        assert node is None or node in node_names, (event["name"], node)


def test_formulas_follow_the_config():
    layer = stepper.formula("blocks.0.ln1.hook_normalized", TransformerConfig(norm="layernorm"))
    rms = stepper.formula("blocks.0.ln1.hook_normalized", TransformerConfig(norm="rmsnorm"))
    assert r"\mu" in layer and r"\mu" not in rms
    assert "A" in stepper.formula("blocks.0.attn.hook_attn_scores", TransformerConfig(position="alibi"))
    assert stepper.formula("blocks.0.attn.hook_attn_scores", TransformerConfig(position="rope")) == "S' = S + M"
    post = stepper.formula("blocks.0.hook_resid_post", TransformerConfig(norm_position="post"))
    assert post.startswith(r"x \leftarrow \mathrm{Norm}")
    assert "SiLU" in stepper.formula("blocks.0.mlp.hook_post", TransformerConfig(ffn="swiglu"))


def test_inputs_name_the_tensors_each_formula_reads():
    _, _, _, events = run_trace(position="rope", ffn="moe")
    index = {e["name"]: i for i, e in enumerate(events)}
    names = lambda step: [events[i]["name"] for i in stepper.inputs_of(events, index[step])]
    assert names("blocks.1.attn.hook_raw_scores") == ["blocks.1.attn.hook_rot_q", "blocks.1.attn.hook_rot_k"]
    assert names("blocks.1.attn.hook_k") == ["blocks.1.ln1.hook_normalized"]
    assert names("blocks.1.mlp.hook_router_logits") == ["blocks.1.ln2.hook_normalized"]
    assert names("blocks.1.hook_resid_pre") == ["blocks.0.hook_resid_post"]  # not listed: the step before
    assert stepper.inputs_of(events, index["blocks.0.attn.hook_mask"]).startswith("the positions")
    _, _, _, enc_dec = run_trace(arch="encoder-decoder")
    index = {e["name"]: i for i, e in enumerate(enc_dec)}
    (memory,) = stepper.inputs_of(enc_dec, index["decoder.blocks.0.cross_attn.hook_v"])
    assert enc_dec[memory]["name"] == "encoder.ln_final.hook_normalized"  # the encoder's output


def hook_sites_of(module: torch.nn.Module) -> set[str]:
    return {stepper.suffix(name) for name, part in module.named_modules() if isinstance(part, HookPoint)}


def test_every_hook_site_a_model_records_has_a_node_of_its_diagram():
    """Every card's classroom model, and the switches no card turns on (gated attention, soft-capped scores): each
    recorded step names a node that its model's diagram colours, and together they record every site but the
    tiled walk's (the Flash page draws those tile by tile, not in the block diagram)."""
    configs = [card.config for card in MODEL_CARDS.values()]
    configs.append(PRESETS["llama2"].replace(attn_gate=True, attn_softcap=30.0))
    configs.append(PRESETS["llama2"].replace(n_layers=4, nope_layers="every 4", attn_temperature_scale=0.1))  # Llama 4
    for kind in ("linear", "gated-deltanet"):  # layers that keep a state: a feature map; conv, decay, delta rule, gate
        configs.append(PRESETS["llama2"].replace(n_layers=2, attention_layers="1:1", linear_kind=kind))
    configs.append(TransformerConfig(  # DeepSeek-V4: a window beside pooled blocks, an indexer choosing blocks, streams
        n_layers=3, d_model=32, n_heads=4, head_dim=16, rope_dim=8, n_kv_heads=1, q_rank=16, sliding_window=8,
        compress_layers="pooled 8, indexed 4, window", index_top_k=2, index_heads=2, index_head_dim=16, sinks=True,
        o_groups=2, o_rank=8, compress_rope_theta=160000.0, hyper_streams=3, max_len=64))
    ids = torch.tensor([[1, 2, 3] * 7])  # long enough for a pooled block of 8 to end
    recorded = set()
    for cfg in configs:
        model = Transformer(cfg, device="cpu").eval()
        every_name = list(model.hook_points())  # the state per token is recorded only when asked for by name
        _, trace = model.run_with_trace(*((ids, ids) if cfg.arch == "encoder-decoder" else (ids,)), names=every_name)
        for event in trace.events:
            node = stepper.diagram_node(event.name)
            assert node is not None and HIGHLIGHT in architecture_dot(cfg, highlight=node), (event.name, node)
            recorded.add(stepper.suffix(event.name))
    assert recorded == set(SITES) - hook_sites_of(TiledAttention())
    assert set(stepper.SITE_NODES) <= set(SITES)  # no node for a site that is gone


def test_diagram_nodes_of_hook_names():
    assert stepper.diagram_node("blocks.3.attn.hook_pattern") == "attn"
    assert stepper.diagram_node("encoder.blocks.0.mlp.hook_pre") == "enc_ffn"
    assert stepper.diagram_node("decoder.blocks.1.cross_attn.hook_q") == "cross"
    assert stepper.diagram_node("hook_logits") == "head"
    assert stepper.diagram_node("ln_final.hook_normalized") == "ln_final"


def test_slice_2d_matches_numpy_indexing():
    values = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    assert np.array_equal(stepper.slice_2d(values, 2, 3, {0: 1, 1: 2}), values[1, 2])
    assert np.array_equal(stepper.slice_2d(values, 3, 1, {0: 0, 2: 3}), values[0, :, 3, :].T)
    with pytest.raises(ValueError, match="dimension 1 twice"):
        stepper.slice_2d(values, 1, 1, {})


def test_shape_table_matches_the_trace():
    _, _, arrays, events = run_trace()
    table = stepper.shape_table(events, arrays)
    assert list(table["name"]) == [e["name"] for e in events]
    row = table.set_index("name").loc["blocks.0.attn.hook_pattern"]
    assert row["shape"] == "(B=1, H=4, T_q=6, T_kv=6)"
    assert row["elements"] == 4 * 36 and row["bytes"] == 4 * 36 * 4
    assert row["max"] == pytest.approx(float(arrays["blocks.0.attn.hook_pattern"].max()))
    mask = table.set_index("name").loc["blocks.0.attn.hook_mask"]
    assert mask["masked"] == 15 and mask["min"] == 0.0  # 6x6 causal: 15 cells above the diagonal


# --- ui/app/export.py ---------------------------------------------------------------------------------

def test_trace_npz_round_trip():
    _, _, arrays, _ = run_trace()
    loaded = np.load(io.BytesIO(export.trace_npz(arrays)))
    assert set(loaded.files) == set(arrays)
    assert np.array_equal(loaded["blocks.1.attn.hook_pattern"], arrays["blocks.1.attn.hook_pattern"])


def test_checkpoint_zip_holds_both_files_and_loads_back(tmp_path):
    torch.manual_seed(0)
    model = Transformer(PRESETS["gpt2"].replace(vocab_size=16, n_layers=1)).eval()
    checkpoint.save(model, tmp_path / "tiny", {"task": "copy"})
    with zipfile.ZipFile(io.BytesIO(export.checkpoint_zip(tmp_path / "tiny"))) as zf:
        assert sorted(zf.namelist()) == ["tiny.json", "tiny.safetensors"]
        zf.extractall(tmp_path / "unzipped")
    loaded, meta = checkpoint.load(tmp_path / "unzipped" / "tiny")
    assert meta["task"] == "copy"
    ids = torch.tensor([[1, 2, 3]])
    assert torch.equal(loaded(ids), model(ids))


def test_heatmaps_png_draws_every_panel():
    _, _, arrays, _ = run_trace()
    stages = pf.head_stages(arrays, pf.attention_view("self"), 0, 0)
    png = export.heatmaps_png([(s.title, s.matrix, s.style) for s in stages], LABELS, LABELS, title="t", dpi=50)
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG"
    assert image.size == (round((4.2 * 4 + 0.8) * 50), round(4.8 * 50))  # four panels side by side
    pixels = np.asarray(image.convert("RGB"))
    grey = np.all(pixels == (0xDD, 0xDD, 0xDD), axis=-1)
    assert grey.any()  # the masked cells of "what softmax sees"


def test_five_lines_come_from_the_library():
    from ui.app.source import five_lines, source_of
    lines = five_lines().splitlines()
    assert len(lines) == 5 and "hook_raw_scores" in lines[0] and "hook_pattern" in lines[2]
    assert all(line.strip() in source_of(Attention.explicit_attention) for line in lines)


def test_subplot_grid_places_every_cell_inside_the_figure_without_overlap():
    cells, layout = figures.subplot_grid([f"cell {i}" for i in range(7)], cols=3, gap_x=0.05, gap_y=0.1)
    assert [c["xaxis"] for c in cells] == ["x", "x2", "x3", "x4", "x5", "x6", "x7"]
    boxes = []
    for cell in cells:
        x_axis, y_axis = layout["xaxis" + cell["xaxis"][1:]], layout["yaxis" + cell["yaxis"][1:]]
        assert x_axis["anchor"] == cell["yaxis"] and y_axis["anchor"] == cell["xaxis"]
        (x0, x1), (y0, y1) = x_axis["domain"], y_axis["domain"]
        assert 0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1
        boxes.append((x0, x1, y0, y1))
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert a[1] <= b[0] or b[1] <= a[0] or a[3] <= b[2] or b[3] <= a[2]  # apart along some axis
    assert [a["text"] for a in layout["annotations"]] == [f"cell {i}" for i in range(7)]
    assert boxes[0][2] > boxes[3][2]  # the first row is on top


def test_head_grid_leaves_masked_cells_blank_and_keeps_the_rest():
    weights = np.tril(np.ones((3, 3))) / np.arange(1, 4)[:, None]  # causal, uniform over what each query sees
    mask = np.where(np.tril(np.ones((3, 3))) > 0, 0.0, np.finfo(np.float32).min)[None]  # (1, T, T)
    fig = figures.head_grid(np.stack([weights, weights]), list("abc"), list("abc"), 1, mask=mask)
    for trace in fig.data:
        z = np.asarray(trace.z, dtype=float)
        assert np.isnan(z[np.triu_indices(3, 1)]).all()  # the future: blank, not a dark 0
        assert np.allclose(z[np.tril_indices(3)], weights[np.tril_indices(3)])


def test_the_stepper_shows_a_linear_layers_own_formula_beside_a_softmax_layers():
    cfg = TransformerConfig(attention_layers="1:1", n_layers=2)
    linear, full = (stepper.formula(f"blocks.{i}.attn.hook_pattern", cfg) for i in (0, 1))
    assert "softmax" in full and "softmax" not in linear and r"\beta" in linear  # the delta rule's write strength


def test_a_marked_k_on_the_indexers_log_axis_keeps_the_axis_on_the_data():
    """A label on a log axis is placed in log10 units: k = 64 written as 64 stretched the axis to 10^64."""
    from ui.figures.indexer import measured_mass_by_k

    ks = [1, 2, 4, 8, 16, 32, 64, 128]
    fig = measured_mass_by_k(ks, {"indexer": [k / 128 for k in ks]}, 64, "")
    low, high = fig.layout.xaxis.range
    assert 10 ** low <= 1 and 10 ** high >= 128 and high < 3
    assert [a.x for a in fig.layout.annotations] == [pytest.approx(math.log10(64))]
    assert [s.x0 for s in fig.layout.shapes] == [64]


def test_the_compute_optimal_size_is_labelled_on_the_log_axis_where_it_is():
    from ui.figures.chapters import loss_against_size

    runs = [{"params": p, "bits_per_char": 2.0, "d_model": 16, "tokens": 1000, "steps": 10} for p in (1e4, 1e5)]
    fig = loss_against_size(runs, optimal_params=3e4)
    assert [a.x for a in fig.layout.annotations] == [pytest.approx(math.log10(3e4))]
    assert [s.x0 for s in fig.layout.shapes] == [3e4]
