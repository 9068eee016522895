"""`attention-lab [streamlit options]`: serve the app from any folder, as `streamlit run app.py` does in the repository.

    attention-lab                                        # http://localhost:8501
    attention-lab --server.address 0.0.0.0 --server.port 8600

Every option goes to `streamlit run` unchanged, so an option Streamlit does not know gets Streamlit's own message.
"""
from __future__ import annotations

import sys

from streamlit.web import cli as streamlit_cli

from ui.app.app_entry import APP

# What the repository's .streamlit/config.toml sets (Streamlit reads that file only from the folder it starts in,
# and an installed app starts anywhere): passed first, so the same option given on the command line wins.
PROJECT_SETTINGS = {
    "client.showErrorDetails": "none",  # a page shows st.error, never a traceback
    "client.toolbarMode": "minimal",
    "server.headless": "true",  # no browser opened, no e-mail asked for on the first run
    "server.runOnSave": "false",
    "browser.gatherUsageStats": "false",
    "theme.base": "light",
}


def streamlit_arguments(options: list[str]) -> list[str]:
    """The `streamlit` command line that runs the app with the project's settings, then the caller's options."""
    settings = [part for name, value in PROJECT_SETTINGS.items() for part in (f"--{name}", value)]
    return ["run", str(APP), *settings, *options]


def main(argv: list[str] | None = None) -> None:
    options = sys.argv[1:] if argv is None else argv
    streamlit_cli.main(args=streamlit_arguments(options), prog_name="attention-lab")


if __name__ == "__main__":
    main()
