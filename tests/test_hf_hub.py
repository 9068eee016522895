"""The Hugging Face page opens a directory without a network, downloads a Hub id only when asked, and says which
case stopped a download: no network, no such model, or a model that needs a token. The Hub itself is never
reached: the network is cut in-process, or a small local server answers as the Hub answers."""
import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from apptest_helpers import APP, assert_clean
from transformer.interop import FAMILIES
from transformer.interop.family import Family

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def no_network(monkeypatch):
    """Every connection and name lookup this process tries fails as it does on a machine with no network; the
    addresses tried are listed (the AppTest script runs in this process, so the page's own calls are caught)."""
    tried: list = []

    def refuse_connect(sock, address):
        tried.append(address)
        raise OSError(101, "Network is unreachable")

    def refuse_lookup(host, *args, **kwargs):
        tried.append(host)
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket.socket, "connect", refuse_connect)
    monkeypatch.setattr(socket, "getaddrinfo", refuse_lookup)
    return tried


def hf_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/hf_model.py").run()
    return at


@pytest.fixture(scope="module")
def tiny_gpt2_directory(tmp_path_factory) -> Path:
    from transformers import GPT2Config, GPT2LMHeadModel

    directory = tmp_path_factory.mktemp("gpt2")
    GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=4)).save_pretrained(directory)
    return directory


def test_a_hub_id_without_a_network_says_so_and_names_what_opens_without_one(no_network):
    at = hf_page()
    at.checkbox(key="hf_download").check().run()
    at.text_input(key="hf_path").set_value("Qwen/Qwen3-0.6B").run()
    assert_clean(at, errors_allowed=True)
    message = " ".join(error.value for error in at.error)
    assert "cannot be reached" in message and "no network" in message and "'Qwen/Qwen3-0.6B'" in message
    assert "save_pretrained" in message and "local Hugging Face cache" in message
    assert no_network, "the page asked the network before saying there is none"
    assert not at.subheader  # nothing half-opened
    assert not any(box.get("error") for box in at.get("status"))  # the reason is not folded away in the status box


@pytest.mark.parametrize("download", [False, True], ids=["box clear", "box ticked"])
def test_a_local_directory_opens_without_touching_the_network(no_network, tiny_gpt2_directory, download):
    at = hf_page()
    if download:
        at.checkbox(key="hf_download").check().run()
    at.text_input(key="hf_path").set_value(str(tiny_gpt2_directory)).run()
    assert_clean(at)
    assert any("GPT2LMHeadModel" in header.value for header in at.subheader)
    assert no_network == []


def test_the_opening_lists_every_family_of_the_registry_even_one_added_later(monkeypatch):
    monkeypatch.setitem(FAMILIES, "newcomer", Family("Newcomer 7", dict, dict, ()))
    opening = hf_page().markdown[0].value
    missing = [family.name for family in FAMILIES.values() if family.name not in opening]
    assert not missing, missing
    assert "Newcomer 7" in opening


SERVED_ID = "tester/tiny-gpt2"  # the one model id the local server holds


class HubLike(BaseHTTPRequestHandler):
    """Answers as the Hub does (its X-Error-Code header names the case): the files of SERVED_ID from the folder
    `served`, a gated model's refusal, and "no such repository" for everything else."""

    served: Path
    asked: list

    def answer(self, with_body: bool) -> None:
        path = self.path.split("?")[0]
        self.asked.append(f"{self.command} {path}")
        served_prefix = f"/{SERVED_ID}/resolve/main/"
        if path.startswith(served_prefix) and (self.served / path[len(served_prefix):]).is_file():
            data = (self.served / path[len(served_prefix):]).read_bytes()
            self.send_response(200)
            self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
            self.send_header("X-Repo-Commit", "0" * 40)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if with_body:
                self.wfile.write(data)
            return
        gated = path.startswith("/someone/gated-model/")
        code = "EntryNotFound" if path.startswith(f"/{SERVED_ID}/") else "GatedRepo" if gated else "RepoNotFound"
        self.send_response(403 if gated else 404)
        self.send_header("X-Error-Code", code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self):
        self.answer(with_body=False)

    def do_GET(self):
        self.answer(with_body=True)

    def log_message(self, *args):
        pass


@pytest.fixture
def hub_like(tiny_gpt2_directory):
    handler = type("Served", (HubLike,), {"served": tiny_gpt2_directory, "asked": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler.asked
    server.shutdown()


def in_fresh_process(script: str, endpoint: str, cache: Path, *args: str) -> str:
    """Run `script` with the Hub at `endpoint` and the Hugging Face cache in `cache` (the Hub's address is read once,
    as huggingface_hub is imported): its last printed line."""
    env = {**os.environ, "HF_ENDPOINT": endpoint, "HF_HOME": str(cache), "HF_HUB_OFFLINE": "0",
           "TRANSFORMERS_OFFLINE": "0", "HF_TOKEN": ""}
    result = subprocess.run([sys.executable, "-c", script, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()[-1]


def test_a_missing_id_and_a_gated_one_each_get_their_own_message(hub_like, tmp_path):
    script = ("import json\nfrom transformer.interop.hub import HubError, download_from_hub\nmessages = {}\n"
              "for model_id in ['nobody/no-such-model', 'someone/gated-model']:\n"
              "    try:\n        download_from_hub(model_id)\n"
              "    except HubError as exc:\n        messages[model_id] = str(exc)\n"
              "print(json.dumps(messages))\n")
    messages = json.loads(in_fresh_process(script, hub_like[0], tmp_path))
    assert "does not exist on the Hugging Face Hub" in messages["nobody/no-such-model"]
    assert "gated: it needs a token" in messages["someone/gated-model"]
    assert "HF_TOKEN" in messages["someone/gated-model"]


def test_a_hub_id_is_downloaded_with_a_message_and_opens_from_the_cache(hub_like, tmp_path):
    endpoint, asked = hub_like
    script = ("import json, sys\nfrom streamlit.testing.v1 import AppTest\n"
              "at = AppTest.from_file(sys.argv[1], default_timeout=240)\nat.run()\n"
              "at.switch_page('pages/hf_model.py').run()\nat.checkbox(key='hf_download').check().run()\n"
              "at.text_input(key='hf_path').set_value(sys.argv[2]).run()\n"
              "print(json.dumps({'errors': [e.value for e in [*at.error, *at.exception]],\n"
              "                  'status': [(s.label, s.state) for s in at.status],\n"
              "                  'steps': [m.value for s in at.status for m in s.markdown],\n"
              "                  'subheaders': [h.value for h in at.subheader]}))\n")
    page = json.loads(in_fresh_process(script, endpoint, tmp_path, APP, SERVED_ID))
    assert page["errors"] == []
    assert page["status"] == [[f"Downloaded {SERVED_ID} into the local Hugging Face cache", "complete"]]
    assert page["steps"] == ["Downloading its configuration…", "Downloading its weights…",
                             "Downloading its tokenizer…"]
    assert page["subheaders"] == ["GPT2LMHeadModel: the GPT-2 family on our axes"]
    assert f"GET /{SERVED_ID}/resolve/main/model.safetensors" in asked  # the weights came from the Hub
    assert list((tmp_path / "hub").glob("models--tester--tiny-gpt2/snapshots/*/model.safetensors"))
