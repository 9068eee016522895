"""One standalone HTML document (the homework file, the class report): a title, a style, a body, nothing fetched."""
from __future__ import annotations

import html


def standalone_page(title: str, style: str, body: str, head: str = "") -> str:
    """A whole document with its title as <title> and <h1>; `head` adds inline scripts (never a src to fetch)."""
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>{style}</style>
{head}
</head>
<body>
<h1>{html.escape(title)}</h1>
{body}
</body>
</html>
"""
