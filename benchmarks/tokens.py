"""What reading BPE tokens costs beside characters: encoding speed, and a page's rerun with each trained checkpoint.

    python -m benchmarks.tokens [--smoke] [--preset llama2] [--out tokens.json]

1. Encoding: the `tokenizers`-backed BPE encoder against the character encoder on 1 MB of held-out English (the
   held-out text written out until it is 1,000,000 characters), and on the app's default sentence, each pair timed
   in one loop that alternates them (``run.interleaved``). Reported: each side's median and BPE / characters.
2. Page reruns: for each page the lecture's examples use, two sessions (AppTest) open the family's trained
   character checkpoint and its trained BPE checkpoint; each then reads the same series of sentences, one
   sidebar text change per rerun (a new text: the forward pass and every figure are redrawn; each of 16 sentences
   twice, with two endings), the two sessions taking turns, a garbage collection before each timed rerun.
   Target: the BPE session's p95 no worse than the character session's (ratio <= 1).
--smoke: 10 kB of text, two pages, two sentences; its numbers mean nothing, it shows the benchmark still runs.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import time

import numpy as np

from benchmarks.app_latency import APP
from benchmarks.run import interleaved
from transformer.tokens import get_tokenizer
from transformer.training import language

PAGES = ("pages/playground.py", "pages/stepper.py", "pages/compare.py", "pages/interpret.py",
         "pages/kv_heads.py", "pages/permutation.py")
SENTENCES = ("The dog chased the ball across the garden.", "A river runs through the old town.",
             "She wrote a letter to her brother in the spring.", "Bread and butter on a cold morning.",
             "The children sang a song about the sea.", "He left the keys on the kitchen table.",
             "Clouds gathered over the hills before the rain.", "The train was late, so we walked home.",
             "A small boat drifted toward the island at dawn.", "The baker sold every loaf before noon.",
             "My sister plays the violin in a quiet room.", "The old map showed a road that no longer exists.",
             "Snow covered the fields and the roofs of the farm.", "The teacher read the story aloud to the class.",
             "We planted tomatoes and beans behind the house.", "A bright light flashed across the night sky.")
ENDINGS = ("It was quiet.", "Then it rained.", "Nobody saw it.")  # a round's ending: every rerun reads a new text
MEGABYTE = 1_000_000


def text_of(characters: int) -> str:
    """The held-out English text, written out again and again to `characters` characters."""
    held_out = language.held_out_text("english")
    return (held_out * (characters // len(held_out) + 1))[:characters]


def encoding(characters: int, repeats: int) -> dict:
    """Median seconds to encode `characters` of held-out text and the default sentence, per tokenizer."""
    from ui.app.state import DEFAULT_TEXT

    text = text_of(characters)
    tokenizers = {name: get_tokenizer(name) for name in ("characters", "bpe")}
    result = {"characters": characters, "sentence": DEFAULT_TEXT}
    for label, sample, rounds in (("text", text, repeats), ("sentence", DEFAULT_TEXT, 200 * repeats)):
        samples = interleaved({name: (lambda t=t: t.encode(sample)) for name, t in tokenizers.items()},
                              repeats=rounds, budget_s=60)
        medians = {name: float(np.median(s)) for name, s in samples.items()}
        result[label] = {"seconds": medians, "ratio": medians["bpe"] / medians["characters"],
                         "tokens": {name: len(t.encode(sample)) for name, t in tokenizers.items()},
                         "rounds": len(samples["bpe"])}
    return result


def session(page: str, preset: str, tokens: str):
    from streamlit.testing.v1 import AppTest

    from ui.app.state import DEFAULT_TEXT

    at = AppTest.from_file(str(APP), default_timeout=120)
    for key, value in {"preset": preset, "tokens": tokens}.items():
        at.query_params[key] = value
    at.switch_page(page).run()  # warm-up: the page's first run, the checkpoint loaded
    at.sidebar.text_area(key="text").set_value(DEFAULT_TEXT).run()
    return at


def reruns(page: str, preset: str, sentences: tuple[str, ...], rounds: int) -> dict:
    """Both sessions read each sentence in turn (the order alternates); seconds of each rerun, what each showed."""
    sessions = {tokens: session(page, preset, tokens) for tokens in ("characters", "bpe")}
    times: dict[str, list[float]] = {tokens: [] for tokens in sessions}
    texts = [f"{sentence} {ending}" for ending in ENDINGS[:rounds] for sentence in sentences]  # each one new
    for i, text in enumerate(texts):
        for tokens in (list(sessions) if i % 2 == 0 else list(sessions)[::-1]):
            at = sessions[tokens]
            at.sidebar.text_area(key="text").set_value(text)
            gc.collect()  # a collection the last rerun left due would land in this one's time, on either side
            start = time.perf_counter()
            at.run()
            times[tokens].append(time.perf_counter() - start)
    shown = {tokens: {"exceptions": len(at.exception), "errors": [e.value for e in at.error],
                      "weights": next((s.value for s in at.success if "Trained weights" in s.value), "not trained")}
             for tokens, at in sessions.items()}
    p50, p95 = ({tokens: float(np.percentile(t, q)) for tokens, t in times.items()} for q in (50, 95))
    return {"page": page, "seconds": times, "p50": p50, "p95": p95, "ratio": p95["bpe"] / p95["characters"],
            "shown": shown}


def markdown(enc: dict, pages: list[dict]) -> str:
    text, sentence = enc["text"], enc["sentence"]
    lines = [f"Encoding {enc['characters']:,} characters of held-out English: characters "
             f"{text['seconds']['characters']:.3f} s, BPE {text['seconds']['bpe']:.3f} s (BPE / characters "
             f"{text['ratio']:.1f}; {text['tokens']['characters']:,} and {text['tokens']['bpe']:,} tokens). "
             f"The default sentence: {sentence['seconds']['characters'] * 1e3:.3f} ms and "
             f"{sentence['seconds']['bpe'] * 1e3:.3f} ms ({sentence['tokens']['characters']} and "
             f"{sentence['tokens']['bpe']} tokens).", "",
             "| page | reruns each | p50: characters / BPE | p95: characters / BPE | BPE / characters (p95) | target "
             "| met? | weights |",
             "|---|---|---|---|---|---|---|---|"]
    for r in pages:
        clean = all(not s["exceptions"] and not s["errors"] for s in r["shown"].values())
        met = r["ratio"] <= 1.0 and clean
        weights = " / ".join(s["weights"].split("trained checkpoint ")[-1].split(" ")[0] for s in r["shown"].values())
        lines.append(f"| {r['page']} | {len(r['seconds']['bpe'])} | {r['p50']['characters'] * 1e3:.0f} / "
                     f"{r['p50']['bpe'] * 1e3:.0f} ms | {r['p95']['characters'] * 1e3:.0f} / {r['p95']['bpe'] * 1e3:.0f} ms "
                     f"| {r['ratio']:.2f} | <= 1.00 | {'yes' if met else '**no**'} | {weights} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="10 kB, two pages, two sentences: it runs, nothing more")
    parser.add_argument("--preset", default="llama2", help="a family with both a character and a BPE checkpoint")
    parser.add_argument("--out", help="write every timing to this JSON file")
    args = parser.parse_args(argv)
    from streamlit.logger import set_log_level

    set_log_level("error")
    load_start = os.getloadavg()[0]
    enc = encoding(10_000 if args.smoke else MEGABYTE, repeats=1 if args.smoke else 5)
    pages, sentences = (PAGES[:2], SENTENCES[:2]) if args.smoke else (PAGES, SENTENCES)
    results = [reruns(page, args.preset, sentences, rounds=1 if args.smoke else 2) for page in pages]
    print(f"{'SMOKE — ' if args.smoke else ''}{args.preset}: characters against BPE, {os.cpu_count()} cores; "
          f"load average {load_start:.1f} at start, {os.getloadavg()[0]:.1f} at end\n")
    print(markdown(enc, results))
    report = {"mode": "smoke" if args.smoke else "full", "preset": args.preset, "cores": os.cpu_count(),
              "encoding": enc, "pages": results}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    return report


if __name__ == "__main__":
    main()
