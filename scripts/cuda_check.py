"""On a machine with a GPU: every shipped language checkpoint (the BPE ones too) gives the same logits, bits per character and KV-cache
generation on CUDA as on the CPU; every preset's fused attention equals the five explicit lines there; the language
task trains there; and one large forward is timed both ways.

    python scripts/cuda_check.py
"""
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from transformer import PRESETS, Transformer, checkpoint, default_device  # noqa: E402
from transformer.training import language, per_character  # noqa: E402
from transformer.training.train import train  # noqa: E402

if not torch.cuda.is_available():
    sys.exit("no CUDA device here: this check needs a GPU")
print("torch", torch.__version__, "device", default_device(), torch.cuda.get_device_name(0))
SENTENCE = "The cat sat on the mat. The cat sat on the mat."
HELD_OUT = language.held_out_text("english")[:20_000]  # for a BPE model: bits per character of the same text
bpe_variants = [e for e in checkpoint.variants() if e.task == "language"
                and checkpoint.load(e.path, device="cpu")[0].tokenizer.row.learned]
for entry in [e for e in checkpoint.shipped() if e.task == "language"] + bpe_variants:
    cpu = checkpoint.load(entry.path, device="cpu")[0]
    gpu = checkpoint.load(entry.path, device="cuda")[0]
    learned = cpu.tokenizer.row.learned
    ids = torch.tensor([[0, *(cpu.tokenizer.encode(SENTENCE) if learned else language.encode_chars(SENTENCE))]])
    with torch.no_grad():
        d = (cpu(ids) - gpu(ids.cuda()).cpu()).abs().max().item()
    row = {"logits_max_diff": d}
    if learned:
        row["bpc_cpu"], row["bpc_cuda"] = (per_character.bits_per_char(m, m.tokenizer, HELD_OUT, context=192)
                                           for m in (cpu, gpu))
    elif gpu.cfg.row("arch").next_token:
        row["bpc_cpu"], row["bpc_cuda"] = (language.bits_per_char(m, limit=4, corpus="english") for m in (cpu, gpu))
    if gpu.cfg.row("arch").next_token:
        g1 = gpu.generate(ids.cuda(), max_new_tokens=40, temperature=0, use_cache=True)
        g2 = gpu.generate(ids.cuda(), max_new_tokens=40, temperature=0, use_cache=False)
        row["cache_equal"] = bool(torch.equal(g1, g2))
    else:
        row["masked_cpu"], row["masked_cuda"] = language.masked_accuracy(cpu, limit=8), language.masked_accuracy(gpu, limit=8)
    print(entry.name, row, flush=True)
for name, cfg in PRESETS.items():
    m = Transformer(cfg, device="cuda").eval()
    x = torch.randint(0, cfg.vocab_size, (2, 64), device="cuda")
    args = (x, x) if cfg.row("arch").cross else (x,)
    with torch.no_grad():
        m.set_fused(True); a = m(*args)
        m.set_fused(False); b = m(*args)
        _, trace = m.run_with_trace(*args)
    print(name, "fused vs explicit", (a - b).abs().max().item(), "trace entries", len(trace), flush=True)
for preset in ("llama2", "bert", "mixtral", "bloom"):
    t0 = time.time()
    model, hist = train(preset, "language", 300, batch_size=16, lr=3e-3, device="cuda", progress=False)
    torch.cuda.synchronize()
    print(preset, "300 language steps on cuda", round(time.time() - t0, 1), "s, loss", round(hist[0]["loss"], 2), "->", round(hist[-1]["loss"], 2), flush=True)
# a big model: fused (SDPA) against the five explicit lines
cfg = PRESETS["llama2"].replace(d_model=1024, n_heads=16, n_kv_heads=4, n_layers=12, d_ff=2816, max_len=4096, vocab_size=32000)
m = Transformer(cfg, device="cuda").eval()
x = torch.randint(0, 32000, (4, 2048), device="cuda")
for fused in (True, False):
    m.set_fused(fused)
    with torch.no_grad():
        for _ in range(2): m(x)
        torch.cuda.synchronize(); t = time.time()
        for _ in range(5): m(x)
        torch.cuda.synchronize()
    print("d1024 L12 B4 T2048 fused" if fused else "explicit", round((time.time() - t) / 5 * 1000, 1), "ms, peak MiB", torch.cuda.max_memory_allocated() // 2**20, flush=True)
    torch.cuda.reset_peak_memory_stats()
