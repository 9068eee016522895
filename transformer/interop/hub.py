"""Fetch a model from the Hugging Face Hub into the local cache, only when asked; then it opens like any cached id.

    download_from_hub("gpt2", report=print)  # its configuration, its weights, its tokenizer
    from_hf("gpt2")                          # read from the cache, as every other id (local_files_only=True)

Everything else in the interop package reads this computer only. A download that cannot happen raises a
``HubError`` (a ValueError) whose message says which case it is: no network (and what opens without one), an id
the Hub does not have, or a model that needs a token.
"""
from __future__ import annotations

import socket
from typing import Callable
from urllib.parse import urlparse

from .huggingface import _architecture, _family_of, _transformers

LOCAL_ALTERNATIVES = ("open a model already on this computer instead: a directory written by save_pretrained, "
                      "or a model id already in the local Hugging Face cache (`hf download <id>` on a machine "
                      "with a network fills it)")
PROBE_SECONDS = 3.0  # how long to wait for the Hub to answer a connection before calling it unreachable


class HubError(ValueError):
    """A download from the Hub that could not happen, in words a reader can act on."""


def hub_endpoint() -> str:
    """The Hub's address: huggingface.co, or $HF_ENDPOINT (a mirror)."""
    from huggingface_hub import constants
    return constants.ENDPOINT


def hub_reachable(timeout_s: float = PROBE_SECONDS) -> bool:
    """Whether a connection to the Hub opens within `timeout_s` ($HF_HUB_OFFLINE set counts as no).

    Asked first because without a network the download's own retries take half a minute to give up.
    """
    from huggingface_hub import constants
    if constants.HF_HUB_OFFLINE:
        return False
    address = urlparse(hub_endpoint())
    port = address.port or (443 if address.scheme == "https" else 80)
    try:
        socket.create_connection((address.hostname, port), timeout=timeout_s).close()
    except OSError:  # no route, no name resolution, refused, timed out
        return False
    return True


def download_from_hub(model_id: str, report: Callable[[str], None] = lambda step: None) -> None:
    """Download `model_id`'s configuration, weights and tokenizer into the local Hugging Face cache.

    `report` hears each step as it starts ("its configuration", ...), for a progress message. An unsupported
    class is refused after the configuration, before any weights are fetched. Raises HubError.
    """
    if not hub_reachable():
        raise HubError(f"The Hugging Face Hub ({hub_endpoint()}) cannot be reached from this computer: there is no "
                       f"network, so {model_id!r} was not downloaded. Without a network, {LOCAL_ALTERNATIVES}.")
    transformers = _transformers()
    try:
        report("its configuration")
        hf_config = transformers.AutoConfig.from_pretrained(model_id, trust_remote_code=False)
        hf_class = _architecture(hf_config, model_id)
        _family_of(hf_class)  # an unsupported class raises here, before gigabytes of weights arrive
        report("its weights")
        getattr(transformers, hf_class).from_pretrained(model_id, trust_remote_code=False)
        report("its tokenizer")
        _download_tokenizer(transformers, model_id)
    except OSError as exc:
        raise HubError(_why_not(model_id, exc)) from exc


def _download_tokenizer(transformers, model_id: str) -> None:
    """Its tokenizer, when it has one: without one the app reads the model's text as character ids."""
    try:
        transformers.AutoTokenizer.from_pretrained(model_id, trust_remote_code=False)
    except (OSError, ValueError, KeyError):  # no tokenizer files, or a tokenizer class this release lacks
        pass


def _why_not(model_id: str, exc: BaseException) -> str:
    """The download's failure in words: transformers wraps the Hub's own error, so walk the chain to find it."""
    from huggingface_hub.errors import GatedRepoError, LocalEntryNotFoundError, RepositoryNotFoundError
    causes = []
    while exc is not None and exc not in causes:
        causes.append(exc)
        exc = exc.__cause__ or exc.__context__
    # most specific first: a gated model is also a repository the anonymous reader cannot see
    if any(isinstance(cause, GatedRepoError) for cause in causes):
        return (f"{model_id!r} is gated: it needs a token. Accept its terms on its Hub page, log in with "
                "`hf auth login` (or set HF_TOKEN) before starting the app, and try again.")
    if any(isinstance(cause, RepositoryNotFoundError) for cause in causes):
        return (f"{model_id!r} does not exist on the Hugging Face Hub, or it is private and needs a token: check "
                "the spelling (e.g. gpt2, Qwen/Qwen3-0.6B); for a private model, log in with `hf auth login` "
                "(or set HF_TOKEN) before starting the app.")
    if any(isinstance(cause, LocalEntryNotFoundError) for cause in causes):
        return (f"The connection to the Hugging Face Hub broke while downloading {model_id!r}; try again, or "
                f"{LOCAL_ALTERNATIVES}.")
    return f"{model_id!r} could not be downloaded from the Hugging Face Hub: {causes[0]}"
