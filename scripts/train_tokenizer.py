"""Learn the byte-level BPE the lab ships (assets/tokenizers/bpe-english-2048.json) from the English training split.

    python scripts/train_tokenizer.py                 # needs Debian's wordnet-base, as English training does
    python scripts/train_tokenizer.py --vocab-size 1024 --out /tmp/bpe-1024.json

Only the training documents are read (transformer.training.english.training_text): the held-out text the
models are measured on never shapes a merge. The file is the `tokenizers` package's JSON, written compact.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from transformer import tokens  # noqa: E402
from transformer.axes import AXES  # noqa: E402
from transformer.training import english  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab-size", type=int, default=tokens.BPE_VOCAB_SIZE)
    parser.add_argument("--out", type=Path, default=tokens.TOKENIZER_DIR / AXES["tokens"].row("bpe").file)
    args = parser.parse_args()
    start = time.perf_counter()
    text = english.training_text()
    tokenizer = tokens.train_bpe(text, args.vocab_size)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(args.out), pretty=False)
    n_tokens = len(tokenizer.encode(text).ids)
    print(f"{args.out}: {tokenizer.get_vocab_size()} tokens from {len(text):,} training characters in "
          f"{time.perf_counter() - start:.1f} s; {len(text) / n_tokens:.2f} characters per token on that text; "
          f"{args.out.stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
