"""Library benchmarks: ours against a reference, timed in the same loop, reported as ratios.

    python -m benchmarks.run [--smoke | --large] [--only ROWS] [--out results.json] [--threads N] [--malloc keep]
                             [--device cuda]

Rows (float32; on the CPU with as many torch threads as the machine gives, or on --device cuda):

    1    our plain forward / Hugging Face LlamaForCausalLM (sdpa), same weights    target <= 1.0
    2    run_with_trace (every hook) / HF eager with attentions + hidden states    target <= 1.0
    2.1  run_with_trace recording only what HF returns / the same HF call         (no target: rows 2 and
         4.2 record about twice what Hugging Face returns; this row records the same)
    3    run_with_trace (every hook) / our own plain forward                       target <= 1.5
    1b-3b  rows 1-3 for LLaMA on an attention-heavy shape: vocab 512, so the output head no
         longer hides the per-layer T x T work
    4.1-4.3  rows 1-3 for GPT-2 (GPT2LMHeadModel), 4.2.1 row 2.1; 4.4 row 1 for Mixtral (MoE)
    5.<kv>.<n>  recomputing / KV-cache generation of n new tokens, MHA, GQA, MQA: the speedup,
         target >= 3 at the middle length (256) and larger still at the longest (512)
    6    achieved GFLOP/s of a GPT-2-small forward / a plain matmul's GFLOP/s      target >= 0.5
    7    peak allocator bytes of a full trace / the bytes the trace holds          target <= 1.5
    8.1-8.3, 9.1-9.3  rows 1-3 for multi-head latent attention (DeepseekV3) and sinks (GptOss)
    Every row that traces every hook (2, 2b, 4.2, 8.2, 9.2) also counts the T x T tensors allocated
    per layer, ours and Hugging Face's (details: square_tensors_per_layer).

How it measures: each timed function runs once to warm up, then `repeats` times in one
loop that alternates ours and the reference (reversing their order every other round),
so a busy neighbour slows both alike; each side's median is reported, every sample is
kept in the JSON. Each loop also has a time budget: on a busy machine it stops after
fewer rounds (at least one) instead of running long, and the JSON says how many it took. --smoke runs the same code at tiny sizes with one repeat (for CI): its
numbers mean nothing, it only proves the benchmark still runs. --large is a GPU's shape (d 1024, 8 layers,
B 8 x T 1024): at the default sizes a GPU waits on kernel launches, not arithmetic. On a GPU every call
is followed by torch.cuda.synchronize() inside its timing, and rows 2's T x T count and 7 read the CUDA
allocator's events and peak.
"""
from __future__ import annotations

import argparse
import copy
import gc
import json
import math
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Callable

import torch

from transformer import KVCache, Transformer, TransformerConfig
from transformer.costs import forward_flops


# --- sizes ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Sizes:
    # rows 1-4 and 7: one model shape for every family
    batch: int
    seq: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_ff: int
    vocab: int
    n_experts: int
    top_k: int
    time_limit_s: float  # the whole run: loops stop early, long generation runs are skipped
    repeats: int
    budget_s: float  # per family
    # row 5: a small LLaMA-style model generating from a short prompt
    gen_d_model: int
    gen_layers: int
    gen_heads: int
    gen_vocab: int
    gen_prompt: int
    gen_lengths: tuple[int, int, int]  # short (reported), target (>= 3x), long (larger than the target's)
    gen_repeats: int
    gen_budget_s: float  # for the longest length; shorter ones get their share
    # row 6: a GPT-2-small-sized forward and a square matmul
    flops_d_model: int
    flops_layers: int
    flops_heads: int
    flops_vocab: int
    flops_seq: int
    matmul_n: int
    flops_repeats: int
    flops_budget_s: float


FULL = Sizes(batch=4, seq=256, d_model=256, n_layers=4, n_heads=8, n_kv_heads=2, d_ff=688, vocab=32000,
             n_experts=4, top_k=2, time_limit_s=510, repeats=7, budget_s=45,
             gen_d_model=256, gen_layers=4, gen_heads=8, gen_vocab=4096, gen_prompt=16, gen_lengths=(64, 256, 512),
             gen_repeats=3, gen_budget_s=45,
             flops_d_model=768, flops_layers=12, flops_heads=12, flops_vocab=50257, flops_seq=512, matmul_n=2048,
             flops_repeats=5, flops_budget_s=30)
# a GPU's shape: rows 1-4 and 7 at d 1024 with 1,024 tokens in each of 8 rows; generation and row 6 GPT-2-small-sized
LARGE = replace(FULL, batch=8, seq=1024, d_model=1024, n_layers=8, n_heads=16, n_kv_heads=4, d_ff=2816,
                time_limit_s=300, repeats=9, budget_s=30, gen_d_model=768, gen_layers=12, gen_heads=12,
                gen_vocab=32000, flops_seq=1024, matmul_n=8192)
# d_ff 48: no tensor but the scores has B x H x T x T numbers (square_tensors counts by size)
SMOKE = Sizes(batch=2, seq=16, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=48, vocab=128,
              n_experts=4, top_k=2, time_limit_s=math.inf, repeats=1, budget_s=10,
              gen_d_model=32, gen_layers=2, gen_heads=8, gen_vocab=128, gen_prompt=4, gen_lengths=(2, 4, 8),
              gen_repeats=1, gen_budget_s=10,
              flops_d_model=32, flops_layers=2, flops_heads=4, flops_vocab=128, flops_seq=16, matmul_n=64,
              flops_repeats=1, flops_budget_s=10)


# --- results ----------------------------------------------------------------------------------

@dataclass
class Row:
    row: str
    what: str
    ours: float
    reference: float
    unit: str  # of ours and reference: "ms", "GFLOP/s", "MiB"
    ratio: float
    target: str  # "<= 1.0", ">= 3", or "" when the row is reported without a target
    met: bool | None
    details: dict = field(default_factory=dict)


def meets(ratio: float, target: str) -> bool | None:
    """Whether `ratio` meets "<= x" or ">= x"; None for a row without a target ("")."""
    if not target:
        return None
    op, bound = target.split()
    return ratio <= float(bound) if op == "<=" else ratio >= float(bound)


def timed_row(row: str, what: str, ours: list[float], reference: list[float], target: str,
              cpu: tuple[list[float], list[float]] | None = None, **details) -> Row:
    """A row whose ratio is median(ours) / median(reference) in seconds (lower is better).

    `cpu`: each side's CPU seconds per call, kept with the ratio of their medians (with one thread on a
    machine others are using, the CPU time a call takes is steadier than its wall time)."""
    ours_s, ref_s = statistics.median(ours), statistics.median(reference)
    ratio = ours_s / ref_s
    if cpu is not None:
        details.update(ours_cpu_samples_s=cpu[0], reference_cpu_samples_s=cpu[1],
                       cpu_ratio_of_medians=statistics.median(cpu[0]) / statistics.median(cpu[1]))
    return Row(row, what, ours_s * 1e3, ref_s * 1e3, "ms", ratio, target, meets(ratio, target),
               dict(ours_samples_s=ours, reference_samples_s=reference,
                    ratio_of_minimums=min(ours) / min(reference),  # noise only adds time: the floor, for a busy machine
                    **details))


# --- timing -----------------------------------------------------------------------------------

def synchronizer(device: torch.device) -> Callable[[], None]:
    """What makes a call's time include its GPU work: the CPU only queues CUDA kernels."""
    return torch.cuda.synchronize if device.type == "cuda" else (lambda: None)


def interleaved(fns: dict[str, Callable[[], object]], repeats: int, budget_s: float,
                warm_up: bool = True, cpu: dict[str, list[float]] | None = None,
                device: torch.device = torch.device("cpu")) -> dict[str, list[float]]:
    """Seconds per call of each function, all timed in one loop, alternating the order each round.

    Stops after `repeats` rounds, or earlier -- after at least one -- once `budget_s` has gone by.
    Given a dict, `cpu` also gets each call's CPU seconds (this process, all its threads).
    """
    names = list(fns)
    samples: dict[str, list[float]] = {name: [] for name in names}
    sync = synchronizer(device)
    with torch.no_grad():
        if warm_up:  # lazy initialisation, allocator pools, caches
            for name in names:
                fns[name]()
            sync()
        gc.collect()
        gc.disable()  # a collection inside one side's timing would be charged to it alone
        started = time.perf_counter()
        try:
            for round_ in range(repeats):
                for name in (names if round_ % 2 == 0 else names[::-1]):
                    start, start_cpu = time.perf_counter(), time.process_time()
                    fns[name]()
                    sync()
                    samples[name].append(time.perf_counter() - start)
                    if cpu is not None:
                        cpu.setdefault(name, []).append(time.process_time() - start_cpu)
                gc.collect()
                if time.perf_counter() - started > budget_s:
                    break
        finally:
            gc.enable()
    return samples


def budget(seconds: float, deadline: float) -> float:
    """A loop's time budget, cut short by the whole run's deadline (time.perf_counter() seconds)."""
    return min(seconds, deadline - time.perf_counter())


# --- rows 1-4: ours against Hugging Face ------------------------------------------------------

def hf_llama(s: Sizes):
    from transformers import LlamaConfig, LlamaForCausalLM
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=s.vocab, hidden_size=s.d_model, intermediate_size=s.d_ff, num_hidden_layers=s.n_layers,
        num_attention_heads=s.n_heads, num_key_value_heads=s.n_kv_heads, max_position_embeddings=2 * s.seq,
        use_cache=False, attn_implementation="sdpa"))


def hf_gpt2(s: Sizes):
    from transformers import GPT2Config, GPT2LMHeadModel
    return GPT2LMHeadModel(GPT2Config(
        vocab_size=s.vocab, n_embd=s.d_model, n_layer=s.n_layers, n_head=s.n_heads, n_inner=4 * s.d_model,
        n_positions=2 * s.seq, activation_function="gelu_new", use_cache=False, attn_implementation="sdpa"))


def hf_mixtral(s: Sizes):
    from transformers import MixtralConfig, MixtralForCausalLM
    return MixtralForCausalLM(MixtralConfig(
        vocab_size=s.vocab, hidden_size=s.d_model, intermediate_size=s.d_ff, num_hidden_layers=s.n_layers,
        num_attention_heads=s.n_heads, num_key_value_heads=s.n_kv_heads, num_local_experts=s.n_experts,
        num_experts_per_tok=s.top_k, max_position_embeddings=2 * s.seq, sliding_window=None,
        use_cache=False, attn_implementation="sdpa"))


def hf_deepseek_mla(s: Sizes):
    """DeepSeek-V3's multi-head latent attention with dense FFNs (every layer below first_k_dense_replace)."""
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM
    d_head = s.d_model // s.n_heads
    return DeepseekV3ForCausalLM(DeepseekV3Config(
        vocab_size=s.vocab, hidden_size=s.d_model, intermediate_size=s.d_ff, num_hidden_layers=s.n_layers,
        num_attention_heads=s.n_heads, num_key_value_heads=s.n_heads, kv_lora_rank=2 * d_head, q_lora_rank=None,
        qk_rope_head_dim=d_head // 2, qk_nope_head_dim=d_head, v_head_dim=d_head, first_k_dense_replace=s.n_layers,
        n_routed_experts=s.n_experts, num_experts_per_tok=s.top_k, n_group=1, topk_group=1,
        max_position_embeddings=2 * s.seq, use_cache=False, attn_implementation="eager"))


def hf_gpt_oss(s: Sizes):
    """gpt-oss: attention sinks, alternating windows (a quarter of T), clamped SwiGLU experts."""
    from transformers import GptOssConfig, GptOssForCausalLM
    return GptOssForCausalLM(GptOssConfig(
        vocab_size=s.vocab, hidden_size=s.d_model, intermediate_size=s.d_ff, num_hidden_layers=s.n_layers,
        num_attention_heads=s.n_heads, num_key_value_heads=s.n_kv_heads, head_dim=s.d_model // s.n_heads,
        num_local_experts=s.n_experts, num_experts_per_tok=s.top_k, sliding_window=max(1, s.seq // 4),
        max_position_embeddings=2 * s.seq, use_cache=False, attn_implementation="eager",
        rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 4.0, "beta_fast": 32.0,
                         "beta_slow": 1.0, "truncate": False, "original_max_position_embeddings": s.seq // 2},
        experts_implementation="eager"))


@dataclass(frozen=True)
class Family:
    label: str
    build: Callable[[Sizes], torch.nn.Module]
    rows: dict[str, str]  # row id -> comparison (a COMPARISONS key)
    vocab: int | None = None  # the family's own vocabulary size, in place of the sizes' (None: the sizes')


FAMILIES = {
    "llama": Family("LLaMA (LlamaForCausalLM)", hf_llama,
                    {"1": "plain", "2": "trace", "2.1": "trace_as_hf", "3": "overhead"}),
    # the LLaMA of rows 1-3 with a small vocabulary: the head's matmul no longer hides the attention's T x T work
    "llama_attention": Family("LLaMA, attention-heavy (LlamaForCausalLM)", hf_llama,
                              {"1b": "plain", "2b": "trace", "3b": "overhead"}, vocab=512),
    "gpt2": Family("GPT-2 (GPT2LMHeadModel)", hf_gpt2,
                   {"4.1": "plain", "4.2": "trace", "4.2.1": "trace_as_hf", "4.3": "overhead"}),
    "mixtral": Family("Mixtral (MixtralForCausalLM)", hf_mixtral, {"4.4": "plain"}),
    "deepseek_mla": Family("MLA (DeepseekV3ForCausalLM, dense FFN)", hf_deepseek_mla,
                           {"8.1": "plain_vs_eager", "8.2": "trace", "8.3": "overhead"}),
    "gpt_oss": Family("sinks (GptOssForCausalLM)", hf_gpt_oss,
                      {"9.1": "plain_vs_eager", "9.2": "trace", "9.3": "overhead"}),
}

# comparison -> (ours, reference, target, what): ours and reference name the timed functions below
COMPARISONS = {
    "plain": ("ours_plain", "hf_sdpa", "<= 1.0", "our plain forward / HF (attn sdpa), same weights"),
    "plain_vs_eager": ("ours_plain", "hf_sdpa", "<= 1.0", "our plain forward / HF as built (eager), same weights"),
    "trace": ("ours_trace", "hf_eager_outputs", "<= 1.0",
              "run_with_trace, every hook / HF eager with output_attentions and output_hidden_states"),
    "overhead": ("ours_trace", "ours_plain", "<= 1.5", "run_with_trace, every hook / our plain forward"),
    # not a target of its own: rows 2 and 4.2 keep about twice what Hugging Face returns; this row records the same
    "trace_as_hf": ("ours_trace_as_hf", "hf_eager_outputs", "",
                    "run_with_trace recording what HF returns (attention weights, residual stream) / HF eager with "
                    "output_attentions and output_hidden_states"),
}
# the tensors Hugging Face returns with output_attentions and output_hidden_states
AS_HF = ["hook_embed", "blocks.*.hook_resid_post", "blocks.*.attn.hook_pattern", "ln_final.hook_normalized"]


def allocator_events(device: torch.device):
    """(profiler activities, the profiler's device type) whose memory events are `device`'s allocator's."""
    from torch.profiler import ProfilerActivity

    if device.type == "cuda":
        return [ProfilerActivity.CPU, ProfilerActivity.CUDA], torch.autograd.DeviceType.CUDA
    return [ProfilerActivity.CPU], torch.autograd.DeviceType.CPU


def square_tensors(fn: Callable[[], object], batch: int, heads: int, seq: int,
                   device: torch.device = torch.device("cpu")) -> int:
    """How many (batch, heads, seq, seq) tensors -- or (.., seq, seq + 1): scores with a sink's column -- of
    float32 the device's allocator hands out while fn runs (profiler memory events; fn runs once untimed first)."""
    from torch.profiler import profile

    activities, device_type = allocator_events(device)
    sizes = {batch * heads * seq * seq * 4, batch * heads * seq * (seq + 1) * 4}
    with torch.no_grad():
        fn()
        with profile(activities=activities, profile_memory=True) as prof:
            fn()
            synchronizer(device)()
    return sum(1 for e in prof.profiler.kineto_results.events()
               if e.name() == "[memory]" and e.device_type() == device_type and e.nbytes() in sizes)


def family_rows(name: str, s: Sizes, wanted: set[str], deadline: float, device: torch.device) -> list[Row]:
    """Build the HF model and ours from its weights; time every function the wanted rows need in one loop."""
    from transformer.interop import from_hf

    family = FAMILIES[name]
    if family.vocab is not None:
        s = replace(s, vocab=family.vocab)
    torch.manual_seed(0)
    hf = family.build(s).eval().to(device)
    ours = from_hf(hf)
    ids = torch.randint(0, s.vocab, (s.batch, s.seq), generator=torch.Generator().manual_seed(1)).to(device)
    functions = {
        "ours_plain": lambda: ours(ids),
        # no cap on the trace's bytes (the app's guard): at --large sizes every hook holds about 16 GiB
        "ours_trace": lambda: ours.run_with_trace(ids, max_bytes=None),
        "ours_trace_as_hf": lambda: ours.run_with_trace(ids, names=AS_HF, max_bytes=None),
        "hf_sdpa": lambda: hf(input_ids=ids, use_cache=False),
    }
    rows = {row: comparison for row, comparison in family.rows.items() if row in wanted}
    if any(c in ("trace", "trace_as_hf") for c in rows.values()):  # a model built eager stays eager
        hf_eager = copy.deepcopy(hf)
        hf_eager.set_attn_implementation("eager")  # the implementation that can return attention weights
        functions["hf_eager_outputs"] = lambda: hf_eager(input_ids=ids, use_cache=False, output_attentions=True,
                                                         output_hidden_states=True)
    needed = {fn for c in rows.values() for fn in COMPARISONS[c][:2]}
    with torch.no_grad():
        max_diff = (ours(ids) - hf(input_ids=ids, use_cache=False).logits).abs().max().item()
    squares = {}  # T x T tensors allocated per layer, for the rows that trace every hook
    if "trace" in rows.values():
        squares = {side: square_tensors(functions[fn], s.batch, s.n_heads, s.seq, device) / s.n_layers
                   for side, fn in (("ours", "ours_trace"), ("reference", "hf_eager_outputs"))}
    cpu: dict[str, list[float]] = {}
    samples = interleaved({fn: functions[fn] for fn in functions if fn in needed}, s.repeats,
                          budget(s.budget_s, deadline), cpu=cpu, device=device)

    shape = (f"d {s.d_model}, {s.n_layers} layers, {s.n_heads} heads"
             + (f" / {s.n_kv_heads} kv" if name != "gpt2" else "")
             + (f", {s.n_experts} experts top-{s.top_k}" if name == "mixtral" else "")
             + f", vocab {s.vocab}, B {s.batch} x T {s.seq}")
    out = []
    for row, comparison in rows.items():
        ours_fn, ref_fn, target, what = COMPARISONS[comparison]
        extra = {}
        if comparison == "trace":
            what += f"; T x T tensors allocated per layer: ours {squares['ours']:g}, HF {squares['reference']:g}"
            extra = dict(square_tensors_per_layer=squares)
        out.append(timed_row(row, f"{family.label} ({shape}): {what}", samples[ours_fn], samples[ref_fn], target,
                             cpu=(cpu[ours_fn], cpu[ref_fn]), max_abs_logit_difference=max_diff, **extra))
    return out


# --- row 5: KV-cache generation against recomputing ---------------------------------------------

KV_KINDS = {"MHA": lambda heads: heads, "GQA": lambda heads: max(1, heads // 4), "MQA": lambda heads: 1}


def generation_rows(s: Sizes, wanted: set[str], deadline: float, device: torch.device) -> list[Row]:
    """Lengths outer, kinds inner: if the time limit comes, it is the longest runs that go unmeasured."""
    short, middle, long = s.gen_lengths
    models = {}
    prompt = torch.randint(0, s.gen_vocab, (1, s.gen_prompt), generator=torch.Generator().manual_seed(1)).to(device)
    for kind, kv_heads in KV_KINDS.items():
        if any(f"5.{kind}.{n}" in wanted for n in s.gen_lengths):
            torch.manual_seed(0)
            models[kind] = Transformer(TransformerConfig(
                vocab_size=s.gen_vocab, d_model=s.gen_d_model, n_heads=s.gen_heads, n_kv_heads=kv_heads(s.gen_heads),
                n_layers=s.gen_layers, max_len=s.gen_prompt + long, position="rope", norm="rmsnorm", ffn="swiglu"),
                device=device).eval()
    out, previous = [], {}  # kind -> (length, cached s, recompute s) of its last measured length
    for n in s.gen_lengths:
        for kind, model in models.items():
            if f"5.{kind}.{n}" not in wanted:
                continue
            cfg = model.cfg
            what = (f"generate {n} tokens, {kind} ({cfg.n_kv_heads} kv of {cfg.n_heads} heads, d {cfg.d_model}, "
                    f"{cfg.n_layers} layers, vocab {cfg.vocab_size}, prompt {s.gen_prompt}): recompute / KV cache")
            target = "" if n == short else ">= 3"
            if kind in previous:  # recomputing grows with the square of the length, the cache linearly
                m, cached_m, recompute_m = previous[kind]
                estimate = recompute_m * (n / m) ** 2 + cached_m * n / m
                if time.perf_counter() + estimate > deadline:
                    out.append(Row(f"5.{kind}.{n}", what, math.nan, math.nan, "ms", math.nan, target, None,
                                   dict(skipped=f"not measured: about {estimate:.0f} s more would pass the time limit")))
                    continue
            last = {}

            def cached(n=n, model=model, last=last):
                cache = KVCache()
                last["tokens"] = model.generate(prompt, n, use_cache=True, cache=cache)
                last["cache_bytes"] = cache.nbytes

            def recompute(n=n, model=model, last=last):
                last["recomputed"] = model.generate(prompt, n, use_cache=False)

            # the model warms up on the first length; recomputing a long run again just to warm up costs minutes
            samples = interleaved({"cached": cached, "recompute": recompute}, s.gen_repeats,
                                  budget(s.gen_budget_s * n / long, deadline), warm_up=kind not in previous,
                                  device=device)
            cached_s, recompute_s = statistics.median(samples["cached"]), statistics.median(samples["recompute"])
            previous[kind] = (n, cached_s, recompute_s)
            speedup = recompute_s / cached_s
            out.append(Row(f"5.{kind}.{n}", f"{what}; cache {last['cache_bytes'] / 2**20:.2f} MiB", cached_s * 1e3,
                           recompute_s * 1e3, "ms", speedup, target, meets(speedup, target),
                           dict(cache_bytes=last["cache_bytes"], same_tokens=bool(torch.equal(last["tokens"], last["recomputed"])),
                                cached_samples_s=samples["cached"], recompute_samples_s=samples["recompute"],
                                ratio_of_minimums=min(samples["recompute"]) / min(samples["cached"]))))
    # the gap must grow with length: the longest run beats the target length's speedup
    by_id = {r.row: r for r in out}
    for kind in KV_KINDS:
        longest, target_row = by_id.get(f"5.{kind}.{long}"), by_id.get(f"5.{kind}.{middle}")
        if longest is not None:
            longest.target = f">= 3, > {middle}'s"
            if not math.isnan(longest.ratio):
                longest.met = longest.ratio >= 3 and (target_row is None or longest.ratio > target_row.ratio)
    return out


# --- row 6: achieved GFLOP/s against a plain matmul ----------------------------------------------

def flops_rows(s: Sizes, deadline: float, device: torch.device) -> list[Row]:
    cfg = TransformerConfig(vocab_size=s.flops_vocab, d_model=s.flops_d_model, n_heads=s.flops_heads,
                            n_layers=s.flops_layers, max_len=s.flops_seq, position="learned", norm="layernorm",
                            ffn="gelu", gelu_approximate="tanh", bias=True)  # GPT-2's recipe
    torch.manual_seed(0)
    model = Transformer(cfg, device=device).eval()
    ids = torch.randint(0, cfg.vocab_size, (1, s.flops_seq), generator=torch.Generator().manual_seed(1)).to(device)
    a, b = torch.randn(s.matmul_n, s.matmul_n, device=device), torch.randn(s.matmul_n, s.matmul_n, device=device)
    samples = interleaved({"forward": lambda: model(ids), "matmul": lambda: a @ b}, s.flops_repeats,
                          budget(s.flops_budget_s, deadline), device=device)
    flops, matmul_flops = forward_flops(cfg, 1, s.flops_seq), 2 * s.matmul_n**3
    achieved = flops / statistics.median(samples["forward"]) / 1e9
    peak = matmul_flops / statistics.median(samples["matmul"]) / 1e9
    what = (f"GFLOP/s of a GPT-2-small-sized forward (d {cfg.d_model}, {cfg.n_layers} layers, {cfg.n_heads} heads, "
            f"vocab {cfg.vocab_size}, B 1 x T {s.flops_seq}; {flops / 1e9:.1f} GFLOP counted analytically) "
            f"/ GFLOP/s of a {s.matmul_n}x{s.matmul_n} @ {s.matmul_n}x{s.matmul_n} matmul")
    return [Row("6", what, achieved, peak, "GFLOP/s", achieved / peak, ">= 0.5", achieved / peak >= 0.5,
                dict(forward_flops=flops, matmul_flops=matmul_flops, forward_samples_s=samples["forward"],
                     matmul_samples_s=samples["matmul"]))]


# --- row 7: memory of a full trace ------------------------------------------------------------------

def held_bytes(tensors: list[torch.Tensor]) -> int:
    """Bytes the tensors hold: numel x element_size, counting tensors that share storage once.

    Views of one storage (a hook point that records a reshaped tensor, the residual stream
    leaving one block and entering the next) count as the largest of them.
    """
    per_storage: dict[int, int] = {}
    for t in tensors:
        key = t.untyped_storage().data_ptr()
        per_storage[key] = max(per_storage.get(key, 0), t.numel() * t.element_size())
    return sum(per_storage.values())


def allocator_peak(fn: Callable[[], object], device: torch.device = torch.device("cpu")) -> tuple[object, int]:
    """(fn's result, the peak of bytes allocated by the device's torch allocator above the level at the start).

    Read from the profiler's memory events (every allocation and free, in time order).
    """
    from torch.profiler import profile

    activities, device_type = allocator_events(device)
    with profile(activities=activities, profile_memory=True) as prof:
        result = fn()
        synchronizer(device)()
    events = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"
                     and e.device_type() == device_type), key=lambda e: e.start_ns())
    level = peak = 0
    for e in events:
        level += e.nbytes()
        peak = max(peak, level)
    return result, peak


def memory_rows(s: Sizes, device: torch.device) -> list[Row]:
    cfg = TransformerConfig(vocab_size=s.vocab, d_model=s.d_model, n_heads=s.n_heads, n_kv_heads=s.n_kv_heads,
                            n_layers=s.n_layers, d_ff=s.d_ff, max_len=2 * s.seq, position="rope", norm="rmsnorm",
                            ffn="swiglu", tie_embeddings=False)  # the LLaMA shape of row 1
    torch.manual_seed(0)
    model = Transformer(cfg, device=device).eval()
    ids = torch.randint(0, s.vocab, (s.batch, s.seq), generator=torch.Generator().manual_seed(1)).to(device)
    model.run_with_trace(ids, max_bytes=None)  # warm-up
    gc.collect()
    (logits, trace), peak = allocator_peak(lambda: model.run_with_trace(ids, max_bytes=None), device)
    held = held_bytes([e.tensor for e in trace.events] + [logits])
    pattern_bytes = cfg.n_layers * s.batch * cfg.n_heads * s.seq**2 * 4
    what = (f"peak bytes allocated during run_with_trace (torch {device.type.upper()} allocator, profiler memory events) / "
            f"bytes the trace holds ({len(trace)} tensors, shared storage once); LLaMA shape of row 1, "
            f"B {s.batch} x T {s.seq}; the {cfg.n_layers} softmax patterns alone are {pattern_bytes / 2**20:.0f} MiB")
    return [Row("7", what, peak / 2**20, held / 2**20, "MiB", peak / held, "<= 1.5", peak / held <= 1.5,
                dict(peak_bytes=peak, held_bytes=held, trace_nbytes_without_dedup=trace.nbytes,
                     pattern_bytes=pattern_bytes))]


# --- the table --------------------------------------------------------------------------------------

def row_ids(s: Sizes) -> list[str]:
    """Every row, in table order."""
    ids = [row for family in FAMILIES.values() for row in family.rows]
    ids += [f"5.{kind}.{n}" for kind in KV_KINDS for n in s.gen_lengths]
    return ids + ["6", "7"]


def select(ids: list[str], only: str | None) -> set[str]:
    """--only "1,4.4,5": a row id, or a group number that selects every row under it."""
    if not only:
        return set(ids)
    chosen = set()
    for token in (t.strip() for t in only.split(",") if t.strip()):
        matches = {r for r in ids if r == token or r.startswith(token + ".")}
        if not matches:
            raise ValueError(f"--only {token!r} matches no row; rows are {', '.join(ids)}")
        chosen |= matches
    return chosen


def run_rows(s: Sizes, wanted: set[str], device: torch.device = torch.device("cpu")) -> list[Row]:
    """The wanted rows, in table order. Generation runs last: it is the long one, and yields to the time limit."""
    deadline = time.perf_counter() + s.time_limit_s
    groups = [(lambda name=name: family_rows(name, s, wanted, deadline, device), set(family.rows))
              for name, family in FAMILIES.items()]
    groups += [(lambda: flops_rows(s, deadline, device), {"6"}), (lambda: memory_rows(s, device), {"7"}),
               (lambda: generation_rows(s, wanted, deadline, device), {r for r in wanted if r.startswith("5.")})]
    rows: list[Row] = []
    for measure, ids in groups:
        if wanted & ids:
            started = time.perf_counter()
            rows += measure()
            print(f"rows {', '.join(sorted(wanted & ids))}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    order = row_ids(s)
    return sorted(rows, key=lambda r: order.index(r.row))


# glibc's mallopt parameters: keep freed memory for reuse rather than hand it back to the kernel
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
KEEP_FREED = {M_MMAP_THRESHOLD: 32 << 20, M_TRIM_THRESHOLD: 1 << 30, M_TOP_PAD: 64 << 20}


def malloc_keeps_freed_memory() -> None:
    """Tell glibc's malloc, for this process, to serve blocks up to 32 MiB from its heap (not fresh mmaps) and
    to keep up to 1 GiB of freed memory instead of returning it: a freed trace's pages are then reused, not
    faulted in again (shared/notes/trace-and-the-allocator.md). Only --malloc keep calls it."""
    import ctypes

    libc = ctypes.CDLL("libc.so.6")
    for param, value in KEEP_FREED.items():
        if libc.mallopt(param, value) != 1:
            raise RuntimeError(f"glibc refused mallopt({param}, {value})")


def machine(device: torch.device) -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    import transformers
    return dict(cpu=cpu, cores=os.cpu_count(), torch_threads=torch.get_num_threads(), torch=torch.__version__,
                transformers=transformers.__version__, python=platform.python_version(),
                load_average_at_start=list(os.getloadavg()), device=str(device),
                gpu=torch.cuda.get_device_name(device) if device.type == "cuda" else None)


def format_value(value: float, unit: str) -> str:
    return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"


def markdown(rows: list[Row]) -> str:
    lines = ["| row | what | ours | reference | ratio | target | met? |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "skipped" in r.details:
            lines.append(f"| {r.row} | {r.what} | — | — | — | {r.target or '—'} | {r.details['skipped']} |")
            continue
        met = "—" if r.met is None else ("yes" if r.met else "**no**")
        lines.append(f"| {r.row} | {r.what} | {format_value(r.ours, r.unit)} | {format_value(r.reference, r.unit)} "
                     f"| {r.ratio:.3g} | {r.target or '—'} | {met} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sizes_group = parser.add_mutually_exclusive_group()
    sizes_group.add_argument("--smoke", action="store_true", help="tiny sizes, one repeat: checks the code runs (CI)")
    sizes_group.add_argument("--large", action="store_true", help="a GPU's shape: d 1024, 8 layers, B 8 x T 1024")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--only", help="comma-separated rows or groups, e.g. '1,2' or '5' or '4.4'")
    parser.add_argument("--out", help="write every row, sample and the machine to this JSON file")
    parser.add_argument("--threads", type=int, help="torch threads (default: what the machine gives; --smoke: 1)")
    parser.add_argument("--malloc", choices=["default", "keep"], default="default",
                        help="keep: glibc keeps freed memory for reuse (mallopt, this process only); "
                             "default: as a notebook gets it")
    args = parser.parse_args(argv)
    sizes = SMOKE if args.smoke else LARGE if args.large else FULL
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device here")
    threads = args.threads or (1 if args.smoke else None)
    try:
        wanted = select(row_ids(sizes), args.only)
    except ValueError as e:
        parser.error(str(e))
    default_threads = torch.get_num_threads()
    if threads:
        # on a shared machine, two threads that must meet at every op wait on each other's neighbours;
        # one thread keeps the smoke run quick whatever else is running
        torch.set_num_threads(threads)
    if args.malloc == "keep":
        malloc_keeps_freed_memory()  # for the rest of this process: run it as a command of its own
    try:
        info = machine(device)
        info["malloc"] = args.malloc
        started = time.perf_counter()
        rows = run_rows(sizes, wanted, device)
    finally:
        torch.set_num_threads(default_threads)
    report(rows, info, started, "smoke" if args.smoke else "large" if args.large else "full", sizes, args.out)
    return rows


def report(rows: list[Row], info: dict, started: float, mode: str, sizes, out: str | None) -> None:
    """Print the machine (load average at the end added to `info`) and the table; with `out`, write
    the mode, the machine, the sizes and every row with its samples as JSON."""
    info.update(load_average_at_end=list(os.getloadavg()), seconds=round(time.perf_counter() - started, 1))
    print(f"{'SMOKE (numbers mean nothing) — ' if mode == 'smoke' else ''}"
          f"{'on ' + info['gpu'] + ' — ' if info.get('gpu') else ''}{info['cpu']}, {info['cores']} cores, "
          f"{info['torch_threads']} torch threads, torch {info['torch']}, transformers {info['transformers']}; "
          f"load average {info['load_average_at_start'][0]:.1f} at start, {info['load_average_at_end'][0]:.1f} "
          f"at end; {info['seconds']} s; malloc {info.get('malloc', 'default')}\n")
    print(markdown(rows))
    if out:
        with open(out, "w") as f:
            json.dump(dict(mode=mode, machine=info, sizes=asdict(sizes),
                           rows=[asdict(r) for r in rows]), f, indent=1)


if __name__ == "__main__":
    main()
