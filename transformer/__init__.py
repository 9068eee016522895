"""Attention Lab: a transformer whose every plug point can be switched, and that records what happens inside."""
from .axes import AXES
from .config import TransformerConfig, choices
from .costs import kv_cache_bytes_per_token, param_counts
from .hooks import HookPoint, Trace, TraceEvent, recording
from .model import CACHE_LAYOUTS, KVCache, Transformer, default_device
from .paged_cache import PagedKVCache
from .presets import MODEL_CARDS, PRESETS

__all__ = [
    "TransformerConfig", "Transformer", "PRESETS", "MODEL_CARDS", "KVCache", "PagedKVCache", "CACHE_LAYOUTS", "Trace", "TraceEvent",
    "HookPoint", "recording", "choices", "AXES", "default_device", "param_counts", "kv_cache_bytes_per_token",
]
