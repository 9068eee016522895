"""Text -> ids -> text, one tokenizer per row of the "tokens" axis (``AXES["tokens"]``).

    tokenizer = get_tokenizer("bpe")          # the byte-level BPE learned on the English training split
    ids = tokenizer.encode("The cat sat.")    # [..] no <bos>: the caller frames the text
    tokenizer.decode(ids) == "The cat sat."   # any text comes back exactly: emoji, Arabic, control characters
    tokenizer.pieces(ids)                     # each token's text, spaces and lone bytes made visible

Characters are the lab's own: one token per character of a small table, any other character as its
UTF-8 bytes; the table is below. Byte-level BPE starts from the 256 bytes and merges the most
frequent adjacent pair of the training text again and again; the `tokenizers` package learns and
applies the merges, and ``merge_steps`` replays them one at a time for the Tokens page.

A checkpoint's JSON names its tokenizer (``describe``); ``from_description`` builds it back and refuses
a missing file or one whose vocabulary is not the model's size.
"""
from __future__ import annotations

import functools
import json
import string
from dataclasses import dataclass
from pathlib import Path

from .axes import AXES

TOKENIZER_DIR = Path(__file__).resolve().parent.parent / "assets" / "tokenizers"
DEFAULT = "characters"  # every checkpoint that names no tokenizer reads characters

# --- the character table: one token per character the English and Python texts use, bytes for the rest --------

SPECIALS = ("<bos>", "<mask>")  # ids 0 and 1 in every tokenizer
# printable ASCII without the form feeds and vertical tab, then the corpus's own typography
CHARACTERS = string.printable[:-3].replace("\r", "") + "’‘“”…—–"
BYTES = tuple(f"<0x{b:02X}>" for b in range(256))
VOCAB: tuple[str, ...] = (*SPECIALS, *CHARACTERS, *BYTES)

_CHAR_ID = {c: len(SPECIALS) + i for i, c in enumerate(CHARACTERS)}
_FIRST_BYTE_ID = len(SPECIALS) + len(CHARACTERS)


def encode_chars(text: str) -> list[int]:
    """Token ids for `text`, no framing: a character of the table is one id, any other its UTF-8 bytes."""
    ids = []
    for ch in text:
        if ch in _CHAR_ID:
            ids.append(_CHAR_ID[ch])
        else:
            ids.extend(_FIRST_BYTE_ID + b for b in ch.encode("utf-8"))
    return ids


def decode_text(ids) -> str:
    """The text back from ids: characters as themselves, byte runs as UTF-8; special tokens are dropped."""
    ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)  # a tensor or array, or a list
    out, pending = [], bytearray()
    for i in map(int, ids):
        if i >= _FIRST_BYTE_ID:
            pending.append(i - _FIRST_BYTE_ID)
            continue
        if pending:
            out.append(pending.decode("utf-8", errors="replace"))
            pending = bytearray()
        if i >= len(SPECIALS):
            out.append(VOCAB[i])
    if pending:
        out.append(pending.decode("utf-8", errors="replace"))
    return "".join(out)


# --- every tokenizer ---------------------------------------------------------------------------------------

BPE_VOCAB_SIZE = 2048  # the shipped BPE: bytes, specials and 1,790 merges


def byte_symbols() -> dict[int, str]:
    """byte -> the printable character byte-level BPE writes it as: printable Latin-1 bytes stand for
    themselves, the others (space, controls, 0x7F-0xA0, 0xAD) for the next free characters from U+0100,
    so that the space is 'Ġ' and a newline 'Ċ', as in GPT-2's vocabulary."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    extra = (b for b in range(256) if b not in printable)
    return {**{b: chr(b) for b in printable}, **{b: chr(0x100 + i) for i, b in enumerate(extra)}}


SYMBOL_BYTES = {symbol: byte for byte, symbol in byte_symbols().items()}


def token_text(data: bytes) -> str:
    """A token's bytes as text: the UTF-8 text they spell, or, where they are not whole UTF-8 characters (half
    an emoji), each byte as <0xF0>, as the character table names its byte tokens."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "".join(f"<0x{b:02X}>" for b in data)


def visible_text(data: bytes) -> str:
    """Bytes as a label: ``token_text`` with spaces, newlines, tabs and other unprintable characters made visible."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return token_text(data)  # lone bytes, <0xF0>, are visible already
    return "".join({" ": "␣", "\n": "⏎", "\t": "⇥"}.get(ch, ch if ch.isprintable() else f"U+{ord(ch):04X}")
                   for ch in text)


class CharacterTokens:
    """One token per character of the table; any other character as one token per UTF-8 byte."""

    name = "characters"

    def __init__(self, row=None):
        self.row = row or AXES["tokens"].row(self.name)
        self.vocab_size = len(VOCAB)

    def encode(self, text: str) -> list[int]:
        return encode_chars(text)

    def decode(self, ids) -> str:
        return decode_text(ids)

    def piece_bytes(self, token_id: int) -> bytes:
        """The UTF-8 bytes one token stands for (none for <bos> and <mask>)."""
        token_id = int(token_id)
        if token_id < len(SPECIALS):
            return b""
        return bytes([token_id - _FIRST_BYTE_ID]) if token_id >= _FIRST_BYTE_ID else VOCAB[token_id].encode("utf-8")

    def pieces(self, ids) -> list[str]:
        """Each token's text as a label: spaces and lone bytes made visible (<bos>, <mask> as they are)."""
        return [SPECIALS[i] if i < len(SPECIALS) else visible_text(self.piece_bytes(i)) for i in map(int, ids)]

    def texts(self, ids) -> list[str]:
        """Each token's text as it is: its vocabulary entry (a space is ' ', a byte token '<0xF0>')."""
        return [VOCAB[i] for i in map(int, ids)]

    def describe(self) -> dict:
        return {"name": self.name, "vocab_size": self.vocab_size}


class BPETokens:
    """Byte-level BPE read from a `tokenizers` JSON file: <bos>, <mask>, the 256 bytes, then one token per merge."""

    name = "bpe"

    def __init__(self, row=None, path: str | Path | None = None):
        from tokenizers import Tokenizer  # the package, not this module

        self.row = row or AXES["tokens"].row(self.name)
        self.path = Path(path) if path is not None else TOKENIZER_DIR / self.row.file
        if not self.path.is_file():
            raise FileNotFoundError(f"{self.path}: no such tokenizer file; make it with scripts/train_tokenizer.py")
        self._tokenizer = Tokenizer.from_file(str(self.path))
        self.vocab_size = self._tokenizer.get_vocab_size()
        model = json.loads(self.path.read_text(encoding="utf-8"))["model"]
        # rank -> (left, right): the order the merges were learned in, the order they are applied
        self.merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
        self.vocab: dict[str, int] = model["vocab"]

    def encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids) -> str:
        return self._tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)

    def piece_bytes(self, token_id: int) -> bytes:
        piece = self._tokenizer.id_to_token(int(token_id))
        if piece is None or piece in SPECIALS:
            return b""
        return bytes(SYMBOL_BYTES[symbol] for symbol in piece)

    def pieces(self, ids) -> list[str]:
        """Each token's text as a label: spaces and lone bytes made visible (<bos>, <mask> as they are)."""
        return [SPECIALS[i] if i < len(SPECIALS) else visible_text(self.piece_bytes(i)) for i in map(int, ids)]

    def texts(self, ids) -> list[str]:
        """Each token's text as it is (' cat'), bytes that are no whole character as <0xF0>."""
        return [SPECIALS[i] if i < len(SPECIALS) else token_text(self.piece_bytes(i)) for i in map(int, ids)]

    def describe(self) -> dict:
        return {"name": self.name, "file": self.path.name, "vocab_size": self.vocab_size}

    def words(self, text: str) -> list[str]:
        """The text split before any merge (runs of letters, digits, punctuation, each with the space before
        it), in byte symbols: BPE merges inside a word, never across two."""
        return [word for word, _ in self._tokenizer.pre_tokenizer.pre_tokenize_str(text)]


# a row of AXES["tokens"] -> the class that builds its tokenizer
TOKENIZERS = {"characters": CharacterTokens, "bpe": BPETokens}


@functools.lru_cache(maxsize=8)
def get_tokenizer(name: str = DEFAULT, path: str | None = None):
    """The tokenizer of a row of the "tokens" axis (its shipped file, or `path` for a learned one)."""
    row = AXES["tokens"].row(name, "tokenizer")
    return TOKENIZERS[name](row, path) if row.learned and path else TOKENIZERS[name](row)


def from_description(description: dict | None, vocab_size: int, beside: Path | None = None):
    """The tokenizer a checkpoint's JSON names ("tokenizer": {"name", "file", "vocab_size"}), characters when it
    names none. Its file is looked for beside the checkpoint, then in assets/tokenizers. A missing file, or a
    vocabulary that is not the model's `vocab_size`, is a ValueError that says which and what to do."""
    if description is None:
        return get_tokenizer(DEFAULT)
    name = description.get("name", DEFAULT)
    row = AXES["tokens"].row(name, "tokenizer")
    path = None
    if row.learned:
        file = description.get("file") or row.file
        candidates = ([beside / file] if beside else []) + [TOKENIZER_DIR / file]
        path = next((p for p in candidates if p.is_file()), None)
        if path is None:
            looked = ", ".join(str(p.parent) for p in candidates)
            raise ValueError(f"tokenizer file {file!r} is missing (looked in {looked}); "
                             "copy it there or make it again with scripts/train_tokenizer.py")
    tokenizer = get_tokenizer(name, str(path) if path else None)
    if row.learned and tokenizer.vocab_size != vocab_size:
        raise ValueError(f"the {row.label} tokenizer {path.name} has {tokenizer.vocab_size} tokens but the model's "
                         f"vocab_size is {vocab_size}: the file is not the one this model was trained with")
    return tokenizer


@dataclass(frozen=True)
class MergeStep:
    pieces: tuple[str, ...]  # the whole text's pieces after this merge, as visible text
    ids: tuple[int, ...]  # their ids
    rank: int | None = None  # the merge's place in the learned order (0 = the most frequent pair); None: no merge yet
    left: str = ""  # the pair's two pieces, as visible text
    right: str = ""
    count: int = 0  # how many places in the text it merged


def merge_steps(tokenizer: BPETokens, text: str, limit: int = 200) -> list[MergeStep]:
    """BPE replayed one merge at a time: first the text's bytes, each its own piece; then at each step the learned
    merge of lowest rank that some adjacent pair of the text still matches, applied wherever it does. The last
    step's pieces are ``tokenizer.encode(text)``'s (at most `limit` merges are replayed)."""
    ranks = {pair: rank for rank, pair in enumerate(tokenizer.merges)}
    words = [list(word) for word in tokenizer.words(text)]  # each word a list of pieces in byte symbols

    def label(piece: str) -> str:
        return visible_text(bytes(SYMBOL_BYTES[symbol] for symbol in piece))

    def state(**merge) -> MergeStep:
        pieces = [piece for word in words for piece in word]
        return MergeStep(tuple(map(label, pieces)), tuple(tokenizer.vocab[p] for p in pieces), **merge)

    steps = [state()]
    while len(steps) <= limit:
        found = [ranks[pair] for word in words for pair in zip(word, word[1:]) if pair in ranks]
        if not found:
            break
        rank = min(found)
        left, right = tokenizer.merges[rank]
        count = 0
        for w, word in enumerate(words):
            merged, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == (left, right):
                    merged.append(left + right)
                    count, i = count + 1, i + 2
                else:
                    merged.append(word[i])
                    i += 1
            words[w] = merged
        steps.append(state(rank=rank, left=label(left), right=label(right), count=count))
    return steps


def train_bpe(text: str, vocab_size: int = BPE_VOCAB_SIZE):
    """A byte-level BPE (`tokenizers`) learned on `text`: <bos> and <mask> first, the 256 bytes, then merges of
    the most frequent adjacent pair until the vocabulary holds `vocab_size` tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    # add_prefix_space=False: a text's first word keeps no invented space, so decode(encode(text)) == text
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIALS), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(text.splitlines(), trainer=trainer)
    return tokenizer
