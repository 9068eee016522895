"""The link students open, its QR code, and the teacher's private resume link: the Lessons page's sharing panel.

The address students open is detected from the browser's own (`detected_base`) and can be corrected on the
page; an address that cannot be one (no http:// or https://, no host, too long to scan as a QR code, spaces,
a query) is said so on the page, and until it is corrected there is no link or QR code.
"""
from __future__ import annotations

import io
from urllib.parse import urlencode, urlsplit

import streamlit as st

from ui.lessons.url_state import BASE, PRESENT, TEACH, TEACHER_KEY, resume_code

DEFAULT_BASE = "http://localhost:8501"
MAX_BASE_CHARS = 200  # the address students open: a QR code of a longer link is too dense to scan anyway
PAGE = "lessons"


def detected_base() -> str:
    """Where this app is served, as the browser sees it (st.context.url without this page's path)."""
    url = getattr(st.context, "url", None)
    if url:
        parts = urlsplit(url)
        path = parts.path.rstrip("/")
        if path.endswith("/" + PAGE) or path == PAGE:
            path = path[: -len(PAGE)].rstrip("/")
        return f"{parts.scheme}://{parts.netloc}{path}"
    host = st.context.headers.get("Host") if st.context.headers else None
    return f"http://{host}" if host else DEFAULT_BASE


def base_problem(base: str) -> str | None:
    """Why `base` cannot be the address students open (said on the page), or None if it can."""
    rule = (f"The address students open must be an http:// or https:// address with a host, at most "
            f"{MAX_BASE_CHARS} characters, like http://192.168.1.20:8501")
    if len(base) > MAX_BASE_CHARS:
        return f"{rule}; this one has {len(base):,} characters."
    if any(c.isspace() or not c.isprintable() for c in base):
        return f"{rule}, without spaces."
    try:
        parts = urlsplit(base)
        parts.port  # noqa: B018 - raises on a port that is not a number from 0 to 65535
    except ValueError as exc:
        return f"{rule}; this one does not read as an address ({exc})."
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{rule}."
    if parts.query or parts.fragment:
        return f"{rule}, without ? or #."
    return None


def students_base() -> str | None:
    """The address students open, once it passes base_problem; None until it does."""
    base = (st.session_state.get(BASE) or DEFAULT_BASE).strip().rstrip("/")
    return None if base_problem(base) else base


def share_link(step: int, code: str | None = None) -> str | None:
    base = students_base()
    query = {"step": step, **({"class": code} if code else {})}
    return f"{base}/{PAGE}?{urlencode(query)}" if base else None


@st.cache_data(max_entries=64, show_spinner=False)
def qr_png(text: str) -> bytes | None:
    """A QR code of `text` as PNG bytes (segno, pure Python); None when segno is not installed."""
    try:
        import segno
    except ImportError:
        return None
    buffer = io.BytesIO()
    segno.make(text, error="m").save(buffer, kind="png", scale=8, border=2)
    return buffer.getvalue()


def share_panel(step: int, code: str | None) -> None:
    s = st.session_state
    if not s.get(BASE):
        s[BASE] = detected_base()
    link = share_link(step, code)
    if link is None:
        st.error(f"{base_problem(s[BASE].strip().rstrip('/'))} Correct it under *Address students open*; until "
                 "then there is no link or QR code.")
    else:
        png = qr_png(link)
        if png is None:
            st.caption("Install `segno` for a QR code.")
        else:
            st.image(png, width=240)
        st.markdown(f"**[{link.split('://', 1)[-1]}]({link})**")
    with st.popover("Address students open"):
        st.text_input("Base address of this app", key=BASE,
                      help="What students type to reach this server, e.g. http://192.168.1.20:8501 (at most "
                           f"{MAX_BASE_CHARS} characters). A server started with --server.address 0.0.0.0 is "
                           "reachable from the class's laptops; localhost is not.")


def resume_panel() -> None:
    """The teacher's private resume link and code: drawn on the teacher's own screen only, never when presenting."""
    s = st.session_state
    if s[PRESENT]:
        st.caption("Your private resume link is hidden in presenter mode.")
        return
    code = resume_code(s[TEACH], s[TEACHER_KEY])
    with st.expander("Private: resume this poll after a reload"):
        st.caption("Whoever has this link or code runs the poll: keep it off the projector and out of the "
                   "class chat. Open the link, or paste the code under *Resume a class poll*.")
        base = students_base()
        if base:
            st.code(f"{base}/{PAGE}?{urlencode({'resume': code})}", language=None)
        st.code(code, language=None)
