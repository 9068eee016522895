"""Where a token is: the position schemes, and the scalings that stretch RoPE past its trained length.

A scheme's flags say what it does (adds vectors to the embeddings? rotates q and k? adds a bias to
the scores?); the model and the pages ask them, never the scheme's name. Its vectors and rotations
are built in transformer/positions.py, one builder per row that needs one.
"""
from __future__ import annotations

from dataclasses import dataclass
from .base import Axis, Choice


def _check_rotation(cfg) -> None:
    """RoPE rotates pairs of dimensions: the rotated width must be even and fit in a head."""
    if cfg.rope_dim is not None:
        if cfg.rope_dim < 2 or cfg.rope_dim % 2 or cfg.rope_dim > cfg.d_head:
            raise ValueError(f"rope_dim={cfg.rope_dim} must be an even number from 2 to d_head={cfg.d_head}: "
                             "RoPE rotates pairs of dimensions")
    elif cfg.d_head % 2:
        source = "head_dim" if cfg.head_dim is not None else f"d_model/n_heads = {cfg.d_model}/{cfg.n_heads}"
        raise ValueError(f"RoPE rotates pairs of dimensions, but d_head = {source} = {cfg.d_head} is odd; "
                         "choose sizes that give an even head dimension, or an even rope_dim")


def _check_no_rotation(cfg) -> None:
    """RoPE's own settings mean nothing for a scheme that does not rotate q and k."""
    if cfg.rope_dim is not None:
        raise ValueError(f"rope_dim={cfg.rope_dim} needs a position scheme that rotates q and k "
                         f"(position='rope'), not {cfg.position!r}")
    if cfg.rope_scaling != "none":
        raise ValueError(f"rope_scaling={cfg.rope_scaling!r} stretches RoPE, but position={cfg.position!r}; "
                         "set position='rope' or rope_scaling='none'")
    if cfg.rope_local_theta is not None:
        raise ValueError(f"rope_local_theta={cfg.rope_local_theta} needs position='rope', not {cfg.position!r}")


def _check_buckets(cfg) -> None:
    """T5's bias is read from relative_buckets rows, the last shared by every distance past relative_max_distance."""
    _check_no_rotation(cfg)
    for field, example in (("relative_buckets", 32), ("relative_max_distance", 128)):
        if getattr(cfg, field) < 1:
            raise ValueError(f"{field}={getattr(cfg, field)} must be at least 1 (T5: {example}); "
                             f"set {field} to {example} or another positive number")


@dataclass(frozen=True, kw_only=True)
class PositionChoice(Choice):
    adds_embedding: bool = False  # vectors added to the embeddings at the bottom (transformer/positions.py builds them)
    rotates_qk: bool = False  # rotates q and k in every attention layer (RoPE)
    score_bias: bool = False  # adds a bias to every layer's scores (ALiBi, T5)
    learned_bias: bool = False  # that bias is a trained table per stack, read by distance bucket (T5)
    hooks: tuple[str, ...] = ()  # the hook sites it fires
    table_param_terms: bool = False  # its table holds max_len x d_model trained parameters

    @property
    def bounds_length(self) -> bool:
        """A table of max_len rows: no position past it exists."""
        return self.adds_embedding


POSITION = Axis("Position", {
    "none": PositionChoice("none", "no position signal: only the mask orders tokens",
                           "A baseline: shows how blind attention is to order.", check=_check_no_rotation),
    "sinusoidal": PositionChoice(
        "sinusoidal", "fixed sine/cosine vectors added to the embeddings",
        "Tells attention where each token is, with nothing to train.", "2017",
        adds_embedding=True, hooks=("hook_pos_embed",), check=_check_no_rotation,
        ops={"hook_pos_embed": "sinusoidal position vectors"},
        formulas={"hook_pos_embed": r"P_{t,2i} = \sin\!\left(t / 10000^{2i/d}\right),\quad "
                                    r"P_{t,2i+1} = \cos\!\left(t / 10000^{2i/d}\right)"}),
    "learned": PositionChoice(
        "learned", "a trained vector per position, added to the embeddings",
        "Lets the model learn what each position means, up to its table's length (max_len).", "GPT-2, BERT",
        adds_embedding=True, hooks=("hook_pos_embed",), table_param_terms=True, check=_check_no_rotation,
        ops={"hook_pos_embed": "learned position vectors"},
        formulas={"hook_pos_embed": r"P_t = P_{\text{learned}}[t]"}),
    "rope": PositionChoice(
        "RoPE", "q and k rotated by an angle proportional to position",
        "Scores depend on the distance between tokens only.", "LLaMA, Mistral",
        rotates_qk=True, hooks=("attn.hook_rope_angles", "attn.hook_rot_q", "attn.hook_rot_k"), check=_check_rotation),
    "xpos": PositionChoice(
        "xPos", "RoPE whose turn also decays: each pair of q's dimensions scaled up by ζ^(t/512), k's down by as much",
        "Scores still depend on the distance only, and far keys count for less: RoPE's oscillation at long range is "
        "damped, which its paper found helps a model read past its trained length.", "Length-Extrapolatable Transformer (2022)",
        rotates_qk=True, hooks=("attn.hook_rope_angles", "attn.hook_rot_q", "attn.hook_rot_k"), check=_check_rotation,
        formulas={"hook_rot_q": r"q'_t = \zeta^{\,t/B}\left(q_t \cos\phi_t + \mathrm{rotate\_half}(q_t) \sin\phi_t\right)",
                  "hook_rot_k": r"k'_t = \zeta^{-t/B}\left(k_t \cos\phi_t + \mathrm{rotate\_half}(k_t) \sin\phi_t\right)"}),
    "alibi": PositionChoice(
        "ALiBi", "a linear distance penalty added to the scores",
        "A penalty that grows with distance at any length; the lecture: it \"generalizes very well to longer "
        "sequences than seen during training\" (measured here: Trade-offs).", "BLOOM",
        score_bias=True, hooks=("attn.hook_alibi_bias",), check=_check_no_rotation,
        formulas={"hook_attn_scores": r"S' = S + M + A"}),
    "t5": PositionChoice(
        "T5 buckets", "a learned bias per head and distance bucket, added to the scores: exact buckets for near "
        "distances, logarithmic ones for far, the last one shared by everything past the maximum distance",
        "Lets each head learn how much distance matters, with a handful of numbers shared by every layer; an "
        "encoder tells keys before the query from keys after it, a decoder sees only the past.", "T5 (2019)",
        score_bias=True, learned_bias=True, hooks=("attn.hook_rel_bias",), check=_check_buckets,
        formulas={"hook_attn_scores": r"S' = S + M + B_{h,\,\mathrm{bucket}(j - i)}"}),
}, problem="Attention is blind to order. Add position vectors (sinusoidal, learned), rotate q and k by position "
           "(RoPE: scores depend on distance only), or penalise distance directly (ALiBi; T5 learns its penalty per "
           "bucket of distance). The lecture says RoPE and ALiBi "
           "read longer texts than they trained on; the Trade-offs page measures it.", field="position")


def _check_llama3(cfg) -> None:
    if not cfg.rope_high_freq_factor > cfg.rope_low_freq_factor > 0:
        raise ValueError(f"rope_high_freq_factor={cfg.rope_high_freq_factor} must be larger than "
                         f"rope_low_freq_factor={cfg.rope_low_freq_factor}, and both above 0 (LLaMA 3.1: 4 and 1)")


def _check_yarn(cfg) -> None:
    if not cfg.yarn_beta_fast > cfg.yarn_beta_slow > 0:
        raise ValueError(f"yarn_beta_fast={cfg.yarn_beta_fast} must be larger than yarn_beta_slow="
                         f"{cfg.yarn_beta_slow}, and both above 0 (the paper: 32 and 1)")


@dataclass(frozen=True, kw_only=True)
class RopeScalingChoice(Choice):
    rescales: bool = True  # changes RoPE's frequencies (transformer/positions.py holds how)
    depends_on_length: bool = False  # the frequencies change with the sequence's length (dynamic NTK)
    turns_fraction: bool = False  # only the first rope_fraction of the frequencies turn, the rest stand still


ROPE_SCALING = Axis("RoPE scaling", {
    "none": RopeScalingChoice("none", "RoPE's frequencies as trained", "Reads as far as it was trained, no further.",
                              rescales=False),
    "linear": RopeScalingChoice("linear (position interpolation)", "every frequency divided by the factor",
                                "Position s·p turns as p did in training; the fast dimensions slow too, so it needs fine-tuning "
                                "(without it the trained LLaMA 2 read worse than unscaled: Positions page).",
                                "position interpolation (Chen et al., 2023), Gemma 3's global layers"),
    "dynamic": RopeScalingChoice("dynamic NTK", "past the trained length, a larger base slows the low frequencies most",
                                 "Nothing changes inside the trained context; beyond it, the base grows with the text.",
                                 "Qwen (early)", depends_on_length=True),
    "yarn": RopeScalingChoice("YaRN", "fast dimensions kept, slow ones interpolated, a ramp between; cos and sin scaled up",
                              "Its paper: reads far past the context while short-range attention stays sharp (the Positions page "
                              "measures both on the trained models).",
                              "DeepSeek-V3, gpt-oss, Qwen3", check=_check_yarn),
    "llama3": RopeScalingChoice("LLaMA 3", "long wavelengths interpolated, short ones kept, a smooth band between",
                                "Stretched LLaMA 3.1 from 8k to 128k tokens (with training at the new length); the Positions "
                                "page measures what it costs at short range.", "LLaMA 3.1",
                                check=_check_llama3),
    "proportional": RopeScalingChoice(
        "proportional", "the first rope_fraction of the frequencies, spaced over the whole head, turn; the rest stand "
        "still", "Most of each head carries no position at all, so a long-range layer matches content at any "
        "distance, while its turning part still tells near from far.", "Gemma 4 (global layers)",
        turns_fraction=True),
}, problem="A RoPE model whose layers see every key fails past the length it trained on: its slow dimensions reach "
           "angles it never saw. "
           "Scaling slows those dimensions so long texts land on familiar angles.", field="rope_scaling")
