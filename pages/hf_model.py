"""Open a Hugging Face model from this computer and look inside it on every page."""
import tempfile

import streamlit as st

from ui.app.page import start_page
from ui.compute.weights import WeightsSource
from ui.app.state import WEIGHTS_KEY, close_weights, use_weights

start_page("Your Hugging Face model", """
Already have a GPT-2, LLaMA, Mistral, Mixtral, BLOOM, Falcon, BERT, Qwen2, Qwen3, Gemma 2, Gemma 3, Phi-3,
OLMo 2, OLMo 3, GPT-NeoX, DeepSeek-V2/V3, DeepSeek-V3.2, GLM-5, gpt-oss, SmolLM3, Llama 4 (text, dense),
Qwen3-Next, Qwen3.5 (text) or OLMo hybrid model on this computer? Open it here: the library reads its config into
the five axes and its layer plan (Llama 4's chunked layers and its layers without positions; the Gated DeltaNet
layers of Qwen3-Next, Qwen3.5 and OLMo hybrid, which keep a state, between full-attention ones; the lightning
indexer of DeepSeek-V3.2 and GLM-5, which keeps each query's top-k keys), copies its weights, and runs
**its own** forward pass — which matches the original to 1e-4 (see docs/interop.md). Every page then
shows that model. Nothing is downloaded: a directory written by `save_pretrained`, or a model id
already in the local Hugging Face cache.
""")

try:
    import transformers  # noqa: F401  (optional: only this page needs it)
except ImportError:
    st.error("The `transformers` package is not installed, so Hugging Face models cannot be opened. "
             "Install it with `pip install transformers`; every other page works without it.")
    st.stop()

from transformer.interop import SUPPORTED_CLASSES, describe_hf  # noqa: E402  (needs transformers)

st.caption("Supported: " + ", ".join(sorted(SUPPORTED_CLASSES)))


def make_demo_model() -> None:
    """A tiny random GPT-2 written to a temporary directory, to try the page without a real model."""
    from transformers import GPT2Config, GPT2LMHeadModel

    directory = tempfile.mkdtemp(prefix="attention-lab-gpt2-")
    GPT2LMHeadModel(GPT2Config(vocab_size=128, n_positions=128, n_embd=64, n_layer=2, n_head=4,
                                       bos_token_id=0, eos_token_id=0)).save_pretrained(directory)
    st.session_state["hf_path"] = directory


path = st.text_input("Directory or cached model id", key="hf_path", placeholder="/path/to/model or gpt2")
col1, col2, col3 = st.columns(3)
col2.button("Make a tiny random GPT-2 to try", on_click=make_demo_model)
if st.session_state.get(WEIGHTS_KEY):
    col3.button("Close it (back to the presets)", on_click=close_weights)

if path:
    try:
        mapping = describe_hf(path.strip())
    except (ValueError, OSError, ImportError) as exc:
        st.error(f"Cannot open {path!r}: {exc}")
    else:
        st.subheader(f"{mapping.hf_class}: the {mapping.family} family on our axes")
        st.table({"axis": list(mapping.axes), "choice": list(mapping.axes.values())})
        for note in mapping.notes:
            st.caption(note)
        col1.button("Open on every page", type="primary", on_click=use_weights, args=(WeightsSource.huggingface(path.strip()),))

shown = WeightsSource.parse(st.session_state.get(WEIGHTS_KEY, ""))
if shown.kind == "huggingface":
    st.success(f"Every page now shows {shown.path}. "
               "Try the attention playground or the stepper.")
    st.page_link("pages/playground.py", label="Attention playground", icon="🎛️")
