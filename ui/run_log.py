"""Each script run's wall-clock and CPU time, appended to a file when $ATTENTION_LAB_RUN_LOG names one.

No Streamlit import here: the load test reads the same names without loading the app.
"""
from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator

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
