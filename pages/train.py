"""Train: the sidebar's variant on a synthetic task, watching the loss fall and the attention form."""
import math
import tempfile
from pathlib import Path

import plotly.graph_objects as go
import streamlit as st
import torch

from transformer import axes, checkpoint
from transformer.training import language
from transformer.training.task_measures import pattern_names
from transformer.training.tasks import TASKS, Batch
from transformer.training.train import evaluate, train
from ui.app.export import checkpoint_zip
from ui.figures.base import FONT, head_grid
from ui.app.page import start_page
from ui.app.charts import show_chart
from ui.compute.tokens import visible
from ui.compute.weights import WeightsSource
from ui.app.state import use_weights
from ui.app.train_tournament import offer_tournament_task, settings_problem, show_live_comparison, warmup_follows_steps

RESULT = "train_result"  # session key: the last (or interrupted) training run

state = start_page("Train a tiny model and watch its attention form", """
Random weights draw noise. Train the sidebar's variant on **language** (English from the Python
documentation, one character at a time: watch the loss in bits per character fall and a previous-token head
form on a sentence; an encoder such as BERT learns masked characters, starting on crops of 8 characters),
or on a task whose solution has a known attention
pattern — **induction** (a previous-token head, then a head that looks one past the previous copy),
**copy** / **reverse** (cross-attention on the diagonal / anti-diagonal), **sort**, **mirror** (bidirectional),
**mixed** (two kinds of token for MoE experts to split) — and watch the heatmap as it trains.
Pressing any button while it runs stops training there; what was learned so far is kept.
""")
if state.error or state.config is None:
    st.error(f"This combination of axes is impossible: {state.error}")
    st.stop()

arch = state.config.arch
tasks = {name: task.for_arch(arch) for name, task in sorted(TASKS.items(), key=lambda item: item[0] != "language")
         if arch in task.archs}
if not tasks:
    st.error(f"No task here trains a {state.config.arch} model; pick another architecture in the sidebar.")
    st.stop()
col1, col2, col3, col4 = st.columns(4)
task_name = col1.selectbox("Task", list(tasks), format_func=lambda n: f"{n}: {tasks[n].description}", key="train_task")
steps = col2.number_input("Steps", min_value=10, max_value=5000, value=400, step=50, key="train_steps",
                          on_change=warmup_follows_steps)
batch_size = col3.select_slider("Batch", [8, 16, 32, 64, 128], value=64, key="train_batch")
lr = col4.number_input("Peak learning rate", value=3e-3, step=1e-3, format="%g", key="train_lr",
                       help="AdamW's peak rate, reached after the warm-up; then a cosine down to a tenth of it")
warmup = col1.number_input("Warm-up steps", min_value=0, value=40, step=10, key="train_warmup",
                           help="steps over which the learning rate climbs from 0 to its peak: 0 to a good share of "
                                "the run (the tournament warms up for a tenth of it)")
problem = settings_problem(int(steps), int(warmup), float(lr))
if problem:
    st.error(problem)
task = tasks[task_name]
try:
    cfg = state.config.replace(vocab_size=len(task.vocab), max_len=max(state.config.max_len, task.max_tokens))
except ValueError as exc:
    st.error(str(exc))
    st.stop()
variant = state.config
task = offer_tournament_task(cfg, task, float(lr), int(warmup))
st.caption(f"Variant: {axes.label('arch', variant.arch)}, {axes.label('kv_heads', variant.attention_kind)}, "
           f"{axes.label('position', variant.position)}, {axes.label('norm', variant.norm)} "
           f"({axes.label('block', 'parallel') if variant.parallel_block else axes.label('norm_position', variant.norm_position)}), "
           f"{axes.label('ffn', variant.ffn)}; "
           f"{state.config.n_layers} layers × {state.config.n_heads} heads, d_model {state.config.d_model}; "
           f"vocabulary sized to the task ({len(task.vocab)} tokens).")

# one fixed example whose attention is redrawn while training: a language model reads its repeated sentence
example = task.sample(1, seed=7)
if task.name == "language":
    example = Batch(targets=example.targets, loss_mask=example.loss_mask,
                    input_ids=torch.tensor([task.encode(task.example_text)]))
cross = cfg.row("arch").cross
bits = task.name == "language"  # a language model's loss reads best in bits per character


def attention_figure(model, step: int) -> go.Figure:
    """The last layer's heads on the fixed example (cross-attention for an encoder-decoder)."""
    name = pattern_names(model, cross=cross)[-1]
    _, trace = model.run_with_trace(*example.model_args(), names=[name])
    weights = trace[name][0].float().cpu().numpy()  # (H, T_q, T_kv)
    keys = visible(task.decode(example.src_ids[0] if cross else example.model_args()[0][0]))
    queries = visible(task.decode(example.tgt_in[0])) if cross else keys
    return head_grid(weights, keys, queries, cfg.n_kv_heads, title=f"{name} at step {step}")


def loss_figure(history: list[dict]) -> go.Figure:
    fig = go.Figure()
    scale = 1 / math.log(2) if bits else 1.0
    fig.add_trace(go.Scatter(x=[h["step"] for h in history], y=[h["loss"] * scale for h in history],
                             name="bits per character" if bits else "loss", line=dict(color="#0072B2")))
    fig.add_trace(go.Scatter(x=[h["step"] for h in history], y=[h["accuracy"] for h in history], name="accuracy",
                             yaxis="y2", line=dict(color="#E69F00")))
    fig.update_layout(height=320, font=FONT, margin=dict(l=10, r=10, t=30, b=10), xaxis_title="step",
                      yaxis=dict(title="bits per character" if bits else "loss"), yaxis2=dict(title="accuracy", overlaying="y", side="right", range=[0, 1]),
                      legend=dict(orientation="h"))
    return fig


def run_training() -> None:
    progress = st.progress(0.0, text="Starting…")
    chart, heatmap = st.empty(), st.empty()
    history: list[dict] = []
    st.session_state[RESULT] = {"task": task_name, "config": cfg, "history": history, "model": None, "done": False,
                                "settings": {"lr": float(lr), "warmup": int(warmup), "batch_size": int(batch_size)},
                                "trained_task": task}

    def report(step: int, metrics: dict, model) -> None:
        history.append(metrics)
        st.session_state[RESULT]["model"] = model  # kept even if a click stops the run here
        loss = f"{metrics['loss'] / math.log(2):.2f} bits per character" if bits else f"loss {metrics['loss']:.3f}"
        progress.progress((step + 1) / steps, text=f"step {step + 1}/{steps} · {loss} · "
                                                   f"accuracy {metrics['accuracy']:.2f}")
        show_chart(loss_figure(history), key=f"loss_{step}", where=chart)
        show_chart(attention_figure(model, step), key=f"attn_{step}", where=heatmap)

    model, _ = train(cfg, task, int(steps), batch_size=int(batch_size), lr=float(lr), warmup=int(warmup),
                     seed=state.seed,
                     callback=report, callback_every=max(1, int(steps) // 40), progress=False)
    st.session_state[RESULT].update(model=model, done=True)


if st.button("Train", type="primary", disabled=problem is not None):
    run_training()

result = st.session_state.get(RESULT)
if result and result["model"] is not None:
    model, history = result["model"].eval(), result["history"]
    finished = "finished" if result["done"] else f"stopped at step {history[-1]['step'] + 1}"
    if result["task"] == "language":
        accuracy = language.held_out_accuracy(model, limit=8)
        corpus = getattr(result.get("trained_task"), "corpus", "python-docs")  # the text it trained on
        measured = (f"{language.bits_per_char(model, limit=8, corpus=corpus):.2f} bits per character on held-out text"
                    if model.cfg.row("arch").next_token else f"masked-character accuracy {accuracy:.2f} on held-out text")
    else:
        accuracy = evaluate(model, result["task"], n_batches=2, batch_size=64)
        measured = f"accuracy {accuracy:.2f} on fresh {result['task']} samples"
    st.subheader(f"Training {finished}: {measured}")
    show_chart(loss_figure(history), key="loss_final")
    show_chart(attention_figure(model, history[-1]["step"]), key="attn_final")
    if "settings" in result:
        show_live_comparison(model, history, result["trained_task"], result["settings"])

    directory = Path(tempfile.gettempdir()) / "attention-lab-trained"
    c = result["config"]
    path = directory / f"{result['task']}-{c.arch}-{c.attention_kind}-{c.position}-{c.norm_position}{c.norm}-{c.ffn}-seed{state.seed}"
    checkpoint.save(model, path, {"task": result["task"], "accuracy": accuracy, "steps": len(history),
                                  "source": "trained in the app"})
    col1, col2 = st.columns(2)
    col1.button("Use it on every page", type="primary", on_click=use_weights, args=(WeightsSource.checkpoint_file(str(path)),))
    col2.download_button("Download the checkpoint (.safetensors + .json)", on_click="ignore",
                         file_name=f"{path.name}.zip", mime="application/zip", data=lambda: checkpoint_zip(path))
    st.caption(f"Saved as {path}.safetensors and .json; `transformer.checkpoint.load('{path}')` opens it.")
