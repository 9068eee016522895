"""Before attention: a GRU encoder-decoder that squeezes the source into one vector, and the same
model with additive (Bahdanau) attention over every encoder state.

The encoder reads the source one letter at a time and leaves one state per letter. Without
attention the decoder sees only the last of them: one fixed vector of d_hidden numbers for the whole
sentence (Cho et al. 2014; Sutskever et al. 2014). With attention, every output step scores every
encoder state, softmaxes the scores and reads their weighted mix (Bahdanau, Cho and Bengio 2015):

    score(s_t, h_i) = v · tanh(W s_t + U h_i)      additive: a one-layer network, not a dot product
    weights_t       = softmax_i(score(s_t, h_i))
    context_t       = sum_i weights_t,i h_i

Both models are the same in every other way: one token embedding, torch's own nn.GRU for the
encoder and the decoder, and an output layer reading [decoder state ; context], where the context
of the bottleneck model is the encoder's last state at every step. The score is Bahdanau's; the
context is read after the decoder's step (the placement of Luong et al. 2015), so a whole target
runs through nn.GRU in one call when training.

    model, report = train_seq2seq(Seq2SeqConfig(task="copy", context="attention"))   # seconds on one thread
    save(model, "assets/checkpoints/gru-copy-attention", report)
    model, meta = load("assets/checkpoints/gru-copy-attention")     # transformer.checkpoint.load reads it too
    letters, weights = model.translate("attention")                  # greedy; weights (T_out, S)

    python -m transformer.rnn        # trains the two shipped models into assets/checkpoints (seconds each)
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

import torch
import torch.nn.functional as F
from torch import nn

from . import checkpoint_format
from .checkpoint_format import CheckpointError, checkpoint_paths
from .training.tasks import LETTERS, SequenceToSequence, get_task

Context = Literal["bottleneck", "attention"]
TaskName = Literal["copy", "reverse"]
SEQ2SEQ_KEY = "seq2seq"  # the JSON entry that marks a GRU checkpoint (transformer.checkpoint.load reads it)


@dataclass(frozen=True)
class Seq2SeqConfig:
    task: TaskName = "copy"  # transformer.training.tasks: write the source again, or backwards
    context: Context = "attention"  # "bottleneck": the encoder's last state only; "attention": all of them
    d_embed: int = 16
    d_hidden: int = 32  # the size of the one fixed vector the bottleneck model must fit a sentence into
    max_letters: int = 24  # the longest source it trains on; longer ones are refused

    def __post_init__(self) -> None:
        for field, literal in (("task", TaskName), ("context", Context)):
            if getattr(self, field) not in get_args(literal):
                raise ValueError(f"{field}={getattr(self, field)!r} is not a valid choice; choose one of "
                                 f"{', '.join(map(repr, get_args(literal)))}")
        for field in ("d_embed", "d_hidden", "max_letters"):
            if getattr(self, field) < 1:
                raise ValueError(f"{field}={getattr(self, field)} must be at least 1")

    @property
    def source_task(self) -> SequenceToSequence:
        return get_task(self.task)

    @property
    def vocab_size(self) -> int:
        return len(self.source_task.vocab)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


class AdditiveAttention(nn.Module):
    """score(s, h) = v · tanh(W s + U h): every decoder state against every encoder state."""

    def __init__(self, d_hidden: int):
        super().__init__()
        self.W = nn.Linear(d_hidden, d_hidden, bias=False)  # the decoder state's side
        self.U = nn.Linear(d_hidden, d_hidden)  # the encoder state's side (with the bias b)
        self.v = nn.Linear(d_hidden, 1, bias=False)

    def forward(self, queries: torch.Tensor, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """queries (B, T, h), states (B, S, h) -> context (B, T, h), weights (B, T, S)."""
        mixed = torch.tanh(self.W(queries)[:, :, None] + self.U(states)[:, None])  # (B, T, S, h)
        scores = self.v(mixed).squeeze(-1)  # (B, T, S)
        weights = scores.softmax(dim=-1)  # (B, T, S): each output step's weights sum to 1
        return weights @ states, weights  # (B, T, h), (B, T, S)


class GRUSeq2Seq(nn.Module):
    """embed -> GRU encoder -> GRU decoder -> [state ; context] -> letters."""

    def __init__(self, cfg: Seq2SeqConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_embed)  # shared by source and target, as in the transformer
        self.encoder = nn.GRU(cfg.d_embed, cfg.d_hidden, batch_first=True)
        self.decoder = nn.GRU(cfg.d_embed, cfg.d_hidden, batch_first=True)
        if cfg.context == "attention":
            self.attention = AdditiveAttention(cfg.d_hidden)
        self.out = nn.Linear(2 * cfg.d_hidden, cfg.vocab_size)

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, S) -> every encoder state (B, S, h) and the last one (1, B, h)."""
        states, last = self.encoder(self.embed(src))  # (B, S, h), (1, B, h)
        return states, last

    def decode(self, tgt_in: torch.Tensor, states: torch.Tensor, hidden: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Target tokens so far (B, T) -> logits (B, T, V), the decoder's last state, attention weights (B, T, S)."""
        outputs, hidden = self.decoder(self.embed(tgt_in), hidden)  # (B, T, h)
        if self.cfg.context == "attention":
            context, weights = self.attention(outputs, states)  # (B, T, h), (B, T, S)
        else:  # the one fixed vector: the encoder's last state, the same at every step
            context, weights = states[:, -1:].expand_as(outputs), None  # (B, T, h)
        return self.out(torch.cat((outputs, context), dim=-1)), hidden, weights  # (B, T, V)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: logits (B, T, V) for every target position at once."""
        states, last = self.encode(src)
        logits, _, _ = self.decode(tgt_in, states, last)
        return logits

    @torch.no_grad()
    def generate(self, src: torch.Tensor, n_letters: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Greedy decoding of n_letters letters: (B, n_letters) ids, and the weights (B, n_letters, S) or None
        without attention."""
        states, hidden = self.encode(src)
        token = torch.full((src.shape[0], 1), self.cfg.source_task.token_id("<bos>"), dtype=torch.long)
        letters, weights = [], []
        for _ in range(n_letters):
            logits, hidden, step_weights = self.decode(token, states, hidden)  # (B, 1, V)
            token = logits[:, -1:].argmax(-1)  # (B, 1)
            letters.append(token)
            weights.append(step_weights)
        return torch.cat(letters, dim=1), None if weights[0] is None else torch.cat(weights, dim=1)

    def encode_text(self, text: str) -> torch.Tensor:
        """(1, S) source ids of a typed text; a clear ValueError for unknown characters or a text too long."""
        if len(text) > self.cfg.max_letters:
            raise ValueError(f"the text has {len(text)} letters, but this model trained on at most "
                             f"{self.cfg.max_letters}; shorten it to {self.cfg.max_letters} letters or fewer")
        return torch.tensor([self.cfg.source_task.encode(text)])

    def translate(self, text: str) -> tuple[str, torch.Tensor | None]:
        """The model's answer for a typed text (as long as the text) and its weights (T_out, S), or None."""
        ids, weights = self.generate(self.encode_text(text), len(text))
        answer = "".join(self.cfg.source_task.decode(ids[0]))
        return answer, None if weights is None else weights[0]


# --- recurrent, convolutional and self-attention layers side by side --------------------------------


def layer_comparison(T: int, D: int, kernel: int = 3) -> list[dict]:
    """Vaswani et al. 2017, Table 1, with the numbers for T tokens of D dimensions: multiply-adds per layer,
    steps that must run one after another, and the most layers a signal needs between two tokens.

    A recurrent layer runs T steps, each a D x D matrix; a convolution reads `kernel` neighbours in
    parallel but needs ceil((T - 1) / (kernel - 1)) stacked layers to connect the first token to the last;
    self-attention connects every pair in one layer, for T x T scores of D multiply-adds each.
    """
    for name, value, least in (("T", T, 1), ("D", D, 1), ("kernel", kernel, 2)):
        if int(value) < least:
            raise ValueError(f"{name}={value} must be at least {least}")
    return [
        {"layer": "recurrent (RNN, GRU)", "per layer": "T·D²", "multiply-adds": T * D * D,
         "sequential steps": T, "path length": T - 1},
        {"layer": f"convolution, kernel {kernel}", "per layer": "k·T·D²", "multiply-adds": kernel * T * D * D,
         "sequential steps": 1, "path length": -(-(T - 1) // (kernel - 1))},
        {"layer": "self-attention", "per layer": "T²·D", "multiply-adds": T * T * D, "sequential steps": 1,
         "path length": 1 if T > 1 else 0},
    ]


# --- data and training --------------------------------------------------------------------------


def letters_batch(task: SequenceToSequence, batch_size: int, n_letters: int, generator: torch.Generator
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(src (B, n + 1) with <eos>, tgt_in (B, n) starting with <bos>, tgt_out (B, n)) of random letters,
    copied or reversed as the task's source_index says."""
    first = task.token_id(LETTERS[0])
    letters = torch.randint(len(LETTERS), (batch_size, n_letters), generator=generator) + first  # (B, n)
    src = torch.cat((letters, torch.full((batch_size, 1), task.token_id("<eos>"))), dim=1)  # (B, n + 1)
    tgt_out = letters[:, task.source_index(n_letters)]  # (B, n)
    bos = torch.full((batch_size, 1), task.token_id("<bos>"))
    return src, torch.cat((bos, tgt_out[:, :-1]), dim=1), tgt_out


@dataclass(frozen=True)
class TrainSettings:
    steps: int = 1500
    batch_size: int = 64
    lr: float = 1e-2
    seed: int = 0


def train_seq2seq(cfg: Seq2SeqConfig, settings: TrainSettings = TrainSettings()) -> tuple[GRUSeq2Seq, dict]:
    """Train on random letter strings of 1 .. max_letters letters (each batch one length, so no padding);
    returns (model in eval mode, report with the accuracy at every length)."""
    task = cfg.source_task
    data = torch.Generator().manual_seed(settings.seed)
    with torch.random.fork_rng():  # seed the weights without disturbing the caller's random state
        torch.manual_seed(settings.seed)
        model = GRUSeq2Seq(cfg).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, settings.lr, total_steps=settings.steps, pct_start=0.1)
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(settings.steps):
        n_letters = int(torch.randint(1, cfg.max_letters + 1, (), generator=data))
        src, tgt_in, tgt_out = letters_batch(task, settings.batch_size, n_letters, data)
        logits = model(src, tgt_in)  # (B, n, V)
        loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
    report = {"training": dataclasses.asdict(settings), "train_seconds": round(time.perf_counter() - start, 1),
              "train_cpu_seconds": round(time.process_time() - cpu_start, 1), "final_loss": round(loss.item(), 4),
              "parameters": sum(p.numel() for p in model.parameters()),
              "accuracy_by_length": accuracy_by_length(model.eval())}
    return model, report


@torch.no_grad()
def accuracy_by_length(model: GRUSeq2Seq, n_samples: int = 256, seed: int = 12345) -> dict[str, float]:
    """{n: share of output letters right} for every source length 1 .. max_letters, greedy decoding on
    fresh strings (a seed training does not use)."""
    data = torch.Generator().manual_seed(seed)
    accuracy = {}
    for n in range(1, model.cfg.max_letters + 1):
        src, _, tgt_out = letters_batch(model.cfg.source_task, n_samples, n, data)
        letters, _ = model.generate(src, n)
        accuracy[str(n)] = round(float((letters == tgt_out).float().mean()), 4)
    return accuracy


# --- checkpoints: the library's safetensors + JSON, with the GRU's own config ------------------------------


def save(model: GRUSeq2Seq, path: str | Path, meta: dict | None = None) -> tuple[Path, Path]:
    """PATH.safetensors + PATH.json; the JSON's "seq2seq" entry marks a GRU, its "config" is the Seq2SeqConfig."""
    return checkpoint_format.save(model, path, {**(meta or {}), SEQ2SEQ_KEY: "gru", "task": model.cfg.task})


def load(path: str | Path, device: torch.device | str | None = None) -> tuple[GRUSeq2Seq, dict]:
    """(model in eval mode, meta); a missing, damaged or mismatched file raises CheckpointError naming it."""
    document = checkpoint_format.read_document(path)
    _, json_path = checkpoint_paths(path)
    if SEQ2SEQ_KEY not in document:
        raise CheckpointError(f"{json_path}: has no \"{SEQ2SEQ_KEY}\" entry; it is not a GRU checkpoint "
                              "(open it with transformer.checkpoint.load)")
    try:
        cfg = Seq2SeqConfig(**document["config"])
    except KeyError:
        raise CheckpointError(f"{json_path}: has no \"config\" entry") from None
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{json_path}: its config is not a valid Seq2SeqConfig: {error}") from None
    return checkpoint_format.load_weights(GRUSeq2Seq(cfg).to(device or "cpu"), path), document


# the shipped pair: copying, where the bottleneck fails clearly and attention learns the diagonal in seconds
SHIPPED = {f"gru-copy-{context}": Seq2SeqConfig(task="copy", context=context) for context in get_args(Context)}


def shipped_path(context: str) -> Path:
    """Where the shipped copy model with this context ("bottleneck" or "attention") lives."""
    return checkpoint_format.SHIPPED_DIR / f"gru-copy-{context}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Train the GRU encoder-decoders, with and without attention.")
    parser.add_argument("--out", default=str(checkpoint_format.SHIPPED_DIR), help="directory for the checkpoints")
    parser.add_argument("--only", choices=list(SHIPPED), help="train one of them")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # the seconds in the checkpoints' JSON are for one thread
    for name, cfg in SHIPPED.items():
        if args.only in (None, name):
            model, report = train_seq2seq(cfg)
            save(model, Path(args.out) / name, report)
            print(name, json.dumps({k: report[k] for k in ("train_seconds", "train_cpu_seconds", "parameters")}),
                  report["accuracy_by_length"])


if __name__ == "__main__":
    main()
