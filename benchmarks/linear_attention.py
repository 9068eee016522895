"""Layers that keep a state: Gated DeltaNet against Hugging Face, generation per token, a trace of states.

    python -m benchmarks.linear_attention [--smoke] [--threads N] [--repeats 7] [--only 1,2,3]

Three tables, each measured side by side in one run (float32, on the CPU):

1. Gated DeltaNet forward, chunked, against Hugging Face's PyTorch implementation on the same weights: a small
   random Qwen3NextForCausalLM built from a config (3 Gated DeltaNet layers : 1 full-attention layer, dense MLPs),
   loaded into ours with from_hf. Rows: the whole model's forward / HF's, and one linear layer alone / HF's
   Qwen3NextGatedDeltaNet (its torch fallbacks: torch_chunk_gated_delta_rule and the reference causal conv1d,
   as on any machine without flash-linear-attention and causal-conv1d); target <= 1.0. Then our chunked form / our
   recurrent one (token by token) on the same layer and input: how much the chunks buy.
2. Generation per token from 256 to 8k tokens of context: a pure Gated DeltaNet model, a 3:1 hybrid and a
   full-attention model of the same sizes. At each context length each model reads the prompt once (prefill),
   then one cached step at a time is timed, the three models alternating in one loop; ms per new token and
   the cache's bytes. Linear layers keep a state of fixed size, so their step is flat; full attention reads
   every past key, so its step grows with the context.
3. A trace that records the states of one layer after every token (hook_state asked for by its exact name):
   the bytes the trace holds against B * H * T * d_k * d_v * 4, and the error a cap (max_bytes) too small gives.

How it times: benchmarks.run.interleaved (a warm-up call, then rounds alternating the sides, each side's
median), so a busy neighbour slows both alike: read the ratios, not the absolute times. On a machine whose cores
other work shares, use --threads 1: two threads on two busy cores made the same forward 10-20 times slower from
one round to the next (docs/benchmarks.md).
--smoke runs the same code at tiny sizes with one repeat: its numbers mean nothing, it only proves it runs.
"""
from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from dataclasses import dataclass

import torch

from benchmarks.run import interleaved
from transformer import KVCache, Transformer, TransformerConfig
from transformer.linear_attention import StateInputs

MiB = 2 ** 20


@dataclass(frozen=True)
class Sizes:
    d_model: int
    n_layers: int  # a multiple of 4: 3 linear : 1 full
    heads: int  # full attention's heads (d_head = d_model / heads), and a linear layer's value heads
    key_heads: int  # a linear layer's q/k heads
    d_state: int  # d_k = d_v of a linear layer
    d_ff: int
    vocab: int
    forward_lengths: tuple[int, ...]
    contexts: tuple[int, ...]
    trace_lengths: tuple[int, ...]
    repeats: int
    steps: int  # cached steps timed per model and context
    budget_s: float  # per timing loop: past it, a loop stops after the round it is in (at least one)


FULL = Sizes(d_model=256, n_layers=4, heads=4, key_heads=2, d_state=64, d_ff=512, vocab=1000,
             forward_lengths=(512, 1024, 2048), contexts=(256, 1024, 2048, 4096, 8192), trace_lengths=(128, 512, 1024),
             repeats=7, steps=10, budget_s=30.0)
SMOKE = Sizes(d_model=32, n_layers=4, heads=2, key_heads=1, d_state=8, d_ff=64, vocab=50,
              forward_lengths=(20,), contexts=(8, 24), trace_lengths=(6,), repeats=1, steps=1, budget_s=5.0)


def progress(line: str) -> None:
    """Each row as it is measured, on stderr (a long run shows where it is; the tables come on stdout)."""
    print(line, file=sys.stderr, flush=True)


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


# --- 1. Gated DeltaNet against Hugging Face's PyTorch implementation ------------------------------------------------

def qwen3_next(s: Sizes):
    """A random Qwen3-Next (3:1, dense SwiGLU MLPs) and ours with its weights."""
    import transformers as tf

    from transformer.interop.huggingface import from_hf

    torch.manual_seed(0)
    config = tf.Qwen3NextConfig(
        vocab_size=s.vocab, hidden_size=s.d_model, num_hidden_layers=s.n_layers, num_attention_heads=s.heads,
        num_key_value_heads=s.heads // 2, head_dim=s.d_model // s.heads, intermediate_size=s.d_ff,
        linear_num_key_heads=s.key_heads, linear_num_value_heads=s.heads, linear_key_head_dim=s.d_state,
        linear_value_head_dim=s.d_state, linear_conv_kernel_dim=4,
        # every layer's MLP dense (mlp_only_layers): the linear layers are what is measured, not the routing
        num_experts=2, num_experts_per_tok=1, moe_intermediate_size=s.d_ff, shared_expert_intermediate_size=s.d_ff,
        mlp_only_layers=list(range(s.n_layers)), max_position_embeddings=max(s.forward_lengths))
    hf = tf.Qwen3NextForCausalLM(config).eval()
    return hf, from_hf(hf).eval()


def forward_rows(s: Sizes) -> list[dict]:
    hf, ours = qwen3_next(s)
    index = next(spec.index for spec in ours.cfg.layer_plan() if spec.row.keeps_state)  # the first linear layer
    layer, hf_layer = ours.blocks[index].attn, hf.model.layers[index].linear_attn
    plain = StateInputs(None)
    rows = []
    for T in s.forward_lengths:
        ids = torch.randint(0, s.vocab, (1, T), generator=torch.Generator().manual_seed(T))
        x = torch.randn(1, T, s.d_model, generator=torch.Generator().manual_seed(T + 1))
        with torch.no_grad():
            model_diff = (ours(ids) - hf(ids).logits).abs().max().item()
            layer_diff = (layer(x, plain) - hf_layer(x)).abs().max().item()
        model = interleaved({"ours": lambda: ours(ids), "hf": lambda: hf(ids)}, s.repeats, s.budget_s)
        one = interleaved({"ours": lambda: layer(x, plain), "hf": lambda: hf_layer(x)}, s.repeats, s.budget_s)

        def recurrent():
            layer.fused = False
            try:
                layer(x, plain)
            finally:
                layer.fused = True

        forms = interleaved({"chunked": lambda: layer(x, plain), "recurrent": recurrent}, s.repeats, s.budget_s)
        for what, samples, a, b, diff in (
                (f"Qwen3-Next forward ({s.n_layers} layers 3:1): ours / HF", model, "ours", "hf", model_diff),
                ("one Gated DeltaNet layer: ours / HF Qwen3NextGatedDeltaNet (torch)", one, "ours", "hf", layer_diff),
                ("one Gated DeltaNet layer: our chunked / our recurrent", forms, "chunked", "recurrent", None)):
            ours_ms, ref_ms = median_ms(samples[a]), median_ms(samples[b])
            rows.append(dict(what=what, T=T, ours_ms=ours_ms, ref_ms=ref_ms, ratio=ours_ms / ref_ms,
                             rounds=len(samples[a]), diff=diff))
            progress(f"{what}, T {T}: {ours_ms:.1f} / {ref_ms:.1f} ms = {ours_ms / ref_ms:.2f}x")
    return rows


# --- 2. generation per token as the context grows --------------------------------------------------------------------

KINDS = {"Gated DeltaNet": "gated-deltanet", "3:1 hybrid": "3:1", "full attention": "softmax"}


def generation_model(s: Sizes, layers: str) -> Transformer:
    torch.manual_seed(0)
    position = "none" if layers == "gated-deltanet" else "rope"  # a model with no softmax layer has no RoPE to turn
    linear = {} if layers == "softmax" else dict(linear_key_heads=s.key_heads, linear_value_heads=s.heads,
                                                 linear_key_head_dim=s.d_state, linear_value_head_dim=s.d_state)
    return Transformer(TransformerConfig(
        vocab_size=s.vocab, d_model=s.d_model, n_heads=s.heads, n_layers=s.n_layers, d_ff=s.d_ff,
        max_len=max(s.contexts) + s.steps + 2, position=position, norm="rmsnorm", ffn="swiglu",
        attention_layers=layers, **linear), device="cpu").eval()


def generation_rows(s: Sizes) -> list[dict]:
    models = {name: generation_model(s, layers) for name, layers in KINDS.items()}
    rows = []
    for n in s.contexts:
        prompt = torch.randint(0, s.vocab, (1, n), generator=torch.Generator().manual_seed(n))
        steps, prefill_ms = {}, {}
        for name, model in models.items():
            cache = KVCache()
            start = time.perf_counter()
            with torch.no_grad():
                model(prompt, cache=cache)  # prefill, once
            prefill_ms[name] = (time.perf_counter() - start) * 1e3
            token, where = prompt[:, -1:], [n]

            def step(model=model, cache=cache, token=token, where=where):
                model(token, position_ids=torch.tensor([[where[0]]]), cache=cache)  # one new token, the past cached
                where[0] += 1

            steps[name] = (step, cache)
        samples = interleaved({name: fn for name, (fn, _) in steps.items()}, s.steps, s.budget_s)
        for name, (_, cache) in steps.items():
            rows.append(dict(model=name, context=n, ms=median_ms(samples[name]), prefill_ms=prefill_ms[name],
                             cache_bytes=cache.nbytes, rounds=len(samples[name])))
            progress(f"{name}, context {n}: {rows[-1]['ms']:.2f} ms a token (prefill {prefill_ms[name]:.0f} ms)")
    first = {r["model"]: r["ms"] for r in rows if r["context"] == s.contexts[0]}
    for r in rows:
        r["growth"] = r["ms"] / first[r["model"]]  # this context's step / the shortest context's
    return rows


# --- 3. a trace of states against its cap ------------------------------------------------------------------------------

def trace_rows(s: Sizes) -> tuple[list[dict], str]:
    model = generation_model(s, "gated-deltanet")
    layer = model.blocks[0].attn
    name = layer.hook_state.name
    B, H, d_k, d_v = 1, layer.n_heads, layer.d_k, layer.d_v
    rows = []
    for T in s.trace_lengths:
        ids = torch.randint(0, s.vocab, (B, T), generator=torch.Generator().manual_seed(T))
        formula = B * H * T * d_k * d_v * 4
        start = time.perf_counter()
        _, trace = model.run_with_trace(ids, names=[name], max_bytes=2 * formula)
        ms = (time.perf_counter() - start) * 1e3
        plain = interleaved({"plain": lambda: model(ids)}, 1, s.budget_s)["plain"]
        rows.append(dict(T=T, held=trace.nbytes, formula=formula, cap=2 * formula, names=trace.names(),
                         shape=tuple(trace[name].shape), trace_ms=ms, plain_ms=median_ms(plain)))
    T = s.trace_lengths[-1]
    ids = torch.randint(0, s.vocab, (B, T), generator=torch.Generator().manual_seed(T))
    try:
        model.run_with_trace(ids, names=[name], max_bytes=B * T * d_k * d_v * 4)  # one head's worth: too small
        refused = "(no error: the cap held the states)"
    except MemoryError as error:
        refused = str(error)
    return rows, refused


# --- the tables ---------------------------------------------------------------------------------------------------------

def print_forward(rows: list[dict]) -> None:
    print("\n1. Gated DeltaNet forward, chunked, against Hugging Face's PyTorch implementation (same weights)")
    print("| row | T | ours (ms) | reference (ms) | ratio | target | max abs diff | rounds |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        target = "<= 1.0" if "HF" in r["what"] else ""
        met = "" if not target else (" (met)" if r["ratio"] <= 1.0 else " (missed)")
        diff = "" if r["diff"] is None else f"{r['diff']:.1e}"
        print(f"| {r['what']} | {r['T']} | {r['ours_ms']:.1f} | {r['ref_ms']:.1f} | {r['ratio']:.2f}x{met} | "
              f"{target} | {diff} | {r['rounds']} |")


def print_generation(rows: list[dict], s: Sizes) -> None:
    print(f"\n2. Generation, ms per new token after a context of n tokens (cached steps; growth = / the {s.contexts[0]}"
          "-token step)")
    print("| model | " + " | ".join(f"{n}" for n in s.contexts) + " | cache at the longest |")
    print("|---|" + "---|" * len(s.contexts) + "---|")
    for model in KINDS:
        mine = [r for r in rows if r["model"] == model]
        cells = " | ".join(f"{r['ms']:.2f} ({r['growth']:.2f}x)" for r in mine)
        print(f"| {model} | {cells} | {mine[-1]['cache_bytes'] / MiB:.2f} MiB |")


def print_trace(rows: list[dict], refused: str) -> None:
    print("\n3. A trace recording one layer's states (hook_state by exact name) against its cap")
    print("| T | recorded | shape | held (MiB) | B*H*T*d_k*d_v*4 (MiB) | held / formula | cap (MiB) | "
          "trace (ms) | plain forward (ms) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['T']} | {', '.join(r['names'])} | {r['shape']} | {r['held'] / MiB:.2f} | {r['formula'] / MiB:.2f} | "
              f"{r['held'] / r['formula']:.3f} | {r['cap'] / MiB:.2f} | {r['trace_ms']:.1f} | {r['plain_ms']:.1f} |")
    print(f"\nwith a cap of one head's states: MemoryError: {refused}")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for torch (default: torch's choice)")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--only", default="1,2,3", help="which tables, e.g. 1,3")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    s = SMOKE if args.smoke else FULL
    if args.repeats:
        s = Sizes(**{**s.__dict__, "repeats": args.repeats})
    only = set(args.only.split(","))
    print(f"float32 on the CPU ({platform.processor() or platform.machine()}), {torch.get_num_threads()} threads, "
          f"torch {torch.__version__}; d_model {s.d_model}, {s.n_layers} layers, {s.heads} heads, linear layers "
          f"{s.key_heads} q/k heads : {s.heads} value heads, d_k = d_v = {s.d_state}, vocab {s.vocab}")
    results = {}
    if "1" in only:
        results["forward"] = forward_rows(s)
        print_forward(results["forward"])
    if "2" in only:
        results["generation"] = generation_rows(s)
        print_generation(results["generation"], s)
    if "3" in only:
        results["trace"], results["refused"] = trace_rows(s)
        print_trace(results["trace"], results["refused"])
    return results


if __name__ == "__main__":
    main()
