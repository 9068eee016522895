"""Why the model predicts what it predicts: the logit lens, activation patching, direct logit attribution.

Everything here reads the model through its hook points (transformer/hooks.py): no module is
changed and no torch hook is registered.

- The **logit lens** reads the residual stream entering each block through the model's own final
  norm and unembedding: what the model would say if it stopped there.
- **Activation patching** runs a corrupted prompt with one activation taken from a clean run, and
  measures how much of the clean behaviour comes back. One generic function, ``patch``, does every
  kind, as in TransformerLens: it takes the hook names (one per row of the result) and the dimension
  of their activation whose entries are the cells (a position of the residual stream, a head of
  ``hook_z``). Each row costs one forward pass of the corrupted prompt: everything before the hook
  is the same for every cell and runs once; at the hook the intervention turns the one activation
  into a batch, copy i with the clean activation written into cell i only, and the rest of the model
  runs on the batch. ``patch_residual`` and ``patch_heads`` are two calls of it.
- **Direct logit attribution** splits the last residual stream into what each part wrote (the
  embeddings, every head, every FFN or MoE expert) and projects each part on one token's row of the
  unembedding, through the final norm's scale at that position.

Decoder and encoder stacks, every attention, position, norm and FFN choice; not encoder-decoders.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from .costs.flops import forward_flops_per_token
from .ffn import MoE
from .hooks import Intervention, hook_name
from .model import Transformer
from .norms import LayerNorm, RMSNorm

Metric = Callable[[torch.Tensor], torch.Tensor]  # logits (1, T, vocab) -> a 0-dim tensor


def logit_difference(right: int, wrong: int, position: int = -1) -> Metric:
    """The usual patching metric: logit of `right` minus logit of `wrong` at `position` (positive: `right` wins)."""
    def metric(logits: torch.Tensor) -> torch.Tensor:
        return logits[0, position, right] - logits[0, position, wrong]
    return metric


# --- the residual stream, read through the output head --------------------------------------------


def residual_names(n_layers: int) -> list[str]:
    """The residual stream entering every block, then leaving the last one: the n_layers + 1 rows of
    ``logit_lens`` and ``patch_residual``."""
    return [hook_name(i, "hook_resid_pre") for i in range(n_layers)] + [hook_name(n_layers - 1, "hook_resid_post")]


def residual_labels(n_layers: int) -> list[str]:
    """Words for the rows of ``residual_names``."""
    return ["embeddings"] + [f"after block {i}" for i in range(n_layers)]


def read_out(model: Transformer, resid: torch.Tensor) -> torch.Tensor:
    """(..., d_model) residual stream -> (..., vocab) logits, through the final norm (if any) and the head."""
    if model.cfg.has_final_norm:
        resid = model.ln_final(resid)
    return model.head(resid)


def _check_model(model: Transformer) -> None:
    if model.cfg.row("arch").cross:
        raise ValueError("interpretation reads one stack; an encoder-decoder has two, use arch='decoder' or 'encoder'")


def _one_prompt(ids: torch.Tensor, what: str = "input_ids") -> torch.Tensor:
    """(T,) or (1, T) -> (1, T); anything else is a clear error."""
    ids = ids[None] if ids.dim() == 1 else ids
    if ids.dim() != 2 or ids.shape[0] != 1 or ids.shape[1] == 0:
        raise ValueError(f"{what} must be one prompt of at least one token, shape (1, T); got {tuple(ids.shape)}")
    return ids


@torch.no_grad()
def logit_lens(model: Transformer, input_ids: torch.Tensor) -> torch.Tensor:
    """(n_layers + 1, T, vocab) log-probabilities read from the residual stream entering each block, and
    leaving the last one (that row is log_softmax of the model's own logits)."""
    _check_model(model)
    names = residual_names(model.cfg.n_layers)
    _, trace = model.run_with_trace(_one_prompt(input_ids).to(model.device), names=names)
    resid = torch.cat([trace[name] for name in names])  # (n_layers + 1, T, d_model)
    return read_out(model, resid).float().log_softmax(-1)


# --- activation patching ---------------------------------------------------------------------------


def write_cells(clean: torch.Tensor, dim: int, cells: torch.Tensor) -> Intervention:
    """An intervention that makes a batch of copies of the corrupted activation: copy i gets clean's entry
    cells[i] along `dim` and keeps all its other entries. `clean` is the clean run's activation, batch 1;
    the corrupted one may be batch 1 too (it broadcasts), so the layers after the hook run on the batch."""
    def intervention(corrupted: torch.Tensor, event) -> torch.Tensor:
        one_hot = torch.zeros(len(cells), corrupted.shape[dim], dtype=torch.bool, device=corrupted.device)
        one_hot[torch.arange(len(cells)), cells] = True  # (n, size of dim): copy i, entry cells[i]
        shape = [len(cells)] + [1] * (corrupted.dim() - 1)
        shape[dim] = corrupted.shape[dim]  # (n, 1, ..., size of dim, ..., 1): broadcasts over the other dims
        return torch.where(one_hot.view(shape), clean.to(corrupted.dtype), corrupted)
    return intervention


def check_budget(grid: str, rows: int, cells: int, max_forwards: int | None, way_out: str) -> None:
    """Refuse, before anything runs, a patching that would run the corrupted prompt more than max_forwards times.
    grid: what the rows and cells are ("layers x positions"); way_out: the arguments that patch less."""
    runs = rows * cells
    if max_forwards is not None and runs > max_forwards:
        row_kind, cell_kind = grid.split(" x ")
        raise ValueError(
            f"patching {rows} {row_kind} x {cells} {cell_kind} runs the corrupted prompt {runs:,} times (batched "
            f"into {rows} forward passes), over the budget of {max_forwards:,}: pass {way_out}, or raise max_forwards")


def forwards_within(model: Transformer, n_tokens: int, flop_budget: float) -> int:
    """How many runs of an n_tokens prompt fit in a FLOP budget (at least 1): a ``max_forwards`` for patching."""
    return max(1, math.floor(flop_budget / (n_tokens * forward_flops_per_token(model.cfg, n_tokens))))


@torch.no_grad()
def patch(model: Transformer, clean_ids: torch.Tensor, corrupt_ids: torch.Tensor, metric: Metric,
          names: Sequence[str], dim: int, cells: Sequence[int], batch_size: int | None = None) -> torch.Tensor:
    """(len(names), len(cells)): the metric of the corrupted prompt with the activation at hook `names[r]`,
    entry `cells[c]` along `dim`, taken from the clean prompt.

    Every kind of patching is this loop: a row is a hook name; its cells run as one batch of corrupted
    copies (`batch_size` copies at most per forward pass), copy i patched at cell i alone. The forward pass
    reads the corrupted prompt once: the batch starts at the hook, where ``write_cells`` makes it.
    """
    clean_ids, corrupt_ids = _check_pair(model, clean_ids, corrupt_ids)
    _, clean = model.run_with_trace(clean_ids, names=list(names))
    cells = torch.as_tensor(cells, dtype=torch.long, device=model.device)
    rows = []
    for name in names:
        values = []
        for chunk in cells.split(batch_size or len(cells)):
            with model.intervene({name: write_cells(clean[name], dim, chunk)}):
                logits = model(corrupt_ids)  # (n, T, vocab): one copy of the prompt per cell from the hook on
            values += [metric(logits[i:i + 1]) for i in range(len(chunk))]
        rows.append(torch.stack(values))
    return torch.stack(rows).float()  # (rows, cells)


def _check_pair(model: Transformer, clean_ids: torch.Tensor, corrupt_ids: torch.Tensor):
    _check_model(model)
    clean_ids, corrupt_ids = _one_prompt(clean_ids, "clean_ids"), _one_prompt(corrupt_ids, "corrupt_ids")
    if clean_ids.shape != corrupt_ids.shape:
        raise ValueError(f"the clean prompt has {clean_ids.shape[1]} tokens and the corrupted one "
                         f"{corrupt_ids.shape[1]}: patching swaps activations position by position, so both "
                         "prompts need the same number of tokens")
    return clean_ids.to(model.device), corrupt_ids.to(model.device)


def _chosen(indices: Sequence[int] | None, count: int, what: str) -> list[int]:
    """Every index below `count`, or the chosen ones after checking them."""
    chosen = list(range(count)) if indices is None else [int(i) for i in indices]
    bad = [i for i in chosen if not 0 <= i < count]
    if bad or not chosen:
        raise ValueError(f"{what} must be a non-empty list of indices from 0 to {count - 1}; got {list(indices)}")
    return chosen


def patch_residual(model: Transformer, clean_ids: torch.Tensor, corrupt_ids: torch.Tensor, metric: Metric, *,
                   layers: Sequence[int] | None = None, positions: Sequence[int] | None = None,
                   max_forwards: int | None = None, batch_size: int | None = None) -> torch.Tensor:
    """(n_layers + 1, T): the metric with the residual stream at (layer, position) taken from the clean run.

    Rows as in ``logit_lens``: the stream entering block 0 ... block L-1, then leaving block L-1.
    `layers` (rows) and `positions` pick a part of the grid; `max_forwards` refuses a grid that would
    run the corrupted prompt more often.
    """
    rows = _chosen(layers, model.cfg.n_layers + 1, "layers")
    cells = _chosen(positions, _one_prompt(clean_ids, "clean_ids").shape[1], "positions")
    check_budget("layers x positions", len(rows), len(cells), max_forwards, "fewer layers=[...] or positions=[...]")
    names = residual_names(model.cfg.n_layers)
    return patch(model, clean_ids, corrupt_ids, metric, [names[r] for r in rows], 1, cells, batch_size)


def patch_heads(model: Transformer, clean_ids: torch.Tensor, corrupt_ids: torch.Tensor, metric: Metric, *,
                layers: Sequence[int] | None = None, max_forwards: int | None = None) -> torch.Tensor:
    """(n_layers, n_heads): the metric with one head's output, at every position and before W_o, taken from
    the clean run. ``hook_z`` holds one entry per query head, so the query heads that share a kv head
    (GQA, MQA) are patched one at a time."""
    rows = _chosen(layers, model.cfg.n_layers, "layers")
    check_budget("layers x heads", len(rows), model.cfg.n_heads, max_forwards, "fewer layers=[...]")
    names = [hook_name(layer, "attn.hook_z") for layer in rows]
    return patch(model, clean_ids, corrupt_ids, metric, names, 1, range(model.cfg.n_heads))


# --- direct logit attribution ---------------------------------------------------------------------

# what a norm does to one part of the stream before scaling it: LayerNorm subtracts the part's mean
CENTERING = {LayerNorm: lambda part: part - part.mean(-1, keepdim=True), RMSNorm: lambda part: part}


@dataclass
class Attribution:
    """Each part's direct effect on one token's logit at one position; the parts add up to the logit.

    With soft-capped logits (Gemma 2) the parts add up to the logit before the cap: ``logit`` is that
    uncapped value, and ``capped_logit`` what the model outputs.
    """

    token: int
    position: int
    logit: float  # the model's own logit for the token (before a soft cap, if the model has one)
    embed: float  # the embeddings (token and position) that start the residual stream
    # (n_layers, the most heads a layer has): each head's write, z_h W_o[h] (times its output gate, if any); a
    # state layer's head writes its read normalised and gated; a layer with fewer heads leaves zeros
    heads: torch.Tensor
    ffn: torch.Tensor  # (n_layers,): each FFN's write (a MoE: its routed experts' and its shared experts')
    experts: torch.Tensor | None  # (n_layers, n_experts) for a MoE: each routed expert's gated write, 0 where not chosen
    constant: float  # what no part writes: attention output biases, the norms' biases, the head's bias
    capped_logit: float | None = None  # the logit after the model's soft cap (None: no cap)

    @property
    def total(self) -> float:
        return self.embed + float(self.heads.sum()) + float(self.ffn.sum()) + self.constant


def _ffn_input_name(model: Transformer, layer: int) -> str:
    """What a block's FFN reads: its own norm (ln2; ln1 in a parallel block with one norm), or, where no norm
    sits before the sublayer (post-norm, a norm after the sublayer), the residual stream between the sublayers."""
    cfg = model.cfg
    if cfg.parallel_block:
        return hook_name(layer, "ln1.hook_normalized" if cfg.parallel_norms == 1 else "ln2.hook_normalized")
    if model.blocks[layer].spec.placement.before:
        return hook_name(layer, "ln2.hook_normalized")
    return hook_name(layer, "hook_resid_mid")


def _normalises_outputs(block) -> bool:
    """Its placement normalises each sublayer's output before the add (sandwich, after)."""
    return block.spec.placement.after and not block.parallel


def expert_writes(moe: MoE, x: torch.Tensor, chosen: torch.Tensor, gates: torch.Tensor) -> torch.Tensor:
    """(n_experts, d_model): each expert's output for one token x (d_model,) times its gate; 0 if not chosen."""
    writes = x.new_zeros(moe.n_experts, x.shape[-1])
    for expert, gate in zip(chosen.tolist(), gates):
        writes[expert] = moe.experts[expert](x[None])[0] * gate
    return writes


Projection = Callable[[torch.Tensor], torch.Tensor]  # parts (..., d_model) -> their effects on one logit (...)


def frozen_norm(norm: torch.nn.Module, whole: torch.Tensor) -> tuple[Projection, torch.Tensor | None]:
    """A norm made linear: (parts -> what the norm makes of each, the norm's bias or None) at one position.

    The norm maps its input x to center(x) * scale * w + b; `scale` depends on the whole input `whole`
    (d_model,) and is frozen at its value here, so each part's image is linear in the part. ``w`` is the
    weight, or (1 + weight) for a norm that scales by one plus its weight (Gemma's RMSNorm).
    """
    center = CENTERING[type(norm)]
    scale = torch.rsqrt(center(whole.float()).pow(2).mean() + norm.eps)
    weight = norm.weight.float()
    if getattr(norm, "plus_one", False):
        weight = 1.0 + weight
    bias = getattr(norm, "bias", None)
    return (lambda parts: center(parts.float()) * (weight * scale)), (None if bias is None else bias.float())


def token_projection(model: Transformer, final: torch.Tensor, token: int) -> tuple[Projection, float]:
    """(parts -> their direct effects on `token`'s logit, what the biases after the stream add) at one position.

    The final norm is frozen at the scale of the whole stream `final` (d_model,): see ``frozen_norm``.
    """
    direction = model.unembed.weight[token].float()  # (d_model,): the token's row of W_U
    constant = float(model.unembed.bias[token]) if model.unembed.bias is not None else 0.0
    if not model.cfg.has_final_norm:
        return lambda parts: parts.float() @ direction, constant
    normalise, bias = frozen_norm(model.ln_final, final)
    if bias is not None:
        constant += float(bias @ direction)
    return lambda parts: normalise(parts) @ direction, constant


@torch.no_grad()
def direct_logit_attribution(model: Transformer, input_ids: torch.Tensor, token: int,
                             position: int = -1) -> Attribution:
    """How much each head, FFN and expert writes directly in the direction of `token`'s logit at `position`.

    The residual stream leaving the last block is the embeddings plus every sublayer's write; frozen at
    this run's norm scales (the final norm's, and each sublayer's own output norm where the placement has
    one: sandwich, after), the logit splits into one term per part. That needs the stream to reach the
    head through at most the final norm: no norm on the residual sum (post-norm), a plain head.
    """
    _check_model(model)
    cfg = model.cfg
    # a norm on the residual sum, or a skip that carries the normed input, renormalises the stream at every block
    summed = [block.spec.index for block in model.blocks
              if block.spec.placement.on_sum or block.spec.placement.skips_normed]
    if summed or cfg.head_transform:
        raise ValueError("direct logit attribution needs the residual stream to reach the unembedding through one "
                         "final norm at most (no norm on the residual sum, a plain head); "
                         + ("this model's head has a transform of its own" if not summed else
                            "this model normalises after every block" if len(summed) == cfg.n_layers else
                            f"this model normalises after blocks {', '.join(map(str, summed))}"))
    if not 0 <= token < cfg.vocab_size:
        raise ValueError(f"token={token} is outside 0..{cfg.vocab_size - 1}")
    ids = _one_prompt(input_ids).to(model.device)
    position = range(ids.shape[1])[position]  # a negative position counts from the end; out of range raises
    L, routed = cfg.n_layers, cfg.row("ffn").routed
    names = [hook_name(0, "hook_resid_pre"), hook_name(L - 1, "hook_resid_post")]
    for layer, block in enumerate(model.blocks):
        # what W_o reads per head: z (times the output gate), a state layer's read normalised and gated, or a gated
        # short convolution's gated output, which has no heads and writes as one part
        row = block.spec.row
        read = "attn.hook_conv_read" if row.conv_only else "attn.hook_read_norm" if row.keeps_state else "attn.hook_z"
        names += [hook_name(layer, read), hook_name(layer, "hook_mlp_out")]
        if _normalises_outputs(block):
            names.append(hook_name(layer, "hook_attn_out"))
        if hasattr(block.attn, "hook_attn_gate"):
            names.append(hook_name(layer, "attn.hook_attn_gate"))
        if cfg.layer_is_moe(layer):
            names += [_ffn_input_name(model, layer), hook_name(layer, "mlp.hook_expert_indices"),
                      hook_name(layer, "mlp.hook_expert_weights")]
    logits, trace = model.run_with_trace(ids, names=names)
    at = lambda name: trace[name][0, position]  # noqa: E731  (a recorded tensor at the position)
    project, constant = token_projection(model, at(names[1]), token)

    def through(norm, whole):  # a sublayer's own output norm, frozen at this position, before the projection
        normalise, bias = frozen_norm(norm, whole)
        return (lambda parts: project(normalise(parts))), (0.0 if bias is None else float(project(bias)))

    # a hybrid's state layers may have more heads; a short convolution is one part
    widest = max(1 if block.spec.row.conv_only else block.attn.n_heads for block in model.blocks)
    heads, ffn = torch.zeros(L, widest), torch.zeros(L)
    experts = torch.zeros(L, cfg.n_experts) if routed else None
    for layer, block in enumerate(model.blocks):
        attn_project, ffn_project = project, project
        if _normalises_outputs(block):
            attn_project, bias = through(block.ln1_post, at(hook_name(layer, "hook_attn_out")))
            constant += bias
            ffn_project, bias = through(block.ln2_post, at(hook_name(layer, "hook_mlp_out")))
            constant += bias
        if block.spec.row.conv_only:
            z = trace[hook_name(layer, "attn.hook_conv_read")][0, position][None]  # (1, d_model): all of W_o's input
        elif block.spec.row.keeps_state:
            z = trace[hook_name(layer, "attn.hook_read_norm")][0, :, position]  # (H_s, d_s): W_o's input per head
        else:
            z = trace[hook_name(layer, "attn.hook_z")][0, :, position]  # (H, d_v)
            if hasattr(block.attn, "hook_attn_gate"):  # gated attention: each head's output times its gate
                z = z * at(hook_name(layer, "attn.hook_attn_gate")).view(cfg.n_heads, cfg.d_v)
        w_o = block.attn.o_proj.weight.view(cfg.d_model, *z.shape)  # (d_model, H, d_v)
        writes = torch.einsum("hd,mhd->hm", z, w_o)  # (H, d_model): head h's share of concat(heads) @ W_o
        heads[layer, :len(writes)] = attn_project(writes)
        if block.attn.o_proj.bias is not None:
            constant += float(attn_project(block.attn.o_proj.bias))
        ffn[layer] = ffn_project(at(hook_name(layer, "hook_mlp_out")))
        if cfg.layer_is_moe(layer):
            x = at(_ffn_input_name(model, layer))  # (d_model,) what the router and the experts read
            chosen = at(hook_name(layer, "mlp.hook_expert_indices"))  # (k,)
            gates = at(hook_name(layer, "mlp.hook_expert_weights")).to(x.dtype)  # (k,)
            experts[layer] = ffn_project(expert_writes(block.mlp, x, chosen, gates))
    logit, capped = float(logits[0, position, token]), None
    if cfg.logit_softcap is not None:  # the parts add up to the logit before the cap (Gemma 2)
        final = at(names[1])
        capped, logit = logit, float(model.unembed(model.ln_final(final) if cfg.has_final_norm else final)[token])
    return Attribution(token, position, logit, float(project(at(names[0]))), heads, ffn, experts, constant, capped)
