"""Open a Hugging Face model from this computer, or from the Hub when asked, and look inside it on every page."""
import tempfile
from pathlib import Path

import streamlit as st

from transformer.interop import FAMILIES, SUPPORTED_CLASSES, describe_hf
from transformer.interop.hub import HubError, download_from_hub
from ui.app.page import start_page
from ui.compute.weights import WeightsSource
from ui.app.state import WEIGHTS_KEY, close_weights, use_weights

DOWNLOADED_KEY = "hf_downloaded"  # the Hub ids fetched in this browser tab: a rerun opens them from the cache


def family_names() -> str:
    """Every family the library opens, in the registry's order: the page's words follow the registry."""
    names = [family.name for family in FAMILIES.values()]
    return ", ".join(names[:-1]) + " or " + names[-1]


start_page("Your Hugging Face model", f"""
Already have a {family_names()} model on this computer? Open it here: the library reads its config into the
five axes and its layer plan (windowed, chunked and position-free layers; the Gated DeltaNet layers of the hybrid
families, which keep a state, between full-attention ones), copies its weights, and runs **its own** forward pass
— which matches the original to 1e-4 (see docs/interop.md). Every page then shows that model. Open a directory
written by `save_pretrained` or a model id already in the local Hugging Face cache; nothing is downloaded unless
you tick **Download from the Hugging Face Hub**.
""")

try:
    import transformers  # noqa: F401  (optional: only this page needs it)
except ImportError:
    st.error("The `transformers` package is not installed, so Hugging Face models cannot be opened. "
             "Install it with `pip install transformers`; every other page works without it.")
    st.stop()

st.caption("Supported: " + ", ".join(sorted(SUPPORTED_CLASSES)))


def make_demo_model() -> None:
    """A tiny random GPT-2 written to a temporary directory, to try the page without a real model."""
    from transformers import GPT2Config, GPT2LMHeadModel

    directory = tempfile.mkdtemp(prefix="attention-lab-gpt2-")
    GPT2LMHeadModel(GPT2Config(vocab_size=128, n_positions=128, n_embd=64, n_layer=2, n_head=4,
                                       bos_token_id=0, eos_token_id=0)).save_pretrained(directory)
    st.session_state["hf_path"] = directory


def fetched_from_hub(model_id: str) -> bool:
    """Download `model_id` into the local cache, once per browser tab, with a message per step; False (and an
    st.error saying why) when it cannot be downloaded."""
    downloaded = st.session_state.setdefault(DOWNLOADED_KEY, [])
    if model_id in downloaded:
        return True
    failed = None
    with st.status(f"Downloading {model_id} from the Hugging Face Hub…", expanded=True) as progress:
        try:
            download_from_hub(model_id, report=lambda step: progress.write(f"Downloading {step}…"))
        except HubError as exc:
            progress.update(label=f"{model_id} was not downloaded", state="error", expanded=False)
            failed = str(exc)
        else:
            progress.update(label=f"Downloaded {model_id} into the local Hugging Face cache", state="complete",
                            expanded=False)
    if failed is not None:  # outside the status box, which folds: the reason shows at once
        st.error(failed)
        return False
    downloaded.append(model_id)
    return True


path = st.text_input("Directory or model id", key="hf_path", placeholder="/path/to/model or gpt2")
from_hub = st.checkbox("Download from the Hugging Face Hub", key="hf_download",
                       help="Fetch a model id (gpt2, Qwen/Qwen3-0.6B) into the local Hugging Face cache first. "
                            "Needs a network; a directory on this computer always opens without one.")
col1, col2, col3 = st.columns(3)
col2.button("Make a tiny random GPT-2 to try", on_click=make_demo_model)
if st.session_state.get(WEIGHTS_KEY):
    col3.button("Close it (back to the presets)", on_click=close_weights)

source = path.strip()
if source and (not from_hub or Path(source).is_dir() or fetched_from_hub(source)):
    try:
        mapping = describe_hf(source)
    except (ValueError, OSError, ImportError) as exc:
        st.error(f"Cannot open {path!r}: {exc}")
    else:
        st.subheader(f"{mapping.hf_class}: the {mapping.family} family on our axes")
        st.table({"axis": list(mapping.axes), "choice": list(mapping.axes.values())})
        for note in mapping.notes:
            st.caption(note)
        col1.button("Open on every page", type="primary", on_click=use_weights, args=(WeightsSource.huggingface(source),))

shown = WeightsSource.parse(st.session_state.get(WEIGHTS_KEY, ""))
if shown.kind == "huggingface":
    st.success(f"Every page now shows {shown.path}. "
               "Try the attention playground or the stepper.")
    st.page_link("pages/playground.py", label="Attention playground", icon=":material/tune:")
