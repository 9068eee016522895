"""A browser tab without the browser: one Streamlit session driven over its WebSocket, as the frontend drives it.

    tab = Tab("http://127.0.0.1:8500")
    await tab.open("lessons", "step=1&class=K7QPM")   # seconds until the page's first run finished
    await tab.choose("Your answer", 1)                # a radio option, by the widget's label
    await tab.click("Send my answer")
    tab.text()                                        # every markdown, heading and alert drawn now
    await tab.close()

What it does, as Streamlit's frontend does (streamlit/proto): GET the page once (its cookies and the
proxy's replica header come with it; the frontend's scripts and styles are not fetched), open
/_stcore/stream, and send a `rerun_script` BackMsg with the page's query string and name; after each
widget change, another one carrying every widget value set so far and, for a button, its trigger. A
fragment with `run_every` makes the server send `auto_rerun`: the tab then asks for that fragment's
rerun every `interval` seconds, like the frontend's timer, until a full run replaces it. The page is
kept as the server describes it (elements by their delta path), without drawing anything.

Every run the tab asked for is timed from the send until the server's `script_finished` for that run,
or for the run that replaced it (a fragment that calls st.rerun): `open_s`, `action_s` (choose,
click) and `poll_s` (the fragment's reruns). Exceptions on the page count in `exceptions`, polls
that failed (no answer within RUN_TIMEOUT_S, a dropped connection) in `poll_failures`.
"""
from __future__ import annotations

import asyncio
import time
import urllib.request
from dataclasses import dataclass

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

RUN_TIMEOUT_S = 120.0
TEXT_ELEMENTS = ("markdown", "heading", "alert")
REPLACED = ForwardMsg.FINISHED_EARLY_FOR_RERUN


@dataclass
class Run:
    started: float  # time.perf_counter() when its new_session arrived
    finished: float | None = None
    status: int | None = None


class Tab:
    """One Streamlit session; see the module's doc."""

    def __init__(self, base: str):
        self.base = base.rstrip("/")
        self.cookie: str | None = None  # what the server and the proxy set, sent back as a browser would
        self.replica: str | None = None  # the X-Hall-Replica header of the page, behind the hall's proxy
        self.open_s: list[float] = []
        self.action_s: list[float] = []
        self.poll_s: list[float] = []
        self.exceptions: list[str] = []  # exception elements the page showed
        self.poll_failures: list[str] = []  # a poll that timed out, or whose connection dropped
        self.elements: dict[tuple[int, ...], tuple[str, object]] = {}  # delta path -> (kind, element proto)
        self._runs: dict[str, Run] = {}  # script run id -> run
        self._widgets: dict[str, object] = {}  # widget id -> a WidgetState to send with every rerun
        self._page_hash = ""
        self._page_name = ""
        self._query = ""
        self._ws = None
        self._reader: asyncio.Task | None = None
        self._fragments: dict[str, asyncio.Task] = {}  # fragment id -> the task rerunning it now
        self._pollers: set[asyncio.Task] = set()  # every such task, current or replaced, until it ends
        self._closing = False
        self._turn = asyncio.Lock()  # one run asked for at a time, as a tab whose script is running waits
        self._changed = asyncio.Event()

    # --- what the page shows -----------------------------------------------------------------

    def text(self) -> str:
        """Every markdown, heading and alert body on the page, in page order."""
        return "\n".join(element.body for _, (kind, element) in sorted(self.elements.items())
                         if kind in TEXT_ELEMENTS)

    def has(self, kind: str) -> bool:
        return any(k == kind for k, _ in self.elements.values())

    def widget(self, kind: str, label: str):
        """The element of the widget of this kind whose label is `label` (ValueError when the page has none)."""
        for k, element in self.elements.values():
            if k == kind and element.label == label:
                return element
        raise ValueError(f"no {kind} labelled {label!r} on the page; it shows:\n{self.text()[:2000]}")

    async def wait_for(self, predicate, timeout_s: float) -> float:
        """Until predicate(self) holds after a finished run; when it first held (time.perf_counter())."""
        deadline = time.perf_counter() + timeout_s
        while not (self._idle() and predicate(self)):
            self._changed.clear()
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise TimeoutError(f"the page did not change as expected within {timeout_s:.0f} s; it shows:\n"
                                   f"{self.text()[:2000]}")
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except asyncio.TimeoutError:
                pass
        return time.perf_counter()

    # --- what a person does ------------------------------------------------------------------

    async def open(self, page: str, query: str = "") -> float:
        """Load /page?query and run it; seconds from the request for the page until its run finished."""
        self._page_name, self._query = page, query
        start = time.perf_counter()
        request = urllib.request.Request(f"{self.base}/{page}" + (f"?{query}" if query else ""),
                                         headers={"Cookie": self.cookie} if self.cookie else {})
        self.cookie, self.replica = await asyncio.to_thread(self._get, request)
        self._ws = await connect(self.base.replace("http", "ws", 1) + "/_stcore/stream", subprotocols=["streamlit"],
                                 origin=self.base, additional_headers={"Cookie": self.cookie} if self.cookie else {},
                                 max_size=None, compression=None, open_timeout=RUN_TIMEOUT_S)
        self._reader = asyncio.create_task(self._read())
        async with self._turn:
            await self._rerun(start)
        self.open_s.append(time.perf_counter() - start)
        return self.open_s[-1]

    async def choose(self, label: str, index: int) -> float:
        """Pick option `index` of the radio labelled `label` (the frontend sends the option's text)."""
        radio = self.widget("radio", label)
        self._widget_state(radio.id).string_value = radio.options[index]
        return await self._act()

    async def click(self, label: str) -> float:
        button = self.widget("button", label)
        return await self._act(trigger=button.id)

    async def close(self) -> None:
        self._closing = True  # an auto_rerun still arriving starts no poller
        for task in self._pollers:
            task.cancel()
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)
        await asyncio.gather(*self._pollers, return_exceptions=True)

    # --- the protocol --------------------------------------------------------------------------

    def _get(self, request) -> tuple[str | None, str | None]:
        with urllib.request.urlopen(request, timeout=RUN_TIMEOUT_S) as response:
            cookies = [c.split(";", 1)[0] for c in response.headers.get_all("Set-Cookie") or []]
            return "; ".join(filter(None, [self.cookie, *cookies])) or None, response.headers.get("X-Hall-Replica")

    def _widget_state(self, widget_id: str):
        if widget_id not in self._widgets:
            state = BackMsg().rerun_script.widget_states.widgets.add()
            state.id = widget_id
            self._widgets[widget_id] = state
        return self._widgets[widget_id]

    async def _act(self, trigger: str | None = None) -> float:
        async with self._turn:
            start = time.perf_counter()
            await self._rerun(start, trigger=trigger)
        self.action_s.append(time.perf_counter() - start)
        return self.action_s[-1]

    async def _rerun(self, start: float, trigger: str | None = None, fragment: str = "") -> None:
        """Ask for a run and wait until it, or the run that replaced it, finished."""
        message = BackMsg()
        state = message.rerun_script
        state.query_string, state.page_name, state.page_script_hash = self._query, self._page_name, self._page_hash
        state.fragment_id, state.is_auto_rerun = fragment, bool(fragment)
        state.widget_states.widgets.extend(self._widgets.values())
        if trigger:
            state.widget_states.widgets.add(id=trigger, trigger_value=True)
        await self._ws.send(message.SerializeToString())
        deadline = start + RUN_TIMEOUT_S
        while not self._finished_since(start):
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), max(deadline - time.perf_counter(), 0.001))
            except asyncio.TimeoutError:
                raise TimeoutError(f"no run finished within {RUN_TIMEOUT_S:.0f} s of the request") from None

    def _finished_since(self, start: float) -> bool:
        return any(run.started >= start and run.finished is not None and run.status != REPLACED
                   for run in self._runs.values())

    def _idle(self) -> bool:
        return all(run.finished is not None for run in self._runs.values())

    async def _read(self) -> None:
        async for payload in self._ws:
            self._receive(ForwardMsg.FromString(payload))
            self._changed.set()

    def _receive(self, message: ForwardMsg) -> None:
        kind = message.WhichOneof("type")
        now = time.perf_counter()
        if kind == "new_session":
            self._runs[message.metadata.run.script_run_id] = Run(started=now)
            if not message.metadata.run.fragment_ids:
                # the whole page is drawn again and its fragments announce themselves again; a poller
                # still waiting for its own run (the one that asked for this) ends at its next tick
                self.elements.clear()
                self._fragments.clear()
        elif kind == "page_info_changed":  # the page wrote its state into the URL: later runs send it
            self._query = message.page_info_changed.query_string
        elif kind == "navigation":  # st.navigation names the page this run drew: later runs ask for it
            self._page_hash = message.navigation.page_script_hash
        elif kind == "script_finished":
            run = self._runs.get(message.metadata.run.script_run_id)
            if run is not None:
                run.finished, run.status = now, message.script_finished
        elif kind == "delta" and message.delta.WhichOneof("type") == "new_element":
            element = message.delta.new_element
            element_kind = element.WhichOneof("type")
            self.elements[tuple(message.metadata.delta_path)] = (element_kind, getattr(element, element_kind))
            if element_kind == "exception":
                self.exceptions.append(element.exception.message)
        elif kind == "auto_rerun" and not self._closing and message.auto_rerun.fragment_id not in self._fragments:
            fragment_id = message.auto_rerun.fragment_id
            task = asyncio.create_task(self._poll(fragment_id, message.auto_rerun.interval))
            self._fragments[fragment_id] = task
            self._pollers.add(task)
            task.add_done_callback(self._pollers.discard)

    async def _poll(self, fragment_id: str, interval_s: float) -> None:
        """Rerun the fragment every interval_s, as the frontend's timer does (never two at once)."""
        next_at = time.perf_counter() + interval_s
        while True:
            await asyncio.sleep(max(next_at - time.perf_counter(), 0))
            next_at += interval_s
            async with self._turn:
                if self._fragments.get(fragment_id) is not asyncio.current_task():
                    return  # a full run replaced this fragment while the tab waited for its turn
                start = time.perf_counter()
                try:
                    await self._rerun(start, fragment=fragment_id)
                except (TimeoutError, ConnectionClosed) as exc:
                    if not self._closing:
                        self.poll_failures.append(f"{type(exc).__name__}: {exc}")
                    return
            self.poll_s.append(time.perf_counter() - start)
