"""Train a model on a synthetic task: AdamW, linear warmup then cosine decay, seeded and reproducible.

    model, history = train("llama2", "induction", steps=1000)
    python -m transformer.training.train --preset llama2 --task induction --steps 1000 --out /tmp/llama2-induction

The same seed gives the same weights (on the same device and thread count). The
loop is plain PyTorch: every heavy operation releases the GIL, so an app can keep
serving other threads while a model trains, refresh a chart through ``callback``
and stop it early through ``should_stop``.
"""
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from .. import checkpoint
from . import language, per_character
from ..config import TransformerConfig
from ..ffn import MoE
from ..model import Transformer, default_device
from ..presets import MODEL_CARDS
from .tasks import TASKS, Language, Task, get_task

Callback = Callable[[int, dict, Transformer], None]


def config_for(preset: str | TransformerConfig, task: str | Task, **changes) -> TransformerConfig:
    """The config to train `task` with: a preset's axes, its vocabulary sized to the task's.

    A preset or model-card name (its classroom config) gets vocab_size = the task's vocabulary and
    max_len = what the model reads: a learned position table exactly as long as the longest training
    sequence (rows past it would stay untrained), other schemes the task's own longer limit (a language
    model is measured on text 4x its training length); a config you pass is only checked (right arch, vocabulary and max_len large enough).
    """
    task = get_task(task)
    if isinstance(preset, str):
        if preset not in MODEL_CARDS:
            raise ValueError(f"unknown preset {preset!r}; choose one of {', '.join(MODEL_CARDS)}")
        cfg = MODEL_CARDS[preset].config.replace(**{"vocab_size": len(task.vocab), **changes})
        if "max_len" not in changes:
            trained_table = cfg.row("position").table_param_terms  # a table of trained rows (learned positions)
            cfg = cfg.replace(max_len=task.for_arch(cfg.arch).max_tokens if trained_table
                              else max(cfg.max_len, task.max_len))
    else:
        cfg = preset.replace(**changes) if changes else preset
    task = task.for_arch(cfg.arch)
    if cfg.vocab_size < len(task.vocab):
        raise ValueError(f"vocab_size={cfg.vocab_size} is smaller than the {task.name} task's {len(task.vocab)} tokens; "
                         f"set vocab_size to at least {len(task.vocab)}")
    if cfg.row("position").bounds_length and cfg.max_len < task.max_tokens:
        raise ValueError(f"max_len={cfg.max_len} is shorter than the {task.name} task's sequences of up to "
                         f"{task.max_tokens} tokens; set max_len to at least {task.max_tokens}")
    return cfg


def task_for(cfg: TransformerConfig, task: str | Task) -> Task:
    """The task as this model trains on it: its arch's form, and for a language model whose every layer
    has a sliding window, repeated spans the widest window can reach."""
    task = get_task(task).for_arch(cfg.arch)
    windows = cfg.layer_windows()
    if isinstance(task, Language) and None not in windows:  # a global layer reaches every earlier copy
        task = task.within_window(max(windows))
    return task


def scale_embeddings_for_sinusoidal(model: Transformer) -> None:
    """Start token embeddings at 0.02 * sqrt(d_model) when positions are a fixed table (sinusoidal).

    Sinusoidal position vectors have entries up to 1, fifty times the 0.02 of a fresh
    token embedding, so the tokens would start drowned and training stalls. The 2017
    paper multiplies embeddings by sqrt(d_model) for this reason; starting them that
    much larger does the same at the start of training. A model that already multiplies
    its embeddings by sqrt(d_model) (``scale_embeddings``) is left as it is.
    """
    scheme = model.cfg.row("position")
    fixed_table = scheme.adds_embedding and not scheme.table_param_terms  # added, never trained
    if fixed_table and not model.cfg.scale_embeddings:
        with torch.no_grad():
            model.embed.weight.normal_(0.0, 0.02 * math.sqrt(model.cfg.d_model))


def start_routers_at_zero(model: Transformer) -> None:
    """Zero every MoE router, so every token starts on the same experts.

    A random router ties each token to experts by chance from the first step, and
    the split stays a split by token. From zero, the tokens that gain nothing from
    the experts everyone trains (letters in the mixed task) move off to the unused
    ones, so routing splits on what the task needs.
    """
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, MoE):
                module.router.weight.zero_()


def learning_rate(step: int, steps: int, peak: float, warmup: int, floor: float = 0.1) -> float:
    """Linear warmup to `peak` over `warmup` steps, then a cosine down to floor * peak at the last step."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup - 1)  # 0 -> 1
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))))


def task_loss(model: Transformer, task: Task, batch) -> tuple[torch.Tensor, torch.Tensor]:
    """(cross-entropy on the answer positions, logits)."""
    logits = model(*batch.model_args())  # (B, T, vocab)
    mask = batch.loss_mask
    return F.cross_entropy(logits[mask].float(), batch.targets[mask]), logits


def train(cfg_or_preset: str | TransformerConfig, task: str | Task, steps: int, *, batch_size: int = 64,
          lr: float = 3e-3, warmup: int | None = None, weight_decay: float = 0.01, aux_loss_weight: float = 0.01,
          grad_clip: float = 1.0, seed: int = 0, device: torch.device | str | None = None,
          callback: Callback | None = None, callback_every: int = 10, should_stop: Callable[[], bool] | None = None,
          progress: bool = True, state_path: str | Path | None = None, save_every_s: float = 180.0,
          start_from: Transformer | None = None, learning: str | None = None) -> tuple[Transformer, list[dict]]:
    """Train a fresh model on `task` for `steps` steps; returns (model in eval mode, history).

    A continued run starts from `start_from`'s weights instead (every weight of the new model that it has, by
    name; the rest, such as an indexer it lacks, keep their seeded start), and with `learning` set only the
    weights whose names contain it learn: DeepSeek-V3.2's indexer warm-up trains ".indexer." alone.

    history holds one dict per step: step, loss, accuracy (on that batch's answer
    positions), lr, aux_loss (MoE load balancing, 0 otherwise), seconds since the start and the
    processor seconds this process spent (the honest figure when other work shares the cores).
    callback(step, metrics, model) runs every `callback_every` steps and after the last;
    should_stop() is asked before each step, and True ends training there.

    With `state_path`, a long run survives being stopped: the model, the optimizer, the data
    generator and the history are saved there every `save_every_s` seconds and at the end, and a
    run started with an existing state file goes on from it (same result as one unbroken run);
    history's seconds count the time of every part.
    """
    if steps < 1:
        raise ValueError(f"steps={steps} must be at least 1")
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size} must be at least 1")
    cfg = config_for(cfg_or_preset, task)
    task = task_for(cfg, task)
    device = torch.device(device) if device is not None else default_device()
    warmup = max(1, steps // 10) if warmup is None else warmup
    data = torch.Generator().manual_seed(seed)  # batches come from their own generator
    history: list[dict] = []
    # fork_rng: seed weights (and dropout) without disturbing the caller's random state
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        model = Transformer(cfg, device=device).train()
        if start_from is None:
            scale_embeddings_for_sinusoidal(model)
            start_routers_at_zero(model)
        else:
            _start_from(model, start_from)
        learned = [w for name, w in model.named_parameters() if learning is None or learning in name]
        if not learned:
            raise ValueError(f"no weight's name contains learning={learning!r}; name part of one, such as '.indexer.'")
        for w in set(model.parameters()) - set(learned):
            w.requires_grad_(False)
        optimizer = torch.optim.AdamW(learned, lr=lr, weight_decay=weight_decay, betas=(0.9, 0.98))
        first_step, earlier_seconds, earlier_cpu = 0, 0.0, 0.0
        if state_path is not None and Path(state_path).exists():
            history = _resume(state_path, model, optimizer, data)
            if history:  # a part that recorded no processor time counts its wall time
                first_step, earlier_seconds = len(history), history[-1]["seconds"]
                earlier_cpu = history[-1].get("cpu_seconds", earlier_seconds)
        start = time.perf_counter() - earlier_seconds
        cpu_start = time.process_time() - earlier_cpu
        last_save = time.perf_counter()
        bar = tqdm(range(first_step, steps), desc=f"{task.name}", disable=not progress, leave=False)
        for step in bar:
            if should_stop is not None and should_stop():
                break
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(step, steps, lr, warmup)
            batch = task.at(step / steps).sample(batch_size, generator=data).to(device)  # a curriculum may change it
            loss, logits = task_loss(model, task, batch)
            aux = model.aux_loss  # MoE: keeps the experts evenly loaded
            index = model.indexer_loss  # reaches the indexers' weights alone, so it needs no weight of its own
            optimizer.zero_grad(set_to_none=True)
            (loss + aux_loss_weight * aux + index).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            optimizer.step()
            metrics = {"step": step, "loss": loss.item(), "accuracy": task.accuracy(logits.detach(), batch),
                       "lr": optimizer.param_groups[0]["lr"], "aux_loss": aux.item(),
                       "indexer_loss": index.item(), "seconds": time.perf_counter() - start,
                       "cpu_seconds": time.process_time() - cpu_start}
            history.append(metrics)
            if step % 10 == 0:
                bar.set_postfix(loss=f"{metrics['loss']:.3f}", acc=f"{metrics['accuracy']:.2f}")
            if callback is not None and (step % callback_every == 0 or step == steps - 1):
                callback(step, metrics, model)
            if state_path is not None and (time.perf_counter() - last_save > save_every_s or step == steps - 1):
                _save_state(state_path, model, optimizer, data, history)
                last_save = time.perf_counter()
        bar.close()
    model.requires_grad_(True)  # weights a warm-up held still learn again wherever the model goes next
    return model.eval(), history


def _start_from(model: Transformer, trained: Transformer) -> None:
    """Copy every weight `trained` has into `model`; a name only `model` has keeps its start, a shape that differs
    is an error (the two must be the same model but for what is added)."""
    own = model.state_dict()
    theirs = {name: w for name, w in trained.state_dict().items() if name in own}
    wrong = [f"{name} {tuple(w.shape)} vs {tuple(own[name].shape)}" for name, w in theirs.items()
             if w.shape != own[name].shape]
    if wrong:
        raise ValueError(f"start_from's weights do not fit this config: {'; '.join(wrong[:3])}; start from a model "
                         f"of the same sizes")
    model.load_state_dict(theirs, strict=False)


def _save_state(path: str | Path, model: Transformer, optimizer: torch.optim.Optimizer, data: torch.Generator,
                history: list[dict]) -> None:
    """Everything a stopped run needs to go on, written to a temporary file and then renamed (never half-written)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "data": data.get_state(),
                "history": history}, partial)
    partial.replace(path)


def _resume(path: str | Path, model: Transformer, optimizer: torch.optim.Optimizer, data: torch.Generator) -> list[dict]:
    state = torch.load(path, map_location=model.device, weights_only=False)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    data.set_state(state["data"])
    return state["history"]


@torch.no_grad()
def evaluate(model: Transformer, task: str | Task, n_batches: int = 8, batch_size: int = 128, seed: int = 12345) -> float:
    """Accuracy on answer positions over fresh batches (a seed the training loop does not use by default);
    for the language task, on held-out topics (next character, or masked characters for an encoder)."""
    task = get_task(task)
    if task.name == "language" and task.tokenizer.row.learned:  # next learned token, windows counted in tokens
        return per_character.held_out_accuracy(model, task.tokenizer, task.corpus, context=task.context)
    if task.name == "language":
        return language.held_out_accuracy(model, corpus=task.corpus)
    data = torch.Generator().manual_seed(seed)
    correct = total = 0
    for _ in range(n_batches):
        batch = task.sample(batch_size, generator=data).to(model.device)
        logits = model(*batch.model_args())
        hits = (logits.argmax(-1) == batch.targets)[batch.loss_mask]
        correct, total = correct + int(hits.sum()), total + hits.numel()
    return correct / total


def describe(model: Transformer, task: str | Task, history: list[dict], settings: dict) -> dict:
    """The JSON a trained checkpoint carries: its task, accuracy, how it was trained, and for the
    language task its held-out figures and the text it was trained on."""
    task = task_for(model.cfg, task)
    meta = {"task": task.name, "accuracy": round(evaluate(model, task), 4),
            "trained_tokens": task.max_tokens,  # the longest sequence it trained on, <bos> included
            "parameters": sum(p.numel() for p in model.parameters()),
            "training": {"steps": len(history), **settings, "schedule": "AdamW, linear warmup (10%) then cosine",
                         "seconds": round(history[-1]["seconds"], 1),
                         "cpu_seconds": round(history[-1].get("cpu_seconds", history[-1]["seconds"]), 1),
                         "final_loss": round(history[-1]["loss"], 4)}}
    if task.name == "language":
        rows = ({"mask_rate": task.mask_rate} if task.masked else
                {"repeat_rate": task.repeat_rate, "repeat_lengths": task.repeat_lengths,
                 "random_spans": task.random_spans, "induction_warmup": task.induction_warmup})
        meta["corpus"] = {**language.corpus_description(task.corpus), **rows, "context": task.context,
                          "curriculum": task.describe_curriculum()}
        if task.docstrings:
            meta["corpus"]["also"] = ("the docstrings of the standard library's public modules, classes and functions "
                                      f"({len(language.docstrings())} of them, {len(language.train_ids(True))} "
                                      "training characters in all with the topics)")
        meta["tokenizer"] = task.tokenizer.describe()
        learned = task.tokenizer.row.learned  # a BPE model's figures: per character, windows counted in tokens
        meta["figures"] = (per_character.measure(model, task.tokenizer, task.corpus, task.context) if learned
                           else language.measure(model, context=task.context, corpus=task.corpus))
    return meta


def trained_length(meta: dict) -> int | None:
    """The longest sequence a checkpoint trained on, <bos> included: what its JSON records
    (``checkpoint.trained_tokens``), else its task's longest sequence (files that record nothing, such as the Train
    page's); None when neither says."""
    recorded = checkpoint.trained_tokens(meta)
    task = TASKS.get(meta.get("task"))
    if recorded is not None or task is None or "config" not in meta:
        return recorded
    return task.for_arch(meta["config"]["arch"]).max_tokens


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m transformer.training.train", description=__doc__.splitlines()[0])
    parser.add_argument("--preset", required=True, choices=list(MODEL_CARDS))
    parser.add_argument("--task", required=True, choices=list(TASKS))
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--out", required=True, help="checkpoint path; writes PATH.safetensors and PATH.json")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--induction-warmup", action="store_true",
                        help="language task: start on repeated spans only, the curriculum that grows induction heads")
    parser.add_argument("--docstrings", action="store_true",
                        help="language task: train on the standard library's docstrings too (the held-out split stays)")
    parser.add_argument("--context", type=int, default=None,
                        help="language task: crop length in characters after any warm-up (default 256; 512 with "
                             "--induction-warmup)")
    parser.add_argument("--repeat-rate", type=float, default=None,
                        help="language task: share of rows (after any warm-up) that repeat a span of text "
                             "(default 0.25; 0.5 with --induction-warmup)")
    parser.add_argument("--corpus", choices=list(language.CORPORA), default=None,
                        help="language task: the text it reads (english: WordNet's everyday English, needs Debian's "
                             "wordnet-base; python-docs: the Python documentation inside CPython, the default)")
    parser.add_argument("--resume", default=None, metavar="STATE",
                        help="save the run's state here every few minutes and, if the file exists, go on from it")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when there is a GPU)")
    parser.add_argument("--threads", type=int, default=1,
                        help="CPU threads for this process (default 1: models this small gain nothing from more, "
                             "and on a shared machine extra threads spin against other work)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)  # a command-line run owns its process; train() itself never does this

    language_settings = (args.induction_warmup or args.docstrings or args.context is not None
                         or args.repeat_rate is not None or args.corpus is not None)
    if language_settings and args.task != "language":
        parser.error("--induction-warmup, --docstrings, --context, --repeat-rate and --corpus are settings of the "
                     "language task")
    if args.context is not None and args.context < 1:
        parser.error(f"--context {args.context}: the crop length must be at least 1 character (try 256 or 512)")
    if args.repeat_rate is not None and not 0 <= args.repeat_rate <= 1:
        parser.error(f"--repeat-rate {args.repeat_rate}: a share of rows, between 0 and 1 (try 0.25)")
    settings = {name: value for name, value in (("context", args.context), ("repeat_rate", args.repeat_rate),
                                                ("corpus", args.corpus)) if value is not None}
    task = (Language(induction_warmup=args.induction_warmup, docstrings=args.docstrings, **settings)
            if language_settings else args.task)
    model, history = train(args.preset, task, args.steps, batch_size=args.batch_size, lr=args.lr,
                           seed=args.seed, device=args.device, state_path=args.resume)
    meta = describe(model, task, history, {"batch_size": args.batch_size, "lr": args.lr, "seed": args.seed,
                                           "threads": args.threads})
    meta["preset"] = args.preset
    paths = checkpoint.save(model, args.out, meta)
    print(f"accuracy {meta['accuracy']:.3f} on fresh samples after {len(history)} steps "
          f"({history[-1]['seconds']:.1f} s); wrote {paths[0]} and {paths[1]}")
    if "figures" in meta:
        print(json.dumps(meta["figures"]))


if __name__ == "__main__":
    main()
