"""The architecture of a config as a Graphviz (DOT) diagram, optionally highlighting one part.

Every box is worded from the library's rows and words: the position scheme's row says whether it adds
a table, rotates q and k or biases the scores; the FFN kind's row whether it is gated or routed; the
norm placement's row where each block's norms sit (before a sublayer, after it, on the residual sum);
the labels come from ``transformer.axes``.
"""
from __future__ import annotations

from transformer import TransformerConfig, axes

HIGHLIGHT = 'style="filled,bold" fillcolor="#fde725" penwidth=3'
NORMAL = 'style=filled fillcolor="#e8eef7"'


def _node(name: str, label: str, highlight: str | None) -> str:
    return f'{name} [label="{label}" {HIGHLIGHT if highlight == name else NORMAL}];'


def _heads(cfg: TransformerConfig) -> str:
    """'GQA: 8 q heads / 2 kv heads': the KV-heads kind and its sizes."""
    H, G = cfg.n_heads, cfg.n_kv_heads
    if cfg.row("kv_heads").latent:  # multi-head latent attention: every head's K and V rebuilt from one latent
        sizes = f"{H} heads, K and V from a latent of {cfg.kv_rank}"
    elif G == H:
        sizes = f"{H} heads"
    else:
        sizes = f"{H} q heads / {G} kv head{'s' if G > 1 else ''}"
    return f"{axes.label('kv_heads', cfg.attention_kind)}: {sizes}"


def _mask(cfg: TransformerConfig, causal: bool) -> str:
    """'causal, window 4 on 3 of 6 layers': the mask, with the sliding window of the local layers."""
    mask = axes.label("mask", "causal" if causal else "none")
    windows = cfg.layer_windows()
    local = [w for w in windows if w is not None]
    if local:
        sizes = sorted(set(local))
        mask += ", window " + "/".join(map(str, sizes))
        if len(local) < len(windows):
            mask += f" on {len(local)} of {len(windows)} layers"
    return mask


def _position(cfg: TransformerConfig) -> str:
    """' + RoPE on q, k': what the position scheme does inside attention (nothing for a table or none)."""
    scheme, label = cfg.row("position"), axes.label("position", cfg.position)
    if scheme.rotates_qk:
        part = f" (first {cfg.d_rope} of {cfg.d_head} dims)" if cfg.d_rope < cfg.d_head else ""
        scaled = ""
        if cfg.row("rope_scaling").rescales:
            scaled = f", {axes.label('rope_scaling', cfg.rope_scaling)} ×{cfg.rope_factor:g}"
        turned = [spec.rotates for spec in cfg.layer_plan() if not spec.row.keeps_state]
        layers = f"\\non {sum(turned)} of {len(turned)} layers (the rest: no positions)" if not all(turned) else ""
        return f" + {label} on q, k{part}{scaled}{layers}"
    if scheme.score_bias:
        return f" + {label} bias"
    return ""


def _attention_extras(cfg: TransformerConfig) -> str:
    """The switches around the five lines: QK-norm, soft-capping, sinks, an output gate (one line each)."""
    lines = []
    if cfg.row("qk_norm").normalises:
        lines.append(f"{axes.AXES['qk_norm'].title} {axes.label('qk_norm', cfg.qk_norm)}")
    lines += [axes.label("scores", key) for key in axes.scores_choices(cfg) if axes.row("scores", key).switch]
    return "".join(f"\\n{line}" for line in lines)


def _ffn(cfg: TransformerConfig) -> str:
    kind = cfg.row("ffn")
    ffn = axes.label("ffn", cfg.ffn)
    if not kind.gated:
        ffn = f"MLP ({ffn})"
    if kind.routed:
        ffn += f": top-{cfg.top_k} of {cfg.n_experts} experts"
        if cfg.n_shared_experts:
            ffn += f" + {cfg.n_shared_experts} shared"
        routed = sum(map(cfg.layer_is_moe, range(cfg.n_layers)))
        if routed == cfg.n_layers - cfg.first_dense_layers and cfg.first_dense_layers:
            ffn += f"\\n(the first {cfg.first_dense_layers} layer{'s' if cfg.first_dense_layers > 1 else ''} dense)"
        elif routed < cfg.n_layers:  # dense layers between the routed ones (Llama 4 Maverick: every other layer)
            ffn += f"\\n(routed on {routed} of {cfg.n_layers} layers)"
    return ffn


def _stack(prefix: str, cfg: TransformerConfig, cross: bool, highlight: str | None) -> tuple[list[str], str, str]:
    """Nodes and edges of one stack; returns (lines, first node, last node)."""
    p = prefix
    norm = axes.label("norm", cfg.norm)
    causal = p != "enc_" and cfg.row("arch").causal
    lines = [_node(f"{p}embed", "token embedding" + (" × √d_model" if cfg.scale_embeddings else ""), highlight)]
    chain = [f"{p}embed"]
    if cfg.row("position").adds_embedding:  # a table added to the embeddings
        lines.append(_node(f"{p}pos", f"+ {axes.label('position', cfg.position)} positions", highlight))
        chain.append(f"{p}pos")
    if cfg.embed_norm:
        lines.append(_node(f"{p}ln_embed", f"embedding {norm}", highlight))
        chain.append(f"{p}ln_embed")
    if cfg.parallel_block:
        placement_words = axes.label("block", "parallel")
    else:
        placement_words = f"norms: {axes.label('norm_position', cfg.norm_position)}"
    block = [f"subgraph cluster_{p}block {{", f'label="× {cfg.n_layers} blocks ({placement_words})";',
             'style=rounded; color="#555555";']
    attention = f"self-attention\\n{_heads(cfg)}\\n{_mask(cfg, causal)}{_position(cfg)}{_attention_extras(cfg)}"
    sublayers = [("ln1", "attn", attention)]
    if cross:
        sublayers.append(("ln_cross", "cross", f"{axes.label('mask', 'cross')}\\nq: decoder, k v: encoder"))
    ffn = _ffn(cfg)
    sublayers.append(("ln2", "ffn", ffn))
    if cfg.parallel_block:  # one norm (or one each) feeds attention and FFN side by side; their outputs are summed
        two = cfg.parallel_norms == 2
        block += [_node(f"{p}ln1", norm, highlight), _node(f"{p}attn", sublayers[0][2], highlight),
                  _node(f"{p}ffn", ffn, highlight), f'{p}add [label="+" shape=circle];',
                  f"{p}ln1 -> {p}attn;", f"{p}attn -> {p}add;", f"{p}ffn -> {p}add;"]
        if two:
            block += [_node(f"{p}ln2", norm, highlight), f"{p}ln2 -> {p}ffn;"]
        else:
            block.append(f"{p}ln1 -> {p}ffn;")
        lines += block + ["}"]
        chain += [f"{p}ln1"]
        if two:
            lines.append(f"{chain[-2]} -> {p}ln2;")
        chain_tail = [f"{p}add"]
    else:
        placement = cfg.row("norm_position")
        inner = []
        for norm_name, sub_name, label in sublayers:
            block.append(_node(f"{p}{sub_name}", label, highlight))
            order = [f"{p}{sub_name}"]
            if placement.before:  # the sublayer reads a normalised copy of the stream
                order.insert(0, f"{p}{norm_name}")
            if placement.after:  # the sublayer's output is normalised before the residual add
                order.append(f"{p}{norm_name}_post")
            if placement.on_sum:  # the residual sum itself is normalised (post-norm)
                order.append(f"{p}{norm_name}")
            block += [_node(name, norm, highlight) for name in order if name != f"{p}{sub_name}"]
            inner += order
        lines += block + ["}"]
        chain += inner
        chain_tail = []
    lines += [f"{a} -> {b};" for a, b in zip(chain, chain[1:])]
    chain = chain_tail or chain[-1:]
    if cfg.has_final_norm:
        lines += [_node(f"{p}ln_final", f"final {norm}", highlight), f"{chain[-1]} -> {p}ln_final;"]
        chain.append(f"{p}ln_final")
    return lines, f"{p}embed", chain[-1]


# a norm this config's placement does not draw -> the sublayer it would sit around (highlight that instead)
NEAREST = {"ln1": "attn", "ln_cross": "cross", "ln2": "ffn", "ln1_post": "attn", "ln_cross_post": "cross",
           "ln2_post": "ffn"}


def architecture_dot(cfg: TransformerConfig, highlight: str | None = None) -> str:
    """DOT source of the model; `highlight` names a node (e.g. "attn", "enc_cross") to colour. A norm the
    placement has no box for (``ln1`` where the norm follows the sublayer) colours its sublayer instead."""
    dot = _dot(cfg, highlight)
    if highlight and HIGHLIGHT not in dot:
        prefix = "enc_" if highlight.startswith("enc_") else ""
        nearest = NEAREST.get(highlight.removeprefix(prefix))
        if nearest:
            dot = _dot(cfg, prefix + nearest)
    return dot


def _dot(cfg: TransformerConfig, highlight: str | None) -> str:
    lines = ['digraph G {', 'rankdir=TB; node [shape=box fontname="Helvetica" fontsize=12];']
    if cfg.row("arch").cross:
        enc, _, enc_last = _stack("enc_", cfg, cross=False, highlight=highlight)
        dec, _, dec_last = _stack("", cfg, cross=True, highlight=highlight)
        lines += enc + dec + [f'{enc_last} -> cross [style=dashed label="memory"];']
        last = dec_last
    else:
        body, _, last = _stack("", cfg, cross=False, highlight=highlight)
        lines += body
    head = "output head (tied)" if cfg.tie_embeddings else "output head"
    if cfg.logit_softcap is not None:
        head += f"\\nlogits soft-capped at ±{cfg.logit_softcap:g}"
    lines += [_node("head", head, highlight), f"{last} -> head;", "}"]
    return "\n".join(lines)
