"""App plumbing and state: the shared sidebar, page setup, URL state, the server, downloads, source excerpts."""
