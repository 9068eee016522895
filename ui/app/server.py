"""What the server process does around every script run: free what can be freed, and log the run when asked.

Nothing here imports Streamlit or torch: app.py calls these around each run, and the load
test reads RUN_LOG_ENV without loading the app.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import gc
import json
import os
import threading
import time
from collections.abc import Iterator


@functools.cache
def freeze_long_lived_objects() -> None:
    """Once per server process: hide every object alive now from the cyclic garbage collector.

    Streamlit runs a full collection after every script run (``runner.postScriptGC``) so
    that memory does not build up between runs. With torch, plotly, pandas and matplotlib
    imported, that walks about 250,000 objects -- classes, functions and constants of the
    libraries that live as long as the process -- and costs about 100 ms of CPU per rerun,
    holding the interpreter lock while other sessions wait. Frozen objects are still freed
    normally when nothing refers to them; they are only never searched for cycles again.
    The pages' shared modules are imported first so that their objects are frozen too.
    """
    from ui.app import export  # noqa: F401  (the libraries every page draws with)
    from ui.figures import base as figures
    from ui.app import page

    gc.collect()  # garbage already waiting is collected, not frozen
    gc.freeze()


TRIM_EVERY_S = 10.0
_trim_lock = threading.Lock()
_last_trim = [0.0]


@functools.cache
def _malloc_trim():
    """glibc's malloc_trim, or None on a C library without it."""
    name = ctypes.util.find_library("c")
    library = ctypes.CDLL(name) if name else None
    return getattr(library, "malloc_trim", None)


def release_freed_memory() -> None:
    """Give memory the process has freed back to the system, at most once every TRIM_EVERY_S seconds.

    Each session's script runs in its own thread, and glibc keeps what a thread frees in that
    thread's own arena for later reuse, so the server's resident memory stays near its peak
    after a class has left. malloc_trim(0) returns those free pages (about 2 ms); once every
    few seconds costs nothing a user could notice.
    """
    trim = _malloc_trim()
    if trim is None or not _trim_lock.acquire(blocking=False):
        return
    try:
        if time.monotonic() - _last_trim[0] >= TRIM_EVERY_S:
            trim(0)
            _last_trim[0] = time.monotonic()
    finally:
        _trim_lock.release()



RUN_LOG_ENV = "ATTENTION_LAB_RUN_LOG"


@contextlib.contextmanager
def logged_run(page: str) -> Iterator[None]:
    """Time one script run; with $ATTENTION_LAB_RUN_LOG set, append a line to that file.

    The line is JSON: the page, when the run ended (time.time()), its wall-clock seconds
    and the CPU seconds of the thread that ran it. The load test reads it to tell the
    server's own share of a change's latency from the browser's.
    """
    path = os.environ.get(RUN_LOG_ENV)
    wall, cpu = time.perf_counter(), time.thread_time()
    try:
        yield
    finally:  # st.stop and st.switch_page end a run by raising: it counts all the same
        if path:
            line = json.dumps(dict(page=page, end=time.time(), wall_s=time.perf_counter() - wall,
                                   cpu_s=time.thread_time() - cpu))
            with open(path, "a") as f:
                f.write(line + "\n")
