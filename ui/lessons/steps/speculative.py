"""Speculative decoding: a small draft guesses k tokens and the trained target checks them in one pass. The step asks
how many guesses the target keeps; its answer comes from running both shipped checkpoints on the lessons' sentence."""
from __future__ import annotations

from transformer.training.tasks import get_task
from ui.compute import speculative_measure as measure
from ui.figures.speculative import accepted_rounds
from ui.lessons.live import Live
from ui.lessons.steps.step import lesson_step

K = 4
NEW_TOKENS = 32
# acceptance-rate bands offered as choices: (lowest rate in the band, its words)
BANDS = ((0.0, "under 25%"), (0.25, "25% to 50%"), (0.5, "50% to 75%"), (0.75, "75% or more"))


def band_of(rate: float) -> int:
    """The index of the band that holds an acceptance rate."""
    return max(i for i, (low, _) in enumerate(BANDS) if rate >= low)


def runs() -> list[measure.Run]:
    """The shipped target (the sidebar's default) with the smallest other shipped model drafting, at k = 1, K and 8."""
    target = measure.DEFAULT_TARGET
    ids, _ = measure.prompt_tokens(target, get_task("language").example_text)
    return measure.sweep(target, measure.default_draft(target), ids, NEW_TOKENS, (1, K, 8))


@lesson_step(
    "speculative", "Speculative decoding",
    text="Generating costs one pass of the whole model per token. **Speculative decoding** lets a small **draft** "
         "model guess the next k tokens; the large **target** reads all k in one pass, which gives its own choice at "
         "every place. The guesses up to the first disagreement are kept, then the target's own token, and both KV "
         "caches are cut back to that. The text is exactly the target's greedy text; what it saves is target passes, "
         "as many as the target accepts.",
    question="What fraction of the draft's guesses does the target accept at k = 4?", kind="choice",
    try_this="On the Speculative decoding page, type a sentence that does not repeat itself and watch the acceptance "
             "rate for k = 1 … 8; then let the target's own first two layers draft.",
    page="speculative", query={"sd_k": str(K), "sd_new": str(NEW_TOKENS)})
def speculative() -> Live:
    by_k = {run.k: run for run in runs()}
    run = by_k[K]
    target, draft = measure.DEFAULT_TARGET, measure.default_draft(measure.DEFAULT_TARGET)
    proposed = sum(len(guesses) for guesses, _, _ in run.rounds)
    accepted = sum(kept for _, kept, _ in run.rounds)
    name = lambda token_ids: measure.labels_of(target, token_ids)
    figure = accepted_rounds([name(guesses) for guesses, _, _ in run.rounds], [kept for _, kept, _ in run.rounds],
                             [name([own])[0] for _, _, own in run.rounds],
                             f"k = {K}: {accepted} of {proposed} guesses accepted, {run.target_forwards} target passes")
    return Live(
        question=(f"The trained {target} (the target) writes {NEW_TOKENS} tokens after “{get_task('language').example_text}”"
                  f"; the trained {draft} (the draft) guesses k = {K} tokens a round. What fraction of the draft's "
                  "guesses does the target accept?"),
        choices=[words for _, words in BANDS], answer=band_of(run.acceptance_rate), source="the trained models' answer",
        why=(f"It accepted {accepted} of {proposed} guesses ({run.acceptance_rate:.0%}), so {run.target_forwards} target "
             f"passes wrote the {NEW_TOKENS} tokens plain greedy writes in {run.greedy_forwards}. At k = 1 it accepts "
             f"{by_k[1].acceptance_rate:.0%}, at k = 8 {by_k[8].acceptance_rate:.0%}: the longer the guess, the likelier "
             "one token in it is wrong, and every guess after that one is thrown away."),
        figure=figure, query={"sd_draft": draft},
        caption="Green: a guess the target accepted. Blue: the target's own token, where it disagreed or after all k "
                "were accepted. Grey: guesses after the first disagreement, never looked at.")
