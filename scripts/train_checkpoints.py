"""Train and save every shipped checkpoint into assets/checkpoints, and write its index.json.

    python scripts/train_checkpoints.py                 # all of them
    python scripts/train_checkpoints.py --only gpt2-induction bert-mirror

Each recipe is a preset, a task and a few training settings; the accuracy stored with a
checkpoint is measured on fresh samples after training. A recipe trains its preset at the size its
card sets (transformer.presets: MODEL_CARDS, each card's classroom sizes), so the app finds the
checkpoint for that preset; only a variant changes the preset, on the one axis it compares. Training uses one CPU thread
by default (--threads), which is both fair on a shared two-core machine and, for models
this small, faster than two threads that fight over cores.
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from transformer import checkpoint  # noqa: E402
from transformer.checkpoint_format import RESERVED_KEYS, checkpoint_paths  # noqa: E402
from transformer.training import language, per_character  # noqa: E402
from transformer.training.tasks import Language  # noqa: E402
from transformer.training.train import config_for, describe, evaluate, train  # noqa: E402


@dataclass(frozen=True)
class Recipe:
    preset: str
    task: str
    steps: int
    lr: float = 3e-3
    batch_size: int = 32
    seed: int = 0
    aux_loss_weight: float = 0.01  # MoE load balancing
    changes: dict = field(default_factory=dict)  # a variant's one change to its preset (position="sinusoidal")
    induction_warmup: bool = False  # language task: the curriculum that starts on repeated spans
    docstrings: bool = False  # language task: the standard library's docstrings as more training text
    context: int | None = None  # language task: crop length after any warm-up (None: the task's own)
    repeat_rate: float | None = None  # language task: share of rows repeating a span after any warm-up (None: the task's)
    corpus: str = "python-docs"  # language task: the text it reads (language.CORPORA)
    tokens: str = "characters"  # language task: how it reads it (a key of AXES["tokens"]; "bpe": context in tokens)
    variant: str = ""  # a preset with one axis changed, for comparisons: not listed as the preset's checkpoint
    bfloat16: bool = False  # store the weights in bfloat16 (half the file) where its measure barely moves (halve)
    start_from: str = ""  # a shipped checkpoint this run goes on from (its weights by name; what it lacks starts fresh)
    indexer_warmup: int = 0  # steps first training the indexer alone with every key kept (DeepSeek-V3.2's warm-up)
    warmup_lr: float = 1e-3  # the indexer warm-up's learning rate

    @property
    def name(self) -> str:
        return "-".join(filter(None, (self.preset, self.variant, self.task)))


# everyday English: the induction warm-up (repeated spans of text in 128-character crops for the first 30%), then
# 512-character crops with a quarter of the rows repeating a span
ENGLISH = dict(corpus="english", context=512, batch_size=16, steps=4000, induction_warmup=True, repeat_rate=0.25)

# every layer Gated DeltaNet: the fields only softmax layers have (positions, kv heads, QK-norm, the output gate) unset
PURE_GATED_DELTANET = dict(attention_layers="gated-deltanet", position="none", n_kv_heads=None, qk_norm="none",
                           attn_gate=False, rope_dim=None)
BPE = dict(ENGLISH, context=192, tokens="bpe", variant="bpe", bfloat16=True)

RECIPES = [
    # every family on English text first: the index's first match for a preset is what the app opens.
    # WordNet's definitions and examples (transformer.training.english); 512-character crops hold a held-out
    # sentence of up to 200 characters written twice. With a quarter of the rows repeating a span from the
    # first step and no warm-up, LLaMA 2 had no induction head after 2,200 steps (0.02) and did not copy a
    # repeated span at all; the warm-up forms the circuit first.
    Recipe("llama2", "language", lr=3e-3, **ENGLISH, bfloat16=True),
    # Mistral's window covers half the context (its card). LLaMA 2's recipe gave it an induction head of 0.48; 35% of
    # the rows repeating (not a quarter) give copying more practice
    Recipe("mistral", "language", lr=3e-3, **{**ENGLISH, "repeat_rate": 0.35}, bfloat16=True),
    Recipe("gpt2", "language", lr=2e-3, **ENGLISH, bfloat16=True),
    # 10 heads of 16 at d_model 160 (its card): the best previous-token head now sits in a head of slope 1/2
    Recipe("bloom", "language", lr=2e-3, **ENGLISH, bfloat16=True),
    Recipe("falcon", "language", lr=3e-3, **ENGLISH, bfloat16=True),
    Recipe("palm", "language", lr=3e-3, **ENGLISH, bfloat16=True),
    Recipe("mixtral", "language", lr=3e-3, **ENGLISH, bfloat16=True),
    # Qwen3: LLaMA 2's recipe with QK-norm per head (head_dim 32 of its own, two kv heads)
    Recipe("qwen3", "language", lr=3e-3, **ENGLISH, bfloat16=True),
    Recipe("deepseek-v3", "language", lr=3e-3, **ENGLISH, bfloat16=True),  # MLA, sigmoid-routed experts
    # DeepSeek-V3.2 as it was made: DeepSeek-V3's model goes on with a lightning indexer. First the indexer alone
    # learns to match the dense weights with every key kept (200 steps), then everything trains with each query's 32
    # keys (of up to 512) for 300 steps at a tenth of the first run's rate, 8 rows a batch. A step with an indexer in
    # every layer costs about 3.5x a dense one on one CPU thread: a run from scratch would not fit (docs/checkpoints.md)
    Recipe("deepseek-v3.2", "language", steps=300, lr=3e-4, batch_size=8, corpus="english", context=512,
           repeat_rate=0.25, bfloat16=True, start_from="deepseek-v3-language", indexer_warmup=200),
    Recipe("gpt-oss", "language", lr=3e-3, **ENGLISH, bfloat16=True),  # sinks, alternating 64-key windows, experts
    Recipe("gemma3", "language", lr=3e-3, **ENGLISH, bfloat16=True),  # five local layers (64 keys) to one global
    # the state-keeping kinds: Qwen3.5's three Gated DeltaNet layers to one full layer, and all four layers Gated
    # DeltaNet (no positions: the state is the order). A step costs about twice a softmax step on one CPU thread, so
    # these stop at 3,000 steps, not 4,000 (docs/checkpoints.md)
    Recipe("qwen3.5", "language", lr=3e-3, **{**ENGLISH, "steps": 3000}, bfloat16=True),
    Recipe("qwen3.5", "language", lr=3e-3, **{**ENGLISH, "steps": 3000}, bfloat16=True, variant="gdn",
           changes=PURE_GATED_DELTANET),
    # Llama 4: NoPE every fourth layer (here the last, full), chunks of 64 characters in the three RoPE layers, a
    # routed expert beside a shared one; 3,000 steps, as Qwen3.5's (docs/checkpoints.md)
    Recipe("llama4", "language", lr=3e-3, **{**ENGLISH, "steps": 3000}, bfloat16=True),
    # the fixed table outweighs the characters: at GPT-2's 2e-3, 2.35 bits and a previous-token head of 0.42
    Recipe("gpt2", "language", lr=3e-3, **ENGLISH, changes=dict(position="sinusoidal"), variant="sinusoidal",
           bfloat16=True),
    # BERT reads masked characters with the encoder's own curriculum: 8-, 16- and 32-character crops, then 64.
    # Post-norm at 4 layers of 128: at lr 3e-3 it stayed on the unigram whatever the curriculum
    Recipe("bert", "language", steps=8000, lr=1e-3, batch_size=32, corpus="english", bfloat16=True),
    # the same families reading byte-level BPE (assets/tokenizers, 2,048 tokens): variants, so the characters stay
    # each preset's checkpoint. 192 tokens hold about 570 characters, a little more than the character models' 512,
    # and a held-out sentence of 200 characters written twice (about 140 tokens)
    Recipe("llama2", "language", lr=3e-3, **BPE),
    Recipe("mistral", "language", lr=3e-3, **{**BPE, "repeat_rate": 0.35}),
    # GPT-2's learned table on BPE: after 4,000 steps (one CPU thread) 1.826 bits, heads 0.33 and 0.23; after 8,000
    # (trained on an H200 in 177 s: --device cuda) 1.704 bits, heads 1.00 and 0.77. On one CPU thread: about 50 min
    Recipe("gpt2", "language", lr=2e-3, **{**BPE, "steps": 8000}),
    Recipe("qwen3", "language", lr=3e-3, **BPE),
    Recipe("llama2", "induction", steps=2000, bfloat16=True),  # at the English size the head forms later: 0.57 after 1,000 steps
    Recipe("mistral", "induction", steps=2000, bfloat16=True),  # as LLaMA 2's, at the English size
    Recipe("falcon", "induction", steps=2000, bfloat16=True),  # at the English size: 0.56 after 1,000 steps
    # Learned positions (GPT-2), ALiBi (BLOOM) and PaLM's block did not form induction heads within a
    # minute (see docs/checkpoints.md); they ship on sort, whose pointer attention they learn quickly.
    Recipe("gpt2", "sort", steps=2000, bfloat16=True),
    Recipe("palm", "sort", steps=2000, bfloat16=True),
    Recipe("bloom", "sort", steps=2000, bfloat16=True),  # at d_model 160, 1,500 steps reached 0.93
    # whether the experts part digits from letters depends on the seed and the schedule (docs/checkpoints.md)
    Recipe("mixtral", "mixed", steps=1200, batch_size=64, bfloat16=True),
    Recipe("original", "reverse", steps=1500, bfloat16=True),
    # T5 at classroom size: relative position buckets, pre-RMSNorm, ReLU; reversing shows in its cross-attention
    Recipe("t5", "reverse", steps=1500, bfloat16=True),
    Recipe("original", "copy", steps=500, bfloat16=True),
    Recipe("bert", "mirror", steps=2000, bfloat16=True),
]


# recipes declared before their first run: they ship no file yet (a test holds each name here to that, so a trained
# one leaves this list and a missing file is never silent)
NOT_YET_SHIPPED: tuple[str, ...] = ()


STATE_DIR = Path(__file__).resolve().parent.parent / "runs"  # training states, not shipped


def file_bytes(path: Path) -> int:
    weights, meta = checkpoint_paths(path)
    return weights.stat().st_size + meta.stat().st_size


def recipe_task(recipe: Recipe) -> Language | str:
    """The task a recipe trains on: the language task with its curriculum, or a synthetic task's name."""
    settings = {name: value for name, value in (("context", recipe.context), ("repeat_rate", recipe.repeat_rate))
                if value is not None}
    return (Language(induction_warmup=recipe.induction_warmup, docstrings=recipe.docstrings, corpus=recipe.corpus,
                     tokens=recipe.tokens, **settings) if recipe.task == "language" else recipe.task)


def train_recipe(recipe: Recipe, directory: Path, device: str = "cpu") -> None:
    task = recipe_task(recipe)
    cfg = config_for(recipe.preset, task, **recipe.changes)
    state = STATE_DIR / f"{recipe.name}.state.pt"  # a stopped run goes on from here when started again
    start, before = continued_start(recipe, cfg, task)
    model, history = train(cfg, task, recipe.steps, lr=recipe.lr, batch_size=recipe.batch_size,
                           seed=recipe.seed, aux_loss_weight=recipe.aux_loss_weight, device=device, state_path=state,
                           start_from=start)
    settings = {"batch_size": recipe.batch_size, "lr": recipe.lr, "seed": recipe.seed,
                "aux_loss_weight": recipe.aux_loss_weight, "threads": torch.get_num_threads(),
                "device": device_name(device), "config_changes": recipe.changes}
    if recipe.start_from:
        settings |= {"started_from": recipe.start_from, "indexer_warmup_steps": recipe.indexer_warmup,
                     "indexer_warmup_lr": recipe.warmup_lr}
        history = before + [{**row, "seconds": row["seconds"] + before[-1]["seconds"],
                             "cpu_seconds": row["cpu_seconds"] + before[-1]["cpu_seconds"]} for row in history]
    meta = describe(model, task, history, settings)
    meta["preset"] = recipe.preset
    path = directory / recipe.name
    store_as = None
    if recipe.bfloat16:
        store_as = halve(model, recipe, task, meta)
    checkpoint.save(model.cpu(), path, meta, store_as=store_as)
    state.unlink()  # the run is done: training this recipe again starts afresh
    (STATE_DIR / f"{recipe.name}.warmup.state.pt").unlink(missing_ok=True)
    seconds = meta["training"]["seconds"]
    print(f"{recipe.name:22s} accuracy {meta['accuracy']:.3f}  {seconds:5.1f} s  {file_bytes(path) / 1024:6.0f} KiB "
          f"{json.dumps(meta.get('figures', {}))}", flush=True)


def device_name(device: str) -> str:
    """What trained a checkpoint, as its JSON records it: "cpu" or the GPU's name."""
    return torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu"


def continued_start(recipe: Recipe, cfg, task):
    """The model a continued recipe starts from and the history of its indexer warm-up, or (None, [])."""
    if not recipe.start_from:
        return None, []
    base, _ = checkpoint.load(checkpoint.SHIPPED_DIR / recipe.start_from, device="cpu")
    if not recipe.indexer_warmup:
        return base, []
    dense = cfg.replace(index_top_k=task.max_tokens)  # every key kept: the indexer learns beside dense attention
    return train(dense, task, recipe.indexer_warmup, lr=recipe.warmup_lr, batch_size=recipe.batch_size,
                 seed=recipe.seed, device="cpu", start_from=base, learning=".indexer.",
                 state_path=STATE_DIR / f"{recipe.name}.warmup.state.pt")


def halve(model, recipe: Recipe, task, meta: dict) -> torch.dtype | None:
    """bfloat16 where the model's own measure barely moves (recorded in meta["storage"]), else None (float32):
    held-out bits per character for a next-token language model, accuracy for the rest."""
    if recipe.task == "language" and model.cfg.row("arch").next_token:
        meta["storage"], store_as = halved_storage(model, recipe.corpus, task.tokenizer, task.context)
        return store_as
    meta["storage"], store_as = halved_accuracy(model, task)
    if store_as is not None:
        meta["accuracy"] = meta["storage"]["accuracy_stored"]  # the accuracy of the weights the file holds
    return store_as


def halved_accuracy(model, task) -> tuple[dict, torch.dtype | None]:
    """A synthetic task's model (or BERT's masked characters) in bfloat16 only where accuracy on the same fresh
    samples moves by at most 0.005."""
    full = evaluate(model, task)
    stored = evaluate(copy.deepcopy(model).to(torch.bfloat16).float(), task)
    storage = {"dtype": "bfloat16", "accuracy_float32": round(full, 4), "accuracy_stored": round(stored, 4)}
    return storage, torch.bfloat16 if abs(stored - full) <= 0.005 else None


def halved_storage(model, corpus: str, tokenizer=None,
                   context: int = per_character.CONTEXT) -> tuple[dict, torch.dtype | None]:
    """assets/ stays under 60 MB: bfloat16 storage (half the file) only where held-out bits move by at most 0.005.
    A model on learned tokens is measured per character of the same held-out text (``per_character``), in windows
    no longer than it trained on."""
    def bits(measured) -> float:
        if tokenizer is not None and tokenizer.row.learned:
            return per_character.bits_per_char(measured, tokenizer, language.held_out_text(corpus),
                                               min(context, per_character.CONTEXT))
        return language.bits_per_char(measured, 256, corpus=corpus)

    full = bits(model)
    halved = copy.deepcopy(model).to(torch.bfloat16).float()
    stored = bits(halved)
    storage = {"dtype": "bfloat16", "held_out_bits_per_char_float32": round(full, 4),
               "held_out_bits_per_char_stored": round(stored, 4)}
    return storage, torch.bfloat16 if abs(stored - full) <= 0.005 else None


def store_halved(recipe: Recipe, directory: Path) -> None:
    """Store a trained language checkpoint again in bfloat16, measured as a freshly trained one would be."""
    path = directory / recipe.name
    model, meta = checkpoint.load(path, device="cpu")
    meta = {k: v for k, v in meta.items() if k not in RESERVED_KEYS}
    store_as = halve(model, recipe, recipe_task(recipe), meta)
    if store_as is None:
        print(f"{recipe.name}: its measure moves too far in bfloat16; kept in float32 {meta['storage']}")
        return
    checkpoint.save(model, path, meta, store_as=store_as)
    print(f"{recipe.name}: stored in bfloat16, {file_bytes(path) / 1024:.0f} KiB {meta['storage']}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="recipe names, e.g. gpt2-induction (default: all)")
    parser.add_argument("--out", type=Path, default=checkpoint.SHIPPED_DIR)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (GPT-2's 8,000 BPE steps); the JSON records which")
    parser.add_argument("--store-bfloat16", action="store_true",
                        help="store the --only checkpoints (trained, bfloat16 recipes) again in bfloat16, no training")
    args = parser.parse_args()
    known = {r.name: r for r in RECIPES}
    unknown = set(args.only or []) - set(known)
    if unknown:
        parser.error(f"unknown recipes {sorted(unknown)}; choose from {', '.join(known)}")
    torch.set_num_threads(args.threads)  # this script's own process, not the library's business
    if args.store_bfloat16:
        for name in args.only or []:
            if not known[name].bfloat16:
                parser.error(f"{name}'s recipe stores float32; set bfloat16=True in its Recipe first")
            store_halved(known[name], args.out)
        write_index(args.out)
        return

    for recipe in RECIPES:
        if not args.only or recipe.name in args.only:
            train_recipe(recipe, args.out, args.device)
    write_index(args.out)


def write_index(directory: Path) -> None:
    """index.json from the checkpoints present, in recipe order (several runs may train side by side)."""
    entries = {"checkpoints": [], "variants": []}
    for recipe in RECIPES:
        _, meta_path = checkpoint_paths(directory / recipe.name)
        if meta_path.exists():
            meta = json.loads(meta_path.read_text())
            entries["variants" if recipe.variant else "checkpoints"].append({
                "name": recipe.name, "preset": recipe.preset, "task": recipe.task, "accuracy": meta["accuracy"],
                "train_seconds": meta["training"]["seconds"], "bytes": file_bytes(directory / recipe.name)})
    index_path = directory / "index.json"
    index_path.write_text(json.dumps({"format_version": 1, **entries}, indent=2) + "\n")
    total = sum(e["bytes"] for group in entries.values() for e in group)
    print(f"{len(entries['checkpoints'])} checkpoints and {len(entries['variants'])} variants, "
          f"{total / 2**20:.2f} MiB in all; wrote {index_path}")


if __name__ == "__main__":
    main()
