"""Long texts: where every head looks across a text of thousands of tokens, without its T x T weights."""
import streamlit as st

from ui.app.charts import show_chart
from ui.app.page import start_page
from ui.app.page_controls import KEEP, keep_valid, url_state
from ui.compute import long_texts as measure
from ui.figures import long_texts as figs

url_state("long", lt_model=measure.DEFAULT_MODEL, lt_source="the shipped document", lt_chars=2_000, lt_window=64,
          lt_figure="distant", lt_atlas="within the trained length", lt_layer=0, lt_head=0, lt_start=0,
          lt_length=128)
SOURCES = ("the shipped document", "paste a text", "upload a .txt file")

start_page("Long texts", f"""
**The problem.** Every attention variant of 2023–2026 (windows, chunks, layers without positions, states instead of
caches, indexers that pick keys) exists for long texts, yet a T × T map of weights stops being drawable, or even
storable, after a few thousand tokens: at 32,000 tokens one head's map is a billion numbers.

**The idea.** Keep what a learner reads off a map and drop the map. The model runs its own fast forward once; as
each layer attends, its weights are made a block of query rows at a time, summarised per head and per token, and
thrown away. Memory grows with T, not T². The figures are those of published work: the weight on the first token
(the attention **sink**), on the nearest keys (**local**) against the rest (**distant**), how spread a row is
(**entropy**), and where the weight goes by distance.

**What to look at.** The strips along the text: a head that keeps its weight local, one that pours it on the first
token, one that reads far back. Past the dashed line the model reads longer texts than it trained on. The atlas
classifies every head by rules fixed in advance, beside random-init weights of the same shape. Up to
{measure.MAX_CHARS:,} characters; press **Stop** (top right) to cancel a long run.
""")

models = list(measure.language_models())
if not models:
    st.error("No shipped language checkpoint was found, so there is no trained model to read a text with.")
    st.stop()
keep_valid("lt_model", models, measure.DEFAULT_MODEL if measure.DEFAULT_MODEL in models else models[0])
keep_valid("lt_source", SOURCES)
keep_valid("lt_chars", measure.DOCUMENT_LENGTHS, 2_000)
keep_valid("lt_figure", list(measure.FIGURES))
col1, col2, col3 = st.columns([2, 2, 1])
col1.selectbox("Model", models, key="lt_model", **KEEP, help="the shipped models trained on English text")
col2.radio("Text", SOURCES, key="lt_source", horizontal=True, **KEEP)
col3.number_input("Local: nearer than", min_value=1, max_value=4096, key="lt_window", **KEEP,
                  help="keys fewer than this many tokens before the query count as local (DuoAttention's 64)")
name, window = st.session_state["lt_model"], int(st.session_state["lt_window"])

text = None
source = st.session_state["lt_source"]
if source == SOURCES[0]:
    st.selectbox("Characters of the held-out English text", measure.DOCUMENT_LENGTHS, key="lt_chars", **KEEP,
                 format_func=lambda n: f"{n:,}", help="English the models never trained on, from the start")
    text = measure.document(int(st.session_state["lt_chars"]))
elif source == SOURCES[1]:
    text = st.text_area("Your text", key="lt_pasted", height=160, max_chars=None,
                        help=f"up to {measure.MAX_CHARS:,} characters; it stays in this session, not in the link")
else:
    upload = st.file_uploader("A UTF-8 text file", type=["txt"], key="lt_upload",
                              help=f"up to {measure.MAX_CHARS:,} characters")
    if upload is not None:
        if upload.size > measure.MAX_UPLOAD_BYTES:
            st.error(f"The file has {upload.size:,} bytes, past this page's cap of {measure.MAX_CHARS:,} characters: "
                     "upload a shorter text.")
        else:
            text = upload.getvalue().decode("utf-8", errors="replace")
if not text:
    st.info("Paste or upload a text to read it.")
    st.stop()

try:
    measure.check_text(text)
    n_tokens = len(measure.tokens_of(name, text))
    refused = measure.past_positions(name, n_tokens)
    if refused:
        raise ValueError(refused)
    measure.check_memory(name, n_tokens)
except (ValueError, MemoryError) as exc:
    st.error(str(exc))
    st.stop()

info = measure.language_models()[name].info
st.markdown(f"**{len(text):,} characters → {n_tokens:,} tokens** for {name}"
            + (f" · trained on texts of at most {info.trained_tokens:,} tokens" if info.trained_tokens else ""))
if info.trained_tokens and n_tokens > info.trained_tokens:
    st.warning(f"This text is {n_tokens / info.trained_tokens:.1f}× the longest text {name} trained on "
               f"({info.trained_tokens:,} tokens). From the dashed line on, the figures show what it does beyond its "
               "training: the page still runs, and that is part of what to look at.",
               icon=":material/straighten:")

runs = {}
for trained in (True, False):
    what = name if trained else "random-init weights of the same shape"
    estimate = measure.estimated_seconds(name, n_tokens)
    bar = st.progress(0.0, text=f"Reading with {what}" + (f": about {estimate:.0f} s" if estimate else "…"))
    layers = sum(1 for spec in measure.language_models()[name].cfg.layer_plan() if spec.row.softmax)
    done = []

    def report(layer: str, bar=bar, done=done, layers=layers, what=what) -> None:
        done.append(layer)
        bar.progress(len(done) / layers, text=f"Reading with {what}: {layer} done ({len(done)} of {layers})")

    runs[trained] = measure.summaries(name, text, window, trained, report)
    bar.empty()
run, random_run = runs[True], runs[False]
st.caption(f"Read in {run.seconds:.1f} s (random-init weights: {random_run.seconds:.1f} s); no T × T tensor was "
           "kept: each block of query rows was summarised and dropped.")

st.subheader("Every head along the text")
st.selectbox("Figure", list(measure.FIGURES), key="lt_figure", format_func=measure.FIGURES.get, **KEEP)
figure = st.session_state["lt_figure"]
heads = run.figures[figure].shape[1]
labels = [f"L{layer}.H{head}" for layer in range(len(run.layers)) for head in range(heads)]
show_chart(figs.head_strips(run.figures[figure].reshape(-1, n_tokens), labels, measure.FIGURES[figure],
                            info.trained_tokens, f"{name}: {measure.FIGURES[figure]}, per head along the text"),
           key="lt_strips")

st.subheader("The head atlas, beside random-init weights")
ranges = list(run.atlases)
keep_valid("lt_atlas", ranges)
st.radio("Queries read", ranges, key="lt_atlas", horizontal=True, **KEEP,
         help="a model reads a text longer than its training differently: compare its heads within and beyond")
reading = st.session_state["lt_atlas"]
thresholds = ", ".join(f"{role} ≥ {least}" for role, least in measure.ROLE_THRESHOLDS.items())
st.caption(f"Rules fixed before any model was read, over the queries at least {window} tokens in: the first role "
           f"whose score reaches its threshold ({thresholds}; previous-token = the share of queries whose top key is "
           "the one before; broad = entropy over that of uniform weights), else mixed. Hover a cell for its scores.")
col1, col2 = st.columns(2)
layer_labels = [f"layer {layer}" for layer in range(len(run.layers))]
for where, result, title, key in ((col1, run, f"{name}, {reading}", "lt_atlas_trained"),
                                  (col2, random_run, f"random-init weights, {reading}", "lt_atlas_random")):
    atlas = result.atlases[reading]
    show_chart(figs.head_atlas([list(r) for r in atlas.roles], layer_labels, atlas.scores, title), key=key,
               where=where)

st.subheader("Where the weight goes, by distance")
show_chart(figs.distance_profile(run.distance_mass.reshape(-1, run.distance_mass.shape[-1]), run.distance_edges,
                                 labels, random_run.distance_mass.reshape(-1, random_run.distance_mass.shape[-1]),
                                 f"{name}: mean weight by distance, every head"), key="lt_distance")

st.subheader("A closer look: one head's exact weights in a window")
keep_valid("lt_layer", list(range(len(run.layers))))
keep_valid("lt_head", list(range(heads)))
col1, col2, col3, col4 = st.columns(4)
col1.selectbox("Layer", list(range(len(run.layers))), key="lt_layer", **KEEP)
col2.selectbox("Head", list(range(heads)), key="lt_head", **KEEP)
col4.number_input("Tokens", min_value=8, max_value=min(measure.ZOOM_MAX, n_tokens), key="lt_length", **KEEP,
                  help=f"at most {measure.ZOOM_MAX}: their exact weights are computed when asked")
length = min(int(st.session_state["lt_length"]), n_tokens)
if int(st.session_state["lt_start"]) > n_tokens - length:
    st.session_state["lt_start"] = n_tokens - length
col3.number_input("From token", min_value=0, max_value=n_tokens - length, key="lt_start", **KEEP)
start, layer, head = int(st.session_state["lt_start"]), int(st.session_state["lt_layer"]), int(st.session_state["lt_head"])
try:
    weights = measure.window_weights(name, text, run.layers[layer], head, start, length, True)
except (ValueError, MemoryError) as exc:
    st.error(str(exc))
else:
    pieces = measure.labels_of(name, text, start, length)
    show_chart(figs.window_weights(weights, start, pieces, f"{run.layers[layer]}, head {head}: tokens {start}–"
                                   f"{start + length - 1} ({run.atlases[reading].roles[layer][head]} {reading})"),
               key="lt_zoom")
    st.caption("Only keys inside the window are drawn; the hover gives each query's weight on the keys before it.")
