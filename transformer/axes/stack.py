"""The stack's skeleton: the architecture, where the norms sit, which norm, and the number format."""
from __future__ import annotations

from dataclasses import dataclass

from .base import Axis, Choice


@dataclass(frozen=True, kw_only=True)
class ArchChoice(Choice):
    causal: bool  # the stack that makes the logits sees only the past (a decoder's)
    cross: bool  # two stacks: the decoder reads the encoder through cross-attention

    @property
    def next_token(self) -> bool:
        """One causal stack that predicts each next token of one text: a language model."""
        return self.causal and not self.cross

    @property
    def stacks(self) -> tuple[str, ...]:
        """Its stacks' name prefixes ("" for a model that is its own single stack)."""
        return ("encoder", "decoder") if self.cross else ("",)


ARCH = Axis("Architecture", {
    "decoder": ArchChoice("decoder", "a causal stack that predicts each next token from the ones before it",
                          "Generates text one token at a time.", "GPT-2, LLaMA", causal=True, cross=False),
    "encoder": ArchChoice("encoder", "a bidirectional stack: every token reads the whole text",
                          "Understands a text with context on both sides (classify it, fill in masked words).", "BERT",
                          causal=False, cross=False),
    "encoder-decoder": ArchChoice("encoder-decoder",
                                  "an encoder reads the source; a causal decoder writes the target, reading the "
                                  "encoder through cross-attention",
                                  "Turns one text into another of a different length (translation).", "2017",
                                  causal=True, cross=True),
}, field="arch")


@dataclass(frozen=True, kw_only=True)
class NormChoice(Choice):
    centres: bool  # subtracts the mean (and has a bias to add back): 2·D parameters, else D


NORM = Axis("Norm", {
    "layernorm": NormChoice(
        "LayerNorm", "subtracts each vector's mean, divides by its standard deviation, scales and shifts",
        "Keeps every token's vector at a steady scale, so deep stacks neither blow up nor vanish.", "2017, GPT-2, BERT",
        centres=True,
        ops={"hook_normalized": "(x - mean(x)) / sqrt(var(x) + eps) * w + b"},
        formulas={"hook_normalized": r"\mathrm{LN}(x) = \frac{x - \mu(x)}{\sqrt{\sigma^2(x) + \epsilon}} \odot w + b"}),
    "rmsnorm": NormChoice(
        "RMSNorm", "divides each vector by its root mean square and scales: no centring, no shift",
        "Steadies the scale without the mean: one reduction fewer; the lecture: \"faster with comparable performance\".", "LLaMA, Mistral",
        centres=False,
        ops={"hook_normalized": "x / sqrt(mean(x^2) + eps) * w"},
        formulas={"hook_normalized": r"\mathrm{RMSNorm}(x) = \frac{x}{\sqrt{\tfrac{1}{d}\sum_i x_i^2 + \epsilon}} \odot w"}),
}, problem="Deep stacks blow up or vanish without normalisation. Pre-norm keeps a clean residual path — the lecture: "
           "\"more stable\", \"does not require learning rate warmup\" (measured here: Trade-offs); RMSNorm drops "
           "the centring, one reduction fewer.", field="norm")


@dataclass(frozen=True, kw_only=True)
class PlacementChoice(Choice):
    """Where a block's norms sit around each sublayer."""

    before: bool  # normalises the sublayer's input (ln1, ln2, ln_cross)
    after: bool  # normalises the sublayer's output before the residual add (ln1_post, ln2_post, ln_cross_post)
    on_sum: bool  # normalises the residual sum (post-norm: ln1, ln2, ln_cross)
    final_norm: bool  # a norm after the last block by default (post-norm blocks already end on one)
    skips_normed: bool = False  # the residual path carries the sublayer's normed input, not the raw stream (MiniMax-01)


NORM_POSITION = Axis("Placement", {
    "pre": PlacementChoice(
        "pre", "the norm reads each sublayer's input; the residual path adds the raw output",
        "Keeps a clean residual path; the lecture: \"more stable\", \"does not require learning rate warmup\".", "GPT-2, LLaMA",
        before=True, after=False, on_sum=False, final_norm=True,
        formulas={"hook_resid_mid": r"x \leftarrow x + \mathrm{Attn}(\mathrm{Norm}(x))",
                  "hook_resid_cross": r"x \leftarrow x + \mathrm{CrossAttn}(\mathrm{Norm}(x), m)",
                  "hook_resid_post": r"x \leftarrow x + \mathrm{FFN}(\mathrm{Norm}(x))"}),
    "post": PlacementChoice(
        "post", "the norm follows each residual addition",
        "Keeps the residual stream itself normalised after every sublayer.", "2017, BERT",
        before=False, after=False, on_sum=True, final_norm=False,
        formulas={"hook_resid_mid": r"x \leftarrow \mathrm{Norm}(x + \mathrm{Attn}(x))",
                  "hook_resid_cross": r"x \leftarrow \mathrm{Norm}(x + \mathrm{CrossAttn}(x, m))",
                  "hook_resid_post": r"x \leftarrow \mathrm{Norm}(x + \mathrm{FFN}(x))"}),
    "sandwich": PlacementChoice(
        "sandwich", "a norm on each sublayer's input and another on its output, before the add",
        "Pre-norm's clean residual path, with each sublayer's contribution kept at a steady scale.", "Gemma 2, Gemma 3",
        before=True, after=True, on_sum=False, final_norm=True,
        formulas={"hook_resid_mid": r"x \leftarrow x + \mathrm{Norm}_{post}(\mathrm{Attn}(\mathrm{Norm}(x)))",
                  "hook_resid_post": r"x \leftarrow x + \mathrm{Norm}_{post}(\mathrm{FFN}(\mathrm{Norm}(x)))"}),
    "after": PlacementChoice(
        "after the sublayer", "the norm reads each sublayer's output, before the residual add",
        "A clean residual path and bounded updates, with the sublayer reading the raw stream.", "OLMo 2",
        before=False, after=True, on_sum=False, final_norm=True,
        formulas={"hook_resid_mid": r"x \leftarrow x + \mathrm{Norm}(\mathrm{Attn}(x))",
                  "hook_resid_post": r"x \leftarrow x + \mathrm{Norm}(\mathrm{FFN}(x))"}),
    "normed-skip": PlacementChoice(
        "normed skip", "the norm reads each sublayer's input, and the residual path carries that normed input on, "
        "not the raw stream", "Every sublayer adds to a stream of steady size, as post-norm's does, while each "
        "sublayer still reads a normalised input.", "MiniMax-01", before=True, after=False, on_sum=False,
        final_norm=True, skips_normed=True,
        formulas={"hook_resid_mid": r"x \leftarrow \mathrm{Norm}(x) + \mathrm{Attn}(\mathrm{Norm}(x))",
                  "hook_resid_cross": r"x \leftarrow \mathrm{Norm}(x) + \mathrm{CrossAttn}(\mathrm{Norm}(x), m)",
                  "hook_resid_post": r"x \leftarrow \mathrm{Norm}(x) + \mathrm{FFN}(\mathrm{Norm}(x))"}),
}, field="norm_position")


@dataclass(frozen=True, kw_only=True)
class BlockChoice(Choice):
    parallel: bool  # attention and FFN read the same input and their outputs are summed


BLOCK = Axis("Block", {
    "sequential": BlockChoice("sequential", "the FFN reads the residual stream after attention has added to it",
                              "The FFN builds on what attention just gathered.", "2017, LLaMA", parallel=False),
    "parallel": BlockChoice(
        "parallel attention + FFN", "attention and the FFN read the same normalised input; their outputs are summed",
        "Both sublayers' matrix products run at once: faster at large scale, at little cost.", "PaLM, Falcon",
        parallel=True,
        formulas={"hook_resid_post": r"x \leftarrow x + \mathrm{Attn}(\mathrm{Norm}(x)) + \mathrm{FFN}(\mathrm{Norm}(x))"}),
})  # derived from cfg.parallel_block


@dataclass(frozen=True, kw_only=True)
class DTypeChoice(Choice):
    bytes: int  # per number


DTYPE = Axis("Number format", {
    "float32": DTypeChoice("float32", "32-bit floats", "Exact enough to compare with any implementation to 1e-5.",
                           bytes=4),
    "bfloat16": DTypeChoice("bfloat16", "16-bit floats with float32's range",
                            "Half the memory and twice the speed on hardware built for it.", bytes=2),
}, field="dtype")
