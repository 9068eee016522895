"""DeepSeek-V3.2's lightning indexer: a few narrow heads choose each query's top-k keys (DeepSeek Sparse Attention).

Attention that reads every earlier key pays for the whole text at every token. The indexer scores every key far
more cheaply, with I small heads of width d_I that share one key per token and use ReLU instead of a softmax:

    score(t, s) = Σ_h w_{t,h} · ReLU(q_{t,h} · k_s / sqrt(d_I)) / sqrt(I)

where q_{t,h} comes from the query's own input (DeepSeek: the attention's q latent), k_s = LayerNorm(x_s W_k) is
one key per token for all heads, the first d_rope dimensions of both turned by RoPE, and w_{t,h} = x_t W_w says
how much head h counts for query t. Each query then attends only to the k earlier keys it scores highest
(``masks.top_k``); the attention itself is unchanged. The indexer's keys are cached beside the attention's own.
GLM-5 reuses it as it is (its rotary pairs, interleaved, are reordered on loading: transformer/interop/hf_dsa.py).
"""
from __future__ import annotations

import torch
from torch import nn

from . import masks
from .hooks import HookPoint
from .layer_plan import LayerSpec
from .positions import apply_partial_rope


class LightningIndexer(nn.Module):
    """Scores every key a query may see and keeps its top k: (B, 1, T_q, T_kv), True = attend, and the scores.

    ``query_width`` is the width of what its queries are projected from: the attention's q latent where MLA has
    one (q_rank, as DeepSeek-V3.2 and GLM-5), else the block's input x.
    """

    def __init__(self, cfg, spec: LayerSpec, query_width: int):
        super().__init__()
        self.n_heads, self.d_head, self.top_k = cfg.index_heads, cfg.index_head_dim, spec.index_top_k
        self.d_rope = cfg.d_rope if spec.rotates else 0  # the dimensions RoPE turns, first in each head
        self.q_proj = nn.Linear(query_width, self.n_heads * self.d_head, bias=False)
        self.k_proj = nn.Linear(cfg.d_model, self.d_head, bias=False)  # one key per token, shared by the heads
        self.k_norm = nn.LayerNorm(self.d_head, eps=1e-6)  # DeepSeek's indexer keeps its own LayerNorm and eps
        self.head_weights = nn.Linear(cfg.d_model, self.n_heads, bias=False)  # w_{t,h}: each head's say per query
        self.cache_token_dims = (2, 2)  # its cached keys, (B, 1, T, d_rope) and (B, 1, T, rest), grow by token
        self.hook_index_q = HookPoint("hook_index_q")
        self.hook_index_k = HookPoint("hook_index_k")
        self.hook_index_weights = HookPoint("hook_index_weights")
        self.hook_index_scores = HookPoint("hook_index_scores")
        self.hook_index_chosen = HookPoint("hook_index_chosen")
        self.loss = torch.zeros(())  # matching_loss of the last forward pass in training, 0 otherwise

    def forward(self, x: torch.Tensor, query_source: torch.Tensor, inputs,
                cache: "dict | None" = None) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, T_q, d_model), query_source (B, T_q, query_width), the layer's AttentionInputs -> the chosen keys
        (B, 1, T_q, T_kv) and the scores that chose them (B, T_q, T_kv), which the indexer's loss reads."""
        B, T_q, _ = x.shape
        q = self.q_proj(query_source).view(B, T_q, self.n_heads, self.d_head).transpose(1, 2)  # (B, I, T_q, d_I)
        k = self.k_norm(self.k_proj(x))[:, None]  # (B, 1, T_q, d_I)
        if inputs.rope is not None:  # RoPE on the first d_rope dimensions, with the attention's own tables
            turn = inputs.rope
            q = apply_partial_rope(q, turn.q_cos, turn.q_sin)  # (B, I, T_q, d_I)
            k = apply_partial_rope(k, turn.k_cos, turn.k_sin)  # (B, 1, T_q, d_I)
        if cache is not None:  # kept as its turned part and the rest, cached ones first
            turned, rest = k.split((self.d_rope, self.d_head - self.d_rope), dim=-1)
            if self in cache:
                past_turned, past_rest = cache[self]
                turned = torch.cat((past_turned, turned), dim=2)  # (B, 1, T_kv, d_rope)
                rest = torch.cat((past_rest, rest), dim=2)  # (B, 1, T_kv, d_I - d_rope)
            cache[self] = (turned, rest)
            k = torch.cat((turned, rest), dim=-1)  # (B, 1, T_kv, d_I)
        q, k = self.hook_index_q(q), self.hook_index_k(k)
        relu = torch.relu((q @ k.transpose(-2, -1)) * self.d_head ** -0.5)  # (B, I, T_q, T_kv): ReLU(q·k / √d_I)
        weights = self.hook_index_weights(self.head_weights(x) * self.n_heads ** -0.5)  # (B, T_q, I)
        scores = self.hook_index_scores(torch.einsum("bqi,biqk->bqk", weights, relu))  # (B, T_q, T_kv)
        return self.hook_index_chosen(masks.top_k(scores, inputs.allowed, self.top_k)), scores  # (B, 1, T_q, T_kv)


def matching_loss(scores: torch.Tensor, dense: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """KL(p || softmax(scores)): how far the indexer's ranking is from the attention it stands in for.

    DeepSeek-V3.2 trains its indexer on this loss alone: p is the layer's dense softmax weights summed over heads
    and renormalised (B, T_q, T_kv), the target, so no gradient of it reaches the model; the top-k choice is a
    sort, so no gradient of the model's loss reaches the indexer either. scores (B, T_q, T_kv) are the indexer's,
    dense (B, H, T_q, T_kv), allowed (B or 1, 1, T_q, T_kv) the keys each query may see.
    """
    seen = allowed[:, 0]  # (B or 1, T_q, T_kv)
    target = dense.detach().sum(1)  # (B, T_q, T_kv)
    target = target / target.sum(-1, keepdim=True)  # rows of 1 again where a sink took a share
    log_q = torch.log_softmax(scores.masked_fill(~seen, float("-inf")), dim=-1)  # (B, T_q, T_kv)
    kl = torch.xlogy(target, target) - target * log_q.masked_fill(~seen, 0.0)  # (B, T_q, T_kv): 0 off the mask
    return kl.sum(-1).mean()


def kept_by_k(dense: torch.Tensor, values: torch.Tensor, order: torch.Tensor, ks: list[int]) -> dict[str, list[float]]:
    """What one query keeps when it attends to only the first k keys of `order`, for each k of `ks`.

    dense (H, T_kv): its softmax weights over every key it may see (rows sum to 1, or to 1 minus a sink's share);
    values (H, T_kv, d_v): each head's values; order (n,): the keys it may see, most wanted first (the indexer's
    ranking, or any other). Keeping the first k renormalises the weights over them, as softmax over those keys
    alone does: w_j / (mass kept + the sink's share). Returns {"mass": the dense weight the kept keys hold, mean
    over heads; "error": |z_k - z| / |z|, z = concat over heads of weights @ values}.
    """
    sink_share = 1 - dense.sum(-1, keepdim=True)  # (H, 1): 0 without sinks
    full = torch.einsum("hk,hkd->hd", dense, values)  # (H, d_v): each head's dense output
    mass, error = [], []
    for k in ks:
        kept = torch.zeros_like(dense[0], dtype=torch.bool)
        kept[order[:k]] = True  # (T_kv,)
        held = (dense * kept).sum(-1, keepdim=True)  # (H, 1)
        sparse = dense * kept / (held + sink_share)  # (H, T_kv): softmax over the kept keys
        mass.append(float(held.mean()))
        error.append(float((torch.einsum("hk,hkd->hd", sparse, values) - full).norm() / full.norm()))
    return {"mass": mass, "error": error}


def with_indexer(model, top_k: int, heads: int = 4, head_dim: int | None = None, seed: int = 0):
    """A copy of `model` whose softmax layers keep their top_k keys: its own indexer where it has one (DeepSeek-V3.2
    opened from Hugging Face, k changed), else a new one of `heads` heads of `head_dim` (None: 2 d_rope, at least
    16) with seeded random weights, every other weight shared with `model`."""
    cfg = model.cfg
    changes = {"index_top_k": top_k}
    if not any(spec.selects_keys for spec in cfg.layer_plan()):
        changes |= {"index_heads": heads, "index_head_dim": head_dim or max(16, 2 * cfg.d_rope)}
    torch.manual_seed(seed)
    copy = type(model)(cfg.replace(**changes), device=model.device).eval()
    missing, unexpected = copy.load_state_dict(model.state_dict(), strict=False)
    assert not unexpected and all(".indexer." in name for name in missing), (missing, unexpected)
    return copy


# --- how much of the dense weight the chosen keys hold ---------------------------------------------------


def mass_kept(dense: torch.Tensor, ranking: torch.Tensor, ks: list[int]) -> list[float]:
    """dense (N, H, T, T) weights, ranking (N, T, T) of each query's keys, higher first (hidden keys -inf): the dense
    weight its first k keys hold, mean over heads and the queries that see more than k keys, for each k."""
    order = ranking.sort(dim=-1, descending=True, stable=True).indices  # (N, T, T)
    ranked = dense.gather(-1, order[:, None].expand_as(dense)).cumsum(-1)  # (N, H, T, T): the first j + 1 keys' mass
    return [round(ranked[:, :, k:, k - 1].mean().item(), 4) for k in ks]  # query q sees q + 1 keys: q >= k


def random_indexer(model, seed: int = 1):
    """The same model with its indexers' weights drawn afresh from `seed`: the random-init control."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        fresh = type(model)(model.cfg, device="cpu").eval()
    fresh.load_state_dict({name: w for name, w in model.state_dict().items() if ".indexer." not in name},
                          strict=False)
    return fresh


@torch.no_grad()
def indexer_mass(model, ids: torch.Tensor, ks: list[int]) -> list[dict]:
    """Per layer with an indexer: the dense weight its k kept keys hold, beside a random-init indexer, the k most
    recent keys and the k keys the dense weights favour (the best any k keys can hold)."""
    names = ["blocks.*.attn.hook_dense_pattern", "blocks.*.attn.indexer.hook_index_scores"]
    _, trace = model.run_with_trace(ids, names=names)
    _, random_trace = random_indexer(model).run_with_trace(ids, names=names)
    N, T = ids.shape
    hidden = ~torch.tril(torch.ones(T, T, dtype=torch.bool))  # (T, T): keys after the query
    recency = torch.arange(T, dtype=torch.float).expand(N, T, T).masked_fill(hidden, float("-inf"))
    rows = []
    for spec in model.cfg.layer_plan():
        if spec.selects_keys:
            name = f"blocks.{spec.index}.attn"
            dense = trace[f"{name}.hook_dense_pattern"]  # (N, H, T, T): what the layer's heads weigh before choosing
            rows.append({"layer": spec.index,
                         **{label: mass_kept(dense, scores.masked_fill(hidden, float("-inf")), ks) for label, scores in
                            (("indexer", trace[f"{name}.indexer.hook_index_scores"]),
                             ("random indexer", random_trace[f"{name}.indexer.hook_index_scores"]),
                             ("most recent k", recency), ("best k", dense.mean(1)))}})
    return rows
