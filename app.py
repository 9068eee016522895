"""Attention Lab: switch a transformer's axes and watch attention change."""
import streamlit as st
import torch

from ui.app.app_entry import inside_app
from ui.app.navigation import HOME, ROOT, by_section
from ui.app.server import freeze_long_lived_objects, logged_run, release_freed_memory

# the tab icon is a local file: a Material icon there is fetched from Google's font server, which an offline
# classroom cannot reach
st.set_page_config(page_title="Attention Lab", page_icon=str(ROOT / "assets" / "icon.png"), layout="wide")

navigation = st.navigation({
    section: [st.Page(ROOT / page.script, title=page.title, icon=page.icon, default=page.script == HOME)
              for page in pages]
    for section, pages in by_section().items()
})
torch.set_num_threads(1)  # many small models, many sessions: one core each keeps the server responsive
freeze_long_lived_objects()
try:
    with logged_run(navigation.url_path or "home"), inside_app():
        navigation.run()
finally:  # st.stop and st.switch_page end a run by raising
    release_freed_memory()
