"""What real models chose: one skeleton, one choice on each of the five axes, read from the library's model
cards."""
from __future__ import annotations

from transformer import MODEL_CARDS, TransformerConfig, axes, kv_cache_bytes_per_token
from ui.figures import lesson as lesson_figures
from ui.lessons.live import Live
from ui.lessons.steps.step import binary_size, lesson_step


def _largest(card) -> TransformerConfig:
    return list(card.real.values())[-1]


def model_rows() -> list[dict[str, str]]:
    """The real-model table: each model's choices on the five axes, from the library's model cards."""
    rows = []
    for card in MODEL_CARDS.values():
        size, real = list(card.real.items())[-1]
        ffn = axes.label("ffn", real.ffn)
        if real.row("ffn").routed:
            ffn += f" {real.n_experts}×, top-{real.top_k}"
        heads = f"latent {real.kv_rank}" if real.row("kv_heads").latent else f"{real.n_kv_heads}/{real.n_heads}"
        windows = real.layer_windows()
        local = [w for w in windows if w is not None]
        window = ""
        if local:
            window = f", window {'/'.join(map(str, sorted(set(local))))}"
            window += f" on {len(local)} of {len(windows)} layers" if len(local) < len(windows) else ""
        placement = (axes.label("block", "parallel") if real.parallel_block
                     else axes.label("norm_position", real.norm_position))
        rows.append({"model": card.name, "year": str(card.year), "size": size, "arch": real.arch,
                     "KV heads": f"{axes.label('kv_heads', real.attention_kind)} ({heads})",
                     "position": axes.label("position", real.position) + window,
                     "norm": f"{axes.label('norm', real.norm)}, {placement}", "FFN": ffn,
                     "KV cache / token": binary_size(kv_cache_bytes_per_token(real))})
    return rows


@lesson_step(
    "real-models", "What real models chose",
    text="The Original Transformer (2017) and LLaMA 2 (2023) are the same skeleton; each real model is one choice "
         "on each of the five axes. The table is computed from the models' real dimensions.",
    question="Which recent model does not use RoPE?", kind="choice",
    try_this="On Home, open a row of the table: the app loads that model's recipe at classroom size.",
    page="")
def what_they_chose() -> Live:
    recent = [card for card in MODEL_CARDS.values() if card.year >= 2022 and _largest(card).row("arch").next_token]
    rotating = [card for card in recent if _largest(card).row("position").rotates_qk]
    other = [card for card in recent if not _largest(card).row("position").rotates_qk]
    odd_one = other[0] if other else rotating.pop()
    shown = sorted([*rotating[:3], odd_one], key=lambda card: (card.year, card.name))
    return Live(
        question="Every recent decoder in the table made the same choice of position scheme — except one. Which?",
        choices=[card.name for card in shown], answer=shown.index(odd_one),
        why=(f"{odd_one.name} ({odd_one.year}) uses {axes.label('position', _largest(odd_one).position)}; the others "
             f"rotate q and k with {axes.label('position', 'rope')}. "
             "Read across the rows: the Original Transformer and LLaMA share one skeleton, and each model is a choice "
             "on each of the five axes."),
        figure=lesson_figures.model_table(model_rows(), odd_one.name),
        caption="Real sizes from transformer.presets (the largest size of each model); KV cache in fp16.")
