"""Everyday English to train on: WordNet's definitions and example sentences, split honestly.

Debian's ``wordnet-base`` package (``apt-get install wordnet-base``) ships Princeton's WordNet 3.0:
117,659 synsets, each a sense of a word with its definition and usually an example sentence of
everyday English. One synset is one document:

    a member of the genus Canis that has been domesticated by man since prehistoric times. The dog barked all night.

Classroom-fit: a synset that WordNet itself files under obscenity, vulgarism, ethnic slur,
disparagement or slang is left out, as is one whose definition calls itself offensive,
obscene, vulgar, derogatory or sexual, and one that uses a word found only in those.

The held-out split is decided per document by a hash of its id (``wordnet-3.0:n:02084071``), so
adding a source never moves a document between training and held-out. Glosses repeat one another
(the same example serves two senses of a word), so a held-out document that shares any
50-character chunk or any whole sentence with the training text moves to training; what stays
held out shares no 50-character chunk with it (``leaked_share`` measures it: 0).

Only training needs the package. The held-out text ships with the project
(``assets/text/english-held-out.txt``), so measuring a model, the app and the tests never need it.
"""
from __future__ import annotations

import functools
import hashlib
import random
import re
from dataclasses import dataclass
from pathlib import Path

WORDNET_DIR = Path("/usr/share/wordnet")
WORDNET_FILES = ("data.noun", "data.verb", "data.adj", "data.adv")
INSTALL_HINT = "install Debian's wordnet-base package: apt-get install wordnet-base"
ASSET_DIR = Path(__file__).resolve().parents[2] / "assets" / "text"
HELD_OUT_PATH = ASSET_DIR / "english-held-out.txt"
OUTSIDE_PROSE_PATH = ASSET_DIR / "outside-prose.txt"

HELD_OUT_PER_THOUSAND = 50  # 5% of documents, by hash of the id
CHUNK = 50  # no held-out chunk this long occurs in the training text
SHUFFLE_SEED = 0

# WordNet's usage domains whose members a classroom model should not learn (synset offsets in data.noun)
BLOCKED_DOMAINS = {"06717170": "disparagement", "06718862": "ethnic slur", "07124340": "obscenity, vulgarism",
                   "07157273": "slang"}
BLOCKED_GLOSS = re.compile(r"\b(offensive|obscene|vulgar|slur|derogatory|disparaging|slang|sexual|sexually|"
                           r"genital|genitals|intercourse|prostitut\w*|pornograph\w*|racist)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Document:
    id: str  # stable across versions of this code: source, part of speech and offset
    text: str


def source_description() -> dict:
    """Package, version, licence and size of the source, for a checkpoint's JSON."""
    return {"package": "wordnet-base (Debian)", "version": _package_version("wordnet-base"),
            "licence": "WordNet 3.0 license (Princeton University): use, copy, modify and distribute, "
                       "with the copyright notice", "content": "WordNet 3.0 definitions and example sentences",
            "documents": len(documents()), "characters": sum(len(d.text) for d in documents())}


def _package_version(name: str) -> str:
    status = Path("/var/lib/dpkg/status")
    if status.exists():
        match = re.search(rf"^Package: {name}\n(?:[^\n]+\n)*?Version: (\S+)", status.read_text(errors="replace"), re.M)
        if match:
            return match.group(1)
    return "unknown"


def _sentence(text: str) -> str:
    """A gloss part as a sentence: its first letter capital, a full stop at the end."""
    text = " ".join(text.strip().strip('"').split())
    if not text:
        return ""
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."


def _parse(line: str) -> tuple[str, str, list[str], list[str], list[str]] | None:
    """(offset, part of speech, lemmas, usage domains, gloss parts) of one data-file line."""
    if line.startswith("  "):  # the licence header
        return None
    head, _, gloss = line.partition(" | ")
    fields = head.split()
    offset, pos, n_words = fields[0], fields[2], int(fields[3], 16)
    lemmas = [w.lower().replace("_", " ") for w in fields[4:4 + 2 * n_words:2]]
    rest = fields[4 + 2 * n_words:]
    n_pointers = int(rest[0])
    pointers = [rest[1 + 4 * i:5 + 4 * i] for i in range(n_pointers)]
    domains = [target for symbol, target, _pos, _src in pointers if symbol == ";u"]
    definition = gloss.split('"', 1)[0].strip().rstrip(";:, ")
    examples = re.findall(r'"([^"]+)"', gloss)  # an example sentence is quoted
    return offset, pos, lemmas, domains, [definition, *examples]


@functools.lru_cache(maxsize=1)
def documents(wordnet_dir: Path = WORDNET_DIR) -> tuple[Document, ...]:
    """Every classroom-fit synset of WordNet as a document, in file order."""
    if not all((wordnet_dir / name).exists() for name in WORDNET_FILES):
        raise FileNotFoundError(f"WordNet's data files are not in {wordnet_dir}: {INSTALL_HINT}")
    parsed = []
    for name in WORDNET_FILES:
        with open(wordnet_dir / name, encoding="latin-1") as lines:
            parsed.extend(p for p in map(_parse, lines) if p is not None)
    blocked = {offset for offset, _, _, domains, parts in parsed
               if set(domains) & BLOCKED_DOMAINS.keys() or BLOCKED_GLOSS.search(" ".join(parts))}
    allowed_words = {w for offset, _, lemmas, _, _ in parsed if offset not in blocked for w in lemmas}
    blocked_words = {w for offset, _, lemmas, _, _ in parsed if offset in blocked for w in lemmas} - allowed_words
    docs = []
    for offset, pos, _, _, parts in parsed:
        text = " ".join(s for s in map(_sentence, parts) if s)
        if offset in blocked or not text or blocked_words.intersection(re.findall(r"[a-z]+", text.lower())):
            continue
        docs.append(Document(f"wordnet-3.0:{pos}:{offset}", text))
    return tuple(docs)


def hashed_held_out(doc_id: str) -> bool:
    """Whether a document is held out by its id alone (5%): stable whatever else the corpus holds."""
    digest = hashlib.sha256(doc_id.encode()).digest()
    return int.from_bytes(digest[:4], "big") % 1000 < HELD_OUT_PER_THOUSAND


def _chunks(text: str) -> set[str]:
    return {text[i:i + CHUNK] for i in range(len(text) - CHUNK + 1)}


def _sentences(text: str) -> set[str]:
    return {s for s in re.split(r"(?<=[.!?]) ", text) if len(s) >= 20}


@functools.lru_cache(maxsize=1)
def split() -> tuple[tuple[Document, ...], tuple[Document, ...]]:
    """(training, held-out) documents. Held out by hash; then any held-out document that shares a
    50-character chunk or a sentence of 20 characters or more with training moves to training,
    until none does (a moved document can touch another held-out one)."""
    docs = documents()
    train = [d for d in docs if not hashed_held_out(d.id)]
    held = [d for d in docs if hashed_held_out(d.id)]
    newly_trained = train
    while newly_trained:
        held_chunks = {}
        for d in held:
            for piece in _chunks(d.text) | _sentences(d.text):
                held_chunks.setdefault(piece, set()).add(d.id)
        touched = set()
        for d in newly_trained:
            text = d.text
            touched.update(*(held_chunks.get(text[i:i + CHUNK], ()) for i in range(len(text) - CHUNK + 1)))
            touched.update(*(held_chunks.get(s, ()) for s in _sentences(text)))
        newly_trained = [d for d in held if d.id in touched]
        held = [d for d in held if d.id not in touched]
        train.extend(newly_trained)
    return tuple(train), tuple(held)


def training_text() -> str:
    """The training documents shuffled (seed 0), one per line."""
    train, _ = split()
    lines = [d.text for d in sorted(train, key=lambda d: d.id)]
    random.Random(SHUFFLE_SEED).shuffle(lines)
    return "\n".join(lines)


def held_out_text_from_source() -> str:
    """The held-out documents in id order, one per line: what assets/text/english-held-out.txt holds."""
    _, held = split()
    return "\n".join(d.text for d in sorted(held, key=lambda d: d.id))


def held_out_text() -> str:
    """The shipped held-out text (no WordNet needed)."""
    return HELD_OUT_PATH.read_text(encoding="utf-8")


def outside_prose() -> str:
    """Paragraphs of narrative English written for this project and kept out of every training text."""
    return OUTSIDE_PROSE_PATH.read_text(encoding="utf-8")


def leaked_share(held_out: str, training: str) -> float:
    """The share of the held-out documents' 50-character chunks (every one, overlapping, within a line) that
    occur in a line of the training text."""
    held_chunks = set().union(*map(_chunks, held_out.splitlines()))
    if not held_chunks:
        return 0.0
    found = {piece for line in training.splitlines() for piece in _chunks(line) if piece in held_chunks}
    return len(found) / len(held_chunks)


def write_held_out() -> Path:
    """Write the held-out text the project ships (run after changing the corpus)."""
    HELD_OUT_PATH.parent.mkdir(parents=True, exist_ok=True)
    HELD_OUT_PATH.write_text(held_out_text_from_source() + "\n", encoding="utf-8")
    return HELD_OUT_PATH


if __name__ == "__main__":
    path = write_held_out()
    train, held = split()
    print(f"{len(train)} training and {len(held)} held-out documents; wrote {path}")
