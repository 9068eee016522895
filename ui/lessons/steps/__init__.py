"""The lecture: one idea per step, each with a question to predict before its figure answers it.

Each module here is a chapter (or a topic) of the lecture. In it, every step is declared with
``@lesson_step(...)`` -- its title, text, question and "try this" -- right above the function that
builds its live question, true answer and figure (step.py says what a step holds). ``STEPS`` below
is the one place that orders them: one line per chapter, the chapters in the lecture's order.

Adding a step is its declaration in a chapter's module plus its name in ``STEPS``;
tests/test_lesson_steps.py fails while a declared step is missing here or listed twice.
"""
from ui.lessons.live import Live
from ui.lessons.steps import (attention, before_attention, block, costs, fixed_state, images, interpret, memory, modern,
                              positions, real_models, speculative, tokens)
from ui.lessons.steps.lesson_model import lesson_model
from ui.lessons.steps.step import Step, letter

STEPS: list[Step] = [
    before_attention.one_vector,
    tokens.how_many,
    attention.soft_lookup, attention.five_lines_and_scaling, attention.masks, attention.multi_head,
    positions.no_positions, positions.four_schemes, positions.relative_position_buckets,
    block.residual_and_norms, block.ffn,
    memory.kv_cache, memory.flash, memory.flash_traffic, speculative.speculative,
    fixed_state.state_size, fixed_state.delta_rule, fixed_state.capacity, fixed_state.hybrid_recall,
    fixed_state.memory_128k,
    images.patches_as_tokens,
    real_models.what_they_chose,
    costs.parameters, costs.growth, costs.sparse,
    interpret.logit_lens, interpret.copying_head,
    modern.local_global, modern.latent, modern.qk_norm, modern.sinks, modern.rope_scaling, modern.indexer_keeps,
    modern.nope_layer,
]

__all__ = ["STEPS", "Live", "Step", "lesson_model", "letter"]  # what the page, the homework file and the tests import
