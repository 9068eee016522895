"""What the Tokens page measures: one text split by each tokenizer, the same sentence in several languages, the
vocabulary's share of real models' parameters, and the shipped families trained on both tokenizers. No Streamlit:
plain data for the page and its tests."""
from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Callable

from transformer import AXES, MODEL_CARDS, checkpoint, tokens
from transformer.checkpoint_format import checkpoint_paths
from transformer.costs import param_counts, param_terms

MAX_CHARS = 5_000  # longer text is cut here before splitting: a page rerun stays quick
MAX_DRAWN = 128  # tokens drawn per split; the counts cover the whole (cut) text

# one meaning, written for this page in each language and script
SAMPLES = {
    "English": "The cat sat by the window and watched the rain.",
    "French": "Le chat était assis près de la fenêtre et regardait la pluie.",
    "German": "Die Katze saß am Fenster und sah dem Regen zu.",
    "Spanish": "El gato estaba sentado junto a la ventana y miraba la lluvia.",
    "Russian": "Кошка сидела у окна и смотрела на дождь.",
    "Greek": "Η γάτα καθόταν δίπλα στο παράθυρο και κοίταζε τη βροχή.",
    "Arabic": "جلست القطة بجانب النافذة وراقبت المطر.",
    "Hebrew": "החתול ישב ליד החלון והסתכל על הגשם.",
    "Hindi": "बिल्ली खिड़की के पास बैठी थी और बारिश देख रही थी।",
    "Chinese": "猫坐在窗边看着雨。",
    "Japanese": "猫は窓のそばに座って雨を見ていた。",
    "Korean": "고양이는 창가에 앉아 비를 바라보았다.",
}


@dataclass(frozen=True)
class Split:
    name: str  # how the page names the tokenizer
    ids: list[int]  # every token of the text
    pieces: list[str]  # each token's text, spaces and lone bytes made visible


def our_splits(text: str) -> list[Split]:
    """The text split by each row of the "tokens" axis (characters, then the shipped BPE)."""
    splits = []
    for name, row in AXES["tokens"].choices.items():
        tokenizer = tokens.get_tokenizer(name)
        ids = tokenizer.encode(text)
        splits.append(Split(f"{row.label} ({tokenizer.vocab_size:,} tokens)", ids, tokenizer.pieces(ids)))
    return splits


def hf_split(text: str, tokenizer, name: str) -> Split:
    """The text split by a Hugging Face model's own tokenizer (no special tokens added), each piece shown by the
    text it decodes to."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    pieces = [tokens.visible_text(tokenizer.decode([i]).encode("utf-8")) for i in ids]
    return Split(f"{name} ({len(tokenizer):,} tokens)", list(ids), pieces)


def language_costs(encoders: dict[str, Callable[[str], list[int]]]) -> dict[str, list[int]]:
    """tokenizer name -> the token count of each sample sentence (SAMPLES' order)."""
    return {name: [len(encode(sentence)) for sentence in SAMPLES.values()] for name, encode in encoders.items()}


def _vocabulary_terms(cfg) -> int:
    """The parameters whose count grows with the vocabulary: the embedding, and an untied unembedding."""
    return sum(t.count for t in param_terms(cfg) if "V" in re.split(r"[^A-Za-z_]+", t.formula))


@dataclass(frozen=True)
class VocabularyShare:
    model: str  # "LLaMA 2 7B"
    vocab_size: int
    d_model: int
    vocabulary_params: int  # embedding (and unembedding when untied)
    total_params: int

    @property
    def share(self) -> float:
        return self.vocabulary_params / self.total_params


@functools.lru_cache(maxsize=1)
def vocabulary_shares() -> tuple[VocabularyShare, ...]:
    """Every real size of every model card, smallest vocabulary first (counted once: 0.25 s of term arithmetic)."""
    rows = [VocabularyShare(f"{card.name} {size}", cfg.vocab_size, cfg.d_model, _vocabulary_terms(cfg),
                            param_counts(cfg)["total"])
            for card in MODEL_CARDS.values() for size, cfg in card.real.items()]
    return tuple(sorted(rows, key=lambda row: (row.vocab_size, row.total_params)))


@dataclass(frozen=True)
class TrainedOnBoth:
    """One family's two shipped language checkpoints, each tokenizer row -> its figure from the checkpoint's JSON."""
    family: str  # the card's name, "LLaMA 2"
    names: dict[str, str]  # checkpoint names
    bits_per_char: dict[str, float]  # held-out English: total bits over characters
    outside_prose: dict[str, float]  # the prose written for the lab, the same measure
    parameters: dict[str, int]


def _meta(entry) -> dict:
    return json.loads(checkpoint_paths(entry.path)[1].read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=1)
def trained_on_both() -> tuple[TrainedOnBoth, ...]:
    """Every family whose language checkpoint (characters) has a variant that reads a learned tokenizer (BPE), in
    index order; () where none does or the index cannot be read."""
    try:
        own = {e.preset: e for e in checkpoint.shipped() if e.task == "language"}
        variants = [e for e in checkpoint.variants() if e.task == "language" and e.preset in own]
    except checkpoint.CheckpointError:
        return ()
    rows = []
    for variant in variants:
        pieces = _meta(variant)
        reads = pieces.get("tokenizer", {}).get("name", tokens.DEFAULT)
        if not AXES["tokens"].row(reads).learned:
            continue
        characters = _meta(own[variant.preset])
        metas = {tokens.DEFAULT: (own[variant.preset].name, characters), reads: (variant.name, pieces)}
        rows.append(TrainedOnBoth(MODEL_CARDS[variant.preset].name, {k: n for k, (n, _) in metas.items()},
                                  {k: m["figures"]["bits_per_char"] for k, (_, m) in metas.items()},
                                  {k: m["figures"]["bits_per_char_outside_prose"] for k, (_, m) in metas.items()},
                                  {k: m["parameters"] for k, (_, m) in metas.items()}))
    return tuple(rows)
