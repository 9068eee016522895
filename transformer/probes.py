"""Two experiments that show why attention is built the way it is.

Why divide by sqrt(d_head): for q and k with independent unit-variance entries, q . k is a
sum of d_head products of variance 1, so its variance is d_head. Unscaled, the scores grow
with the head size and softmax saturates (one key takes almost all the weight, the entropy
of a row falls towards 0); divided by sqrt(d_head) their variance stays near 1.

Why positions: without position information and without a mask, self-attention treats its
input as a set. Shuffle the tokens and every output, every attention row and column, is
shuffled the same way -- nothing else changes (permutation equivariance). A position scheme,
or a causal mask, breaks that.

Nothing here changes a model that is passed in; the permutation test builds its own.
"""
from __future__ import annotations

from collections.abc import Sequence

import math
from dataclasses import dataclass

import torch

from .analysis import INITS
from .config import TransformerConfig
from .hooks import attention_stacks, hook_name, recording
from .model import Transformer
from .axes import AXES
from .axes.attention import WITHOUT_LATENT

# --- scaling ----------------------------------------------------------------------------


def softmax_entropy(scores: torch.Tensor) -> torch.Tensor:
    """(..., T_kv) -> (...): entropy in nats of softmax over the last dim; log(T_kv) is uniform, 0 is one-hot."""
    log_p = scores.double().log_softmax(-1)
    return -(log_p.exp() * log_p).sum(-1)


def repeat_kv_heads(k: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, G, T, d) -> (B, H, T, d): kv head g serves query heads g*H/G ... (g+1)*H/G - 1, as in attention."""
    n_kv_heads = k.shape[1]
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads={n_heads} is not divisible by the {n_kv_heads} kv heads of k")
    return k.repeat_interleave(n_heads // n_kv_heads, dim=1)


def scores(q: torch.Tensor, k: torch.Tensor, scaled: bool) -> torch.Tensor:
    """(..., T_q, d) x (..., T_kv, d) -> (..., T_q, T_kv): q . k, divided by sqrt(d) when scaled (at least float32)."""
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k need the same head size, got d={q.shape[-1]} and d={k.shape[-1]}")
    dtype = torch.promote_types(torch.promote_types(q.dtype, k.dtype), torch.float32)
    s = q.to(dtype) @ k.to(dtype).transpose(-2, -1)
    return s / math.sqrt(q.shape[-1]) if scaled else s


def score_statistics(q: torch.Tensor, k: torch.Tensor, scaled: bool) -> tuple[float, float]:
    """(variance of every score, mean softmax entropy of a row in nats) for queries q over keys k.

    q: (..., T_q, d), k: (..., T_kv, d) with broadcastable leading dims (repeat GQA's kv heads
    first, see `repeat_kv_heads`). No mask: every query sees all T_kv keys, so the entropy is at
    most log(T_kv).
    """
    s = scores(q, k, scaled)
    return float(s.var()), float(softmax_entropy(s).mean())


@dataclass
class ScalingCurves:
    d_heads: list[int]
    n_keys: int
    var_unscaled: list[float]  # grows like d_head
    var_scaled: list[float]  # stays near 1
    entropy_unscaled: list[float]  # nats; collapses towards 0
    entropy_scaled: list[float]  # nats; stays near log(n_keys)
    n_queries: int  # rows per point

    @property
    def max_entropy(self) -> float:
        return math.log(self.n_keys)


def random_qk(d_head: int, n_queries: int, n_keys: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """q (n_queries, 1, d_head) and k (n_queries, n_keys, d_head): each query with keys of its own, every entry
    an independent N(0, 1) draw, reproducible from `seed`."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n_queries, 1, d_head, generator=g), torch.randn(n_queries, n_keys, d_head, generator=g)


def random_score_statistics(d_heads: list[int], n_keys: int, seed: int = 0, n_queries: int = 256) -> ScalingCurves:
    """Score variance and softmax entropy against d_head, for random unit-variance q and k, with and without 1/sqrt(d).

    Each of `n_queries` rows is one query over `n_keys` keys of its own, so the rows are independent samples.
    """
    if n_keys < 2:
        raise ValueError(f"n_keys={n_keys} must be at least 2: one key always gets all the weight")
    if not d_heads or min(d_heads) < 1:
        raise ValueError(f"every d_head must be at least 1, got {list(d_heads)}")
    stats = {True: [], False: []}
    for d in d_heads:
        q, k = random_qk(d, n_queries, n_keys, seed)
        for scaled in (False, True):
            stats[scaled].append(score_statistics(q, k, scaled))
    return ScalingCurves(list(d_heads), n_keys, [v for v, _ in stats[False]], [v for v, _ in stats[True]],
                         [e for _, e in stats[False]], [e for _, e in stats[True]], n_queries)


def softmax_row(d_head: int, n_keys: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """One random query over `n_keys` random keys: its softmax weights (n_keys,) unscaled and scaled."""
    q, k = random_qk(d_head, 1, n_keys, seed)
    return scores(q, k, False)[0, 0].softmax(-1), scores(q, k, True)[0, 0].softmax(-1)


@dataclass
class HeadStatistics:
    """One layer of a model, per query head: what its q and k look like and what scaling does to their scores."""
    q_var: list[float]  # variance of the entries of q
    k_var: list[float]  # of k (the kv head this query head reads)
    var_unscaled: list[float]  # variance of q . k
    var_scaled: list[float]  # of q . k / sqrt(d_head)
    entropy_unscaled: list[float]  # mean row entropy (nats) if the scores were not scaled
    entropy_scaled: list[float]  # what the model computes (no mask, every key seen)
    d_head: int
    n_keys: int


def head_score_statistics(q: torch.Tensor, k: torch.Tensor) -> HeadStatistics:
    """q (B, H, T, d_head) and k (B, G, T, d_head), as recorded where the scores read them (``live_qk_names``)."""
    if q.dim() != 4 or k.dim() != 4:
        raise ValueError(f"q and k must be (B, heads, T, d_head), got shapes {tuple(q.shape)} and {tuple(k.shape)}")
    k = repeat_kv_heads(k, q.shape[1])  # (B, H, T, d_head)
    out = {name: [] for name in ("q_var", "k_var", "var_unscaled", "var_scaled", "entropy_unscaled", "entropy_scaled")}
    for h in range(q.shape[1]):
        qh, kh = q[:, h].double(), k[:, h].double()  # (B, T, d_head)
        out["q_var"].append(float(qh.var()))
        out["k_var"].append(float(kh.var()))
        for scaled, suffix in ((False, "unscaled"), (True, "scaled")):
            var, entropy = score_statistics(qh, kh, scaled)
            out[f"var_{suffix}"].append(var)
            out[f"entropy_{suffix}"].append(entropy)
    return HeadStatistics(**out, d_head=q.shape[-1], n_keys=k.shape[2])


def live_qk_names(cfg: TransformerConfig, layer: int) -> tuple[str, str]:
    """The hook names of the q and k a layer's scores are made of: after QK-norm and after RoPE when the
    model has them. Multi-head latent attention (kv_rank set) rebuilds each key from its latent and its
    shared rotated part: its ``hook_k`` is already the key the scores read (it has no ``hook_rot_k``)."""
    if not 0 <= layer < cfg.n_layers:
        raise ValueError(f"layer={layer} is outside 0..{cfg.n_layers - 1}")
    rotates, normalised = cfg.row("position").rotates_qk, cfg.row("qk_norm").normalises
    q = "hook_rot_q" if rotates else "hook_q_norm" if normalised else "hook_q"
    if cfg.row("kv_heads").latent:
        k = "hook_k"
    else:
        k = "hook_rot_k" if rotates else "hook_k_norm" if normalised else "hook_k"
    stack = attention_stacks(cfg.arch).input
    return hook_name(layer, f"attn.{q}", stack), hook_name(layer, f"attn.{k}", stack)


# --- permutation equivariance -------------------------------------------------------------


def unshuffle(perm: torch.Tensor) -> torch.Tensor:
    """The inverse permutation: x[perm][unshuffle(perm)] == x."""
    return torch.argsort(perm)


def with_position(cfg: TransformerConfig, position: str, **changes) -> TransformerConfig:
    """`cfg` with another position scheme (and `changes`), still valid: what belongs to RoPE (a partial or
    scaled rotation, a local base) goes when the scheme does not rotate q and k, and multi-head latent
    attention, which needs a decoupled RoPE part narrower than its heads when the scheme rotates, gives way
    to heads with keys and values of their own where it has none."""
    scheme = AXES["position"].row(position)
    changes = dict(position=position, **changes)
    if not scheme.rotates_qk:
        changes |= dict(rope_dim=None, rope_scaling="none", rope_local_theta=None)
    decoupled_rope = cfg.rope_dim is not None and cfg.rope_dim < cfg.d_head  # MLA's own rotated key part
    latent = cfg.row("kv_heads").latent and changes.get("kv_rank", cfg.kv_rank) is not None
    decoder = AXES["arch"].row(changes.get("arch", cfg.arch)).next_token
    if latent and (not decoder or (scheme.rotates_qk and not decoupled_rope)):
        changes |= WITHOUT_LATENT
    return cfg.replace(**changes)


def equivariance_config(cfg: TransformerConfig, position: str, causal: bool) -> TransformerConfig:
    """`cfg` as one stack with the given position scheme and either no mask (encoder) or a causal mask (decoder).

    A sliding window is dropped, on every layer (it depends on order as much as a causal mask does), and the
    weights are float32 (permutation_test casts them to the precision it is asked for). The rest follows
    ``with_position``: multi-head latent attention, built for decoders, stays in the causal runs only.
    """
    return with_position(cfg, position, arch="decoder" if causal else "encoder", sliding_window=None,
                         layer_pattern="uniform", dropout=0.0, dtype="float32")


def permutation_test(cfg: TransformerConfig, ids: torch.Tensor, perm: torch.Tensor, seed: int = 0,
                     dtype: torch.dtype = torch.float32, init: str = "variance-preserving") -> dict:
    """Run a model on `ids` (T,) and on `ids[perm]`, un-shuffle the second run, and measure what changed.

    If the model is permutation equivariant, logits_shuffled[unshuffle(perm)] equals logits, and each
    layer's weights with rows and columns un-shuffled equal the original weights. Returns
      outputs: max |difference| of the logits;
      patterns: max |difference| of the attention weights, over every layer and head;
      per_layer: (L,) that pattern difference per layer;
      per_position: (T,) max |difference| of each original token's logits;
      resid: (L, T) max |difference| of each original token's residual stream after each block;
      output_scale: max |logit|, to judge the differences against;
      weights, weights_back: (L, H, T, T) the attention weights on the text, and on the shuffled text
      with rows and columns put back in the original order.
    The model is built from `cfg` with weights seeded by `seed` (`init` from analysis.INITS: the default
    gives scores of order 1, so the weights are far from uniform) and run in `dtype`; float64 shows what
    float32 rounding hides. An encoder-decoder is refused: `equivariance_config` makes one stack of it.
    """
    if cfg.row("arch").cross:
        raise ValueError("the permutation test runs one stack; make the config an encoder or a decoder "
                         "(equivariance_config does)")
    if init not in INITS:
        raise ValueError(f"init={init!r} is not one of {', '.join(INITS)}")
    ids, perm = torch.as_tensor(ids).reshape(-1), torch.as_tensor(perm).reshape(-1)
    if sorted(perm.tolist()) != list(range(len(ids))):
        raise ValueError(f"perm must hold each of 0..{len(ids) - 1} exactly once, got {perm.tolist()}")
    with torch.random.fork_rng(devices=[]):  # seeded weights, the caller's random state untouched
        torch.manual_seed(seed)
        model = Transformer(cfg, device="cpu").eval()
        with torch.no_grad():
            INITS[init](model)
    model = model.to(dtype)
    patterns = [hook_name(i, "attn.hook_pattern") for i in range(cfg.n_layers)]
    resid = [hook_name(i, "hook_resid_post") for i in range(cfg.n_layers)]
    with torch.no_grad(), recording(patterns + resid) as recorder:  # the text and its shuffle, one batch of two
        logits = model(torch.stack((ids, ids[perm])))  # (2, T, vocab)
    plain, shuffled = ({"logits": logits[row].double(),
                        **{name: recorder.trace[name][row].double() for name in patterns + resid}} for row in (0, 1))
    back = unshuffle(perm)  # shuffled position of each original token
    out_diff = (shuffled["logits"][back] - plain["logits"]).abs()  # (T, vocab)
    per_layer = [float((shuffled[name][:, back][:, :, back] - plain[name]).abs().max()) for name in patterns]  # (H, T, T)
    resid_diff = torch.stack([(shuffled[name][back] - plain[name]).abs().amax(-1) for name in resid])  # (L, T)
    return dict(outputs=float(out_diff.max()), patterns=max(per_layer), per_layer=per_layer,
                per_position=out_diff.amax(-1).tolist(), resid=resid_diff.tolist(),
                output_scale=float(plain["logits"].abs().max()),
                weights=torch.stack([plain[name] for name in patterns]),
                weights_back=torch.stack([shuffled[name][:, back][:, :, back] for name in patterns]))


def rounding_tolerance(dtype: torch.dtype, scale: float = 1.0) -> float:
    """A difference below this is float rounding, not a change: 1000 machine epsilons of `dtype` times the values' size.

    The same sums taken in another order (as a shuffled input makes them) round differently: a few epsilons per
    operation, growing with depth. Float32: about 1e-4 for values of order 1; float64: about 2e-13.
    """
    return 1000 * torch.finfo(dtype).eps * max(1.0, scale)


def seeded_permutation(t: int, seed: int, keep_last: bool = False) -> torch.Tensor:
    """A random order of 0..t-1 reproducible from `seed`, never the identity when t > 1 (or t > 2 with keep_last).

    keep_last=True shuffles only the first t - 1 positions: the last token stays last.
    """
    n = t - 1 if keep_last else t
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(n, generator=g) if n > 0 else torch.arange(0)
    if n > 1 and bool((perm == torch.arange(n)).all()):
        perm = perm.roll(1)
    return torch.cat((perm, torch.arange(n, t)))


def seeded_word_permutation(words: Sequence[int], seed: int, keep_first: bool = False) -> torch.Tensor:
    """A random order of the tokens that moves whole words, as the lecture shuffles "I ate rice" into "rice ate I".

    words[i] is token i's word, numbered in order (0, 0, 1, 2, 2, ...): each word's tokens stay together and in
    their order, and the words take a seeded order, never the identity with two words or more to move.
    keep_first=True keeps the first word first (a start token such as <bos>).
    """
    starts = [i for i in range(len(words)) if i == 0 or words[i] != words[i - 1]]
    spans = [range(start, end) for start, end in zip(starts, [*starts[1:], len(words)])]  # each word's tokens
    kept = 1 if keep_first and spans else 0
    order = [*range(kept), *(kept + int(w) for w in seeded_permutation(len(spans) - kept, seed))]
    return torch.tensor([i for w in order for i in spans[w]], dtype=torch.long)  # (T,)
