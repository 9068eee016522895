"""The shared sidebar: preset, the five axes, sizes, input text and seed — all kept in the URL.

Every page calls ``sidebar()`` first. It reads the URL once per session, draws the
widgets, writes the current state back to the URL (so a link reproduces the view)
and returns an ``AppState`` with a validated config, or the library's error message.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from urllib.parse import urlencode

import streamlit as st

from transformer import AXES, MODEL_CARDS, PRESETS, TransformerConfig, axes, choices
from transformer.layer_plan import parse_attention_layers
from transformer.tokens import DEFAULT as DEFAULT_TOKENS, get_tokenizer
from transformer.training.tasks import TASKS, get_task

from ui.app.charts import image_format_choice
from ui.compute.shipped import trained_config, trained_tasks
from ui.compute.weights import WeightsSource, weights_config, weights_info

DEFAULT_PRESET = "llama2"
DEFAULT_TASK = "language"  # every preset ships a language model: any typed text runs on trained weights
DEFAULT_TEXT = TASKS[DEFAULT_TASK].example_text  # a plain sentence, written twice
CUSTOM = "custom"
STORE = "_sidebar_values"  # the canonical values: widget keys are re-seeded from it on every run

# URL key -> (session key, how to read it from the URL string)
def _flag(text: str) -> bool:
    return str(text).lower() in ("true", "1", "yes")


AXIS_KEYS = {
    "arch": str, "position": str, "norm": str, "norm_position": str, "ffn": str,
    "n_layers": int, "d_model": int, "n_heads": int, "n_kv_heads": int,
    "n_experts": int, "top_k": int, "sliding_window": int,
    # the switches of 2024-2026
    "layer_pattern": str, "qk_norm": str, "attn_softcap": float, "logit_softcap": float, "sinks": _flag,
    "attn_gate": _flag, "rope_scaling": str, "rope_factor": float, "rope_dim": int, "kv_rank": int,
    "nope_layers": str,
    # attention that keeps a state: each layer's kind, and the kind of the linear layers "3:1" names
    "attention_layers": str, "linear_kind": str,
}
# fields whose widget shows 0 for "off" (None in the config)
ZERO_IS_NONE = ("sliding_window", "attn_softcap", "logit_softcap", "rope_dim", "kv_rank")
LAYER_PATTERN_CHOICES = ("uniform", "alternate", "5:1", "3:1", "1:1")
NOPE_CHOICES = ("none", "every 4", "every 2")  # layers without positions: Llama 4 and SmolLM3 leave out every fourth
HYBRID = "3:1"  # three linear layers, then one softmax layer (Qwen3-Next, Qwen3.5)
# task: which shipped checkpoint of these axes; tokens: the row of AXES["tokens"] the text is read in
OTHER_KEYS = {"preset": str, "text": str, "seed": int, "task": str, "tokens": str}
WEIGHTS_KEY = "weights"  # URL and session key of chosen weights: a WeightsSource as text

def _axis_help(axis: str) -> str:
    """A sidebar widget's help: each choice of the axis, what it does (and who chose it), the problem it solves."""
    return "\n".join(f"- {key}: {c.does}" + (f" ({c.examples})" if c.examples else "") + f". {c.solves}"
                     for key, c in AXES[axis].choices.items())


@dataclass
class AppState:
    preset: str  # a PRESETS key, or "custom" when an axis moved away from it
    config: TransformerConfig | None  # None when the widgets describe an impossible model
    error: str | None
    text: str
    seed: int
    weights: str = ""  # a WeightsSource as text: "" = a shipped checkpoint if one fits the config, else random
    tokens: str = DEFAULT_TOKENS  # the sidebar's Tokens choice, a row of AXES["tokens"]

    @property
    def config_json(self) -> str:
        return self.config.to_json()


def _preset_values(name: str) -> dict:
    cfg = PRESETS[name]
    values = {k: getattr(cfg, k) for k in AXIS_KEYS}
    for key in ZERO_IS_NONE:  # 0 = off in the widget
        values[key] = values[key] or 0
    return values


def _init_from_url() -> None:
    """First run of a session: fill the widgets' state from the URL (or the defaults)."""
    if st.session_state.get("_state_ready"):
        return
    params = st.query_params
    preset = params.get("preset", DEFAULT_PRESET)
    if preset not in PRESETS and preset != CUSTOM:
        preset = DEFAULT_PRESET
    values = _preset_values(preset if preset in PRESETS else DEFAULT_PRESET)
    values.update(preset=preset, text=DEFAULT_TEXT, seed=0, task=DEFAULT_TASK, tokens=DEFAULT_TOKENS)
    for key, parse in {**AXIS_KEYS, **OTHER_KEYS}.items():
        if key in params:
            try:
                values[key] = parse(params[key])
            except ValueError:
                pass  # a malformed number in a link: keep the default
    if values["tokens"] not in AXES["tokens"].choices:
        values["tokens"] = DEFAULT_TOKENS  # a tokenizer the table does not know, from a link: the default
    if values["preset"] in PRESETS and {k: values[k] for k in AXIS_KEYS} != _preset_values(values["preset"]):
        values["preset"] = CUSTOM  # the link changed an axis away from its preset
    st.session_state[STORE] = values
    if params.get(WEIGHTS_KEY):
        st.session_state[WEIGHTS_KEY] = params[WEIGHTS_KEY]
    st.session_state["_state_ready"] = True


def text_for(new_task: str | None, old_task: str | None, text: str) -> str:
    """The input after the weights change: typed English stays while both models read any text (so
    families compare on one sentence); a synthetic task brings its own example."""
    if new_task in (None, DEFAULT_TASK):
        return text if old_task in (None, DEFAULT_TASK) else DEFAULT_TEXT
    return get_task(new_task).example_text


def current_task() -> str | None:
    """The task of the weights the sidebar's state shows now (None: random or Hugging Face weights)."""
    s = st.session_state
    if s.get(WEIGHTS_KEY):
        return weights_info("", s[WEIGHTS_KEY]).task
    try:
        cfg = config_from_values(_current_values(), s["preset"], s["task"], s[STORE]["tokens"])
    except ValueError:
        return None
    return weights_info(cfg.to_json(), WeightsSource.read_in(s[STORE]["tokens"])).task


def apply_preset(name: str | None = None) -> None:
    """Fill the axes with a preset's values (a widget callback: runs before the page draws)."""
    name = name or st.session_state["preset"]
    old_task = current_task()
    st.session_state["preset"] = name
    if name in PRESETS:
        trained = trained_config(PRESETS[name], tokens=st.session_state[STORE]["tokens"])
        new_task = weights_info(trained.to_json()).task if trained else None
        _store(**_preset_values(name), task=new_task or DEFAULT_TASK,
               text=text_for(new_task, old_task, st.session_state[STORE]["text"]))
    _store(preset=name)
    close_weights()


def choose_task() -> None:
    """A widget callback: show the checkpoint of these axes trained on another task."""
    s = st.session_state
    old_task = weights_info(config_from_values(_current_values(), s["preset"], s[STORE]["task"],
                                               s[STORE]["tokens"]).to_json()).task
    _store(task=s["task"], text=text_for(s["task"], old_task, s[STORE]["text"]))


def _store(**values) -> None:
    """Set values both in the canonical store and in the widgets' keys."""
    st.session_state[STORE].update(values)
    st.session_state.update(values)


def _changed(key: str) -> None:
    """A widget callback: keep its new value (Streamlit forgets widget keys across page switches)."""
    st.session_state[STORE][key] = st.session_state[key]
    if key in AXIS_KEYS:
        _mark_custom()


def use_weights(weights: str) -> None:
    """Show these weights (a WeightsSource as text) on every page, with their task's example input."""
    old_task = current_task()
    st.session_state[WEIGHTS_KEY] = weights
    _store(text=text_for(weights_info("", weights).task, old_task, st.session_state[STORE]["text"]))


def use_text(text: str) -> None:
    """A widget callback: put this text in the sidebar's input, for every page."""
    _store(text=text)


def close_weights() -> None:
    st.session_state.pop(WEIGHTS_KEY, None)


def _mark_custom() -> None:
    name = st.session_state["preset"]
    if name in PRESETS and _current_values() != _preset_values(name):
        _store(preset=CUSTOM)


def _current_values() -> dict:
    return {k: st.session_state[k] for k in AXIS_KEYS}


def config_from_values(values: dict, preset: str, task: str | None = None,
                       tokens: str = DEFAULT_TOKENS) -> TransformerConfig:
    """The widgets' values on top of the preset's remaining fields (bias, eps, ...), for text read in `tokens`."""
    base = PRESETS.get(preset, PRESETS[DEFAULT_PRESET])
    # a value the caller does not give (an older link, a switch with no widget drawn) keeps the preset's
    fields = {**_preset_values(preset if preset in PRESETS else DEFAULT_PRESET), **values}
    for key in ZERO_IS_NONE:
        fields[key] = fields[key] or None
    if fields["kv_rank"]:  # MLA rebuilds a key and a value per head, and keeps RoPE on a decoupled part
        fields["n_kv_heads"] = fields["n_heads"]
        d_head = fields["d_model"] // fields["n_heads"]
        if fields["rope_dim"] is None and AXES["position"].row(fields["position"]).rotates_qk and d_head >= 4:
            fields["rope_dim"] = 2 * (d_head // 4)
    if not AXES["position"].row(fields["position"]).rotates_qk:  # RoPE's own switches mean nothing without RoPE
        fields.update(rope_scaling="none", rope_factor=1.0, rope_dim=None, nope_layers="none")
    if not _has_state_layers(fields):  # the linear kind means nothing without linear layers
        fields["linear_kind"] = _preset_values(preset if preset in PRESETS else DEFAULT_PRESET)["linear_kind"]
    if preset == CUSTOM:  # family-specific details only make sense inside their family
        base = TransformerConfig()
    config = dataclasses.replace(base, **fields)
    # a trained checkpoint brings its task's vocabulary; without one, a learned tokenizer's pieces size the embedding
    return trained_config(config, task, tokens) or sized_for_tokens(config, tokens)


def sized_for_tokens(config: TransformerConfig, tokens: str) -> TransformerConfig:
    """Random weights reading a learned tokenizer (BPE) need one embedding row per piece; characters keep the
    preset's vocabulary, whose ids the character tokens wrap around."""
    if not AXES["tokens"].row(tokens, "tokens").learned:
        return config
    return dataclasses.replace(config, vocab_size=get_tokenizer(tokens).vocab_size)


def sidebar() -> AppState:
    _init_from_url()
    s = st.session_state
    s.update(s[STORE])
    with st.sidebar:
        if s.get(WEIGHTS_KEY):
            st.info(f"Every page shows **{weights_info('', s[WEIGHTS_KEY]).label}**; the axes below do not apply to it.")
            st.button("Back to the presets", on_click=close_weights)
        st.selectbox("Preset (real model recipe)", [*PRESETS, CUSTOM], key="preset", on_change=apply_preset,
                     format_func=lambda k: MODEL_CARDS[k].name if k in MODEL_CARDS else "custom (edited)")
        if s["preset"] in MODEL_CARDS:
            st.caption(MODEL_CARDS[s["preset"]].summary)
        else:
            st.caption("custom: an axis was changed away from the preset")
        st.text_area("Input text", key="text", on_change=_changed, args=("text",), height=80,
                     help="One token per character. The language models read any text (characters outside "
                          "their table become one token per UTF-8 byte); a synthetic task lists its symbols.")
        _tokens_choice()
        _task_choice()

        st.markdown("**The five axes**")
        st.selectbox(AXES["arch"].title, choices("arch"), key="arch", on_change=_changed, args=("arch",),
                     help=_axis_help("arch"))
        _attention_layers_choice()
        heads = s["n_heads"]
        kv_options = [g for g in range(1, heads + 1) if heads % g == 0] or [1]
        if s["n_kv_heads"] not in kv_options:  # keep the widget valid; the config check reports the problem
            kv_options = sorted({*kv_options, s["n_kv_heads"]})
        st.selectbox(f"{AXES['kv_heads'].title} (G)", kv_options, key="n_kv_heads", on_change=_changed,
                     args=("n_kv_heads",), help=_axis_help("kv_heads"),
                     format_func=lambda g: _kv_option(heads, g))
        st.number_input("Sliding window W (0 = none)", min_value=0, max_value=4096, step=1, key="sliding_window",
                        on_change=_changed, args=("sliding_window",))
        st.selectbox(AXES["position"].title, choices("position"), key="position", on_change=_changed,
                     args=("position",), help=_axis_help("position"))
        col1, col2 = st.columns(2)
        col1.selectbox(AXES["norm"].title, choices("norm"), key="norm", on_change=_changed, args=("norm",),
                       help=_axis_help("norm"))
        col2.selectbox(AXES["norm_position"].title, choices("norm_position"), key="norm_position", on_change=_changed,
                       args=("norm_position",), help=_axis_help("norm_position"))
        st.selectbox(AXES["ffn"].title, choices("ffn"), key="ffn", on_change=_changed, args=("ffn",),
                     help=_axis_help("ffn"))
        if AXES["ffn"].row(s["ffn"]).routed:
            col1, col2 = st.columns(2)
            col1.number_input("Experts", min_value=1, max_value=16, key="n_experts", on_change=_changed, args=("n_experts",))
            col2.number_input("Top-k", min_value=1, max_value=16, key="top_k", on_change=_changed, args=("top_k",))

        with st.expander("Since 2023: local/global layers, QK-norm, caps, sinks, MLA, RoPE scaling, NoPE layers",
                         expanded=_any_modern(s)):
            options = list(LAYER_PATTERN_CHOICES)
            if s["layer_pattern"] not in options:
                options.append(s["layer_pattern"])
            st.selectbox("Local / global layers", options, key="layer_pattern", on_change=_changed,
                         args=("layer_pattern",), help="which layers use the sliding window W above: every layer "
                         "(uniform), local and global alternating (Gemma 2, gpt-oss), five local to one global "
                         "(Gemma 3)...; a local layer needs W > 0")
            st.selectbox(AXES["qk_norm"].title, choices("qk_norm"), key="qk_norm", on_change=_changed,
                         args=("qk_norm",), help=_axis_help("qk_norm"), format_func=lambda k: axes.label("qk_norm", k))
            col1, col2 = st.columns(2)
            col1.number_input("Score cap (0 = none)", min_value=0.0, max_value=1000.0, step=5.0, key="attn_softcap",
                              on_change=_changed, args=("attn_softcap",), help=AXES["scores"].choices["softcap"].does)
            col2.number_input("Logit cap (0 = none)", min_value=0.0, max_value=1000.0, step=5.0, key="logit_softcap",
                              on_change=_changed, args=("logit_softcap",), help="the same on the final logits (Gemma 2: 30)")
            col1, col2 = st.columns(2)
            col1.checkbox("Sinks", key="sinks", on_change=_changed, args=("sinks",),
                          help=AXES["scores"].choices["sinks"].does)
            col2.checkbox("Output gate", key="attn_gate", on_change=_changed, args=("attn_gate",),
                          help=AXES["scores"].choices["gate"].does)
            st.number_input("MLA latent rank (0 = off)", min_value=0, max_value=512, step=4, key="kv_rank",
                            on_change=_changed, args=("kv_rank",), help=AXES["kv_heads"].choices["MLA"].does)
            if AXES["position"].row(s["position"]).rotates_qk:
                col1, col2 = st.columns(2)
                col1.selectbox(AXES["rope_scaling"].title, choices("rope_scaling"), key="rope_scaling",
                               on_change=_changed, args=("rope_scaling",), help=_axis_help("rope_scaling"),
                               format_func=lambda k: axes.label("rope_scaling", k))
                col2.number_input("Scaling factor", min_value=1.0, max_value=64.0, step=1.0, key="rope_factor",
                                  on_change=_changed, args=("rope_factor",))
                st.number_input("Rotated dimensions per head (0 = all)", min_value=0, max_value=512, step=2,
                                key="rope_dim", on_change=_changed, args=("rope_dim",),
                                help="partial rotary: GPT-NeoX turns a quarter of each head; MLA a decoupled part")
                options = list(NOPE_CHOICES)
                if s["nope_layers"] not in options:
                    options.append(s["nope_layers"])
                st.selectbox("Layers without positions", options, key="nope_layers", on_change=_changed,
                             args=("nope_layers",), help="NoPE layers: RoPE leaves out the N-th, 2N-th ... layer "
                             "(Llama 4 and SmolLM3: every 4th), which then sees order only through the mask and "
                             "the layers below; the Masks page draws the plan")

        st.markdown("**Sizes**")
        col1, col2, col3 = st.columns(3)
        col1.number_input("Layers", min_value=1, max_value=12, key="n_layers", on_change=_changed, args=("n_layers",))
        col2.number_input("d_model", min_value=8, max_value=512, step=8, key="d_model", on_change=_changed, args=("d_model",))
        col3.number_input("Heads", min_value=1, max_value=16, key="n_heads", on_change=_changed, args=("n_heads",))
        st.number_input("Seed", min_value=0, max_value=2**31 - 1, key="seed", on_change=_changed, args=("seed",))
        _sync_url()
        st.caption("This page's link reproduces the view:")
        st.code("?" + urlencode(dict(st.query_params)), language=None)
        image_format_choice()

    config, error = None, None
    weights = s.get(WEIGHTS_KEY, "")
    try:
        if weights:
            config = chosen_config(weights)
        else:
            config = config_from_values(_current_values(), s["preset"], s["task"], s["tokens"])
    except (ValueError, OSError, ImportError) as exc:
        error = str(exc)
    # chosen weights bring their own tokenizer; the default weights are read in the sidebar's Tokens choice
    return AppState(s["preset"], config, error, s["text"], int(s["seed"]),
                    weights or WeightsSource.read_in(s["tokens"]), s["tokens"])


def _softmax_kind() -> str:
    return next(key for key, row in AXES["attention"].choices.items() if row.softmax)


def _state_kinds() -> list[str]:
    """The kinds that keep a state, in the table's order: what a linear layer may be."""
    return [key for key, row in AXES["attention"].choices.items() if row.keeps_state]


def _has_state_layers(values: dict) -> bool:
    """Whether the widgets' attention layers include one that keeps a state (a pattern that does not parse: no;
    the config check then names it)."""
    try:
        kinds = parse_attention_layers(values["attention_layers"], int(values["n_layers"]), values["linear_kind"])
    except ValueError:
        return False
    return any(AXES["attention"].row(kind).keeps_state for kind in kinds)


def _attention_layers_choice() -> None:
    """Each layer's attention kind: softmax everywhere, three linear layers to one softmax layer, or linear
    everywhere; and which linear kind. "All linear" is the linear kind's own key, so the link says it plainly."""
    s = st.session_state
    softmax, linear = _softmax_kind(), s["linear_kind"]
    options = [softmax, HYBRID, linear]
    if s["attention_layers"] not in options:  # a comma list or another kind from a link: kept, and shown as it is
        options.append(s["attention_layers"])
    words = {softmax: "softmax in every layer", HYBRID: "hybrid: 3 linear : 1 softmax",
             linear: "linear in every layer (no softmax)"}
    kinds = AXES["attention"].choices
    name = lambda k: kinds[k].label if k in kinds else k  # a key the table does not know: the config check names it
    st.selectbox("Attention layers", options, key="attention_layers", on_change=_changed, args=("attention_layers",),
                 format_func=lambda k: words.get(k, f"{name(k)} in every layer" if k in kinds else k),
                 help=_axis_help("attention") + "\n\nThe hybrid repeats three layers of the linear kind below, then "
                      "one softmax layer (Qwen3-Next, Qwen3.5). The State page shows what a linear layer keeps.")
    if s["attention_layers"] != softmax:
        linear_kinds = _state_kinds()
        if linear not in linear_kinds:
            linear_kinds.append(linear)
        st.selectbox("Linear kind", linear_kinds, key="linear_kind", on_change=_linear_kind_changed, format_func=name,
                     help="the kind of the linear layers:\n" + "\n".join(
                         f"- {key}: {kinds[key].does}" for key in _state_kinds()))


def _linear_kind_changed() -> None:
    """A widget callback: "linear in every layer" follows the new kind (it is written as the kind's key)."""
    s = st.session_state
    old = s[STORE]["linear_kind"]
    _changed("linear_kind")
    if s["attention_layers"] == old:
        _store(attention_layers=s["linear_kind"])
        _mark_custom()


def _any_modern(s) -> bool:
    """Whether a switch of 2024-2026 is on: then its expander opens by itself."""
    return (s["layer_pattern"] != "uniform" or _row_flag(s, "qk_norm", "normalises") or bool(s["attn_softcap"])
            or bool(s["logit_softcap"]) or bool(s["sinks"]) or bool(s["attn_gate"])
            or _row_flag(s, "rope_scaling", "rescales") or bool(s["rope_dim"]) or bool(s["kv_rank"])
            or s["nope_layers"] not in ("", "none"))


def _row_flag(s, axis: str, flag: str) -> bool:
    """A flag of the widget's choice on `axis`; a key the table does not know (from a malformed link) counts as on,
    and the config check names it."""
    row = AXES[axis].choices.get(s[axis])
    return True if row is None else getattr(row, flag)


def _kv_option(n_heads: int, n_kv_heads: int) -> str:
    """'2 · GQA': G and the KV-heads kind the library derives from H and G (``TransformerConfig.attention_kind``)."""
    try:
        kind = TransformerConfig(d_model=2 * n_heads, n_heads=n_heads, n_kv_heads=n_kv_heads,
                                 position="none").attention_kind
    except ValueError:  # G does not divide H: the config check below says so
        return str(n_kv_heads)
    return f"{n_kv_heads} · {axes.label('kv_heads', kind)}"


def _task_choice() -> None:
    """When several shipped checkpoints have the sidebar's axes, pick which one every page shows."""
    s = st.session_state
    if s.get(WEIGHTS_KEY):
        return
    try:
        tasks = trained_tasks(config_from_values(_current_values(), s["preset"]), s["tokens"])
    except ValueError:
        return  # an impossible config: the page says why
    if len(tasks) > 1:
        if s["task"] not in tasks:
            _store(task=tasks[0])
        st.selectbox("Trained on", tasks, key="task", on_change=choose_task,
                     format_func=lambda t: f"{t}: {get_task(t).description}",
                     help="Every preset ships a language model (any text); some also a small synthetic task "
                          "whose solution has a known attention pattern.")


def _tokens_choice() -> None:
    """How the default weights read the text: characters or a learned tokenizer (BPE). Where no shipped checkpoint
    of the sidebar's axes reads the chosen tokens, say so: the pages then show random weights reading them."""
    s = st.session_state
    if s.get(WEIGHTS_KEY):
        return  # chosen weights read text in their own tokenizer
    st.radio("Tokens", list(AXES["tokens"].choices), key="tokens", on_change=_changed, args=("tokens",),
             horizontal=True, format_func=lambda k: axes.label("tokens", k), help=_axis_help("tokens"))
    if not AXES["tokens"].row(s["tokens"]).learned:
        return
    try:
        trained = trained_tasks(config_from_values(_current_values(), s["preset"]), s["tokens"])
    except ValueError:
        return  # an impossible config: the page says why
    if not trained:
        family = f"{MODEL_CARDS[s['preset']].name} " if s["preset"] in MODEL_CARDS else ""
        others = [key for key, row in AXES["tokens"].choices.items() if not row.learned
                  and trained_tasks(config_from_values(_current_values(), s["preset"]), key)]
        instead = (f" Choose {axes.label('tokens', others[0])} for the trained weights of these axes." if others
                   else "")
        st.info(f"No shipped {family}checkpoint reads {axes.label('tokens', s['tokens'])} tokens yet: every page "
                f"shows **random weights** (seed {s['seed']}) reading them, one embedding row per piece.{instead}",
                icon=":material/casino:")


@st.cache_data(max_entries=8, show_spinner=False)
def chosen_config(weights: str) -> TransformerConfig:
    return weights_config(weights)


def _sync_url() -> None:
    """Write the whole state into the URL, only the keys that changed."""
    s = st.session_state
    state = {k: str(s[k]) for k in (*OTHER_KEYS, *AXIS_KEYS)}
    if s.get(WEIGHTS_KEY):
        state[WEIGHTS_KEY] = s[WEIGHTS_KEY]
    elif WEIGHTS_KEY in st.query_params:
        del st.query_params[WEIGHTS_KEY]
    for key, value in state.items():
        if st.query_params.get(key) != value:
            st.query_params[key] = value
