"""Flash attention: exact attention one tile at a time, never holding the T x T matrix."""
import numpy as np
import pandas as pd
import streamlit as st

from transformer import MODEL_CARDS, axes
from transformer.costs import full_attention_bytes, tiled_attention_bytes
from transformer.flash import TiledAttention
from ui.figures.flash import (GIB, MIB, memory_formula, measured_curves, rescale_and_output, result_comparison,
                              running_stats, tile_grid, tile_matrices)
from ui.compute.flash_measure import (MASKS, MAX_IO_T, MAX_T, check_settings, hbm_counts, live_qkv, measure,
                                      random_qkv, tiled_run)
from transformer.flash_io import SRAM_KEPT
from transformer.hbm import SRAM_BYTES_A100, tile_sram_bytes
from ui.figures.flash_io import hbm_traffic, sram_budget
from ui.app.page import start_page
from ui.app.charts import show_chart
from ui.app.page_controls import KEEP, carry_over, keep_valid, url_state, write_url
from ui.compute.tokens import encode_text
from ui.compute.weights import weights_info
from ui.app.source import source_of

# random numbers first: untrained weights give scores so close together that the rescaling hardly shows
SOURCES = {"random": "random numbers (the sidebar's seed)", "live": "the sidebar's model (one layer, one head)"}
REAL = {f"{key} {size}": (card, cfg) for key, card in MODEL_CARDS.items() for size, cfg in card.real.items()}
REAL_BLOCK = 128  # tile side of the flash kernels for the real-size arithmetic and the measurements
MEASURE_UP_TO = [512, 1024, 2048]  # the tiled Python loop takes seconds at 2048 on a busy CPU
DEFAULTS = {"flash_src": "random", "flash_T": 32, "flash_layer": 0, "flash_head": 0, "flash_bq": 8, "flash_bk": 8,
            "flash_mask": "causal", "flash_w": 8, "flash_pad": 4, "flash_step": 0, "flash_model": "llama2 7B",
            "flash_io_T": 1024, "flash_io_d": 64, "flash_io_bq": 128, "flash_io_bk": 128, "flash_io_bytes": 2,
            "flash_io_sram": SRAM_BYTES_A100 // 1024}
ELEMENT_BYTES = {2: "2 (fp16 / bf16)", 4: "4 (fp32)"}  # bytes per element of Q, K, V, S, P and O in HBM
url_state("flash", carry=True, **DEFAULTS)  # carry: the sidebar's values, across a page switch
MEASURING = {"flash_mem_max": 1024, "flash_time_max": 1024}  # the measured ranges: kept across pages, not in the URL
carry_over(MEASURING)
for key, default in MEASURING.items():
    st.session_state.setdefault(key, default)
keep_valid("flash_src", list(SOURCES))
keep_valid("flash_mask", list(MASKS))
keep_valid("flash_model", list(REAL), DEFAULTS["flash_model"])
keep_valid("flash_io_bytes", list(ELEMENT_BYTES))
for key in ("flash_T", "flash_bq", "flash_bk", "flash_w", "flash_pad", "flash_io_T", "flash_io_d", "flash_io_bq",
            "flash_io_bk", "flash_io_sram"):
    if not isinstance(st.session_state[key], int):
        st.session_state[key] = DEFAULTS[key]
write_url()  # the values just corrected

state = start_page("Flash attention: exact attention, one tile at a time", """
**The problem.** The five lines build a T × T matrix of scores and another of weights for every head. For one
layer of LLaMA 2 7B (32 heads) at T = 32,768 tokens in fp16 that is 2 × 32 × 32,768² × 2 bytes = **128 GiB**. Even
where it fits, writing it to GPU memory and reading it back costs more time than the arithmetic itself: attention
is limited by memory traffic, not by multiplications.

**The idea.** Cut Q into blocks of `block_q` rows and K, V into blocks of `block_k` columns. Each query block sweeps
across the key blocks keeping three things per row: the running maximum *m* of its scores, the running sum
*l* = Σ exp(s − m) and the running output *acc* = Σ exp(s − m) · v. When a tile brings a larger maximum, everything
summed so far is multiplied by exp(m_old − m_new) — the **online softmax** — and at the end acc / l is *exactly*
softmax(S) @ V. Tiles that the causal mask or a window hide completely are skipped without loading them.

**What to look at.** Step through the tiles: which tile is loaded, its scores, how m and l move and how much the old
sums are rescaled. At the end, the tiled result next to the explicit one (the difference is float rounding), then
the memory each approach holds as T grows, and what this machine measures.
""")

st.header("Step through the tiles")
st.radio("q, k, v from", list(SOURCES), key="flash_src", format_func=SOURCES.get, horizontal=True, **KEEP)


def live_inputs():
    """(q, k, v, slope, T, description) from the sidebar's model, or a reason it cannot be used."""
    if state.error:
        return f"the sidebar describes an impossible model ({state.error})"
    cfg = state.config
    try:
        tokens = encode_text(state.text, state.config_json, state.weights)
    except (ValueError, OSError) as exc:
        return str(exc)
    keep_valid("flash_layer", range(cfg.n_layers), 0)
    keep_valid("flash_head", range(cfg.n_heads), 0)
    col1, col2 = st.columns(2)
    col1.selectbox("Layer", range(cfg.n_layers), key="flash_layer", **KEEP)
    col2.selectbox("Head", range(cfg.n_heads), key="flash_head", **KEEP,
                   format_func=lambda h: f"{h} (reads kv head {h // cfg.group_size})")
    layer, head = st.session_state["flash_layer"], st.session_state["flash_head"]
    try:
        q, k, v, slope = live_qkv(state.config_json, state.seed, tuple(tokens.ids), tuple(tokens.labels), layer, head,
                                  state.weights)
    except (ValueError, MemoryError, OSError) as exc:
        return str(exc)
    t = min(len(tokens.ids), MAX_T)
    info = weights_info(state.config_json, state.weights)
    weights = f"untrained, seed {state.seed}" if info.kind == "random" else info.label
    scheme, label = cfg.row("position"), axes.label("position", cfg.position)
    what = f"rotated by {label}" if scheme.rotates_qk else f"with {label}'s distance penalty" if slope is not None else ""
    note = (f"q, k, v of layer {layer}, head {head} of the sidebar's model ({weights}) on its {len(tokens.ids)}-token "
            f"input{', ' + what if what else ''}; the mask is the one chosen here, not the model's.")
    if info.kind == "random":
        note += " Untrained weights give scores close together: expect rescale factors near 1."
    if len(tokens.ids) > MAX_T:
        note += f" The first {MAX_T} tokens are used."
    return q[:t], k[:t], v[:t], slope, t, note


inputs = live_inputs() if st.session_state["flash_src"] == "live" else None
if isinstance(inputs, str):
    st.warning(f"The live model cannot be used: {inputs}. Showing random q, k, v instead.")
controls = iter(st.columns(5))  # filled left to right: T only for random q, k, v
if isinstance(inputs, tuple):
    q, k, v, slope, t, note = inputs
else:
    next(controls).number_input("T (tokens)", key="flash_T", step=1, help=f"2 to {MAX_T}", **KEEP)
    t = int(st.session_state["flash_T"])
    q, k, v = random_qkv(t, state.seed) if 2 <= t <= MAX_T else (None, None, None)
    slope, note = None, (f"Random q, k, v: {t} tokens × d_head = 16, standard normal numbers from the sidebar's seed "
                         f"({state.seed}). Their scores spread about as widely as a trained model's, so the running "
                         "maximum moves and the rescaling shows.")
next(controls).number_input("block_q (query rows per tile)", key="flash_bq", step=1, **KEEP)
next(controls).number_input("block_k (keys per tile)", key="flash_bk", step=1, **KEEP)
next(controls).selectbox("Mask", list(MASKS), key="flash_mask", **KEEP)
mask = st.session_state["flash_mask"]
if MASKS[mask]["windowed"]:
    next(controls).number_input("Window W (keys a query sees)", key="flash_w", step=1, **KEEP)
if MASKS[mask]["padded"]:
    next(controls).number_input("Padding tokens at the end", key="flash_pad", step=1, **KEEP)
st.caption(note)
block_q, block_k = int(st.session_state["flash_bq"]), int(st.session_state["flash_bk"])
window, n_pad = int(st.session_state["flash_w"]), int(st.session_state["flash_pad"])


def move(delta: int, n_steps: int) -> None:
    st.session_state["flash_step"] = min(max(int(st.session_state["flash_step"]) + delta, 0), n_steps - 1)


def describe_rescale(rows: np.ndarray, step: dict) -> str:
    """The row whose old sums shrink most in this tile, in numbers."""
    seen_before = np.isfinite(step["m_before"]) & (step["m_before"] > -1e30)
    if not seen_before.any():
        return ("First computed tile of this query block: m starts at −∞ and l at 0, so nothing old is rescaled "
                "(the factor exp(−∞) = 0 multiplies an empty sum).")
    row = int(np.argmin(np.where(seen_before, step["rescale"], np.inf)))
    m_old, m_new, factor = step["m_before"][row], step["m_after"][row], step["rescale"][row]
    if factor == 1.0:
        return "No row found a larger score in this tile: every factor is 1 and the old sums are kept as they are."
    return (f"Largest correction: query {rows[row]} — its maximum rose from {m_old:.3f} to {m_new:.3f}, so its old sum "
            f"l and output acc are multiplied by exp({m_old:.3f} − {m_new:.3f}) = {factor:.3f} before this tile is added.")


def show_steps(run: dict) -> None:
    steps, tiles = run["steps"], run["tiles"]
    n_steps = len(steps)
    current = st.session_state["flash_step"]  # a link or a change of blocks may point past the last step
    st.session_state["flash_step"] = min(max(current, 0), n_steps - 1) if isinstance(current, int) else 0
    n_skipped = sum(tile.skipped for tile in tiles)

    col1, col2, col3 = st.columns([1, 6, 1], vertical_alignment="bottom")
    col1.button("◀ Previous", key="flash_prev", on_click=move, args=(-1, n_steps),
                disabled=st.session_state["flash_step"] == 0)
    col3.button("Next ▶", key="flash_next", on_click=move, args=(1, n_steps),
                disabled=st.session_state["flash_step"] == n_steps - 1)
    if n_steps > 1:
        col2.slider("Step (one tile per step, query block by query block)", 0, n_steps - 1, key="flash_step", **KEEP)
    step_index = st.session_state["flash_step"]
    step = steps[step_index]

    col1, col2, col3 = st.columns(3)
    col1.metric("Step", f"{step_index} of {n_steps - 1}")
    col2.metric("Tiles computed", f"{n_steps - n_skipped} of {n_steps}")
    col3.metric("Tiles skipped by the mask", str(n_skipped))
    (q0, q1), (k0, k1) = step["q_rows"], step["k_cols"]
    show_chart(tile_grid(tiles, step_index, run["allowed"],
                         f"Tile ({step['q_block']}, {step['k_block']}): queries {q0}–{q1 - 1} × keys {k0}–{k1 - 1}"),
               key="flash_grid")
    skip_note = {"causal": "a causal query never sees a later key, so tiles above the diagonal are skipped",
                 "sliding window": "tiles above the diagonal or further back than the window are skipped",
                 "none": "without a mask every tile is computed",
                 "padding": "padding depends on the data, not on positions, so no tile is skipped: the padded "
                            "columns are masked inside the tiles (crosses)"}[mask]
    st.caption(f"{n_skipped} of {n_steps} tiles skipped: {skip_note}. A skipped tile is known from positions alone, "
               "before any number is read. Crosses mark pairs computed and then masked.")

    if step["skipped"]:
        st.info(f"Step {step_index} is skipped: the mask hides every (query, key) pair of this tile. Nothing is loaded; "
                "m, l and acc stay as they were.")
        return
    rows = np.arange(q0, q1)
    show_chart(tile_matrices(step["scores"], step["probs"], step["q_rows"], step["k_cols"],
                             "This tile's scores and unnormalised weights"), key="flash_tile")
    show_chart(running_stats(rows, step["m_before"], step["m_after"], step["l_before"], step["l_after"],
                             "Running max and running sum of the query block"), key="flash_stats")
    st.caption("Before the block's first computed tile m = −∞ and l = 0 (no bar). A row whose scores in a tile are all "
               "masked keeps its old m.")
    show_chart(rescale_and_output(rows, step["rescale"], step["out_so_far"], "Rescaling the old sums"),
               key="flash_rescale")
    st.caption(describe_rescale(rows, step) + " The partial output is acc / l: the answer if the keys stopped here.")


try:
    check_settings(t, block_q, block_k, mask, window, n_pad)
except ValueError as exc:
    where_t = " (T is the length of the sidebar's input text)" if isinstance(inputs, tuple) else ""
    st.error(f"{exc}{where_t} The memory and time sections below still work.")
else:
    run = tiled_run(q, k, v, slope, block_q, block_k, mask, window, n_pad)
    show_steps(run)

    with st.expander("The online softmax in the library's source (TiledAttention.forward)"):
        lines = source_of(TiledAttention.forward).splitlines()
        start = next(i for i, line in enumerate(lines) if "online softmax" in line)
        st.code("\n".join(line.strip() for line in lines[start:start + 7]), language="python")

    st.header("The result: tiled equals explicit")
    show_chart(result_comparison(run["out"], run["reference"], "Output (T × d_head): tiled, explicit, difference"),
               key="flash_result")
    col1, col2 = st.columns(2)
    col1.metric("max |tiled − explicit|", f"{run['max_abs_diff']:.2e}")
    col2.metric("T × T matrices held by the tiled run", "0")
    st.caption("The explicit reference is the library's own five lines (Attention.explicit_attention) under the same "
               "mask. Differences of order 1e-7 are float32 rounding: the tiled run adds the same terms in another "
               "order. The output is complete once the last step has run; each row's final value is its query block's "
               "last partial output.")

st.header("Bytes moved: HBM against SRAM")
st.markdown("""
A GPU keeps Q, K, V and everything the five lines write in **HBM**, its large memory (tens of GiB), far from the
arithmetic. Each streaming multiprocessor has a small on-chip **SRAM** — the FlashAttention paper gives 192 KB per
SM on an A100 — fast, but only a few tiles big. Every matrix must travel from HBM into SRAM to be used and back to be
kept. Below, the three versions run on random q, k, v (one head) with a counter that each of them increments when it
loads or stores a full matrix or a tile: the bytes are counted by the code that runs, not by a formula. The lecture's
tutorial (`001`) says flash attention is "2-4x faster on A100 due to far fewer HBM reads/writes": a claim about a
GPU this page does not measure; the counts show where it comes from.
""")
columns = iter(st.columns(6))
next(columns).number_input("T (tokens)", key="flash_io_T", step=256, help=f"1 to {MAX_IO_T:,}", **KEEP)
next(columns).number_input("d_head", key="flash_io_d", step=16, **KEEP)
next(columns).number_input("block_q", key="flash_io_bq", step=16, **KEEP)
next(columns).number_input("block_k", key="flash_io_bk", step=16, **KEEP)
next(columns).selectbox("Bytes per element", list(ELEMENT_BYTES), key="flash_io_bytes", format_func=ELEMENT_BYTES.get,
                        **KEEP)
next(columns).number_input("SRAM (KiB)", key="flash_io_sram", step=16, **KEEP)
io = {name: int(st.session_state[f"flash_io_{key}"]) for name, key in
      (("t", "T"), ("d_head", "d"), ("block_q", "bq"), ("block_k", "bk"), ("element_bytes", "bytes"))}
sram_bytes = int(st.session_state["flash_io_sram"]) * 1024
try:
    moved = hbm_counts(**io, sram_bytes=sram_bytes, seed=state.seed)
except ValueError as exc:
    st.error(f"{exc}. The sections around this one still work.")
else:
    show_chart(sram_budget(tile_sram_bytes(io["block_q"], io["block_k"], io["d_head"], io["element_bytes"]), sram_bytes,
                           f"What one tile step holds in SRAM: tiles of {io['block_q']} × {io['block_k']}"),
               key="flash_io_sram_chart")
    show_chart(hbm_traffic(moved["counts"], f"Bytes moved to and from HBM at T = {io['t']:,}, d_head = "
                                            f"{io['d_head']} (one head)"), key="flash_io_traffic")
    totals = {method: sum(sum(counted[way].values()) for way in ("reads", "writes"))
              for method, counted in moved["counts"].items()}
    columns = st.columns(len(totals) + 1)
    for column, (method, total) in zip(columns, totals.items()):
        column.metric(f"{method}: bytes moved", f"{total / MIB:,.2f} MiB")
    columns[-1].metric("explicit ÷ FA2 order", f"{totals['explicit'] / totals['FA2 order']:,.1f}×")
    st.dataframe(pd.DataFrame([{
        "version": method, "keeps in SRAM across its inner loop": SRAM_KEPT[method],
        "read (counted)": sum(counted["reads"].values()), "read (closed form)": moved["closed"][method]["reads"],
        "written (counted)": sum(counted["writes"].values()), "written (closed form)": moved["closed"][method]["writes"],
        "max |out − explicit|": moved["max_diff"].get(method, 0.0)} for method, counted in moved["counts"].items()]),
        hide_index=True)
    st.caption("Explicit: Q, K, V read once; S and P (T × T) each written and read back; O written. FA1 order (outer "
               "over K/V blocks): K and V read once, but Q, O, m and l read and written once per key block. FA2 order "
               "(outer over Q blocks, the library's TiledAttention): Q read once, K and V once per query block, O "
               "written once. m and l are float32. The outputs are the same to float rounding.")

st.subheader("FlashAttention 1, 2 and 3")
st.markdown("""
- **FlashAttention 1** (Dao et al., 2022): the tiling and online softmax above, written as one fused GPU kernel.
  Its outer loop runs over K/V blocks, so the partial output and m, l of every query block go to HBM and come back
  once per key block (the *FA1 order* above). The tutorial calls it the "First IO-aware Attention formalization".
- **FlashAttention 2** (Dao, 2023): the loops swapped — outer over Q blocks, inner over K/V — so a query block's
  output stays in SRAM until it is finished (the *FA2 order*, and the loop this library runs); the work is also
  split across the GPU's warps and thread blocks along the sequence. The tutorial: "Outer loop over Q, inner loop
  over K/V (better parallelism) … Roughly 2x additional speedup".
- **FlashAttention 3** (Shah et al., 2024): written for the H100 — asynchronous copies from HBM overlapping the
  matrix multiplications, warps specialised as producers (loading tiles) and consumers (computing), and FP8
  arithmetic. The tutorial: "Another 1.5-2x speedup". None of it changes the bytes counted above; it hides the time
  spent moving them.
""")

st.header("Memory: O(T²) against O(T)")
st.selectbox("Real model (one layer, one sequence)", list(REAL), key="flash_model", **KEEP,
             format_func=lambda key: f"{REAL[key][0].label(key.split(' ', 1)[1])} (H={REAL[key][1].n_heads}, "
                                     f"d_head={REAL[key][1].d_head})")
card, real = REAL[st.session_state["flash_model"]]
lengths = 2 ** np.arange(9, 18)  # 512 ... 131,072 tokens
full = np.array([full_attention_bytes(1, real.n_heads, int(n), 2) for n in lengths])
tiled = np.array([tiled_attention_bytes(1, real.n_heads, int(n), REAL_BLOCK, REAL_BLOCK, real.d_head) for n in lengths])
show_chart(memory_formula(lengths, full, tiled, f"{card.name}: bytes held beyond q, k, v and the output"),
           key="flash_memory_formula")
at = int(np.searchsorted(lengths, 32_768))
st.caption(f"full_attention_bytes: 2 × H × T² × 2 bytes (fp16 scores and weights); tiled_attention_bytes: m and l "
           f"for every row plus one {REAL_BLOCK} × {REAL_BLOCK} tile and its accumulator, in float32. At T = 32,768: "
           f"{full[at] / GIB:,.0f} GiB against {tiled[at] / MIB:,.1f} MiB. Doubling T multiplies the first by 4 and the "
           "second by about 2.")

st.subheader("Measured on this machine")
st.markdown("Peak memory one causal-attention call adds (B = 1, H = 4, G = 2, d_head = 64, float32, tiles of "
            f"{REAL_BLOCK}), measured in a fresh process by transformer/flash_memory.py: the GPU allocator's peak on a "
            "GPU, the process's peak resident memory on a CPU.")


def measured_section(kind: str, key: str, button: str) -> dict | None:
    """A 'largest T' control, a button, a progress bar; the cached result stays shown after the click."""
    col1, col2 = st.columns([3, 1], vertical_alignment="bottom")
    col1.select_slider("Largest T", MEASURE_UP_TO, key=key, **KEEP)
    sizes = tuple(int(n) for n in 2 ** np.arange(8, int(np.log2(st.session_state[key])) + 1))  # 256 ... largest
    shown = f"{key}_shown"
    if col2.button(button, key=f"{key}_go"):
        st.session_state[shown] = sizes
    if st.session_state.get(shown) != sizes:
        return None
    bar = st.progress(0.0, text="Starting a fresh Python process…")
    try:
        result = measure(kind, sizes, REAL_BLOCK, on_progress=lambda done, text: bar.progress(done, text=text))
    except RuntimeError as exc:
        bar.empty()
        st.error(f"The measurement failed: {exc}")
        st.session_state.pop(shown)
        return None
    bar.empty()
    return result


memory = measured_section("memory", "flash_mem_max", "Measure memory")
if memory:
    setup = memory["setup"]
    sizes = sorted({row["T"] for row in memory["rows"]})
    formula = {"explicit": [full_attention_bytes(setup["B"], setup["H"], n, 4) for n in sizes],
               "tiled": [tiled_attention_bytes(setup["B"], setup["H"], n, REAL_BLOCK, REAL_BLOCK, setup["d_head"])
                         for n in sizes]}
    show_chart(measured_curves(memory["rows"], "MiB", f"Peak memory on {memory['device']}", formula, log_y=False),
               key="flash_memory_measured")
    table = pd.DataFrame(memory["rows"]).pivot(index="T", columns="method", values="value") / MIB
    st.dataframe(table.round(2).rename(columns=lambda m: f"{m} (MiB)"))
    st.caption("The explicit path also builds its T × T additive mask, as the library does once per forward pass. "
               "0 means less than one 4 KiB page beyond what was already held. Dashed: the formulas above for this setup.")

st.header("Time")
st.markdown("Time per call of the same three methods (median of 3, after a warm-up), in a fresh process. "
            "**Be honest about what this shows:** the tiled version here is a Python loop written to be read and "
            "recorded, one tile per iteration, so it is slow. The library's default path is "
            "`torch.nn.functional.scaled_dot_product_attention`, a fused kernel that does the same tiling in compiled "
            "code (FlashAttention on GPUs) — that is where the speed comes from.")
timing = measured_section("time", "flash_time_max", "Measure time")
if timing:
    show_chart(measured_curves(timing["rows"], "ms", f"Time per call on {timing['device']} "
                                                    f"({timing['threads']} threads)"), key="flash_time_measured")
    table = pd.DataFrame(timing["rows"]).pivot(index="T", columns="method", values="value") * 1000
    st.dataframe(table.round(2).rename(columns=lambda m: f"{m} (ms)"))

write_url()  # the values as this run left them (a step clamped to the new last tile)
