"""Before attention, the lecture's opening: a GRU encoder-decoder that hands its decoder one vector, beside one
that attends to every encoder state."""
from __future__ import annotations

from ui.compute.chapters_measure import CONTEXTS, accuracy_curves, gru_models
from ui.figures import chapters as chapter_figures
from ui.lessons.live import Live
from ui.lessons.steps.step import lesson_step

FALLS = 0.3  # a model whose accuracy drops by this much from the shortest to the longest string "falls"


@lesson_step(
    "before-attention", "Before attention: one vector for a sentence",
    text="Before 2015, a sequence-to-sequence model read its input with a recurrent network, one token at a time, "
         "and handed the decoder **one fixed vector**: the encoder's last state. **Attention** (Bahdanau et al., "
         "2015) keeps every encoder state, and at each output step scores them all, softmaxes the scores and reads "
         "their weighted mix.",
    question="What happens to each model's accuracy as the strings get longer?", kind="choice",
    try_this="On the Before attention page, type 20 letters: the one-vector model's copy goes wrong after the first "
             "few; the attention model's weights draw the diagonal.",
    page="before_attention")
def one_vector() -> Live:
    curves = accuracy_curves()  # {model name: {letters: share right}}
    bottleneck, attention = curves[CONTEXTS["bottleneck"]], curves[CONTEXTS["attention"]]
    shortest, longest = min(attention), max(attention)
    falls = tuple(acc[shortest] - acc[longest] > FALLS for acc in (bottleneck, attention))
    outcomes = {(False, False): "Both stay near 100%", (True, True): "Both fall",
                (True, False): "The one-vector model falls; the attention model stays near 100%",
                (False, True): "The attention model falls; the one-vector model stays near 100%"}
    d_hidden = gru_models()["bottleneck"][0].cfg.d_hidden
    return Live(
        question=("Two GRU encoder-decoders learn to copy random letters. One hands its decoder only the encoder's last "
                  f"state, {d_hidden} numbers; the other attends to every encoder state. From {shortest} to {longest} "
                  "letters, what happens to the share of letters each copies right?"),
        choices=list(outcomes.values()), answer=list(outcomes).index(falls), source="the trained models' answer",
        why=(f"At {longest} letters the one-vector model gets {bottleneck[longest]:.0%} right, the attention model "
             f"{attention[longest]:.0%}: one vector of {d_hidden} numbers must carry every letter at once, and the "
             "decoder can never look back; with attention it reads each letter's own encoder state when it writes "
             "that letter."),
        figure=chapter_figures.accuracy_by_length(curves, "copying random letters: share of output letters right"),
        caption="Measured on 256 fresh strings of each length when the two checkpoints were trained, seconds each on "
                "one CPU thread.")
