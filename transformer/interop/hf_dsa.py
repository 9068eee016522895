"""DeepSeek-V3.2 and GLM-5 (GlmMoeDsa): DeepSeek-V3's latent attention and MoE, plus a lightning indexer in every
layer that cuts each query's keys to its top k (DeepSeek Sparse Attention, transformer/indexer.py).

Their ``layer_types`` ("indexed_attention" on every layer) are our plan's indexed layers (``index_top_k``); the
indexer's q projection reads the attention's q latent, its key is LayerNorm(x W_k), RoPE turns the first
qk_rope_head_dim dimensions of both. DeepSeek-V3.2 turns them as halves (as we do), GLM-5 as interleaved pairs:
those rows are reordered on loading, as the attention's own are (hf_modern.py). GLM-5's layers that reuse the
previous layer's top-k ("shared" in ``indexer_types``) are refused by name: every layer here runs its own indexer.
"""
from __future__ import annotations

import torch

from ..config import TransformerConfig
from .family import Family, unsupported
from .hf_modern import _deepseek_config, _deepseek_weights, _interleave_permutation
from .weights import Weights, norm_weights


def _dsa_config(c, hf_class: str, has_head: bool) -> dict:
    other = sorted(set(getattr(c, "layer_types", None) or ["indexed_attention"]) - {"indexed_attention"})
    if other:
        raise unsupported(hf_class, f"layer_types {other}", "every layer of DeepSeek Sparse Attention is "
                          "indexed_attention")
    shared = [i for i, kind in enumerate(getattr(c, "indexer_types", None) or []) if kind != "full"]
    if shared:
        raise unsupported(hf_class, f"indexer_types 'shared' on layers {shared}", "a layer that reuses the previous "
                          "layer's top-k keys is not built: each layer here runs its own indexer (indexer_types all "
                          "'full')")
    fields = _deepseek_config(c, hf_class, has_head, v3=True)
    if c.q_lora_rank is None:
        raise unsupported(hf_class, "q_lora_rank=None", "the indexer's queries read the q latent")
    # HF's indexer picks min(index_topk, T) keys; ours refuses a k past the longest context, so cap it there
    return fields | dict(index_top_k=min(c.index_topk, c.max_position_embeddings), index_heads=c.index_n_heads,
                         index_head_dim=c.index_head_dim)


def _weights_with_indexer(interleaved: bool):
    """DeepSeek-V3's weights, and each layer's indexer: wq_b, wk (with k_norm, a LayerNorm) and weights_proj.
    `interleaved`: the indexer turns its rotary pairs interleaved (GLM-5), so its rope rows are reordered to ours."""

    def weights(model, cfg: TransformerConfig) -> Weights:
        w = _deepseek_weights(model, cfg)
        d_rope, width, heads = cfg.d_rope, cfg.index_head_dim, cfg.index_heads
        order = torch.arange(width)  # within a head: HF's [rope | rest], the rope rows in our order
        if interleaved:
            order[:d_rope] = _interleave_permutation(d_rope)
        for i, layer in enumerate(model.base_model.layers):
            indexer, b = layer.self_attn.indexer, f"blocks.{i}.attn.indexer."
            q = indexer.wq_b.weight.view(heads, width, -1)[:, order]  # (I, d_I, q_rank)
            w |= {b + "q_proj.weight": q.reshape(heads * width, -1), b + "k_proj.weight": indexer.wk.weight[order],
                  b + "head_weights.weight": indexer.weights_proj.weight}
            w |= {b + name: t[order] for name, t in norm_weights("k_norm", indexer.k_norm).items()}
        return w

    return weights


DSA_FAMILIES = {
    "deepseek_v32": Family("DeepSeek-V3.2", _dsa_config, _weights_with_indexer(interleaved=False), (
        "as DeepSeek-V3 (MLA, YaRN's mscale in the softmax scale, the sigmoid-routed MoE), plus a lightning indexer "
        "in every layer (layer_types 'indexed_attention'): index_topk, index_n_heads, index_head_dim",
        "the indexer: wq_b from the q latent, wk then its LayerNorm k_norm, weights_proj; RoPE on the first "
        "qk_rope_head_dim dimensions as halves, like ours", "index_topk above the longest context is capped there")),
    "glm_moe_dsa": Family("GLM-5", _dsa_config, _weights_with_indexer(interleaved=True), (
        "DeepSeek-V3.2's layers: MLA, the lightning indexer in every layer, the sigmoid-routed MoE",
        "the indexer turns its rotary pairs interleaved: wq_b's and wk's rope rows (and k_norm's) are reordered "
        "to our halves", "indexer_types 'shared' (a layer reusing the previous layer's top-k) is refused by name")),
}

DSA_CLASSES = {"DeepseekV32ForCausalLM": ("deepseek_v32", True), "DeepseekV32Model": ("deepseek_v32", False),
               "GlmMoeDsaForCausalLM": ("glm_moe_dsa", True), "GlmMoeDsaModel": ("glm_moe_dsa", False)}

DEFAULT_DSA_CLASS = {"deepseek_v32": "DeepseekV32ForCausalLM", "glm_moe_dsa": "GlmMoeDsaForCausalLM"}
