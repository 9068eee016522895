"""The architecture of a config as a Graphviz (DOT) diagram, optionally highlighting one part."""
from __future__ import annotations

from transformer import TransformerConfig, axes

HIGHLIGHT = 'style="filled,bold" fillcolor="#fde725" penwidth=3'
NORMAL = 'style=filled fillcolor="#e8eef7"'


def _node(name: str, label: str, highlight: str | None) -> str:
    return f'{name} [label="{label}" {HIGHLIGHT if highlight == name else NORMAL}];'


def _stack(prefix: str, cfg: TransformerConfig, cross: bool, highlight: str | None) -> tuple[list[str], str, str]:
    """Nodes and edges of one stack; returns (lines, first node, last node)."""
    p = prefix
    norm = axes.label("norm", cfg.norm)
    sizes = {"MHA": f"{cfg.n_heads} heads", "GQA": f"{cfg.n_heads} q heads / {cfg.n_kv_heads} kv heads",
             "MQA": f"{cfg.n_heads} q heads / 1 kv head"}[cfg.attention_kind]
    kind = f"{axes.label('kv_heads', cfg.attention_kind)}: {sizes}"
    mask = axes.label("mask", "causal" if (p != "enc_" and cfg.arch != "encoder") else "none")
    if cfg.sliding_window:
        mask += f", window {cfg.sliding_window}"
    position_label = axes.label("position", cfg.position)
    position = {"rope": f" + {position_label} on q, k", "alibi": f" + {position_label} bias"}.get(cfg.position, "")
    ffn = axes.label("ffn", cfg.ffn)
    if cfg.ffn in ("relu", "gelu"):
        ffn = f"MLP ({ffn})"
    if cfg.ffn == "moe":
        ffn += f": top-{cfg.top_k} of {cfg.n_experts} experts"
    lines = [_node(f"{p}embed", "token embedding", highlight)]
    chain = [f"{p}embed"]
    if cfg.position in ("sinusoidal", "learned"):
        lines.append(_node(f"{p}pos", f"+ {position_label} positions", highlight))
        chain.append(f"{p}pos")
    if cfg.embed_norm:
        lines.append(_node(f"{p}ln_embed", f"embedding {norm}", highlight))
        chain.append(f"{p}ln_embed")
    norm_placement = f"{axes.label('norm_position', cfg.norm_position)}-norm"
    placement = axes.label("block", "parallel") if cfg.parallel_block else norm_placement
    block = [f"subgraph cluster_{p}block {{", f'label="× {cfg.n_layers} blocks ({placement})";',
             'style=rounded; color="#555555";']
    sublayers = [("ln1", "attn", f"self-attention\\n{kind}\\n{mask}{position}")]
    if cross:
        sublayers.append(("ln_cross", "cross", f"{axes.label('mask', 'cross')}\\nq: decoder, k v: encoder"))
    sublayers.append(("ln2", "ffn", ffn))
    if cfg.parallel_block:  # one norm feeds attention and FFN side by side; their outputs are summed
        block += [_node(f"{p}ln1", norm, highlight), _node(f"{p}attn", sublayers[0][2], highlight),
                  _node(f"{p}ffn", ffn, highlight), f'{p}add [label="+" shape=circle];',
                  f"{p}ln1 -> {p}attn;", f"{p}ln1 -> {p}ffn;", f"{p}attn -> {p}add;", f"{p}ffn -> {p}add;"]
        lines += block + ["}"]
        chain += [f"{p}ln1"]
        chain_tail = [f"{p}add"]
    else:
        inner = []
        for norm_name, sub_name, label in sublayers:
            block += [_node(f"{p}{norm_name}", norm, highlight), _node(f"{p}{sub_name}", label, highlight)]
            pair = [f"{p}{norm_name}", f"{p}{sub_name}"]
            inner += pair if cfg.norm_position == "pre" else pair[::-1]  # post-norm: the norm follows
        lines += block + ["}"]
        chain += inner
        chain_tail = []
    lines += [f"{a} -> {b};" for a, b in zip(chain, chain[1:])]
    chain = chain_tail or chain[-1:]
    if cfg.has_final_norm:
        lines += [_node(f"{p}ln_final", f"final {norm}", highlight), f"{chain[-1]} -> {p}ln_final;"]
        chain.append(f"{p}ln_final")
    return lines, f"{p}embed", chain[-1]


def architecture_dot(cfg: TransformerConfig, highlight: str | None = None) -> str:
    """DOT source of the model; `highlight` names a node (e.g. "attn", "dec_cross") to colour."""
    lines = ['digraph G {', 'rankdir=TB; node [shape=box fontname="Helvetica" fontsize=12];']
    if cfg.arch == "encoder-decoder":
        enc, _, enc_last = _stack("enc_", cfg, cross=False, highlight=highlight)
        dec, _, dec_last = _stack("", cfg, cross=True, highlight=highlight)
        lines += enc + dec + [f'{enc_last} -> cross [style=dashed label="memory"];']
        last = dec_last
    else:
        body, _, last = _stack("", cfg, cross=False, highlight=highlight)
        lines += body
    lines += [_node("head", "output head (tied)" if cfg.tie_embeddings else "output head", highlight), f"{last} -> head;", "}"]
    return "\n".join(lines)
