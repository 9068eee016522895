"""The class poll: its store, SQLite or PostgreSQL, and no Streamlit."""
