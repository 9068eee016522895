"""Measure every shipped checkpoint on fresh samples and print the figures as markdown tables.

    python scripts/measure_checkpoints.py                        # print every table
    python scripts/measure_checkpoints.py --refresh PATH ...     # measure language checkpoints again into their JSON
    python scripts/measure_checkpoints.py --write-docs           # fill the figures in README.md and docs/checkpoints.md

Per checkpoint: accuracy on answer positions; the head that draws the task's pattern
(induction: the token after the previous occurrence; copy/reverse: the diagonal /
anti-diagonal of the cross-attention; mirror: the masked token's twin; sort: the
value being written) with its score, and for induction the best previous-token head
in an earlier layer; for the mixture of experts, where each kind of token is routed.
Training seconds and file sizes come from the checkpoint files themselves. The language
checkpoints' figures were measured on every held-out character when they were trained and
are read back from their JSON.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from transformer.training import language, per_character  # noqa: E402
from transformer.checkpoint import SHIPPED_DIR, load, save, shipped, variants  # noqa: E402
from transformer.checkpoint_format import RESERVED_KEYS, checkpoint_paths  # noqa: E402
from transformer.training.task_measures import (expert_usage, head_scores, random_router_specialisation,  # noqa: E402
                                                specialisation)
from transformer.training.tasks import TASKS  # noqa: E402
from transformer.training.train import evaluate  # noqa: E402

ACCURACY_SEED, PATTERN_SEED = 777, 778  # neither is used by training or by the stored accuracy

PATTERN_NAMES = {"induction": "induction", "copy": "diagonal (cross)", "reverse": "anti-diagonal (cross)",
                 "mirror": "twin", "sort": "pointer"}


def best_head(scores: torch.Tensor) -> tuple[int, int, float]:
    """(layer, head, score) of the highest entry of an (L, H) table."""
    flat = int(scores.argmax())
    layer, head = divmod(flat, scores.shape[1])
    return layer, head, float(scores[layer, head])


def measure(entry) -> dict:
    model, meta = load(entry.path, device="cpu")
    task = TASKS[entry.task]
    weights, json_file = checkpoint_paths(entry.path)
    row = {"name": entry.name, "preset": entry.preset, "task": entry.task,
           "accuracy": evaluate(model, task, n_batches=8, batch_size=128, seed=ACCURACY_SEED),
           "seconds": meta["training"]["seconds"], "steps": meta["training"]["steps"],
           "kib": (weights.stat().st_size + json_file.stat().st_size) / 1024}
    batch = task.sample(256, seed=PATTERN_SEED)
    if entry.task == "mixed":
        row["experts"] = expert_usage(model, task, batch)
        row["specialisation"] = [specialisation(usage) for usage in row["experts"]]  # per layer
        row["random_specialisation"] = random_router_specialisation(model.cfg, task, batch)
        return row
    scores = head_scores(model, task, batch)
    layer, head, score = best_head(scores["solution"])
    row["pattern"] = f"{PATTERN_NAMES[entry.task]} L{layer}H{head} {score:.2f}"
    if entry.task in ("copy", "reverse"):
        row["pattern"] += f" (layer mean {scores['solution'][layer].mean():.2f})"
    if entry.task == "induction" and layer > 0:
        p_layer, p_head, p_score = best_head(scores["previous_token"][:layer])
        row["previous"] = f"L{p_layer}H{p_head} {p_score:.2f}"
    return row


def language_tables(entries) -> None:
    """The language checkpoints' held-out figures, recorded in their JSON when they were trained
    (`transformer.training.language.measure`: every held-out character, every held-out sentence)."""
    print("| checkpoint | held-out bits/char | next-char accuracy | previous-token head | induction head | "
          "steps | train s | size KiB |")
    print("|---|---|---|---|---|---|---|---|")
    lengths, experts = [], []
    for entry in entries:
        weights, json_file = checkpoint_paths(entry.path)
        meta = json.loads(json_file.read_text())
        figures, training = meta["figures"], meta["training"]
        head = lambda key: (f"L{figures[key]['layer']}H{figures[key]['head']} {figures[key]['score']:.2f}"
                            if key in figures else "")
        bpc = f"{figures['bits_per_char']:.2f}" if "bits_per_char" in figures else "(encoder)"
        kib = (weights.stat().st_size + json_file.stat().st_size) / 1024
        accuracy = (f"{figures['masked_accuracy']:.3f} (masked characters)" if "masked_accuracy" in figures
                    else f"{meta['accuracy']:.3f}")
        after = f"(next-character head {head('next_token_head')})" if "next_token_head" in figures else head("induction_head")
        print(f"| {entry.name} | {bpc} | {accuracy} | {head('previous_token_head')} | {after} | "
              f"{training['steps']} | {training['seconds']:.0f} | {kib:.0f} |")
        if "bits_per_char_by_length" in figures:
            lengths.append((entry.name, meta["config"]["position"], meta["corpus"].get("context", 256),
                            figures["bits_per_char_by_length"]))
        if "experts_by_class" in figures:
            experts.append((entry.name, figures["experts_by_class"], figures["expert_class_separation"]))
    print("\n| checkpoint | position | trained on | " + " | ".join(f"{m} context" for m in lengths[0][3]) + " |")
    print("|---|---|---|" + "---|" * len(lengths[0][3]))
    for name, position, context, by_length in lengths:
        print(f"| {name} | {position} | {context} | " + " | ".join(f"{v:.2f}" for v in by_length.values()) + " |")
    for name, usage, separation in experts:
        print(f"\nExpert routing of {name} on held-out text (share of each class's top-k slots per expert):\n")
        n_experts = len(next(iter(usage[0].values())))
        print("| layer | characters | " + " | ".join(f"expert {e}" for e in range(n_experts)) + " | separation |")
        print("|---|---|" + "---|" * n_experts + "---|")
        for layer, (by_class, sep) in enumerate(zip(usage, separation)):
            for kind, share in by_class.items():
                print(f"| {layer} | {kind} | " + " | ".join(f"{s:.2f}" for s in share) + f" | {sep:.2f} |")


# --- synthetic tasks: measured afresh (their JSON holds the training accuracy only) ---------------------------

def synthetic_rows() -> list[dict]:
    return [measure(entry) for entry in shipped() if entry.task != "language"]


def synthetic_table(rows: list[dict]) -> str:
    """Every synthetic checkpoint's accuracy and pattern head, then each mixture's routing beside random routers."""
    lines = ["| checkpoint | accuracy | pattern head (score) | previous-token head | steps | train s | size KiB |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        pattern = r.get("pattern", "experts: see below")
        lines.append(f"| {r['name']} | {r['accuracy']:.3f} | {pattern} | {r.get('previous', '')} | {r['steps']} | "
                     f"{r['seconds']:.1f} | {r['kib']:.0f} |")
    everything = sum(f.stat().st_size for f in SHIPPED_DIR.rglob("*") if f.is_file()) / 2 ** 20
    lines.append(f"\nThe synthetic checkpoints above: {sum(r['kib'] for r in rows) / 1024:.2f} MiB. Everything in "
                 f"`assets/checkpoints/` (the language models, the variants and the ViT too): {everything:.1f} MiB.")
    for r in rows:
        if "experts" in r:
            lines.append(routing_table(r))
    return "\n".join(lines)


def routing_table(row: dict) -> str:
    n_experts = len(next(iter(row["experts"][0].values())))
    lines = [f"\nExpert routing of {row['name']} (share of each kind's top-k slots per expert):\n",
             "| layer | kind | " + " | ".join(f"expert {e}" for e in range(n_experts)) + " | specialisation |",
             "|---|---|" + "---|" * n_experts + "---|"]
    for layer, (usage, spec) in enumerate(zip(row["experts"], row["specialisation"])):
        lines += [f"| {layer} | {kind} | " + " | ".join(f"{s:.2f}" for s in share.tolist()) + f" | {spec:.2f} |"
                  for kind, share in usage.items()]
    chance, best = row["random_specialisation"], max(row["specialisation"])
    verdict = "above all of them ✓" if best > max(chance) else "within their range: no claim"
    lines.append(f"\nRandom-init routers of the same shape, {len(chance)} seeds: the largest layer specialisation "
                 f"{min(chance):.2f}–{max(chance):.2f}; trained {best:.2f}, {verdict}.")
    return "\n".join(lines)


def synthetic_summary(rows: list[dict]) -> str:
    """The README's short table: what to look at in each synthetic checkpoint."""
    lines = ["| checkpoint | accuracy | what to look at |", "|---|---|---|"]
    for r in rows:
        if "experts" in r:
            chance = r["random_specialisation"]
            layer, best = max(enumerate(r["specialisation"]), key=lambda pair: pair[1])
            claim = (f"layer-{layer} router sends digits and letters to different experts: specialisation {best:.2f}, "
                     f"random routers {min(chance):.2f}–{max(chance):.2f}" if best > max(chance) else
                     f"routing no further apart than random routers ({best:.2f}; {min(chance):.2f}–{max(chance):.2f})")
            lines.append(f"| {r['name']} | {r['accuracy']:.3f} | {claim} |")
        else:
            previous = f"; previous-token head {r['previous']}" if "previous" in r else ""
            lines.append(f"| {r['name']} | {r['accuracy']:.3f} | {r['pattern']}{previous} |")
    return "\n".join(lines)


# --- everyday English: the tables docs/checkpoints.md and the README are made from --------------------------

DOCS = {ROOT / "README.md": ("english-models", "python-docs-models", "synthetic-summary", "bpe-models"),
        ROOT / "docs" / "checkpoints.md": ("english-corpus", "english-models", "synthetic-models")}
BLOCK = re.compile(r"(<!-- figures:(?P<name>[\w-]+) -->\n).*?(<!-- /figures -->)", re.S)


def language_entries(corpus: str) -> list[tuple[str, dict]]:
    """(name, JSON document) of every shipped language checkpoint trained on `corpus`, in index order."""
    rows = []
    for entry in shipped() + variants():
        meta = json.loads(checkpoint_paths(entry.path)[1].read_text())
        if entry.task == "language" and meta["corpus"].get("name", "python-docs") == corpus:
            rows.append((entry.name, meta))
    return rows


def english_entries() -> list[tuple[str, dict]]:
    return language_entries("english")


def python_docs_table(rows: list[tuple[str, dict]]) -> str:
    """The checkpoints still trained on the Python documentation: their held-out figures (no controls measured)."""
    lines = ["| checkpoint | held-out bits/char (topics) | previous-token head | induction head | trained context |",
             "|---|---|---|---|---|"]
    for name, meta in rows:
        f = meta["figures"]
        head = lambda key: f"L{f[key]['layer']}H{f[key]['head']} {f[key]['score']:.2f}" if key in f else "—"
        bits = f"{f['bits_per_char']:.2f}" if "bits_per_char" in f else f"(masked accuracy {f['masked_accuracy']:.2f})"
        lines.append(f"| {name} | {bits} | {head('previous_token_head')} | {head('induction_head')} | "
                     f"{meta['corpus']['context']} characters |")
    return "\n".join(lines)


def _head(figures: dict, key: str) -> str:
    """'L1H2 0.93 (random 0.04-0.09) ✓': the trained head's score beside the same measure on random-init
    weights, and ✓ only where it lies above every seed's."""
    best, (low, high) = figures[key], figures["random_init"][key]
    verdict = "✓" if best["score"] > high else "not above random"
    return f"L{best['layer']}H{best['head']} {best['score']:.2f} (random {low:.2f}–{high:.2f}) {verdict}"


def unit(meta: dict) -> str:
    """What a language checkpoint's context counts: characters, or the tokens of its learned tokenizer."""
    tokenizer = meta.get("tokenizer", {}).get("name", "characters")
    return "characters" if tokenizer == "characters" else f"{tokenizer.upper()} tokens"


def english_models_table(rows: list[tuple[str, dict]]) -> str:
    """One line per English checkpoint: held-out figures against random-init controls, and its training."""
    lines = ["| checkpoint | held-out bits/char | outside prose bits/char | previous-token head | induction head "
             "(masked accuracy for BERT) | parameters | trained context | steps | training: processor s (wall s, threads) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, meta in rows:
        f, t = meta["figures"], meta["training"]
        if "masked_accuracy" in f:
            bits, prose, second = "(encoder)", "", f"accuracy {f['masked_accuracy']:.3f}; next-character {_head(f, 'next_token_head')}"
        else:
            bits, prose, second = f"{f['bits_per_char']:.2f}", f"{f['bits_per_char_outside_prose']:.2f}", _head(f, "induction_head")
        lines.append(f"| {name} | {bits} | {prose} | {_head(f, 'previous_token_head')} | {second} | "
                     f"{meta['parameters'] / 1e6:.2f} M | {meta['trained_tokens'] - 1} {unit(meta)} | {t['steps']} | "
                     f"{t['cpu_seconds']:.0f} ({t['seconds']:.0f}, {t['threads']}) |")
    seeds = rows[0][1]["figures"]["random_init"]["seeds"] if rows else []
    lines.append(f"\nRandom: the same measure on untrained weights of the same shape, seeds {', '.join(map(str, seeds))} "
                 "(lowest–highest); ✓ where the trained head lies above all of them.")
    lines += [routing_lines(name, meta["figures"]) for name, meta in rows if "routing_separation" in meta["figures"]]
    return "\n".join(lines)


def routing_lines(name: str, figures: dict) -> str:
    """What a mixture's experts take, in its most separating layer, against random-init routers of its shape."""
    low, high = figures["random_init"]["routing_separation"]
    layer = figures["expert_class_separation"].index(figures["routing_separation"])
    usage = figures["experts_by_class"][layer]
    n_experts = len(next(iter(usage.values())))
    verdict = "above all of them ✓" if figures["routing_separation"] > high else "within their range: no claim"
    lines = [f"\n**{name}'s experts.** In layer {layer}, routing separates kinds of character by "
             f"{figures['routing_separation']:.2f} (the largest total-variation distance between two kinds' expert "
             f"shares); random-init routers of the same shape {low:.2f}–{high:.2f}: {verdict}.\n",
             "| characters | " + " | ".join(f"expert {e}" for e in range(n_experts)) + " |",
             "|---|" + "---|" * n_experts]
    lines += [f"| {kind} | " + " | ".join(f"{share:.2f}" for share in shares) + " |" for kind, shares in usage.items()]
    return "\n".join(lines)


def english_corpus_table(rows: list[tuple[str, dict]]) -> str:
    """The text they read: each source with its package, version, licence and size; the split; the baselines."""
    corpus = rows[0][1]["corpus"]
    lines = ["| source | package | version | licence | documents | characters |", "|---|---|---|---|---|---|"]
    for source in corpus["sources"]:
        lines.append(f"| {source['content']} | {source['package']} | {source['version']} | {source['licence']} | "
                     f"{source['documents']:,} | {source['characters']:,} |")
    lines.append(f"\nTraining text: {corpus['train_characters']:,} characters. Held out: {corpus['held_out_documents']:,} "
                 f"whole documents, {corpus['held_out_characters']:,} characters ({corpus['held_out']}), of whose "
                 f"50-character chunks a share of {corpus['held_out_chunks_in_training']:g} occurs in the training text. "
                 f"Baselines on the held-out text: {corpus['unigram_bits']:.2f} bits per character by each character's "
                 f"frequency (unigram), {corpus['bigram_bits']:.2f} by the character before it (bigram).")
    return "\n".join(lines)


def bpe_table(rows: list[tuple[str, dict]]) -> str:
    """Each family that ships both: its BPE checkpoint beside its character checkpoint, per character of the same
    held-out text and outside prose, and the BPE model's heads against random-init weights."""
    by_name = dict(rows)
    lines = ["| family | held-out bits/char: characters → BPE | outside prose: characters → BPE | BPE previous-token "
             "head | BPE induction head | BPE parameters (share in the token tables) | BPE training: processor seconds |",
             "|---|---|---|---|---|---|---|"]
    for name, meta in rows:
        characters = by_name.get(f"{meta['preset']}-language")
        if meta.get("tokenizer", {}).get("name") != "bpe" or characters is None:
            continue
        f, c = meta["figures"], characters["figures"]
        tables = 1 if meta["config"]["tie_embeddings"] else 2  # GPT-2 reads and writes through one table
        vocabulary = tables * meta["tokenizer"]["vocab_size"] * meta["config"]["d_model"]
        lines.append(f"| {meta['preset']} | {c['bits_per_char']:.3f} → **{f['bits_per_char']:.3f}** | "
                     f"{c['bits_per_char_outside_prose']:.3f} → **{f['bits_per_char_outside_prose']:.3f}** | "
                     f"{_head(f, 'previous_token_head')} | {_head(f, 'induction_head')} | {meta['parameters']:,} "
                     f"({vocabulary / meta['parameters']:.0%}) | {meta['training']['steps']:,} steps, "
                     f"{meta['training']['cpu_seconds']:.0f} s on {meta['training'].get('device', 'cpu').replace('cpu', 'a CPU thread')} |")
    return "\n".join(lines)


def english_blocks() -> dict[str, str]:
    rows, older = english_entries(), language_entries("python-docs")
    blocks = {"english-models": english_models_table(rows), "english-corpus": english_corpus_table(rows),
              "bpe-models": bpe_table(rows)} if rows else {}
    return {**blocks, "python-docs-models": python_docs_table(older) if older else "(none: every family reads English)"}


def regenerated(text: str, blocks: dict[str, str]) -> str:
    """text with every <!-- figures:NAME --> ... <!-- /figures --> block filled from `blocks`."""
    return BLOCK.sub(lambda m: m.group(1) + blocks[m.group("name")] + "\n" + m.group(3)
                     if m.group("name") in blocks else m.group(0), text)


def synthetic_blocks() -> dict[str, str]:
    rows = synthetic_rows()
    return {"synthetic-models": synthetic_table(rows), "synthetic-summary": synthetic_summary(rows)}


def write_docs() -> None:
    blocks = {**english_blocks(), **synthetic_blocks()}
    for path in DOCS:
        path.write_text(regenerated(path.read_text(encoding="utf-8"), blocks), encoding="utf-8")
        print(f"wrote the figures in {path.relative_to(ROOT)}")


def refresh(path: Path) -> None:
    """Measure a language checkpoint again with this library's measures and write the figures into its JSON
    (its weights and training record stay as they are)."""
    model, meta = load(path, device="cpu")
    corpus = meta["corpus"].get("name", "python-docs")
    meta["corpus"].update(language.corpus_description(corpus))
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is not None and tokenizer.row.learned:  # per character of the same held-out text, heads in tokens
        meta["figures"] = per_character.measure(model, tokenizer, corpus, meta["corpus"]["context"])
    else:
        meta["figures"] = language.measure(model, context=meta["corpus"]["context"], corpus=corpus)
    meta.setdefault("parameters", sum(p.numel() for p in model.parameters()))
    meta.setdefault("trained_tokens", 1 + meta["corpus"]["context"])
    halved = meta.get("storage", {}).get("dtype") == "bfloat16"  # stored halved: stays so (the values are exact)
    save(model, path, {k: v for k, v in meta.items() if k not in RESERVED_KEYS}, store_as=torch.bfloat16 if halved else None)
    print(f"{path.name}: {json.dumps(meta['figures'])}")


def main() -> None:
    torch.set_num_threads(1)
    args = sys.argv[1:]
    if args[:1] == ["--refresh"]:
        for path in args[1:]:
            refresh(Path(path))
        return
    if "--write-docs" in args:
        write_docs()
        return
    for table in english_blocks().values():
        print(table, end="\n\n")
    entries = shipped()
    language_tables([e for e in entries if e.task == "language"] + variants())
    print()
    print(synthetic_table(synthetic_rows()))


if __name__ == "__main__":
    main()
