"""Hook points and recording.

Every intermediate tensor passes through a ``HookPoint``: an identity module whose
name is its module path (``blocks.0.attn.hook_pattern``). When nothing records, a
hook point returns its input untouched. Inside ``recording(...)`` the active
``Recorder`` sees each tensor in the order the forward pass makes them, keeps the
ones asked for, and may replace them (interventions).

The active recorder lives in a ``ContextVar``: each thread (each browser session)
has its own, so two threads tracing the same model never see each other's tensors,
and nothing is attached to the model, so no hook can be left behind.
"""
from __future__ import annotations

import contextlib
import contextvars
import fnmatch
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

import torch
from torch import nn

from .axes import AXES, Choice
from .hook_sites import SITES

DEFAULT_MAX_BYTES = 1 << 30  # 1 GiB

_ACTIVE: contextvars.ContextVar["Recorder | None"] = contextvars.ContextVar("attention_lab_recorder", default=None)


class HookPoint(nn.Module):
    """Identity module that lets a recorder see (and replace) the tensor passing through.

    ``HookPoint("hook_k", T_kv="S")``: its dims and op come from the site's row in ``hook_sites.SITES``,
    a dim renamed where the module differs (cross-attention's keys are the S encoder positions);
    ``choice`` is the row in the table of the choice that makes the tensor, whose words win where it words
    the site its own way (``HookPoint("hook_normalized", AXES["norm"].row("rmsnorm"))``; a linear layer's
    ``hook_pattern`` is no softmax).
    """

    def __init__(self, site: str, choice: Choice | None = None, **renamed_dims: str):
        super().__init__()
        if site not in SITES:
            raise KeyError(f"hook site {site!r} has no row in transformer/hook_sites.py SITES")
        row = SITES[site]
        self.name = ""  # set to the module path by ``name_hook_points``
        self.site = site  # the name's last part
        self.dims = tuple(renamed_dims.get(d, d) for d in row.dims)  # named dimensions, e.g. ("B", "H", "T_q", "T_kv")
        own = choice.ops.get(site) if choice is not None else None
        self.op = own if own is not None else row.op  # the operation, in words or a formula
        if self.op is None:
            raise KeyError(f"hook site {site!r} leaves its op to the choice that makes it; pass that choice's row")
        self.on_request = row.on_request  # recorded only when asked for by its exact name

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        recorder = _ACTIVE.get()
        if recorder is None:
            return x
        return recorder.visit(self, x)

    def extra_repr(self) -> str:
        return f"dims={self.dims}"


def name_hook_points(model: nn.Module) -> None:
    """Give every hook point its module path as its name."""
    for path, module in model.named_modules():
        if isinstance(module, HookPoint):
            module.name = path


def active_recorder() -> "Recorder | None":
    return _ACTIVE.get()


@dataclass
class TraceEvent:
    index: int  # position in the forward pass
    name: str
    tensor: torch.Tensor
    dims: tuple[str, ...]
    op: str

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.tensor.shape)

    @property
    def named_shape(self) -> str:
        """``(B=1, H=4, T_q=9, T_kv=9)``"""
        return "(" + ", ".join(f"{d}={n}" for d, n in zip(self.dims, self.shape)) + ")"

    @property
    def nbytes(self) -> int:
        return self.tensor.numel() * self.tensor.element_size()


class Trace:
    """The recorded tensors, in the order the forward pass made them.

    ``trace[name]`` gives the tensor (the latest one, if a name fired more than
    once, as in generation); ``trace.events`` the ordered events.
    """

    def __init__(self, events: list[TraceEvent] | None = None):
        self.events: list[TraceEvent] = events or []
        self._latest: dict[str, TraceEvent] = {e.name: e for e in self.events}

    def add(self, event: TraceEvent) -> None:
        self.events.append(event)
        self._latest[event.name] = event

    def __getitem__(self, name: str) -> torch.Tensor:
        if name not in self._latest:
            raise KeyError(f"{name!r} was not recorded; recorded names: {', '.join(self.names()[:12])}{' ...' if len(self._latest) > 12 else ''}")
        return self._latest[name].tensor

    def __contains__(self, name: str) -> bool:
        return name in self._latest

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[TraceEvent]:
        return iter(self.events)

    def event(self, name: str) -> TraceEvent:
        return self._latest[name]

    def names(self) -> list[str]:
        return list(self._latest)

    def keys(self) -> list[str]:
        return self.names()

    @property
    def nbytes(self) -> int:
        return sum(e.nbytes for e in self.events)

    def to_numpy(self) -> dict[str, "object"]:
        """name -> numpy array (float tensors as float32), for caching and download."""
        out = {}
        for e in self.events:
            t = e.tensor.detach().cpu()
            out[e.name] = (t.float() if t.is_floating_point() else t).numpy()
        return out


Intervention = Callable[[torch.Tensor, TraceEvent], torch.Tensor]
NameFilter = Iterable[str] | Callable[[str], bool] | None


def _exact_names(names: NameFilter) -> frozenset[str]:
    """The names a filter asks for one by one (no glob): the only way to ask for a site recorded on request."""
    if names is None or callable(names):
        return frozenset()
    return frozenset(p for p in ([names] if isinstance(names, str) else names) if not any(c in p for c in "*?["))


def _make_filter(names: NameFilter) -> Callable[[str], bool]:
    if names is None:
        return lambda name: True
    if callable(names):
        return names
    patterns = [names] if isinstance(names, str) else list(names)
    exact = {p for p in patterns if not any(c in p for c in "*?[")}
    globs = [p for p in patterns if p not in exact]
    return lambda name: name in exact or any(fnmatch.fnmatchcase(name, g) for g in globs)


class Recorder:
    """Keeps the tensors whose names pass ``names`` and applies interventions."""

    def __init__(self, names: NameFilter = None, interventions: dict[str, Intervention] | None = None,
                 max_bytes: int | None = DEFAULT_MAX_BYTES, record: bool = True):
        self._keep = _make_filter(names) if record else (lambda name: False)
        self._named = _exact_names(names) if record else frozenset()
        self.interventions = dict(interventions or {})
        self.max_bytes = max_bytes
        self.trace = Trace()
        self.kept_bytes = 0  # = self.trace.nbytes, kept as a running total: summing every event per visit is quadratic
        self._index = 0
        self._wants: dict[str, bool] = {}

    def wants(self, name: str, on_request: bool = False) -> bool:
        """Whether a tensor of this name is recorded or replaced (cached per name); a site recorded on request
        (``HookSite.on_request``) only when its exact name was asked for."""
        if name not in self._wants:
            self._wants[name] = name in self.interventions or self.keeps(name, on_request)
        return self._wants[name]

    def keeps(self, name: str, on_request: bool = False) -> bool:
        """Whether the trace keeps a tensor of this name (``names`` asked for it)."""
        return name in self._named if on_request else self._keep(name)

    def visit(self, point: HookPoint, x: torch.Tensor) -> torch.Tensor:
        event = TraceEvent(self._index, point.name, x, point.dims, point.op)
        self._index += 1
        if point.name in self.interventions:
            x = self.interventions[point.name](x, event)
            event.tensor = x
        if self.keeps(point.name, point.on_request):
            event.tensor = x.detach()
            if self.max_bytes is not None and self.kept_bytes + event.nbytes > self.max_bytes:
                raise MemoryError(
                    f"recording {point.name} {event.named_shape} would bring the trace to "
                    f"{(self.kept_bytes + event.nbytes) / 2**20:.1f} MiB, over the cap of {self.max_bytes / 2**20:.1f} MiB; "
                    "record fewer names (names=[...]), use a shorter input, or raise max_bytes"
                )
            self.trace.add(event)
            self.kept_bytes += event.nbytes
        return x


@contextlib.contextmanager
def recording(names: NameFilter = None, interventions: dict[str, Intervention] | None = None,
              max_bytes: int | None = DEFAULT_MAX_BYTES, record: bool = True) -> Iterator[Recorder]:
    """Record (and/or intervene on) every forward pass run inside the block, in this thread only."""
    recorder = Recorder(names, interventions, max_bytes, record)
    token = _ACTIVE.set(recorder)
    try:
        yield recorder
    finally:
        _ACTIVE.reset(token)


def wants_any(*points: HookPoint) -> bool:
    """True when the active recorder asks for any of these hook points."""
    recorder = _ACTIVE.get()
    return recorder is not None and any(recorder.wants(p.name, p.on_request) for p in points)


# --- names and ablations ------------------------------------------------------------------


def hook_name(layer: int, path: str, stack: str = "") -> str:
    """The hook point of a block, by its path in the block: hook_name(1, "attn.hook_z") -> "blocks.1.attn.hook_z";
    stack="decoder" for an encoder-decoder's decoder stack."""
    return f"{stack + '.' if stack else ''}blocks.{layer}.{path}"


@dataclass(frozen=True)
class AttentionStacks:
    """A model's stacks, as hook_name's ``stack``: whose blocks hold self-attention (``attn``) and whose
    also hold cross-attention (``cross_attn``)."""

    self_attention: tuple[str, ...]  # ("",) for one stack; ("encoder", "decoder"), the stack reading the input first
    cross_attention: tuple[str, ...]  # () or ("decoder",)

    @property
    def input(self) -> str:
        """The stack that reads the input text: an encoder-decoder's encoder."""
        return self.self_attention[0]

    @property
    def output(self) -> str:
        """The stack the logits come from: an encoder-decoder's decoder."""
        return self.self_attention[-1]


def attention_stacks(arch: str) -> AttentionStacks:
    """Which stacks of an architecture hold which attention; the first layer's weights on the input text are
    ``hook_name(0, "attn.hook_pattern", attention_stacks(cfg.arch).input)``."""
    if AXES["arch"].row(arch).cross:
        return AttentionStacks(("encoder", "decoder"), ("decoder",))
    return AttentionStacks(("",), ())


def ablations(heads: Iterable[tuple[int, int]] = (), experts: Iterable[tuple[int, int]] = (),
              stack: str = "") -> dict[str, Intervention]:
    """Interventions that switch parts off: each (layer, head) writes nothing (its z is zeroed, so
    W_o adds nothing from it); each (layer, expert) is never chosen (its router logit is -inf).

        with model.intervene(ablations(heads=[(1, 2)])): logits = model(ids)
    """
    by_name: dict[str, list[int]] = {}
    for layer, head in heads:
        by_name.setdefault(hook_name(layer, "attn.hook_z", stack), []).append(head)
    for layer, expert in experts:
        by_name.setdefault(hook_name(layer, "mlp.hook_router_logits", stack), []).append(expert)

    def switch_off(indices: list[int], dim: int, value: float) -> Intervention:
        def intervention(tensor: torch.Tensor, event: TraceEvent) -> torch.Tensor:
            index = torch.tensor(indices, device=tensor.device)
            return tensor.index_fill(dim, index, value)
        return intervention

    return {name: switch_off(indices, 1, 0.0) if name.endswith("hook_z") else switch_off(indices, -1, float("-inf"))
            for name, indices in by_name.items()}
