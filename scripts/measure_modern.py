"""Measure what the attention of 2024-2026 does on the shipped English checkpoints; write the JSON the pages draw.

    python -m scripts.measure_modern            # writes assets/measurements/modern-variants.json

1. RoPE scaling at inference, no retraining: the trained RoPE checkpoints read held-out English at 1x, 2x and 4x
   their trained context, plain and with each scaling (linear, dynamic NTK, YaRN, LLaMA 3) at factors 2 and 4.
2. Where models without sinks put weight they do not need: per layer and head, the share of attention on the
   first position (<bos>) and on spaces, on held-out English, beside the same on random-init weights of each
   checkpoint's shape (the measure a sink is meant to replace).
3. What sinks take: per layer and head of each shipped checkpoint with sinks, the mean share of a row its sink
   logit took on held-out English, and its weight on the first position, beside random-init weights of its shape.
4. How large the trained decoders' attention scores grew, with and without QK-norm: per layer, the spread and the
   largest |q.k / sqrt(d)|, beside random-init weights of each shape.
5. Which kind of layer does what, in the checkpoints that mix local and global layers or leave positions out of
   some layers (NoPE): per layer, the best previous-token and induction head scores (copies 20-200 characters
   apart), beside random init.
6. Which keys a lightning indexer keeps, in the checkpoints with one: the share of the dense weights the kept keys
   hold as k shrinks, for the trained indexer, a random-init one, the k most recent keys and the best k keys.

    python -m scripts.measure_modern --only layer_roles indexer_mass     # those sections again, the rest kept
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from transformer.checkpoint import load, shipped, trained_tokens
from transformer.indexer import indexer_mass
from transformer.axes import AXES
from transformer.training import language
from transformer.training.language import encode_chars, untrained

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "assets" / "measurements" / "modern-variants.json"
CORPUS = "english"
MULTIPLES = (1, 2, 4)
FACTORS = (2.0, 4.0)
SPARE_WINDOWS, SPARE_CONTEXT = 16, 256
RANDOM_SEEDS = (0, 1, 2)


def language_decoders(keep=lambda cfg: True):
    """(entry, model, meta) for each shipped decoder language checkpoint whose config `keep` accepts."""
    for entry in shipped():
        if entry.task != "language":
            continue
        model, meta = load(entry.path, device="cpu")
        if model.cfg.row("arch").next_token and keep(model.cfg):
            yield entry, model, meta


def mixes_local_and_global(cfg) -> bool:
    windows = cfg.layer_windows()
    return None in windows and any(w is not None for w in windows)


def scaled(model, scaling: str, factor: float, context: int):
    """The same weights read with RoPE scaled: scaling has no parameters, so the state dict carries over."""
    cfg = model.cfg.replace(rope_scaling=scaling, rope_factor=factor, rope_original_max_len=context,
                            max_len=max(model.cfg.max_len, int(context * max(MULTIPLES))))
    twin = type(model)(cfg, device="cpu").eval()
    twin.load_state_dict(model.state_dict())
    return twin


def rope_scaling_rows(model, context: int) -> list[dict]:
    """Held-out bits per character at each multiple of the trained context, plain and with each scaling."""
    rows = [{"scaling": "none", "factor": 1.0}]
    # proportional RoPE (Gemma 4) stills most of each head's frequencies; it reads no further than it was trained
    rows += [{"scaling": name, "factor": f} for name, scaling in AXES["rope_scaling"].choices.items()
             if scaling.rescales and not scaling.turns_fraction for f in FACTORS]
    for row in rows:
        rescales = AXES["rope_scaling"].row(row["scaling"]).rescales
        reader = scaled(model, row["scaling"], row["factor"], context) if rescales else model
        row["bits_per_char"] = {
            f"{m}x": round(language.bits_per_char(reader, m * context, limit=8 * 4 // m, corpus=CORPUS), 3)
            for m in MULTIPLES}
    return rows


def windows_of_text(context: int, n: int) -> torch.Tensor:
    return language.held_out_windows(context, limit=n, corpus=CORPUS)[:, :-1]  # (N, 1 + context): <bos> first


@torch.no_grad()
def spare_weight(model, ids: torch.Tensor) -> dict:
    """Per layer and head: mean attention on position 0 (<bos>), on space keys, and spaces' share of the keys."""
    _, trace = model.run_with_trace(ids, names="blocks.*.attn.hook_pattern")
    space = ids == encode_chars(" ")[0]  # (N, T)
    causal_keys = torch.tril(torch.ones(ids.shape[1], ids.shape[1]))  # (T, T): the keys each query may see
    space_share = ((causal_keys[None] * space[:, None].float()).sum(-1) / causal_keys.sum(-1)).mean().item()
    first, spaces = [], []
    for layer in range(model.cfg.n_layers):
        pattern = trace[f"blocks.{layer}.attn.hook_pattern"][:, :, 1:]  # (N, H, T-1, T): queries after <bos>
        first.append([round(v, 4) for v in pattern[..., 0].mean((0, 2)).tolist()])
        spaces.append([round(v, 4) for v in (pattern * space[:, None, None].float()).sum(-1).mean((0, 2)).tolist()])
    return {"first_position": first, "spaces": spaces, "space_key_share": round(space_share, 4)}


def spare_weight_rows() -> list[dict]:
    ids = windows_of_text(SPARE_CONTEXT, SPARE_WINDOWS)
    rows = []
    for entry, model, _ in language_decoders(lambda cfg: not cfg.sinks):
        trained = spare_weight(model, ids)
        controls = [spare_weight(untrained(model.cfg, seed), ids) for seed in RANDOM_SEEDS]
        rows.append({"model": entry.name, "preset": entry.preset, **trained,
                     "random_init": {"seeds": list(RANDOM_SEEDS),
                                     "first_position_max": max(max(map(max, c["first_position"])) for c in controls),
                                     "spaces_max": max(max(map(max, c["spaces"])) for c in controls)}})
    return rows


LAYER_SENTENCES = 60  # held-out sentences written twice, spread over the split, for the per-layer induction scores


def layer_roles(model) -> dict:
    """Per layer: the best previous-token head's score and the best induction head's (copies 20-200 apart)."""
    sentences = language.induction_sentences(model.cfg, CORPUS, LAYER_SENTENCES)
    return {"previous_token": [round(v, 3) for v in language.previous_token_scores(model, corpus=CORPUS).amax(1).tolist()],
            "induction": [round(v, 3) for v in language.induction_scores(model, sentences).amax(1).tolist()]}


def leaves_positions_out(cfg) -> bool:
    """A RoPE model with softmax layers that turn nothing (NoPE); a layer that keeps a state is no such layer."""
    return cfg.row("position").rotates_qk and any(not spec.rotates and not spec.row.keeps_state
                                                  for spec in cfg.layer_plan())


def layer_kind(spec) -> str:
    """'global', 'local (W)', 'chunk (C)', with ', NoPE' where a RoPE model's layer turns nothing."""
    kind = f"local ({spec.window})" if spec.window else f"chunk ({spec.chunk})" if spec.chunk else "global"
    return kind + (", NoPE" if not spec.rotates else "")


def layer_role_rows() -> list[dict]:
    """The shipped checkpoints that mix local and global layers, or leave positions out of some: which kind of layer
    does what, beside random init."""
    rows = []
    for entry, model, _ in language_decoders(lambda cfg: mixes_local_and_global(cfg) or leaves_positions_out(cfg)):
        windows = model.cfg.layer_windows()
        controls = [layer_roles(untrained(model.cfg, seed)) for seed in RANDOM_SEEDS]
        rows.append({"model": entry.name, "preset": entry.preset, "layer_windows": list(windows),
                     "layer_kinds": [layer_kind(spec) for spec in model.cfg.layer_plan()], **layer_roles(model),
                     "random_init": {"seeds": list(RANDOM_SEEDS),
                                     **{key: [max(c[key][layer] for c in controls) for layer in range(len(windows))]
                                        for key in ("previous_token", "induction")}}})
    return rows


@torch.no_grad()
def score_sizes(model, ids: torch.Tensor) -> dict:
    """Per layer: the spread (std) and the largest |score| of q.k / sqrt(d) over the pairs the causal mask keeps."""
    _, trace = model.run_with_trace(ids, names="blocks.*.attn.hook_raw_scores")
    seen = torch.tril(torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool))  # (T, T)
    spread, largest = [], []
    for layer in range(model.cfg.n_layers):
        scores = trace[f"blocks.{layer}.attn.hook_raw_scores"][..., seen]  # (N, H, pairs)
        spread.append(round(scores.std().item(), 3))
        largest.append(round(scores.abs().max().item(), 2))
    return {"score_std": spread, "score_max": largest}


def score_size_rows() -> list[dict]:
    """How large the trained decoders' attention scores grew, with and without QK-norm, beside random init."""
    ids = windows_of_text(SPARE_CONTEXT, SPARE_WINDOWS)
    rows = []
    for entry, model, _ in language_decoders():
        controls = [score_sizes(untrained(model.cfg, seed), ids) for seed in RANDOM_SEEDS]
        rows.append({"model": entry.name, "preset": entry.preset, "qk_norm": model.cfg.qk_norm, **score_sizes(model, ids),
                     "random_init": {"seeds": list(RANDOM_SEEDS), "score_std": max(max(c["score_std"]) for c in controls),
                                     "score_max": max(max(c["score_max"]) for c in controls)}})
    return rows


@torch.no_grad()
def sink_share(model, ids: torch.Tensor) -> dict:
    """Per layer and head: the mean share of each row the sink took, and the mean weight on position 0 (<bos>)."""
    _, trace = model.run_with_trace(ids, names=["blocks.*.attn.hook_sink_share", "blocks.*.attn.hook_pattern"])
    share, first = [], []
    for layer in range(model.cfg.n_layers):
        share.append([round(v, 4) for v in trace[f"blocks.{layer}.attn.hook_sink_share"][:, :, 1:].mean((0, 2)).tolist()])
        pattern = trace[f"blocks.{layer}.attn.hook_pattern"][:, :, 1:]  # (N, H, T-1, T): queries after <bos>
        first.append([round(v, 4) for v in pattern[..., 0].mean((0, 2)).tolist()])
    return {"sink_share": share, "first_position": first}


def sink_share_rows() -> list[dict]:
    """The shipped checkpoints with sinks: how much their sinks take on held-out English, trained and random-init."""
    ids = windows_of_text(SPARE_CONTEXT, SPARE_WINDOWS)
    rows = []
    for entry, model, _ in language_decoders(lambda cfg: cfg.sinks):
        controls = [sink_share(untrained(model.cfg, seed), ids) for seed in RANDOM_SEEDS]
        rows.append({"model": entry.name, "preset": entry.preset, "layer_windows": list(model.cfg.layer_windows()),
                     **sink_share(model, ids),
                     "random_init": {"seeds": list(RANDOM_SEEDS), "sink_share": [c["sink_share"] for c in controls],
                                     "first_position": [c["first_position"] for c in controls]}})
    return rows


INDEX_CONTEXT, INDEX_WINDOWS = 256, 8  # held-out characters per window (after <bos>), windows read
INDEX_KS = [1, 2, 4, 8, 16, 32, 64, 128]


def indexer_mass_rows() -> list[dict]:
    """The shipped checkpoints with a lightning indexer: what their kept keys hold as k shrinks, beside controls."""
    ids = windows_of_text(INDEX_CONTEXT, INDEX_WINDOWS)  # (N, 1 + 256): <bos> first
    return [{"model": entry.name, "preset": entry.preset, "tokens": ids.shape[1], "ks": INDEX_KS,
             "trained_top_k": model.cfg.index_top_k, "layers": indexer_mass(model, ids, INDEX_KS)}
            for entry, model, _ in language_decoders(lambda cfg: any(s.selects_keys for s in cfg.layer_plan()))]


def rope_scaling_sections() -> list[dict]:
    rope = []
    for entry, model, meta in language_decoders(lambda cfg: cfg.row("position").rotates_qk):
        context = trained_tokens(meta) - 1  # characters after <bos>
        rope.append({"model": entry.name, "preset": entry.preset, "context": context,
                     "rows": rope_scaling_rows(model, context)})
        print(f"{entry.name}: RoPE scalings measured", flush=True)
    return rope


SECTIONS = {"rope_scaling": rope_scaling_sections, "spare_weight": spare_weight_rows, "sinks": sink_share_rows,
            "score_sizes": score_size_rows, "layer_roles": layer_role_rows, "indexer_mass": indexer_mass_rows}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--only", nargs="*", choices=list(SECTIONS),
                        help="measure these sections again and keep the others from the file")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    started, cpu_started = time.perf_counter(), time.process_time()
    kept = json.loads(Path(args.out).read_text(encoding="utf-8")) if args.only else {}
    result = {"corpus": CORPUS, **{name: kept[name] if args.only and name not in args.only and name in kept
                                   else measure() for name, measure in SECTIONS.items()}}
    if args.only:
        result["sections_last_measured"] = args.only
    result |= {"seconds": round(time.perf_counter() - started, 1),
               "cpu_seconds": round(time.process_time() - cpu_started, 1), "command": "python -m scripts.measure_modern"}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
