"""Figure builders: plain functions from numpy to a plotly Figure, no Streamlit, tested without a server."""
