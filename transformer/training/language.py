"""English text every machine has, and a character tokenizer that places any text.

The corpus is the Python documentation's topics that ship inside CPython
(``pydoc_data.topics``: 79 topics, about 465,000 characters of English prose with
code in it). Whole topics are held out, so held-out text is text the model never saw.

The character tokenizer (its table is in transformer/tokens.py, beside the BPE) gives one token per
character for the characters that text uses (printable ASCII, newline, tab and the typographic quotes
and dashes of the corpus), and spells every other character as its UTF-8 bytes, one token per byte.
No text raises: emoji with joiners, Arabic, Hebrew and control characters all become byte tokens,
and ``decode_text`` gives the exact text back.
"""
from __future__ import annotations

import functools
import math

import torch

from ..hooks import hook_name
# the character table lives with the other tokenizers (transformer/tokens.py); its names stay importable here
from ..tokens import _CHAR_ID, _FIRST_BYTE_ID, BYTES, CHARACTERS, SPECIALS, VOCAB, decode_text, encode_chars  # noqa: F401
from . import english

# --- the corpus ---------------------------------------------------------------------

HELD_OUT_EVERY = 8  # every 8th topic in name order is held out: 10 whole topics


@functools.lru_cache(maxsize=1)
def topics() -> dict[str, str]:
    """name -> text of every documentation topic, in name order."""
    from pydoc_data.topics import topics as pydoc_topics

    return {name: pydoc_topics[name] for name in sorted(pydoc_topics)}


def split_names(split: str) -> list[str]:
    """The topic names of the 'train' or 'held-out' split (fixed: every 8th topic is held out)."""
    if split not in ("train", "held-out"):
        raise ValueError(f"split={split!r} must be 'train' or 'held-out'")
    names = list(topics())
    return [n for i, n in enumerate(names) if (i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1) == (split == "held-out")]


@functools.lru_cache(maxsize=2)
def corpus_ids(split: str) -> torch.Tensor:
    """(N,) the split's topics encoded and joined by blank lines."""
    text = "\n\n".join(topics()[name].strip() for name in split_names(split))
    return torch.tensor(encode_chars(text), dtype=torch.long)


# importing these has side effects (a browser, a printed poem, a GUI) or they document the built-in types and
# the documentation itself, which the held-out topics describe
DOCSTRING_SKIP = {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "builtins", "test", "lib2to3",
                  "ensurepip", "venv", "pydoc", "pydoc_data"}


@functools.lru_cache(maxsize=1)
def docstrings() -> dict[str, str]:
    """name -> docstring of every public standard-library module, class and function (over 40 characters),
    in name order: more English about Python, from the same CPython, for the training split only."""
    import importlib
    import inspect
    import sys
    import warnings

    found = {}
    for module_name in sorted(sys.stdlib_module_names - DOCSTRING_SKIP):
        if module_name.startswith("_"):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                module = importlib.import_module(module_name)
            except Exception:  # a module this platform lacks (winreg, curses without a terminal library, ...)
                continue
        found[module_name] = inspect.getdoc(module) or ""
        public = getattr(module, "__all__", None) or [a for a in dir(module) if not a.startswith("_")]
        for attr in sorted(public):
            obj = getattr(module, attr, None)
            if getattr(obj, "__module__", None) == module_name and len(inspect.getdoc(obj) or "") > 40:
                found[f"{module_name}.{attr}"] = inspect.getdoc(obj)
    return {name: text for name, text in found.items() if text}


CORPORA = {"python-docs": "the Python documentation topics inside CPython (pydoc_data.topics)",
           "english": "everyday English: WordNet 3.0's definitions and example sentences (Debian's wordnet-base)"}


@functools.lru_cache(maxsize=1)
def english_train_ids() -> torch.Tensor:
    """(N,) WordNet's training documents, shuffled, one per line (needs Debian's wordnet-base)."""
    return torch.tensor(encode_chars(english.training_text()), dtype=torch.long)


@functools.lru_cache(maxsize=2)
def train_ids(with_docstrings: bool = False, corpus: str = "python-docs") -> torch.Tensor:
    """(N,) the training text: the training topics, then (with_docstrings) the standard library's docstrings;
    or for corpus="english", WordNet's training documents."""
    if corpus == "english":
        return english_train_ids()
    if not with_docstrings:
        return corpus_ids("train")
    extra = "\n\n".join(docstrings().values())
    return torch.cat((corpus_ids("train"), torch.tensor(encode_chars("\n\n" + extra), dtype=torch.long)))


def held_out_text(corpus: str = "python-docs") -> str:
    """The corpus's held-out text: the held-out topics, or the English held-out documents the project ships."""
    if corpus == "english":
        return english.held_out_text()
    return "\n\n".join(topics()[name].strip() for name in split_names("held-out"))


@functools.lru_cache(maxsize=2)
def held_out_ids(corpus: str = "python-docs") -> torch.Tensor:
    """(N,) the corpus's held-out text encoded."""
    return corpus_ids("held-out") if corpus == "python-docs" else torch.tensor(encode_chars(held_out_text(corpus)))


def held_out_sentences(min_chars: int = 20, max_chars: int = 200, corpus: str = "python-docs") -> list[str]:
    """Sentences of held-out prose (ASCII, no code), for tests that repeat a sentence."""
    sentences = []
    paragraphs = (held_out_text(corpus).splitlines() if corpus == "english" else
                  [p for name in split_names("held-out") for p in topics()[name].split("\n\n")])
    for paragraph in paragraphs:
        line = " ".join(paragraph.split())
        if line.startswith(("*", ">>>", "-")) or not line.isascii():
            continue
        # an English document ends on its last sentence's full stop; the topics' figures were measured on splits
        # that keep it (and add another), so theirs stay as recorded
        for sentence in (line.removesuffix(".") if corpus == "english" else line).split(". "):
            sentence = sentence.strip()
            if min_chars <= len(sentence) + 1 <= max_chars and sentence[:1].isupper():
                sentences.append(sentence + ".")
    return sentences


# --- what a trained language model does, measured on held-out text ---------------------

def held_out_windows(context: int, limit: int | None = None, corpus: str = "python-docs") -> torch.Tensor:
    """(N, 1 + context + 1) windows of the held-out text, each with <bos> and one more character to predict:
    every window, or `limit` of them spread evenly from the first to the last, so a sample reads all of it."""
    text = held_out_ids(corpus)
    n_all = (len(text) - 1) // context
    n = n_all if limit is None else min(n_all, limit)
    starts = torch.linspace(0, n_all - 1, n).round().long() * context  # (N,)
    windows = text[starts[:, None] + torch.arange(context + 1)]  # (N, context + 1)
    bos = torch.zeros(n, 1, dtype=torch.long)  # <bos> is id 0
    return torch.cat((bos, windows), dim=1)  # (N, 1 + context + 1): input = [:, :-1], targets = [:, 1:]


@torch.no_grad()
def bits_per_char(model, context: int = 256, limit: int | None = None, batch_size: int = 16,
                  corpus: str = "python-docs") -> float:
    """Held-out bits per character of a decoder: mean -log2 p(next character) over every character of the split."""
    if not model.cfg.row("arch").next_token:
        raise ValueError(f"bits per character needs a decoder (next-character model), got arch={model.cfg.arch!r}")
    windows = held_out_windows(context, limit, corpus).to(model.device)
    return _bits(model, windows, batch_size)


@torch.no_grad()
def text_bits_per_char(model, text: str, context: int = 256) -> float:
    """A decoder's bits per character on any text, read in windows of `context` characters each after <bos>."""
    ids = torch.tensor(encode_chars(text))
    n = (len(ids) - 1) // context
    if n < 1:
        raise ValueError(f"text of {len(text)} characters is shorter than one window of {context} + 1")
    windows = torch.cat((torch.zeros(n, 1, dtype=torch.long), ids[:n * context + 1].unfold(0, context + 1, context)), 1)
    return _bits(model, windows.to(model.device))


def _bits(model, windows: torch.Tensor, batch_size: int = 16) -> float:
    """Mean -log2 p of each window's characters after the first, given those before: windows (N, 1 + context + 1)."""
    total = 0.0
    for batch in windows.split(batch_size):
        logits = model(batch[:, :-1]).float()  # (B, 1 + context, vocab)
        total += torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten(), reduction="sum").item()
    return total / windows[:, 1:].numel() / math.log(2)


ENCODER_CONTEXT = 64  # the masked-character model's crops: its position table is trained this far


@torch.no_grad()
def masked_accuracy(model, context: int = ENCODER_CONTEXT, limit: int | None = None, mask_rate: float = 0.15, seed: int = 0,
                    corpus: str = "python-docs") -> float:
    """An encoder's accuracy at recovering masked characters of held-out text (seeded masks)."""
    windows = held_out_windows(context, limit, corpus)[:, :-1]  # (N, 1 + context)
    masked = torch.rand(windows.shape, generator=torch.Generator().manual_seed(seed)) < mask_rate
    masked[:, 0] = False  # <bos> stays
    inputs = windows.masked_fill(masked, VOCAB.index("<mask>")).to(model.device)
    predicted = model(inputs).argmax(-1).cpu()  # (N, 1 + context)
    return (predicted[masked] == windows[masked]).float().mean().item()


def _patterns(model, ids: torch.Tensor) -> torch.Tensor:
    """(L, B, H, T, T) every self-attention layer's softmax weights on ids (B, T)."""
    names = [hook_name(i, "attn.hook_pattern") for i in range(model.cfg.n_layers)]
    _, trace = model.run_with_trace(ids.to(model.device), names=names)
    return torch.stack([trace[n].float().cpu() for n in names])


@torch.no_grad()
def previous_token_scores(model, context: int = 128, limit: int = 16, corpus: str = "python-docs") -> torch.Tensor:
    """(L, H): mean attention weight on the token just before, from every held-out position but the first."""
    return neighbour_scores(model, -1, context, limit, corpus)


@torch.no_grad()
def neighbour_scores(model, offset: int, context: int = 128, limit: int = 16, corpus: str = "python-docs") -> torch.Tensor:
    """(L, H): mean attention weight on the token `offset` away (-1 the one before, +1 the one after, which
    only an encoder sees), from every held-out position that has one."""
    ids = held_out_windows(context, limit, corpus)[:, :-1]  # (B, 1 + context)
    patterns = _patterns(model, ids)  # (L, B, H, T, T)
    return patterns.diagonal(offset=offset, dim1=-2, dim2=-1).mean(dim=(1, 3))  # (L, H)


def repeated_sentence(sentence: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """ids (1, T) of '<bos>sentence sentence', and for every token of the second copy (queries)
    the position after its first occurrence (keys): the place an induction head looks."""
    first = encode_chars(sentence)
    ids = torch.tensor([[0, *first, *encode_chars(" "), *first]])  # (1, T)
    n = len(first)
    queries = torch.arange(n) + 2 + n  # second copy: after <bos>, the first copy and the space
    keys = torch.arange(n) + 2  # the token after each first occurrence
    return ids, queries, keys


def induction_sentences(cfg, corpus: str = "python-docs", limit: int | None = None) -> list[str]:
    """The held-out sentences an induction head is measured on: all of them (20-200 characters), or for a
    model whose every layer has a sliding window those whose first copy its widest window still reaches
    (shorter than the window; one global layer reaches them all); `limit` of them spread evenly over the
    held-out text."""
    sentences = held_out_sentences(corpus=corpus)
    if limit is not None and limit < len(sentences):
        sentences = [sentences[i] for i in torch.linspace(0, len(sentences) - 1, limit).round().long().tolist()]
    windows = cfg.layer_windows()
    return sentences if None in windows else [s for s in sentences if len(s) < max(windows)]


@torch.no_grad()
def induction_scores(model, sentences: list[str]) -> torch.Tensor:
    """(L, H): on each sentence written twice, the mean weight from the second copy's tokens to the
    token after their first occurrence, averaged over sentences."""
    total = torch.zeros(model.cfg.n_layers, model.cfg.n_heads)
    for sentence in sentences:
        ids, queries, keys = repeated_sentence(sentence)
        patterns = _patterns(model, ids)[:, 0]  # (L, H, T, T)
        total += patterns[:, :, queries, keys].mean(-1)  # (L, H)
    return total / len(sentences)


@torch.no_grad()
def induction_scores_within_reach(model, sentences: list[str]) -> torch.Tensor:
    """(L, H) induction scores, each layer on the sentences whose first copy it can see: a local layer on those
    shorter than its window, a global layer on all of them (a head cannot copy what its mask hides)."""
    windows = model.cfg.layer_windows()
    scores = torch.zeros(model.cfg.n_layers, model.cfg.n_heads)
    for window in set(windows):
        reached = [s for s in sentences if window is None or len(s) < window]
        layers = [i for i, w in enumerate(windows) if w == window]
        if reached:
            scores[layers] = induction_scores(model, reached)[layers]
    return scores


def matching_head_score(sentences: list[str], k: int) -> float:
    """The induction score a perfect head matching the last k characters would get: from each token of the
    second copy, its weight spread evenly over every earlier position that follows the same k characters.
    One character is ambiguous in English (every 'e' is followed by something): k=1 scores about 0.25 on
    the held-out sentences, k=2 about 0.69, so a head at 0.5 must match more than one character."""
    total = 0.0
    for sentence in sentences:
        ids, queries, keys = repeated_sentence(sentence)
        text = ids[0].tolist()
        for query, key in zip(queries.tolist(), keys.tolist()):
            context = text[query - k + 1:query + 1]
            matches = [j for j in range(k, query + 1) if text[j - k:j] == context]
            if key in matches:  # the first copy's start follows <bos>, not the space before the second copy
                total += 1 / len(matches) / len(queries)
    return total / len(sentences)


@torch.no_grad()
def held_out_accuracy(model, context: int | None = None, limit: int | None = 64, corpus: str = "python-docs") -> float:
    """A decoder's top-1 next-character accuracy on held-out text (256-character windows); an encoder's
    masked-character accuracy (windows of the length it trains on)."""
    if not model.cfg.row("arch").causal:
        return masked_accuracy(model, context or ENCODER_CONTEXT, limit, corpus=corpus)
    context = context or 256
    windows = held_out_windows(context, limit, corpus).to(model.device)
    hits = total = 0
    for batch in windows.split(16):
        predicted = model(batch[:, :-1]).argmax(-1)  # (B, 1 + context)
        hits, total = hits + int((predicted == batch[:, 1:]).sum()), total + predicted.numel()
    return hits / total


# --- what a mixture of experts routes where -------------------------------------------------

CHARACTER_CLASSES = ("letters", "spaces and punctuation", "digits", "code")
ENGLISH_CLASSES = ("lower-case letters", "capitals", "spaces", "punctuation", "digits")


def english_class(ch: str) -> str:
    return ("capitals" if ch.isupper() else "lower-case letters" if ch.isalpha() else "digits" if ch.isdigit()
            else "spaces" if ch.isspace() else "punctuation")


def character_classes(text: str, corpus: str = "python-docs") -> list[str]:
    """The class of each character. English: lower-case letters, capitals, spaces, punctuation, digits.
    The topics: anything on a code line (indented by four spaces or a >>> prompt) is "code"; elsewhere
    letters, digits, or spaces and punctuation."""
    if corpus == "english":
        return [english_class(ch) for ch in text]
    classes = []
    for line in text.splitlines(keepends=True):
        code = line.startswith("    ") or line.lstrip().startswith(">>>")
        for ch in line:
            classes.append("code" if code else "letters" if ch.isalpha() else "digits" if ch.isdigit()
                           else "spaces and punctuation")
    return classes


@torch.no_grad()
def expert_usage_by_class(model, context: int = 256, limit: int = 32,
                          corpus: str = "python-docs") -> list[dict[str, list[float]]]:
    """Per MoE layer: character class -> the share of its top-k routing slots each expert receives,
    on held-out text (characters outside the table, spelled as several bytes, are left out)."""
    if not model.cfg.row("ffn").routed:
        raise ValueError(f"expert usage needs a mixture-of-experts model (ffn='moe'), got ffn={model.cfg.ffn!r}")
    text = held_out_text(corpus)
    classes = ENGLISH_CLASSES if corpus == "english" else CHARACTER_CLASSES
    kept = [(ch, kind) for ch, kind in zip(text, character_classes(text, corpus)) if ch in _CHAR_ID]
    ids = torch.tensor([_CHAR_ID[ch] for ch, _ in kept])
    kinds = [kind for _, kind in kept]
    n = min(limit, len(ids) // context)
    batch = torch.cat((torch.zeros(n, 1, dtype=torch.long), ids[:n * context].view(n, context)), dim=1)  # (n, 1 + context)
    names = [hook_name(i, "mlp.hook_expert_indices") for i in range(model.cfg.n_layers) if model.cfg.layer_is_moe(i)]
    _, trace = model.run_with_trace(batch.to(model.device), names=names)
    class_of = torch.tensor([classes.index(k) for k in kinds[:n * context]]).view(n, context)  # (n, context)
    usage = []
    for name in names:
        chosen = trace[name][:, 1:].cpu()  # (n, context, k), <bos> left out
        layer = {}
        for c, kind in enumerate(classes):
            slots = chosen[class_of == c].flatten()
            layer[kind] = (torch.bincount(slots, minlength=model.cfg.n_experts).float() / max(1, slots.numel())).tolist()
        usage.append(layer)
    return usage


def class_separation(layer_usage: dict[str, list[float]]) -> float:
    """The largest total-variation distance between two classes' expert distributions (0 = same experts)."""
    rows = [torch.tensor(v) for v in layer_usage.values()]
    return max(0.5 * (a - b).abs().sum().item() for i, a in enumerate(rows) for b in rows[i + 1:])


# --- everything a language checkpoint records about itself ---------------------------------------

EXTRAPOLATION = (1, 2, 4)  # multiples of the training context
BITS_CONTEXT = 256  # held-out bits per character are read in windows this long, whatever a model trained on


INDUCTION_SAMPLE = 200  # held-out sentences an English model's induction head is measured on, spread over the split
RANDOM_SEEDS = (0, 1, 2, 3, 4)  # random-init controls: the same measure on untrained weights of the same shape


def _best(scores: torch.Tensor) -> dict:
    """(L, H) scores -> the best head, JSON-ready."""
    layer, head = divmod(int(scores.argmax()), scores.shape[1])
    return {"score": round(float(scores[layer, head]), 3), "layer": layer, "head": head}


def head_figures(model, context: int | None = None, corpus: str = "python-docs") -> dict:
    """The figures that say a head does something: a decoder's best previous-token and induction heads, an
    encoder's previous- and next-character heads; what random_init_control repeats on untrained weights."""
    if not model.cfg.row("arch").causal:  # measured at the length it was trained on: later rows of its table are untrained
        context = context or ENCODER_CONTEXT
        return {"previous_token_head": _best(neighbour_scores(model, -1, context, corpus=corpus)),
                "next_token_head": _best(neighbour_scores(model, +1, context, corpus=corpus))}
    sample = INDUCTION_SAMPLE if corpus == "english" else None
    return {"previous_token_head": _best(previous_token_scores(model, corpus=corpus)),
            "induction_head": _best(induction_scores_within_reach(model, induction_sentences(model.cfg, corpus, sample)))}


def routing_separation(model, context: int | None = None, corpus: str = "python-docs") -> float:
    """The figure that says experts specialise: the largest class separation of any MoE layer on held-out text."""
    usage = expert_usage_by_class(model, context or BITS_CONTEXT, corpus=corpus)
    return round(max(class_separation(layer) for layer in usage), 3)


def untrained(cfg, seed: int):
    """A random-init model of this config on the CPU, drawn from `seed` without touching the global generator."""
    from ..model import Transformer

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return Transformer(cfg, device="cpu").eval()


def random_init_control(cfg, context: int | None = None, corpus: str = "python-docs",
                        seeds: tuple[int, ...] = RANDOM_SEEDS) -> dict:
    """The head figures of untrained models of the same config, one per seed: {figure: [lowest, highest]}.
    A head "does" something only where the trained figure lies above the highest."""
    scores: dict[str, list[float]] = {}
    for seed in seeds:
        untrained_model = untrained(cfg, seed)
        for name, best in head_figures(untrained_model, context, corpus).items():
            scores.setdefault(name, []).append(best["score"])
        if cfg.row("ffn").routed:
            scores.setdefault("routing_separation", []).append(routing_separation(untrained_model, context, corpus))
    return {name: [min(values), max(values)] for name, values in scores.items()}


def measure(model, context: int | None = None, corpus: str = "python-docs") -> dict:
    """The figures a language checkpoint ships with, all on held-out text (JSON-ready); `context` is the
    length it trained on (default: 256 characters for a decoder, ENCODER_CONTEXT for an encoder), the
    unit of its length-extrapolation figures. For English, each head figure stands beside the same
    measure on random-init weights (`random_init`), and bits per character on prose unlike the training text."""
    figures = head_figures(model, context, corpus)
    if corpus == "english":
        figures["random_init"] = {"seeds": list(RANDOM_SEEDS), **random_init_control(model.cfg, context, corpus)}
    if not model.cfg.row("arch").causal:
        context = context or ENCODER_CONTEXT
        return {"masked_accuracy": round(masked_accuracy(model, context, corpus=corpus), 4), **figures}
    context = context or BITS_CONTEXT
    figures = {"bits_per_char": round(bits_per_char(model, BITS_CONTEXT, corpus=corpus), 3),  # one protocol for all
               **figures}
    if corpus == "english":
        figures["bits_per_char_outside_prose"] = round(text_bits_per_char(model, english.outside_prose(),
                                                                          min(context, BITS_CONTEXT)), 3)
    if model.cfg.max_len >= context * EXTRAPOLATION[-1]:
        figures["bits_per_char_by_length"] = {
            f"{m}x": round(bits_per_char(model, m * context, limit=8 * 4 // m, corpus=corpus), 3) for m in EXTRAPOLATION}
    if model.cfg.row("ffn").routed:
        usage = expert_usage_by_class(model, context, corpus=corpus)
        figures["experts_by_class"] = usage
        figures["expert_class_separation"] = [round(class_separation(layer), 3) for layer in usage]
        figures["routing_separation"] = max(figures["expert_class_separation"])
    return figures


def ngram_baselines(corpus: str = "english") -> dict:
    """Held-out bits per character of the two simplest models, counted on the training text (add-one
    smoothing over the vocabulary): the next character by its frequency (unigram), and by the one
    before it (bigram). A model that learned anything beats both."""
    train, held = train_ids(corpus=corpus), held_out_ids(corpus)
    V = len(VOCAB)
    counts = torch.bincount(train, minlength=V).double() + 1
    unigram_bits = float(-(counts.log2() - counts.sum().log2())[held].mean())
    pairs = torch.bincount(train[:-1] * V + train[1:], minlength=V * V).double().view(V, V) + 1  # (previous, next)
    bigram = pairs.log2() - pairs.sum(1, keepdim=True).log2()  # log2 p(next | previous)
    bigram_bits = float(-bigram[held[:-1], held[1:]].mean())
    return {"unigram_bits": round(unigram_bits, 3), "bigram_bits": round(bigram_bits, 3)}


def corpus_description(corpus: str = "python-docs") -> dict:
    """What a language model was trained on, for its checkpoint's JSON."""
    import sys

    if corpus == "english":
        return {"name": "english", "sources": [english.source_description()],
                "train_characters": len(train_ids(corpus=corpus)), "held_out": str(english.HELD_OUT_PATH.relative_to(
                    english.ASSET_DIR.parents[1])), "held_out_characters": len(held_out_ids(corpus)),
                "held_out_documents": len(english.held_out_text().splitlines()), **ngram_baselines(corpus),
                "held_out_chunks_in_training": english.leaked_share(english.held_out_text(), english.training_text())}
    return {"source": "pydoc_data.topics (the Python documentation topics inside CPython)",
            "python": sys.version.split()[0], "train_characters": len(corpus_ids("train")),
            "held_out_topics": split_names("held-out"), "held_out_characters": len(corpus_ids("held-out"))}
