"""Shared pieces of the app's pages: the sidebar and URL state, the cached model and trace, figure builders."""
