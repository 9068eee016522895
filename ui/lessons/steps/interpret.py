"""Why this prediction?: at which layer the answer appears (the logit lens), and which head carries it
(activation patching)."""
from __future__ import annotations

import torch

from transformer.interpret import residual_labels
from transformer.training.task_measures import attention_mass
from transformer.training.tasks import induction_targets
from ui.compute.interpret_measure import PAIRS, answer_token, lens_view, patching
from ui.compute.model_cache import get_trace
from ui.compute.tokens import encode_text
from ui.figures.interpret import effect_heatmaps, lens_grid
from ui.lessons.live import Live
from ui.lessons.steps.lesson_model import LESSON_SEED, MAX_SHOWN, lesson_model, token_name
from ui.lessons.steps.step import lesson_step


@lesson_step(
    "logit-lens", "At which layer does the answer appear?",
    text="Every block adds to the residual stream, and only the last one is read out. The **logit lens** reads the "
         "stream earlier — through the same final norm and unembedding — as if the model stopped there: what would "
         "it say after block 0? After block 1?",
    question="From which block on is the model's answer the top token?", kind="choice",
    try_this="On the Why this prediction? page, move along the lens to the first copy of the sentence: there the "
             "answer appears later, or never, because nothing can be copied yet.",
    page="interpret", uses_model=True)
def logit_lens() -> Live:
    m = lesson_model()
    ids = tuple(m.tokens.ids)
    lens = lens_view(m.config_json, LESSON_SEED, ids)
    rows = residual_labels(m.config.n_layers)
    # a position whose next token the model gets right, best one it can copy from earlier in the text (the same
    # two tokens occurred before), where that answer appears latest (and most clearly at the output)
    right = [q for q in range(len(ids) - 1) if lens.answers[q] == ids[q + 1]] or [len(ids) - 1]
    copied = [q for q in right if any(ids[j:j + 2] == ids[q:q + 2] for j in range(q))]
    query = max(copied or right, key=lambda q: (lens.first_row(q), lens.answer_probs[-1, q]))
    row = lens.first_row(query)
    answer = lens.top_labels[-1, query, 0]
    shown = list(range(max(0, query - MAX_SHOWN + 1), query + 1))
    figure = lens_grid(lens.top_labels[:, shown], lens.top_probs[:, shown], lens.answer_probs[:, shown], rows,
                       [f"{i}:{m.labels[i]}" for i in shown],
                       f"the logit lens on “{m.text}”, up to {token_name(m, query)}")
    control = lens_view(m.config_json, LESSON_SEED, ids, random_init=True)
    before = f"{rows[row - 1]} the top token was '{lens.top_labels[row - 1, query, 0]}'" if row else "from the start"
    return Live(
        question=(f"After {token_name(m, query)} of “{m.text}” the model predicts '{answer}'. Read the residual stream "
                  "through the final norm and the unembedding at every depth: from which point on is "
                  f"'{answer}' the top token?"),
        choices=rows, answer=row,
        source="the trained model's answer" if m.trained else "the model's answer (untrained weights)",
        why=(f"'{answer}' leads from {rows[row]} on ({lens.answer_probs[row, query]:.0%}, "
             f"{lens.answer_probs[-1, query]:.0%} at the output); {before}: "
             + ("the embedding of the token alone already points to it." if row == 0 else
                f"block {row - 1} wrote the answer into the stream.")),
        figure=figure, query={"lens_end": str(query)},
        caption=(f"Weights of {m.weights}. With random-init weights of the same shape the output here is "
                 f"'{control.top_labels[-1, query, 0]}' at {control.top_probs[-1, query, 0]:.1%}: the answer is "
                 "what training wrote into the blocks."))


COPY_PAIR = "a word changed"  # the answer copies a character of an earlier word, which the corruption changes
MAX_HEAD_CHOICES = 6


@lesson_step(
    "copying-head", "Which head copies the repeated word?",
    text="Attention weights say where a head looks, not what its output does. **Activation patching** asks the "
         "output: run a corrupted prompt, put back one head's output from the clean prompt, and see how much of "
         "the clean answer returns. A head that brings it all back carries the difference.",
    question="Which head brings the clean answer back?", kind="choice",
    try_this="In the playground, switch that head off on a repeated sentence: the second copy gets harder to "
             "predict.",
    page="playground", query={"play_tab": "Prediction"}, uses_model=True)
def copying_head() -> Live:
    m = lesson_model()
    pair = PAIRS[COPY_PAIR]
    clean, corrupt = (encode_text(text, m.config_json) for text in (pair.clean, pair.corrupt))
    right, wrong = (answer_token(text, answer, m.config_json) for text, answer in
                    ((pair.clean, pair.right), (pair.corrupt, pair.wrong)))
    result = patching(m.config_json, LESSON_SEED, tuple(clean.ids), tuple(corrupt.ids), right, wrong)
    L, H = result.heads.shape
    effects = torch.from_numpy(result.heads).flatten()  # (L * H,)
    best = int(effects.argmax())
    # the playground's induction head on this prompt: the head whose last query looks most at the token after
    # the earlier copy of its own token
    ids = torch.tensor([clean.ids])
    last = torch.zeros_like(ids, dtype=torch.bool)
    last[0, -1] = True
    targets = induction_targets(ids, last)  # (1, T, T)
    trace = get_trace(m.config_json, LESSON_SEED, tuple(clean.ids), tuple(clean.labels))
    looks = torch.stack([attention_mass(torch.from_numpy(trace.pattern(layer))[None], targets) for layer in range(L)])
    induction = int(looks.argmax())  # (L, H) flattened
    candidates = sorted({best, induction, *effects.topk(min(MAX_HEAD_CHOICES - 2, L * H)).indices.tolist()})
    name = lambda index: f"layer {index // H}, head {index % H}"  # noqa: E731
    same = "the same head" if induction == best else f"not this head but {name(induction)}"
    runner_up = float(effects.topk(2).values[-1]) if L * H > 1 else 0.0
    return Live(
        question=(f"Clean: “{pair.clean}” → '{pair.right}'. Corrupted: “{pair.corrupt}” → '{pair.wrong}'. Run the "
                  "corrupted prompt, but take one head's output from the clean run. Which head brings back most of "
                  f"the clean answer '{pair.right}'?"),
        choices=[name(c) for c in candidates], answer=candidates.index(best),
        source="the trained model's answer" if m.trained else "the model's answer (untrained weights)",
        why=(f"Patching {name(best)} alone moves the logit difference '{pair.right}' − '{pair.wrong}' by "
             f"{effects[best]:+.2f} of the {result.gap:+.2f} between the two prompts (the next best head: "
             f"{runner_up:+.2f}). The playground's induction head — the head whose last query puts most weight "
             f"({float(looks.flatten()[induction]):.0%}) on the token after the earlier '{clean.labels[-1]}' — is "
             f"{same}: it finds the earlier copy and moves what followed it. With random-init weights of the same "
             f"shape no head moves it by more than {float(abs(result.control_heads).max()):.2f}."),
        figure=effect_heatmaps([("trained weights", result.heads), ("random-init weights", result.control_heads)],
                               [f"head {h}" for h in range(H)], [f"layer {layer}" for layer in range(L)], "head",
                               "layer", result.gap, "one head patched from the clean run: the logit difference it "
                                                    "brings back"),
        query={"text": pair.clean, "layer": str(induction // H), "head": str(induction % H),
               "query": str(len(clean.ids) - 1)},
        caption=(f"Weights of {m.weights}. Each cell: the corrupted run with that head's output (every position, "
                 "before W_o) taken from the clean run. The link opens the playground's prediction on the clean prompt, "
                 "the induction head chosen above its tabs."))
