"""Measurements that explain the axes: output distributions, position geometry, norm behaviour
with depth, cached generation, and attention under a chosen mask (costs: transformer.costs).

Each function answers one question the app asks of a model or a config; none of them
changes the model.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from . import masks
from .config import TransformerConfig
from .hooks import attention_stacks, hook_name, recording
from .model import DTYPES, KVCache, Transformer, self_attention_inputs
from .axes import AXES
from .norms import NORM_MODULES
from .positions import ROTATIONS, apply_rope, rope_angles, rope_inv_freq, rope_tables, sinusoidal_table

# --- activations ----------------------------------------------------------------------

# the nonlinearities the FFNs use: ReLU (2017), GELU (GPT-2, BERT), SiLU inside SwiGLU's gate (LLaMA)
ACTIVATIONS = {
    "ReLU": F.relu,
    "GELU": F.gelu,
    "GELU (tanh approx.)": lambda x: F.gelu(x, approximate="tanh"),
    "SiLU": F.silu,
}


def activation_curves(x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Each activation evaluated on x."""
    return {name: fn(x) for name, fn in ACTIVATIONS.items()}


# --- output distributions ------------------------------------------------------------


def next_token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """(..., vocab) -> (...): entropy in nats of softmax(logits); log(vocab) is a uniform guess."""
    log_p = logits.float().log_softmax(-1)
    return -(log_p.exp() * log_p).sum(-1)


def kl_divergence(logits_p: torch.Tensor, logits_q: torch.Tensor) -> torch.Tensor:
    """(..., vocab) x2 -> (...): KL(P || Q) in nats, P = softmax(logits_p), Q = softmax(logits_q)."""
    if logits_p.shape != logits_q.shape:
        raise ValueError(f"KL needs distributions of one shape, got {tuple(logits_p.shape)} and {tuple(logits_q.shape)}; "
                         "compare models with the same vocab_size on the same tokens")
    log_p, log_q = logits_p.float().log_softmax(-1), logits_q.float().log_softmax(-1)
    return (log_p.exp() * (log_p - log_q)).sum(-1)


# --- positions ---------------------------------------------------------------------


def sinusoidal_similarity(n_positions: int, d_model: int) -> torch.Tensor:
    """(P, P): dot products of the sinusoidal position vectors; it depends on |m - n| only."""
    table = sinusoidal_table(n_positions, d_model)  # (P, d_model)
    return table @ table.T


def cosine_similarity(table: torch.Tensor) -> torch.Tensor:
    """(P, d) -> (P, P): cosine of the angle between every two rows (1 = same direction)."""
    unit = F.normalize(table.float(), dim=-1)
    return unit @ unit.T


def rope_rotate(x: torch.Tensor, positions: torch.Tensor, theta: float = 10000.0) -> torch.Tensor:
    """One vector x (d_head,) rotated as RoPE does at each position: (P, d_head)."""
    angles = rope_angles(positions[None], rope_inv_freq(x.shape[-1], theta))  # (1, P, d_head/2)
    cos, sin = rope_tables(angles, x.dtype)  # (1, 1, P, d_head)
    return apply_rope(x.expand(1, 1, len(positions), -1), cos, sin)[0, 0]  # (P, d_head)


def rope_pairs(x: torch.Tensor, positions: torch.Tensor, theta: float = 10000.0) -> torch.Tensor:
    """(P, d_head/2, 2): each rotated pair (x_i, x_{i + d_head/2}) as a 2-D point, per position."""
    rotated = rope_rotate(x, positions, theta)  # (P, d_head)
    first, second = rotated.chunk(2, dim=-1)  # the half-split layout pairs i with i + d_head/2
    return torch.stack((first, second), dim=-1)


def rope_scores(q: torch.Tensor, k: torch.Tensor, n_positions: int, theta: float = 10000.0) -> torch.Tensor:
    """(P, P): score[m, n] = RoPE(q, m) . RoPE(k, n) for one fixed q and k content.

    RoPE rotates q by m*freq and k by n*freq, so their dot product only sees the angle
    difference (m - n)*freq: every diagonal m - n = const holds one value.
    """
    positions = torch.arange(n_positions)
    return rope_rotate(q, positions, theta) @ rope_rotate(k, positions, theta).T


def rotary_scores_by_distance(scheme: str, q: torch.Tensor, k: torch.Tensor, distances: torch.Tensor,
                               theta: float = 10000.0) -> torch.Tensor:
    """(len(distances),): q at position d against k at position 0, both turned by a rotating scheme's tables
    (``positions.ROTATIONS``: RoPE, xPos). q, k: (d_rope,) one head's content."""
    positions = torch.cat((distances, distances.new_zeros(1)))[None]  # (1, D + 1): every query, then the key at 0
    turn = ROTATIONS[scheme](positions, rope_angles(positions, rope_inv_freq(len(q), theta)), torch.float32)
    queries = apply_rope(q.expand(1, 1, positions.shape[1], -1), turn.q_cos, turn.q_sin)[0, 0, :-1]  # (D, d_rope)
    key = apply_rope(k.expand(1, 1, positions.shape[1], -1), turn.k_cos, turn.k_sin)[0, 0, -1]  # (d_rope,)
    return queries @ key


def diagonal_spread(matrix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(offsets, spread): for each diagonal m - n = offset, max - min of its values."""
    n = matrix.shape[0]
    offsets = torch.arange(-(n - 1), n)
    spread = torch.stack([matrix.diagonal(-int(o)).max() - matrix.diagonal(-int(o)).min() for o in offsets])
    return offsets, spread


# --- norms ---------------------------------------------------------------------------


def normalize(x: torch.Tensor, kind: str, eps: float = 1e-5) -> torch.Tensor:
    """The library's LayerNorm or RMSNorm (weight 1, bias 0) applied to vectors (..., d)."""
    AXES["norm"].row(kind, "norm")  # an unknown kind raises, listing the valid ones
    with torch.no_grad():
        return NORM_MODULES[kind](x.shape[-1], eps)(x.float())


def _variance_preserving(model: Transformer) -> None:
    """Every matrix N(0, 1/fan_in): each layer keeps its input's scale, with no depth correction."""
    for p in model.parameters():
        if p.dim() >= 2:
            torch.nn.init.normal_(p, 0.0, 1 / math.sqrt(p.shape[1]))


# init name -> what to do after the model is built (the library's own init already ran)
INITS = {
    "library": lambda model: None,  # GPT-2's: N(0, 0.02), residual projections shrunk by 1/sqrt(2 n_layers)
    "variance-preserving": _variance_preserving,
}


@dataclass
class DepthProfile:
    resid_norms: list[float]  # mean L2 norm per token: the embedding, then after each block
    grad_norms: list[float]  # L2 norm of each block's parameter gradients
    loss: float


def depth_profile(cfg: TransformerConfig, ids: torch.Tensor, seed: int = 0, init: str = "library") -> DepthProfile:
    """At initialisation: how big the residual stream is after each block, and how big each
    block's gradient is, for next-token cross-entropy on `ids` (B, T).

    init="variance-preserving" shows the bare effect of the norm placement; the library's
    GPT-2 init shrinks what each block adds by 1/sqrt(2 n_layers), which hides most of it.
    """
    if init not in INITS:
        raise ValueError(f"init={init!r} is not one of {', '.join(INITS)}")
    if ids.shape[-1] < 2:
        raise ValueError(f"depth_profile needs at least 2 tokens to predict a next one, got {ids.shape[-1]}")
    if cfg.row("arch").cross:
        raise ValueError("depth_profile measures one stack; use arch='decoder' or 'encoder'")
    torch.manual_seed(seed)
    model = Transformer(cfg, device="cpu").train()
    INITS[init](model)
    residual = {}

    def keep(tensor, event):
        residual[event.name] = tensor.detach()
        return tensor

    names = [hook_name(0, "hook_resid_pre")] + [hook_name(i, "hook_resid_post") for i in range(cfg.n_layers)]
    with model.intervene({name: keep for name in names}):
        logits = model(ids[:, :-1])  # (B, T-1, vocab)
    loss = F.cross_entropy(logits.reshape(-1, cfg.vocab_size), ids[:, 1:].reshape(-1)) + model.aux_loss
    loss.backward()
    resid = [float(residual[name].norm(dim=-1).mean()) for name in names]
    grads = [math.sqrt(sum(float(p.grad.pow(2).sum()) for p in block.parameters() if p.grad is not None))
             for block in model.blocks]
    return DepthProfile(resid, grads, loss.item())


# --- generation with a KV cache ---------------------------------------------------------


@dataclass
class CacheStep:
    token_id: int  # the token chosen at this step (greedy)
    cache_shapes: dict[str, tuple[int, ...]]  # layer name -> shape of its cached K (V has the same)
    cache_nbytes: int
    max_abs_diff: float  # | cached logits - logits recomputed from the whole sequence |, max over vocab


def cached_generation(model: Transformer, ids: torch.Tensor, n_steps: int, start_token_id: int = 0) -> list[CacheStep]:
    """Greedy generation with a KV cache, checking each step against a full recomputation.

    ids: (1, T) prompt (the source for an encoder-decoder, whose target starts at start_token_id).
    Step 0 is the prefill of the prompt; each later step feeds one new token.
    """
    if not model.cfg.row("arch").causal:
        raise ValueError("an encoder-only model does not generate; use arch='decoder' or 'encoder-decoder'")
    if n_steps < 1:
        raise ValueError(f"n_steps={n_steps} must be at least 1")
    names = {module: name for name, module in model.named_modules()}
    cache = KVCache()
    with torch.no_grad():
        if model.cfg.row("arch").cross:
            memory = model.encode(ids)
            seq = torch.full((1, 1), start_token_id, dtype=torch.long, device=ids.device)
            run = lambda tokens, pos, c: model.decode(tokens, memory, position_ids=pos, cache=c)
        else:
            seq = ids
            run = lambda tokens, pos, c: model(tokens, position_ids=pos, cache=c)
        new = seq
        steps = []
        for _ in range(n_steps):
            positions = torch.arange(seq.shape[1] - new.shape[1], seq.shape[1], device=ids.device)[None]  # (1, T_new)
            cached = run(new, positions, cache)[0, -1].float()  # (vocab,)
            full = run(seq, None, None)[0, -1].float()  # (vocab,) recomputed from scratch
            new = cached.argmax()[None, None]  # (1, 1)
            seq = torch.cat((seq, new), dim=1)
            shapes = {names[layer]: tuple(k.shape) for layer, (k, _) in cache.layers.items()}
            steps.append(CacheStep(int(new), shapes, cache.nbytes, float((cached - full).abs().max())))
    return steps


# --- attention under a chosen mask --------------------------------------------------------


SPARSE_SIZE_NAMES = {"strided": "stride", "block-local": "block", "global-local": "local window"}


def allowed_matrix(kind: str, t: int, window: int | None = None, causal: bool = True,
                   n_global: int = 1) -> torch.Tensor:
    """(T, T) boolean, True where a query may attend, from the library's own mask builder.

    A sliding window is causal (the W most recent keys) or, with causal=False as in an
    encoder, centred ((W - 1) // 2 keys on each side). "chunked" (Llama 4) takes `window` as
    its chunk: a query sees only the keys of its own chunk. The sparse patterns ("strided",
    "block-local", "global-local") take `window` as their stride, block or local window; one
    larger than T, or more global tokens than T, is refused with a ValueError saying so.
    """
    positions = torch.arange(t)
    builders = {
        "none": lambda: masks.self_attention(positions, positions, is_causal=False),
        "causal": lambda: masks.self_attention(positions, positions, is_causal=True),
        "sliding window": lambda: masks.self_attention(positions, positions, is_causal=causal, window=window or 1),
        "chunked": lambda: masks.self_attention(positions, positions, is_causal=causal, chunk=window or 1),
        **{pattern: (lambda pattern=pattern: masks.self_attention(positions, positions, is_causal=causal,
                                                                 pattern=pattern, pattern_size=window or 1,
                                                                 n_global=n_global))
           for pattern in SPARSE_SIZE_NAMES},
    }
    if kind not in builders:
        raise ValueError(f"mask kind {kind!r} is not one of {', '.join(builders)}")
    if kind in SPARSE_SIZE_NAMES:
        name = SPARSE_SIZE_NAMES[kind]
        if window is None or not 1 <= window <= t:
            raise ValueError(f"a {name} of {window} does not fit a text of T = {t} tokens; choose a {name} between 1 "
                             f"and {t} (or type a longer text)")
        if kind == "global-local" and not 0 <= n_global <= t:
            raise ValueError(f"{n_global} global tokens do not fit a text of T = {t} tokens; choose between 0 and {t}")
    return builders[kind]()[0, 0]


def allowed_pairs(kind: str, t: int, size: int, causal: bool = True, n_global: int = 1, rows: int = 256) -> int:
    """How many (query, key) pairs a sparse pattern lets a text of `t` tokens score (dense: t² or t(t+1)/2),
    counted from the mask builder `rows` queries at a time, so that t = 100,000 needs no t x t matrix."""
    positions = torch.arange(t)
    return sum(int(masks.sparse(kind, chunk, positions, size, causal, n_global).sum())
               for chunk in positions.split(rows))


def tiles_needed(kind: str, t: int, size: int, tile: int, causal: bool = True, n_global: int = 1) -> int:
    """How many of the (t / tile)² tiles of the score matrix hold at least one allowed pair: the tiles a
    block-sparse kernel must compute (flash attention skips the others). t must be a multiple of tile."""
    if t % tile:
        raise ValueError(f"t={t} is not a multiple of the tile size {tile}; choose t = {tile * (t // tile + 1)}")
    positions = torch.arange(t)
    needed = 0
    for rows in positions.split(tile):
        allowed = masks.sparse(kind, rows, positions, size, causal, n_global)  # (tile, t)
        needed += int(allowed.view(tile, t // tile, tile).any(dim=2).any(dim=0).sum())
    return needed


def with_pattern(model: Transformer, pattern: str, size: int, n_global: int = 1) -> Transformer:
    """The same weights with a sparse attention pattern in every self-attention (a pattern adds no parameter)."""
    cfg = model.cfg.replace(attention_pattern=pattern, pattern_size=size, n_global=n_global, sliding_window=None)
    with torch.random.fork_rng(devices=[]):  # its random init is overwritten: leave the caller's random state alone
        twin = Transformer(cfg, device=model.device)
    twin.load_state_dict(model.state_dict())
    return twin.eval()


@torch.no_grad()
def fused_explicit_gap(model: Transformer, ids: torch.Tensor) -> float:
    """Largest |logit difference| between the fused SDPA path and the explicit five lines on `ids`. It switches the
    model's path while it runs (and leaves it fused): give it a model no other thread is running."""
    args = (ids, ids) if model.cfg.row("arch").cross else (ids,)
    fused = model.set_fused(True)(*args)
    explicit = model.set_fused(False)(*args)
    model.set_fused(True)
    return float((fused - explicit).abs().max())


def attention_under_mask(model: Transformer, ids: torch.Tensor, layer: int, allowed: torch.Tensor | None = None,
                         attention_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(additive mask (B, 1, T, T), weights (B, H, T, T)) of one self-attention layer.

    `allowed` (T, T) replaces the model's own mask in every layer (an intervention at each
    hook_mask), so the weights are what this model computes under that mask. `attention_mask`
    (B, T) is the usual padding mask. An encoder-decoder runs its encoder.
    """
    cfg = model.cfg
    if not 0 <= layer < cfg.n_layers:
        raise ValueError(f"layer={layer} is outside 0..{cfg.n_layers - 1}")
    stack = attention_stacks(cfg.arch).input
    interventions = {}
    if allowed is not None:
        additive = masks.to_additive(allowed, torch.float32).to(model.device)[None, None]  # (1, 1, T, T)
        if attention_mask is not None:
            additive = masks.to_additive(allowed.to(model.device)[None, None] & masks.padding(attention_mask), torch.float32)
        interventions = {hook_name(i, "attn.hook_mask", stack): (lambda t, e: additive.to(t.dtype))
                         for i in range(cfg.n_layers)}
    names = [hook_name(layer, "attn.hook_mask", stack), hook_name(layer, "attn.hook_pattern", stack)]
    with torch.no_grad(), recording(names, interventions) as recorder:
        if cfg.row("arch").cross:
            model.encode(ids, attention_mask)
        else:
            model(ids, attention_mask=attention_mask)
    return recorder.trace[names[0]], recorder.trace[names[1]]


def cross_attention(model: Transformer, src_ids: torch.Tensor, tgt_ids: torch.Tensor, layer: int,
                    src_attention_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(additive mask (B, 1, T_q, S), weights (B, H, T_q, S)) of one decoder cross-attention layer."""
    cross_stacks = attention_stacks(model.cfg.arch).cross_attention
    if not cross_stacks:
        raise ValueError(f"cross-attention needs arch='encoder-decoder', this model is a {model.cfg.arch}")
    if not 0 <= layer < model.cfg.n_layers:
        raise ValueError(f"layer={layer} is outside 0..{model.cfg.n_layers - 1}")
    names = [hook_name(layer, f"cross_attn.{site}", cross_stacks[0]) for site in ("hook_mask", "hook_pattern")]
    with torch.no_grad(), recording(names) as recorder:
        model(src_ids, tgt_ids, attention_mask=src_attention_mask)
    return recorder.trace[names[0]], recorder.trace[names[1]]


# --- the attention of 2024-2026 ------------------------------------------------------------


def rope_wavelengths(cfg: TransformerConfig, factor: float, original: int,
                     scalings: tuple[str, ...] = ("none", "linear", "dynamic", "yarn", "llama3")) -> dict[str, torch.Tensor]:
    """(d_rope/2,) tokens per full turn of each RoPE frequency, plain and under each scaling stretched `factor`
    times past `original` tokens (dynamic NTK read at factor x original, where it has grown)."""
    from .positions import scaled_inv_freq

    out = {}
    for name in scalings:
        scaled = cfg.replace(rope_scaling=name, rope_factor=factor if name != "none" else 1.0,
                             rope_original_max_len=original, max_len=max(cfg.max_len, int(factor * original)))
        inv_freq, _ = scaled_inv_freq(scaled, int(factor * original))
        out[name] = 2 * math.pi / inv_freq
    return out


def qk_norm_entropy(d_head: int, scales: list[float], n_keys: int = 64, n_queries: int = 256,
                    seed: int = 0) -> dict[str, torch.Tensor]:
    """Mean softmax entropy (bits) of q.k/sqrt(d) over n_keys random keys as q and k grow by `scales`, without and
    with QK-norm (q and k divided by their RMS first, as an RMSNorm with unit weight does).

    Without the norm the scores grow with the square of the scale and softmax collapses onto one key; with it
    nothing depends on the scale."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_queries, d_head, generator=g)  # (N, d)
    k = torch.randn(n_keys, d_head, generator=g)  # (K, d)

    def entropy(q: torch.Tensor, k: torch.Tensor) -> float:
        p = (q @ k.T / math.sqrt(d_head)).softmax(-1)  # (N, K)
        return float(-(p * p.clamp_min(1e-30).log2()).sum(-1).mean())

    rms = lambda t: t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6)  # noqa: E731
    plain = torch.tensor([entropy(s * q, s * k) for s in scales])
    normed = torch.tensor([entropy(rms(s * q), rms(s * k)) for s in scales])
    return {"without QK-norm": plain, "with QK-norm": normed}


def twin(model: Transformer, **changes) -> Transformer:
    """The same weights under a switched config (QK-norm off, a cap, a sink ...): every tensor both configs have is
    copied; one only the twin has keeps its start (a new norm's weight 1, a sink's logit 0)."""
    other = Transformer(model.cfg.replace(**changes), device=model.device).eval()
    theirs = model.state_dict()
    other.load_state_dict({k: v for k, v in theirs.items() if k in other.state_dict()
                           and other.state_dict()[k].shape == v.shape}, strict=False)
    return other


@torch.no_grad()
def scores_and_weights(model: Transformer, ids: torch.Tensor, layer: int) -> dict[str, torch.Tensor]:
    """One layer's raw scores (B, H, T, T), the weights, and where a sink is, its share (B, H, T)."""
    prefix = hook_name(layer, "attn.", attention_stacks(model.cfg.arch).output)
    names = [prefix + n for n in ("hook_raw_scores", "hook_pattern", "hook_sink_share")]
    _, trace = model.run_with_trace(ids, names=names)
    out = {"scores": trace[names[0]], "weights": trace[names[1]]}
    if names[2] in trace:
        out["sink_share"] = trace[names[2]]
    return out


@torch.no_grad()
def mla_absorbed_gap(model: Transformer, ids: torch.Tensor, layer: int = 0) -> float:
    """Largest |weight| difference between MLA's two forms in one layer: keys rebuilt from the latent (training)
    and W_uk folded into the query, reading the cached latent directly (inference). 0 up to float rounding."""

    prefix = hook_name(layer, "attn.", "")
    names = [prefix + n for n in ("hook_rot_q", "hook_q", "hook_latent", "hook_k_rope", "hook_pattern")]
    _, trace = model.run_with_trace(ids, names=names)
    positions = torch.arange(ids.shape[1], device=model.device)
    inputs = self_attention_inputs(model.cfg, model.blocks[layer].spec, True, positions, positions, positions[None],
                                   positions[None], None, DTYPES[model.cfg.dtype], 0)
    q = trace[names[0]] if names[0] in trace else trace[names[1]]
    k_rope = trace[names[3]] if names[3] in trace else q.new_zeros(*q.shape[:1], 1, q.shape[2], 0)
    absorbed = model.blocks[layer].attn.absorbed_weights(q, trace[names[2]], k_rope, inputs)
    return float((absorbed - trace[names[4]]).abs().max())
