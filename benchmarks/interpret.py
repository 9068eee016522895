"""Activation patching: batched (one forward pass per heatmap row) against one forward pass per cell.

    python -m benchmarks.interpret [--smoke] [--threads N] [--out interpret.json]

Rows (CPU, float32, 2 torch threads by default: the cores the app is sized for):

    R.<checkpoint>  patch_residual, the whole (n_layers + 1) x T grid at T = 32, for every shipped decoder
                    checkpoint / the same grid one cell per forward pass (TransformerLens's loop)
                    target: ours <= 1 s (the ratio is reported beside it)
    H.<checkpoint>  patch_heads, the whole n_layers x n_heads grid / one head per forward pass (no target)
    G.1             patch_residual's whole grid for a GPT-2-small-shaped model (d_model 768, 12 layers,
                    12 heads, vocab 50,257, random weights) at T = 32 / one plain forward of the prompt:
                    its time, and what it costs in forwards (one per cell unbatched: 13 x 32 = 416) (no target)
    G.2             one row of that grid, batched / one cell per forward pass (no target)

Both sides write the same cells through the library's hook points (``interpret.write_cells``); only
the batching differs. They are timed in one loop that alternates them (``benchmarks.run.interleaved``).
--smoke runs tiny sizes with one repeat: its numbers mean nothing, it proves the benchmark runs.
"""
from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import torch

from transformer import Transformer, TransformerConfig, checkpoint
from transformer.hooks import hook_name
from transformer.interpret import logit_difference, patch_heads, patch_residual, residual_names, write_cells

from benchmarks.run import Row, interleaved, machine, report, timed_row

TARGET_S = 1.0  # patch_residual on a shipped checkpoint at T = 32


@dataclass(frozen=True)
class Sizes:
    tokens: int  # T of the clean and corrupted prompts
    repeats: int
    budget_s: float  # per timed loop
    checkpoints: bool  # the shipped checkpoints (else a tiny model stands in)
    gpt2: dict  # TransformerConfig fields of the GPT-2-small shape


GPT2_SMALL = dict(vocab_size=50257, d_model=768, n_heads=12, n_layers=12, max_len=1024, position="learned",
                  norm="layernorm", ffn="gelu", gelu_approximate="tanh", bias=True)
FULL = Sizes(tokens=32, repeats=5, budget_s=60, checkpoints=True, gpt2=GPT2_SMALL)
SMOKE = Sizes(tokens=8, repeats=1, budget_s=10, checkpoints=False,
              gpt2=dict(GPT2_SMALL, vocab_size=128, d_model=32, n_heads=4, n_layers=2, max_len=16))


def prompts(vocab_size: int, tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded random ids, and a copy with one token changed: timing does not depend on the text."""
    clean = torch.randint(0, vocab_size, (1, tokens), generator=torch.Generator().manual_seed(0))
    corrupt = clean.clone()
    corrupt[0, tokens // 2] = (clean[0, tokens // 2] + 1) % vocab_size
    return clean, corrupt


@torch.no_grad()
def one_cell_per_forward(model: Transformer, clean, corrupt, metric, names: list[str], cells: range) -> torch.Tensor:
    """The reference: the same cells, each in a forward pass of its own."""
    _, trace = model.run_with_trace(clean, names=names)
    values = torch.zeros(len(names), len(cells))
    for row, name in enumerate(names):
        for column, cell in enumerate(cells):
            with model.intervene({name: write_cells(trace[name], 1, torch.tensor([cell]))}):
                values[row, column] = metric(model(corrupt))
    return values


def compare(row: str, what: str, model: Transformer, batched, names: list[str], cells: range, sizes: Sizes,
            time_target: bool = False) -> Row:
    """Time `batched` (ours) against one_cell_per_forward over the same names and cells, and check they agree;
    with time_target, the row's target is ours <= TARGET_S (the ratio is reported beside it)."""
    clean, corrupt = prompts(model.cfg.vocab_size, sizes.tokens)
    metric = logit_difference(0, 1)
    ours = lambda: batched(model, clean, corrupt, metric)  # noqa: E731
    reference = lambda: one_cell_per_forward(model, clean, corrupt, metric, names, cells)  # noqa: E731
    difference = float((ours() - reference()).abs().max())
    samples = interleaved({"ours": ours, "reference": reference}, sizes.repeats, sizes.budget_s, warm_up=False)
    result = timed_row(row, what, samples["ours"], samples["reference"], "", cells=len(names) * len(cells),
                       batched_forwards=len(names), max_abs_difference=difference)
    if time_target:
        result.target, result.met = f"ours <= {TARGET_S:g} s", result.ours / 1e3 <= TARGET_S
    return result


def checkpoint_rows(sizes: Sizes) -> list[Row]:
    if sizes.checkpoints:
        models = [(entry.name, checkpoint.load(entry.path, device="cpu")[0].eval()) for entry in checkpoint.shipped()]
    else:
        torch.manual_seed(0)
        models = [("tiny", Transformer(TransformerConfig(vocab_size=64, d_model=32, n_heads=4, n_kv_heads=2,
                                                         n_layers=2, max_len=16), device="cpu").eval())]
    rows = []
    for name, model in models:
        cfg = model.cfg
        if not cfg.row("arch").next_token:
            continue
        T = sizes.tokens
        rows.append(compare(f"R.{name}", f"patch_residual, {cfg.n_layers + 1} x {T} cells ({name}, d {cfg.d_model}, "
                                         f"{cfg.n_layers} layers, {cfg.n_heads} heads)", model, patch_residual,
                            residual_names(cfg.n_layers), range(T), sizes, time_target=True))
        rows.append(compare(f"H.{name}", f"patch_heads, {cfg.n_layers} x {cfg.n_heads} cells ({name})", model,
                            patch_heads, [hook_name(i, "attn.hook_z") for i in range(cfg.n_layers)],
                            range(cfg.n_heads), sizes))
    return rows


def gpt2_rows(sizes: Sizes) -> list[Row]:
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(**sizes.gpt2), device="cpu").eval()
    cfg, T = model.cfg, sizes.tokens
    clean, corrupt = prompts(cfg.vocab_size, T)
    metric = logit_difference(0, 1)
    samples = interleaved({"grid": lambda: patch_residual(model, clean, corrupt, metric),
                           "forward": lambda: model(corrupt)}, sizes.repeats, sizes.budget_s, warm_up=False)
    shape = f"d {cfg.d_model}, {cfg.n_layers} layers, {cfg.n_heads} heads, vocab {cfg.vocab_size:,}, random weights"
    grid = timed_row("G.1", f"patch_residual, the whole {cfg.n_layers + 1} x {T} grid, GPT-2-small shape ({shape}) "
                            "/ one plain forward of the prompt", samples["grid"], samples["forward"], "",
                     cells=(cfg.n_layers + 1) * T, batched_forwards=cfg.n_layers + 1)
    first_row = lambda m, c, k, f: patch_residual(m, c, k, f, layers=[0])  # noqa: E731
    return [grid, compare("G.2", f"patch_residual, one row of {T} cells, GPT-2-small shape", model, first_row,
                          residual_names(cfg.n_layers)[:1], range(T), sizes)]


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one repeat: checks the code runs (CI)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2: the app's two cores)")
    parser.add_argument("--out", help="write every row, sample and the machine to this JSON file")
    args = parser.parse_args(argv)
    sizes = SMOKE if args.smoke else FULL
    default_threads = torch.get_num_threads()
    torch.set_num_threads(1 if args.smoke else args.threads)
    try:
        info = machine(torch.device("cpu"))
        started = time.perf_counter()
        rows = checkpoint_rows(sizes) + gpt2_rows(sizes)
    finally:
        torch.set_num_threads(default_threads)
    report(rows, info, started, "smoke" if args.smoke else "full", sizes, args.out)
    return rows


if __name__ == "__main__":
    main()
