"""embed -> position -> N blocks -> final norm -> unembed, and generate() with a KV cache.

Decoder-only and encoder-only models are one stack of blocks; an encoder-decoder
has two (``encoder.`` and ``decoder.``) sharing one token embedding, and every
decoder block cross-attends to the encoder's output.
"""
from __future__ import annotations

import contextlib
import math
from typing import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from . import masks
from .attention import Attention, AttentionInputs
from .block import Block
from .config import TransformerConfig
from .ffn import MoE
from .hooks import DEFAULT_MAX_BYTES, HookPoint, Intervention, NameFilter, Recorder, Trace, name_hook_points, recording
from .hyper_connections import HyperHead, widen
from .indexer import LightningIndexer
from .layer_plan import LayerSpec
from .linear_attention import LinearAttention, state_inputs
from .norms import make_norm
from .paged_cache import PagedKVCache
from .per_layer import PerLayerEmbedding
from .short_conv import ShortConv
from .positions import (POSITION_EMBEDDINGS, ROTATIONS, SCORE_BIASES, RelativePositionBias, rope_angles,
                        scaled_inv_freq, temperature_scales)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def default_device() -> torch.device:
    """CUDA when there is a GPU, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class KVCache:
    """What each layer keeps of the past, two tensors per layer.

    A softmax layer keeps the keys and values of every past token, (B, G, T, d_head) each: GQA and MQA
    store only their G kv heads, which is the point of them (MLA: its latent and RoPE key). A layer that
    reuses an earlier layer's K and V (``kv_shared_layers``, Gemma 4) keeps nothing: that layer's entry
    serves both. A layer that keeps a state keeps that state instead, (B, H, d_k, d_v) however long the
    text, and its short convolution's last inputs (B, channels, K - 1), empty without one.
    """

    def __init__(self):
        self.layers: dict[nn.Module, tuple[torch.Tensor, torch.Tensor]] = {}
        self.position_ids: torch.Tensor | None = None  # (B or 1, T) positions of the cached tokens
        self.length = 0

    def __contains__(self, layer: nn.Module) -> bool:
        return layer in self.layers

    def __getitem__(self, layer: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
        return self.layers[layer]

    def __setitem__(self, layer: nn.Module, kept: tuple[torch.Tensor, torch.Tensor]) -> None:
        self.layers[layer] = kept

    @property
    def nbytes(self) -> int:
        """Every byte kept: keys and values, latents, states and convolution inputs."""
        return sum(t.numel() * t.element_size() for kept in self.layers.values() for t in kept)

    def shapes(self) -> list[tuple[int, ...]]:
        """The first tensor of each layer: its keys (B, G, T, d_head), or its state (B, H, d_k, d_v)."""
        return [tuple(first.shape) for first, _ in self.layers.values()]

    def truncate(self, length: int) -> None:
        """Forget every token past the first `length`, as if only they had been fed (speculative decoding's rollback).

        Each layer names the axis along which its kept tensors count tokens (`cache_token_dims`); cross-attention
        keeps the encoder's keys whole. A layer that keeps a state has folded every token into it and cannot give
        one back: the cache is then left as it was and a ValueError says which layer.
        """
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot truncate a cache of {self.length} tokens to {length}: "
                             f"pass a length from 0 to {self.length}")
        # what does not grow by token (no axis named) is cross-attention's encoder keys, kept whole, or a state:
        # refused, never cut wrongly
        token_dims = {layer: getattr(layer, "cache_token_dims", None) for layer in self.layers}
        stateful = sorted({type(layer).__name__ for layer, dims in token_dims.items()
                           if dims is None and not getattr(layer, "cross", False)})
        if stateful:
            raise ValueError(f"a cache holding {', '.join(stateful)} layers cannot be truncated to {length} of its "
                             f"{self.length} tokens: such a layer keeps a state of fixed size, not one entry per token; "
                             "use a model whose layers are all softmax attention")
        for layer, kept in self.layers.items():
            dims = token_dims[layer]  # None: cross-attention's keys, kept whole
            if dims is not None:
                # K, V (B, G, length, d_head); MLA's latent (B, length, kv_rank) and rotated key (B, 1, length, d_rope)
                self.layers[layer] = tuple(t.narrow(dim, 0, length) for t, dim in zip(kept, dims))
        if self.position_ids is not None:
            self.position_ids = self.position_ids[:, :length]  # (B or 1, length)
        self.length = length

    def reserve(self, batch: int, new: int, attention_mask: torch.Tensor | None, device: torch.device) -> None:
        """Nothing to set aside before a pass: each layer concatenates its new keys and values to its past."""


# a cache of each layout of AXES["kv_cache"]: the same tokens and logits, the memory laid out otherwise
CACHE_LAYOUTS: dict[str, type] = {"contiguous": KVCache, "paged": PagedKVCache}


class Stack(nn.Module):
    """The encoder or the decoder of an encoder-decoder."""

    def __init__(self, cfg: TransformerConfig, causal: bool, cross: bool):
        super().__init__()
        build_stack(self, cfg, causal, cross)

    def forward(self, tok_emb, attention_mask=None, position_ids=None, cache=None, memory=None, memory_mask=None):
        return run_stack(self, tok_emb, attention_mask, position_ids, cache, memory, memory_mask)


def build_stack(owner: nn.Module, cfg: TransformerConfig, causal: bool, cross: bool) -> None:
    """Give `owner` the modules of one stack (a decoder-only model is its own stack)."""
    owner.cfg, owner.causal = cfg, causal
    owner.hook_embed = HookPoint("hook_embed")
    scheme = cfg.row("position")
    if scheme.adds_embedding:
        owner.pos = POSITION_EMBEDDINGS[cfg.position](cfg.max_len, cfg.d_model)
        owner.hook_pos_embed = HookPoint("hook_pos_embed", scheme)
    if scheme.learned_bias:  # T5: one table per stack, its buckets split by sign where keys follow the query too
        owner.rel_bias = RelativePositionBias(cfg, bidirectional=not causal)
    if cfg.embed_norm:  # BERT and BLOOM: a LayerNorm whatever the blocks use
        owner.ln_embed = make_norm(cfg, kind="layernorm")
    owner.embed_dropout = nn.Dropout(cfg.dropout)
    if cfg.per_layer_dim is not None:  # Gemma 4: every layer's own embedding of the tokens (transformer/per_layer.py)
        owner.per_layer_embed = PerLayerEmbedding(cfg)
    owner.blocks = nn.ModuleList(Block(cfg, spec, cross=cross) for spec in cfg.layer_plan())
    if cfg.hyper_streams > 1:  # the blocks keep several residual streams; one vector per token leaves them
        owner.hyper_head = HyperHead(cfg)
    if cfg.has_final_norm:  # by default unless the blocks end on a norm (post-norm)
        owner.ln_final = make_norm(cfg)


def run_stack(owner, tok_emb, attention_mask, position_ids, cache, memory, memory_mask,
              ids: torch.Tensor | None = None) -> torch.Tensor:
    """The stack's blocks over the embedded tokens (B, T, d_model); `ids` (B, T) feed per-layer embeddings."""
    cfg = owner.cfg
    B, T, _ = tok_emb.shape
    device = tok_emb.device
    past = cache.length if cache is not None else 0
    slots_q = torch.arange(past, past + T, device=device)  # where the new tokens sit
    slots_k = torch.arange(0, past + T, device=device)  # every key, cached ones first
    if position_ids is None:
        position_ids = slots_q[None]  # (1, T)
    if cache is not None:  # a paged cache takes its blocks for the new tokens here, once for every layer
        cache.reserve(B, T, attention_mask, device)
    scheme = cfg.row("position")
    if scheme.bounds_length and int(position_ids.max()) >= cfg.max_len:
        raise ValueError(
            f"a sequence reaching position {int(position_ids.max())} is too long for {cfg.position} positions "
            f"with max_len={cfg.max_len}; shorten the input to at most {cfg.max_len} tokens or raise max_len")
    k_position_ids = position_ids
    if cache is not None and cache.position_ids is not None:
        batch = max(position_ids.shape[0], cache.position_ids.shape[0])
        k_position_ids = torch.cat((cache.position_ids.expand(batch, -1), position_ids.expand(batch, -1)), dim=1)

    x = owner.hook_embed(tok_emb * _embedding_scale(cfg, tok_emb.dtype) if cfg.scale_embeddings else tok_emb)
    if scheme.adds_embedding:
        x = x + owner.hook_pos_embed(owner.pos(position_ids))  # (B, T, d_model)
    if cfg.embed_norm:
        x = owner.ln_embed(x)
    x = owner.embed_dropout(x)
    per_layer = None  # (B, T, L, per_layer_dim): Gemma 4's input of each layer, from the ids and their embedding
    if cfg.per_layer_dim is not None:
        if ids is None:
            raise ValueError(f"per_layer_dim={cfg.per_layer_dim} looks each token up in every layer's own table: pass "
                             "input_ids (inputs_embeds are no token ids)")
        per_layer = owner.per_layer_embed(ids, x)

    # one set of attention inputs per kind of layer in the plan (its keys, its RoPE), shared by its layers;
    # a layer that keeps a state needs only to know where the padding is. Where later layers reuse an earlier
    # layer's K and V, every layer of this pass shares one place that holds them by layer
    layer_kv = {} if any(block.spec.reuses_kv for block in owner.blocks) else None
    kinds = {block.spec.inputs_key: block for block in reversed(owner.blocks)}  # one layer of each kind
    inputs = {key: state_inputs(attention_mask, T) if block.spec.row.keeps_state else
              self_attention_inputs(block.layer_cfg, block.spec, owner.causal, slots_q, slots_k, position_ids,
                                    k_position_ids, attention_mask, x.dtype, past, layer_kv,
                                    getattr(owner, "rel_bias", None))
              for key, block in kinds.items()}
    cross_inputs = None
    if memory is not None:
        allowed = masks.cross(memory_mask, T, memory.shape[1], device)  # (B or 1, 1, T, T_src)
        cross_inputs = AttentionInputs.given(allowed, plain_causal=False, no_mask=memory_mask is None, dtype=x.dtype)
    if cfg.hyper_streams > 1:
        x = widen(x, cfg.hyper_streams)  # (B, T, n, d_model): hyper-connections' streams, alike at first
    for i, block in enumerate(owner.blocks):
        own = per_layer[:, :, i] if per_layer is not None else None  # (B, T, per_layer_dim)
        x = block(x, inputs[block.spec.inputs_key], cross_inputs, memory, cache, own, ids)  # (B, T, d_model)
    if cfg.hyper_streams > 1:
        x = owner.hyper_head(x)  # (B, T, d_model)
    if cache is not None:
        cache.position_ids, cache.length = k_position_ids, past + T
    if cfg.has_final_norm:
        x = owner.ln_final(x)
    return x


def _embedding_scale(cfg: TransformerConfig, dtype: torch.dtype) -> torch.Tensor:
    """Gemma's sqrt(d_model), rounded to the embeddings' dtype as Gemma rounds it."""
    return torch.tensor(cfg.d_model ** 0.5, dtype=dtype)


def self_attention_inputs(cfg, spec: LayerSpec, causal, slots_q, slots_k, position_ids, k_position_ids, attention_mask,
                          dtype, past, layer_kv: dict | None = None, learned_bias: nn.Module | None = None):
    """Mask, RoPE tables, the scores' position bias (ALiBi, T5) and q's temperature for the layers of the plan that
    share this one's: built once per forward. `layer_kv` is the pass's one place for K and V that later layers reuse
    (None: no layer does); `learned_bias` the stack's table of T5 biases (None without one)."""
    def keys(rows: slice) -> torch.Tensor:  # which keys the query rows asked for see: (B or 1, 1, rows, T_kv)
        return masks.self_attention(slots_q[rows], slots_k, is_causal=causal, window=spec.window, chunk=spec.chunk,
                                    attention_mask=attention_mask, pattern=cfg.attention_pattern,
                                    pattern_size=cfg.pattern_size, n_global=cfg.n_global)

    scheme = cfg.row("position")
    simple = (attention_mask is None and spec.bound is None and not cfg.row("attention_pattern").sparse
              and not scheme.score_bias)
    rope = score_bias = q_scale = None
    if spec.rotates:  # a NoPE layer of a RoPE model has no tables
        seq_len = int(k_position_ids.max()) + 1
        inv_freq, scale = scaled_inv_freq(cfg, seq_len, spec.rope_theta, spec.rope_scaling)
        angles = rope_angles(position_ids, inv_freq.to(slots_q.device))  # (B or 1, T, d_rope/2)
        rope = ROTATIONS[cfg.position](position_ids, angles, dtype, scale)
    elif cfg.attn_temperature_scale is not None:  # Llama 4: a NoPE layer sharpens q with its position instead
        q_scale = temperature_scales(position_ids, cfg.attn_temperature_scale, cfg.attn_temperature_floor)
    if scheme.score_bias:  # ALiBi's fixed slopes or T5's learned buckets, for the new queries against every key
        def score_bias(rows: slice) -> torch.Tensor:  # (B or 1, H, rows, T_kv)
            return SCORE_BIASES[cfg.position](cfg, learned_bias, position_ids[:, rows], k_position_ids).to(dtype)
    return AttentionInputs(keys, len(slots_q), dtype, plain_causal=simple and causal and past == 0,
                           no_mask=simple and not causal, rope=rope, score_bias=score_bias, q_scale=q_scale,
                           layer_kv=layer_kv)


class Transformer(nn.Module):
    """The whole model. ``model(ids)`` for one stack; ``model(src_ids, tgt_ids)`` for an encoder-decoder."""

    def __init__(self, cfg: TransformerConfig, device: torch.device | str | None = None):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        arch = cfg.row("arch")
        if arch.cross:
            self.encoder = Stack(cfg, causal=False, cross=False)
            self.decoder = Stack(cfg, causal=True, cross=True)
        else:
            build_stack(self, cfg, causal=arch.causal, cross=False)
        if cfg.head_transform:  # BERT's masked-LM head: dense -> activation -> LayerNorm
            self.head_dense = nn.Linear(cfg.d_model, cfg.d_model)
            self.head_norm = make_norm(cfg, kind="layernorm")
        self.unembed = nn.Linear(cfg.d_model, cfg.vocab_size, bias=cfg.head_bias)
        self.hook_logits = HookPoint("hook_logits")
        self._init_weights()
        if cfg.tie_embeddings:
            self.unembed.weight = self.embed.weight
        name_hook_points(self)
        self.to(device=device or default_device(), dtype=DTYPES[cfg.dtype])

    def _init_weights(self) -> None:
        # GPT-2's scheme: N(0, 0.02), residual output projections shrunk by sqrt(2 * n_layers)
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * self.cfg.n_layers) if name.endswith(("o_proj.weight", "down.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
        for module in self.modules():
            if isinstance(module, (LinearAttention, ShortConv)):  # decays and convolutions start where their authors start them
                module.reset_state_parameters()

    @property
    def device(self) -> torch.device:
        return self.embed.weight.device

    # --- forward ----------------------------------------------------------------

    def forward(self, input_ids: torch.Tensor | None = None, tgt_ids: torch.Tensor | None = None, *,
                inputs_embeds: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None, tgt_attention_mask: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, cache: KVCache | None = None) -> torch.Tensor:
        """Logits (B, T, vocab). For an encoder-decoder, input_ids is the source and tgt_ids the target.

        A decoder or encoder takes `inputs_embeds` (B, T, d_model) in place of input_ids: vectors that
        are no token of the vocabulary (an image's patches, see transformer/vision.py) enter where
        E[token ids] would, and everything after the embedding is the same.
        """
        if self.cfg.row("arch").cross:
            if inputs_embeds is not None:
                raise ValueError("inputs_embeds is for arch='decoder' or 'encoder'; an encoder-decoder takes model(src_ids, tgt_ids)")
            self._check_ids(input_ids, "input_ids")
            if tgt_ids is None:
                raise ValueError("an encoder-decoder model takes model(src_ids, tgt_ids); tgt_ids is missing")
            memory = self.encode(input_ids, attention_mask)
            return self.decode(tgt_ids, memory, attention_mask, tgt_attention_mask, position_ids, cache)
        tok_emb = self.embed_inputs(input_ids, inputs_embeds)  # (B, T, d_model)
        if tgt_ids is not None:
            raise ValueError(f"a {self.cfg.arch} model takes one sequence; tgt_ids is only for arch='encoder-decoder'")
        h = run_stack(self, tok_emb, attention_mask, position_ids, cache, None, None, input_ids)
        return self.hook_logits(self.head(h))

    def embed_inputs(self, input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None) -> torch.Tensor:
        """E[input_ids] (B, T, d_model), or inputs_embeds given in its place: exactly one of the two."""
        if inputs_embeds is None:
            self._check_ids(input_ids, "input_ids")
            return self.embed(input_ids)  # (B, T, d_model)
        if input_ids is not None:
            raise ValueError("pass input_ids or inputs_embeds, not both")
        if inputs_embeds.dim() != 3 or inputs_embeds.shape[1] == 0 or inputs_embeds.shape[2] != self.cfg.d_model:
            raise ValueError(f"inputs_embeds must be a (batch, tokens, d_model={self.cfg.d_model}) tensor with at least "
                             f"one token, got shape {tuple(inputs_embeds.shape)}")
        return inputs_embeds

    def encode(self, src_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The encoder's output (B, S, d_model), which every decoder block cross-attends to."""
        return self.encoder(self.embed(src_ids), attention_mask)

    def decode(self, tgt_ids, memory, src_attention_mask=None, tgt_attention_mask=None, position_ids=None, cache=None):
        self._check_ids(tgt_ids, "tgt_ids")
        h = self.decoder(self.embed(tgt_ids), tgt_attention_mask, position_ids, cache, memory, src_attention_mask)
        return self.hook_logits(self.head(h))

    def head(self, h: torch.Tensor) -> torch.Tensor:
        if self.cfg.head_input_scale is not None:  # T5 with a tied head: the embedding's scale undone, d_model**-0.5
            h = h * self.cfg.head_input_scale  # (B, T, d_model)
        if self.cfg.head_transform:
            h = self.head_norm(F.gelu(self.head_dense(h), approximate=self.cfg.gelu_approximate))
        logits = self.unembed(h)  # (B, T, vocab)
        cap = self.cfg.logit_softcap
        return logits if cap is None else cap * torch.tanh(logits / cap)  # Gemma 2: every logit inside (-cap, cap)

    def _check_ids(self, ids: torch.Tensor | None, what: str) -> None:
        if ids is None:
            raise ValueError(f"{what} is missing: pass a (batch, tokens) tensor of token ids")
        if ids.dim() != 2 or ids.shape[1] == 0:
            raise ValueError(f"{what} must be a (batch, tokens) tensor with at least one token, got shape {tuple(ids.shape)}")
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.cfg.vocab_size):
            raise ValueError(f"{what} holds ids from {int(ids.min())} to {int(ids.max())}, outside 0..{self.cfg.vocab_size - 1} (vocab_size={self.cfg.vocab_size})")

    # --- recording and interventions -----------------------------------------------

    def run_with_trace(self, *args, names: NameFilter = None, interventions: dict[str, Intervention] | None = None,
                       max_bytes: int | None = DEFAULT_MAX_BYTES, **kwargs) -> tuple[torch.Tensor, Trace]:
        """Forward pass that records every hook point (or those in `names`: exact names or globs).

        Returns (logits, trace). Only tensors asked for are kept; past `max_bytes` it stops with MemoryError, and
        a text whose one (B, H, T, T) pattern alone is over `max_bytes` is refused before anything is computed.
        """
        self._check_weights_fit(args, names, max_bytes)
        with torch.no_grad(), recording(names, interventions, max_bytes) as recorder:
            logits = self(*args, **kwargs)
        return logits, recorder.trace

    def _check_weights_fit(self, args: tuple, names: NameFilter, max_bytes: int | None) -> None:
        """Refuse, before computing, a recording of T x T weights that one layer's tensor alone would take past
        the cap: such a text is read through ``transformer.long_context.summarize`` instead."""
        ids = next((a for a in args if isinstance(a, torch.Tensor)), None)
        if max_bytes is None or ids is None or ids.dim() != 2:
            return
        wants = Recorder(names)
        square = [n for n in self.hook_points() if n.endswith((".hook_pattern", ".hook_attn_scores")) and wants.keeps(n)]
        B, T = ids.shape
        one = B * self.cfg.n_heads * T * T * 4  # one float32 (B, H, T, T) tensor
        if square and one > max_bytes:
            raise MemoryError(
                f"recording {square[0]} on {T} tokens makes a (B={B}, H={self.cfg.n_heads}, T={T}, T={T}) tensor of "
                f"{one / 2**20:.0f} MiB, over the cap of {max_bytes / 2**20:.0f} MiB; for where each head looks on a "
                "long text use transformer.long_context.summarize(model, ids), which never holds T x T, or record "
                "names without the weights (names=[...])")

    @contextlib.contextmanager
    def intervene(self, interventions: dict[str, Intervention]) -> Iterator[None]:
        """Replace tensors at hook points for forward passes inside the block (this thread only).

        ``{"blocks.0.attn.hook_pattern": lambda t, event: t * keep}`` -- each function gets the
        tensor and its event and returns the replacement.
        """
        with recording(interventions=interventions, record=False):
            yield

    def hook_points(self) -> dict[str, HookPoint]:
        return {m.name: m for m in self.modules() if isinstance(m, HookPoint)}

    def set_fused(self, fused: bool) -> "Transformer":
        """fused=False runs the explicit five-line attention everywhere (for teaching and checks), and a layer that
        keeps a state its recurrent form, token by token, instead of the chunked one."""
        for m in self.modules():
            if isinstance(m, (Attention, LinearAttention)):
                m.fused = fused
        return self

    @property
    def aux_loss(self) -> torch.Tensor:
        """The MoE load-balancing loss of the last forward pass, summed over layers (0 without MoE)."""
        losses = [m.aux_loss for m in self.modules() if isinstance(m, MoE)]
        return torch.stack(losses).sum() if losses else torch.zeros((), device=self.device)

    @property
    def indexer_loss(self) -> torch.Tensor:
        """The lightning indexers' matching loss of the last training forward pass, summed over layers (0 without
        an indexer): each indexer learns from it alone, the model never does (transformer/indexer.py)."""
        losses = [m.loss for m in self.modules() if isinstance(m, LightningIndexer)]
        return torch.stack(losses).sum() if losses else torch.zeros((), device=self.device)

    # --- generation ---------------------------------------------------------------

    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor, max_new_tokens: int, use_cache: bool = True, *,
                 temperature: float = 0.0, top_k: int | None = None, attention_mask: torch.Tensor | None = None,
                 generator: torch.Generator | None = None, tgt_ids: torch.Tensor | None = None,
                 start_token_id: int = 0, cache: KVCache | PagedKVCache | None = None) -> torch.Tensor:
        """Extend the sequence by max_new_tokens: greedy (temperature 0) or sampled (temperature, top_k).

        Decoder: returns (B, T + new). Encoder-decoder: input_ids is the source, the target starts
        from tgt_ids (or start_token_id) and (B, T_tgt + new) is returned; the encoder runs once.
        Pass your own `cache` to inspect it afterwards; a `PagedKVCache` keeps it in blocks (CACHE_LAYOUTS).
        """
        if not self.cfg.row("arch").causal:
            raise ValueError("an encoder-only model does not generate; use arch='decoder' or 'encoder-decoder'")
        if max_new_tokens < 0:
            raise ValueError(f"max_new_tokens={max_new_tokens} must be at least 0")
        B = input_ids.shape[0]
        if self.cfg.row("arch").cross:
            src_mask = attention_mask
            memory = self.encode(input_ids, src_mask)
            ids = tgt_ids if tgt_ids is not None else torch.full((B, 1), start_token_id, dtype=torch.long, device=input_ids.device)
            mask = None
            step = lambda new_ids, pos, m, c: self.decode(new_ids, memory, src_mask, m, pos, c)
        else:
            ids, mask = input_ids, attention_mask
            step = lambda new_ids, pos, m, c: self(new_ids, attention_mask=m, position_ids=pos, cache=c)
        # with left padding, each row's positions count its real tokens only
        if mask is not None:
            positions = (mask.long().cumsum(-1) - 1).clamp(min=0)  # (B, T)
        else:
            positions = torch.arange(ids.shape[1], device=ids.device).expand(B, -1)  # (B, T)
        cache = (cache if cache is not None else KVCache()) if use_cache else None
        new_ids = ids
        for _ in range(max_new_tokens):
            if cache is None:  # recompute the whole sequence every step
                logits = step(ids, positions, mask, None)
            else:  # only the new tokens; the past comes from the cache
                logits = step(new_ids, positions[:, -new_ids.shape[1]:], mask, cache)
            new_ids = self._pick(logits[:, -1].float(), temperature, top_k, generator)[:, None]  # (B, 1)
            ids = torch.cat((ids, new_ids), dim=1)
            positions = torch.cat((positions, positions[:, -1:] + 1), dim=1)
            if mask is not None:
                mask = torch.cat((mask, torch.ones_like(new_ids, dtype=mask.dtype)), dim=1)
        return ids

    @staticmethod
    def _pick(logits: torch.Tensor, temperature: float, top_k: int | None, generator) -> torch.Tensor:
        if temperature <= 0:
            return logits.argmax(-1)
        logits = logits / temperature
        if top_k is not None:
            kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        return torch.multinomial(logits.softmax(-1), 1, generator=generator)[:, 0]
