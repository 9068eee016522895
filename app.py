"""Attention Lab: switch a transformer's axes and watch attention change."""
from pathlib import Path

import streamlit as st
import torch

from ui.app.app_entry import inside_app
from ui.app.server import freeze_long_lived_objects, logged_run, release_freed_memory

st.set_page_config(page_title="Attention Lab", page_icon="🔍", layout="wide")

HERE = Path(__file__).parent
# section -> (script, title, icon)
PAGES = {
    "Start": [("pages/home.py", "Home", "🏠"),
              ("pages/lessons.py", "Lessons", "🧑‍🏫")],
    "Explore": [("pages/playground.py", "Attention playground", "🎛️"),
                ("pages/stepper.py", "Forward-pass stepper", "👣"),
                ("pages/compare.py", "Compare", "⚖️"),
                ("pages/interpret.py", "Why this prediction?", "🔬")],
    "The five axes": [("pages/kv_heads.py", "KV heads", "🔑"),
                      ("pages/masks.py", "Masks", "🎭"),
                      ("pages/positions.py", "Positions", "📍"),
                      ("pages/norms.py", "Norms", "📏"),
                      ("pages/ffn.py", "FFN and MoE", "🧮"),
                      ("pages/scores.py", "Scores: QK-norm, caps, sinks", "🎚️")],
    "Why it works": [("pages/before_attention.py", "Before attention", "⏮️"),
                     ("pages/scaling.py", "Why divide by √d", "➗"),
                     ("pages/permutation.py", "Why positions", "🔀"),
                     ("pages/vit.py", "The same block on images", "🖼️")],
    "At scale": [("pages/costs.py", "What a model costs", "💰"),
                 ("pages/growth.py", "How models grow", "📈"),
                 ("pages/tradeoffs.py", "Trade-offs, measured", "🏁")],
    "Go further": [("pages/flash.py", "Flash attention", "⚡"),
                   ("pages/train.py", "Train", "🏋️"),
                   ("pages/hf_model.py", "Your Hugging Face model", "🤗")],
}

navigation = st.navigation({
    section: [st.Page(HERE / script, title=title, icon=icon, default=script == "pages/home.py")
              for script, title, icon in pages]
    for section, pages in PAGES.items()
})
torch.set_num_threads(1)  # many small models, many sessions: one core each keeps the server responsive
freeze_long_lived_objects()
try:
    with logged_run(navigation.url_path or "home"), inside_app():
        navigation.run()
finally:  # st.stop and st.switch_page end a run by raising
    release_freed_memory()
