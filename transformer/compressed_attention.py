"""DeepSeek-V4's attention: a sliding window of keys, plus keys pooled in blocks, some chosen by an indexer.

Every layer keeps one head that is both key and value, kv = RMSNorm(x W_kv), turned by RoPE, and queries from a
latent: q = UnitRMS(RMSNorm(x W_q↓) W_q↑) per head. A query sees the last `window` of those (the sliding branch)
and, on a compressed layer, one pooled key per finished block of `rate` tokens before it:

    block_i = RMSNorm(Σ_{t in block i} softmax_t(x_t W_gate + B_pos) ⊙ x_t W_pool)     (per channel)

turned by RoPE at the block's first position. At rate 4 ("indexed") each block also reads the block before it
(two series of weights, 2 rate slots), and a lightning indexer of its own, over keys pooled the same way, keeps
each query's index_top_k best blocks; at rate 128 ("pooled") every finished block is seen. A block counts as
finished for a query only once its last token is at or before the query, so nothing leaks from the future.
Softmax runs over window and blocks together, with a learned sink per head (as gpt-oss). Because V = K carries
RoPE, the output's turned dimensions are turned back by the query's own angle; then the heads go, in o_groups
groups, each through its own projection to o_rank numbers, and one W_o mixes the groups.

The cache keeps the window's keys and each token's pooling projections, from which the blocks are pooled again:
generation with the cache equals recomputation.
"""
from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

from .attention import Attention, AttentionInputs, merge_heads, split_heads
from .hooks import HookPoint
from .layer_plan import LayerSpec
from .norms import UnitRMS, make_norm
from .positions import apply_partial_rope, rope_angles, rope_tables, scaled_inv_freq


class BlockPool(nn.Module):
    """Pools each finished block of `rate` tokens into one key `width` wide (two series where blocks overlap)."""

    def __init__(self, cfg, spec: LayerSpec, width: int):
        super().__init__()
        self.rate, self.width, self.overlaps = spec.compress_rate, width, spec.indexes_blocks
        series = 2 if self.overlaps else 1  # rate 4: each token also writes into the next block's key
        self.pool_proj = nn.Linear(cfg.d_model, series * width, bias=False)
        self.gate_proj = nn.Linear(cfg.d_model, series * width, bias=False)
        self.position_bias = nn.Parameter(torch.zeros(self.rate, series * width))  # B_pos: each slot's own bias
        self.norm = make_norm(cfg, width, "rmsnorm", hook=False)

    @property
    def row_width(self) -> int:
        """What the cache keeps per token: its pooling values and its gates."""
        return 2 * self.pool_proj.out_features

    def rows(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat((self.pool_proj(x), self.gate_proj(x)), dim=-1)  # (B, T, row_width)

    def forward(self, rows: torch.Tensor, rotate) -> torch.Tensor:
        """rows (B, T, row_width) of every token so far -> the finished blocks' keys (B, 1, n_blocks, width)."""
        B, T, _ = rows.shape
        n, r, w = T // self.rate, self.rate, self.width
        values, gates = rows[:, :n * r].chunk(2, dim=-1)  # (B, n r, series w) each
        values = values.reshape(B, n, r, values.shape[-1])  # (B, n, r, series w)
        gates = gates.reshape(B, n, r, gates.shape[-1]) + self.position_bias  # (B, n, r, series w)
        if self.overlaps:  # 2r slots: the block before's first series, then this block's second
            # (B, n, r, w); [:, :n] keeps none before the first block has ended
            earlier_v = torch.cat((values.new_zeros(B, 1, r, w), values[:, :-1, :, :w]), dim=1)[:, :n]
            earlier_g = torch.cat((gates.new_full((B, 1, r, w), float("-inf")), gates[:, :-1, :, :w]), dim=1)[:, :n]
            values = torch.cat((earlier_v, values[..., w:]), dim=2)  # (B, n, 2r, w)
            gates = torch.cat((earlier_g, gates[..., w:]), dim=2)  # (B, n, 2r, w): block 0 has no block before
        pooled = (values * gates.softmax(dim=2)).sum(dim=2)  # (B, n, w): a softmax over the slots, per channel
        starts = torch.arange(n, device=rows.device) * r  # (n,): each block turns by its first position
        return rotate(self.norm(pooled)[:, None], starts)  # (B, 1, n, w)


class BlockIndexer(nn.Module):
    """DeepSeek-V4's indexer: scores every finished block for each query, Σ_h w_h ReLU(q_h · k_block), keeps top k."""

    def __init__(self, cfg, spec: LayerSpec):
        super().__init__()
        self.n_heads, self.d_head, self.top_k = cfg.index_heads, cfg.index_head_dim, spec.index_top_k
        self.q_proj = nn.Linear(cfg.q_rank, self.n_heads * self.d_head, bias=False)  # from the attention's q latent
        self.head_weights = nn.Linear(cfg.d_model, self.n_heads, bias=False)  # w_{t,h}
        self.pool = BlockPool(cfg, spec, self.d_head)  # its own pooled keys, d_index wide
        self.hook_block_scores = HookPoint("hook_block_scores")
        self.hook_blocks_chosen = HookPoint("hook_blocks_chosen")

    def forward(self, x, q_latent, rows, turn, finished: torch.Tensor, rotate) -> torch.Tensor:
        """finished (1, 1, T_q, n): the blocks each query may see -> the chosen ones, bool (B, 1, T_q, n)."""
        B, T_q, _ = x.shape
        q = split_heads(self.q_proj(q_latent), self.n_heads)  # (B, I, T_q, d_I)
        q = apply_partial_rope(q, turn.q_cos, turn.q_sin)  # (B, I, T_q, d_I): its first d_rope dims turned
        keys = self.pool(rows, rotate)  # (B, 1, n, d_I)
        relu = torch.relu(q @ keys.transpose(-2, -1)) * self.d_head ** -0.5  # (B, I, T_q, n)
        weights = self.head_weights(x) * self.n_heads ** -0.5  # (B, T_q, I)
        scores = torch.einsum("bqi,biqn->bqn", weights, relu)  # (B, T_q, n)
        scores = self.hook_block_scores(scores.masked_fill(~finished[:, 0], float("-inf")))  # (B, T_q, n)
        n = scores.shape[-1]
        # ReLU scores tie at 0 often: a stable sort breaks ties toward the earlier block, the same however many
        # blocks follow, so a cached step chooses as the whole text does
        top = scores.sort(dim=-1, descending=True, stable=True).indices[..., :min(self.top_k, n)]  # (B, T_q, k)
        chosen = torch.zeros_like(scores, dtype=torch.bool).scatter_(-1, top, True)  # (B, T_q, n)
        return self.hook_blocks_chosen((chosen & finished[:, 0])[:, None])  # (B, 1, T_q, n): unfinished ones dropped


class CompressedAttention(Attention):
    """One DeepSeek-V4 layer's attention, built from its row of the plan (``spec.compress_rate``)."""

    def __init__(self, cfg, spec: LayerSpec):
        super().__init__(cfg, projections=False, spec=replace(spec, index_top_k=None))  # its indexer picks blocks
        H, d = cfg.n_heads, cfg.d_head
        self.spec, self.cfg = spec, cfg
        self.n_kv_heads = 1  # one head, both key and value, serves every query head
        self.q_down = nn.Linear(cfg.d_model, cfg.q_rank, bias=False)
        self.q_down_norm = make_norm(cfg, cfg.q_rank, "rmsnorm", hook=False)
        self.q_up = nn.Linear(cfg.q_rank, H * d, bias=False)
        self.q_head_norm = UnitRMS(cfg.norm_eps)  # each query head at unit RMS, nothing to learn
        self.kv_proj = nn.Linear(cfg.d_model, d, bias=False)
        self.kv_norm = make_norm(cfg, d, "rmsnorm", hook=False)
        if cfg.o_groups is not None:  # the grouped low-rank output projection
            self.o_groups = cfg.o_groups
            self.o_group_proj = nn.Parameter(torch.empty(cfg.o_groups, cfg.o_rank, H * d // cfg.o_groups))
            nn.init.normal_(self.o_group_proj, 0.0, 0.02)
            self.o_proj = nn.Linear(cfg.o_groups * cfg.o_rank, cfg.d_model, bias=False)
        else:
            self.o_proj = nn.Linear(H * d, cfg.d_model, bias=False)
        self.pool = BlockPool(cfg, spec, d) if spec.compress_rate else None
        self.block_indexer = BlockIndexer(cfg, spec) if spec.indexes_blocks else None
        del self.hook_v  # its values are its keys, hook_rot_k: RoPE turns them too
        self.hook_window = HookPoint("hook_window")
        if self.pool is not None:
            self.hook_compressed_k = HookPoint("hook_compressed_k")

    def rotate_blocks(self, t: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
        """Turns pooled keys (B, 1, n, w) by RoPE at their blocks' first positions `starts` (n,)."""
        inv_freq, scale = scaled_inv_freq(self.cfg, int(starts.max()) + 1 if len(starts) else 1,
                                          self.spec.rope_theta, self.spec.rope_scaling)
        cos, sin = rope_tables(rope_angles(starts[None], inv_freq.to(t.device)), t.dtype, scale)  # (1, 1, n, d_rope)
        return apply_partial_rope(t, cos, sin)  # (B, 1, n, w)

    def pooling_rows(self, x: torch.Tensor) -> torch.Tensor:
        """Each token's pooling projections, the attention's then the indexer's: (B, T, R), R = 0 on a window layer."""
        pools = [self.pool] + ([self.block_indexer.pool] if self.block_indexer is not None else [])
        parts = [pool.rows(x) for pool in pools if pool is not None]
        return torch.cat(parts, dim=-1) if parts else x[..., :0]

    def forward(self, x: torch.Tensor, inputs: AttentionInputs, context=None, cache: "dict | None" = None):
        B, T, _ = x.shape
        turn = inputs.rope
        q_latent = self.q_down_norm(self.q_down(x))  # (B, T, q_rank)
        q = self.q_head_norm(self.hook_q(split_heads(self.q_up(q_latent), self.n_heads)))  # (B, H, T, d_head)
        kv = self.hook_k(split_heads(self.kv_norm(self.kv_proj(x)), 1))  # (B, 1, T, d_head): K = V
        self.hook_rope_angles(turn.angles)
        q = self.hook_rot_q(apply_partial_rope(q, turn.q_cos, turn.q_sin))  # (B, H, T, d_head)
        kv = self.hook_rot_k(apply_partial_rope(kv, turn.k_cos, turn.k_sin))  # (B, 1, T, d_head)
        rows = self.pooling_rows(x)  # (B, T, R)
        if cache is not None:  # the window's keys and every token's pooling rows, cached ones first
            if self in cache:
                past_kv, past_rows = cache[self]
                kv = torch.cat((past_kv, kv), dim=2)  # (B, 1, T_kv, d_head)
                rows = torch.cat((past_rows, rows), dim=1)  # (B, T_kv, R)
            cache[self] = (kv, rows)
        allowed = self.hook_window(inputs.allowed.expand(B, -1, -1, -1))  # (B, 1, T, T_kv): the sliding branch
        keys = kv
        if self.pool is not None:
            keys, allowed = self.with_blocks(x, q_latent, kv, rows, turn, allowed)
        weights_in = AttentionInputs.from_allowed(allowed, dtype=q.dtype)
        return self.attend(q, keys, keys, weights_in, gate=turn)  # (B, T, d_model)

    def with_blocks(self, x, q_latent, kv, rows, turn, allowed):
        """The window's keys and the finished blocks' keys side by side, and which of them each query sees."""
        T, T_kv = x.shape[1], kv.shape[2]
        own = self.pool.row_width
        blocks = self.hook_compressed_k(self.pool(rows[..., :own], self.rotate_blocks))  # (B, 1, n, d_head)
        n = blocks.shape[2]
        positions = torch.arange(T_kv - T, T_kv, device=x.device)  # (T,): the queries' places
        finished = (torch.arange(n, device=x.device)[None] < ((positions + 1) // self.spec.compress_rate)[:, None])
        finished = finished[None, None]  # (1, 1, T, n): block i ends at or before the query
        if self.block_indexer is not None:
            finished = self.block_indexer(x, q_latent, rows[..., own:], turn, finished, self.rotate_blocks)
        keys = torch.cat((kv, blocks), dim=2)  # (B, 1, T_kv + n, d_head)
        return keys, torch.cat((allowed, finished.expand(x.shape[0], -1, -1, -1)), dim=-1)  # (B, 1, T, T_kv + n)

    def output(self, z: torch.Tensor, turn) -> torch.Tensor:
        """z (B, H, T, d_head) turned back by the query's angle (V carried RoPE), then the grouped projection."""
        z = apply_partial_rope(z, turn.q_cos, -turn.q_sin)  # (B, H, T, d_head)
        heads = merge_heads(z)  # (B, T, H * d_head)
        if not hasattr(self, "o_group_proj"):
            return self.o_proj(heads)  # (B, T, d_model)
        B, T, _ = heads.shape
        groups = heads.view(B, T, self.o_groups, -1)  # (B, T, g, H d_head / g)
        low = torch.einsum("btgi,gri->btgr", groups, self.o_group_proj)  # (B, T, g, o_rank): each group its own
        return self.o_proj(low.reshape(B, T, -1))  # (B, T, d_model)
