"""The same block on images: a small Vision Transformer on 8x8 handwritten digits, and where its [CLS] token looks."""
import numpy as np
import pandas as pd
import streamlit as st

from transformer import axes, vision
from ui.figures import vision as figs
from ui.app.export import trace_npz
from ui.figures.base import heatmap
from ui.app.page import start_page
from ui.app.charts import show_chart
from ui.app.page_controls import KEEP, keep_valid, url_state
from ui.compute.vision_measure import (conv_trained, digit_view, held_out, held_out_predictions, stem_gap,
                                      vit_model)

STEMS = axes.keys("patch_stem")  # flatten + linear, or a convolution: the rows of the patch-stem axis
url_state("vit", carry=True, vit_digit=0, vit_layer=1, vit_head=0, vit_stem=STEMS[0])  # carry: the sidebar's values, across a page switch

start_page("The same block on images", """
**The problem.** Attention reads a sequence of vectors. An image is a grid of pixels — is attention a text-only trick?

**The idea.** Cut the image into patches and read them row by row, like words. One linear map turns each patch's
pixels into a vector (the image's "token embedding"), a learned **[CLS]** vector goes in front, learned positions are
added, and then come *exactly* the library's encoder blocks — the same five lines, the same hook names as for text.
The class is read from the output at [CLS], so [CLS] has to gather, through attention, whatever patches tell the
digits apart. This is the Vision Transformer (Dosovitskiy et al., 2020), here at the size of scikit-learn's 8 × 8
digits: 16 patches of 2 × 2 pixels.

**What to look at.** Pick a digit the model never trained on. Where does [CLS] look in each head — at the strokes,
at the blank middle of a 0, at the bar of a 7? Which heads look at the same place for every digit (a position
habit), which follow the ink? And when the prediction is wrong, what did it look at?
""")

keep_valid("vit_stem", STEMS, STEMS[0])
stem = st.radio("Patch stem", STEMS, format_func=lambda key: axes.label("patch_stem", key), horizontal=True,
                key="vit_stem", **KEEP,
                help="how a patch's pixels become a token: cut out and flattened through a linear map, or one "
                     "convolution whose kernel and stride are the patch size. The weights are the same numbers.")
try:
    model, meta = vit_model(stem)
    images, labels = held_out()
    predicted = held_out_predictions(stem)
except ImportError as exc:  # scikit-learn is missing
    st.error(f"The digits come with scikit-learn, which is not installed here ({exc}). "
             "Install it with `pip install scikit-learn` (it is in requirements.txt).")
    st.stop()
except (ValueError, OSError) as exc:  # CheckpointError is a ValueError
    st.error(f"The digits ViT cannot be loaded: {exc}. Train it again with `python -m transformer.vision`.")
    st.stop()

cfg, shape = model.cfg, model.shape
keep_valid("vit_digit", range(len(images)), 0)
keep_valid("vit_layer", range(cfg.n_layers), cfg.n_layers - 1)
keep_valid("vit_head", range(cfg.n_heads), 0)

wrong = np.flatnonzero(predicted != labels)
seconds = meta.get("train_cpu_seconds", meta.get("train_seconds"))
st.success(f"Trained weights: {cfg.n_layers} encoder blocks, {cfg.n_heads} heads, d_model = {cfg.d_model}, "
           f"{sum(p.numel() for p in model.parameters()):,} parameters"
           + (f", trained in {seconds:.0f} CPU seconds on one thread" if isinstance(seconds, (int, float)) else "")
           + f". On the {len(images)} held-out digits it is right {len(images) - len(wrong)} times "
           f"({1 - len(wrong) / len(images):.1%}).", icon=":material/school:")


def jump_to_wrong() -> None:
    """The next held-out digit after the current one that the model gets wrong."""
    later = wrong[wrong > int(st.session_state["vit_digit"])]
    st.session_state["vit_digit"] = int(later[0] if len(later) else wrong[0])


col1, col2, col3, col4 = st.columns([2, 1, 1, 1.4])
col1.number_input(f"Held-out digit (0 … {len(images) - 1})", min_value=0, max_value=len(images) - 1, step=1,
                  key="vit_digit", **KEEP, help="digits from the last 20% of the data set, never seen in training")
col2.selectbox("Layer", range(cfg.n_layers), key="vit_layer", **KEEP)
col3.selectbox("Head", range(cfg.n_heads), key="vit_head", **KEEP)
col4.button("Next digit it gets wrong", on_click=jump_to_wrong, disabled=not len(wrong),
            help=f"{len(wrong)} of the {len(images)} held-out digits are misclassified")
index, layer, head = int(st.session_state["vit_digit"]), int(st.session_state["vit_layer"]), int(st.session_state["vit_head"])

try:
    view = digit_view(index, stem)
except (ValueError, MemoryError) as exc:
    st.error(str(exc))
    st.stop()
label, probabilities = int(view["label"]), view["probabilities"]
guess = int(probabilities.argmax())

# --- the digit and the prediction ------------------------------------------------------------
c1, c2 = st.columns(2)
show_chart(figs.digit_patches(view["image"], shape.patch_size,
                              f"digit {index}: {shape.n_patches} patches of {shape.patch_size}×{shape.patch_size}"),
           key="vit_digit_patches", where=c1)
c1.caption("Each patch (orange borders) becomes one token, numbered in reading order after [CLS] (token 0). "
           f"A token is the patch's {shape.patch_pixels} pixels through one linear map, plus a learned position.")
show_chart(figs.class_probabilities(probabilities, label), key="vit_probabilities", where=c2)
if guess == label:
    c2.markdown(f"**Prediction {guess}** with probability {probabilities[guess]:.2f} — the true label is {label}. :material/check_circle:")
else:
    c2.markdown(f"**Prediction {guess}** with probability {probabilities[guess]:.2f}, but the true label is "
                f"**{label}** (probability {probabilities[label]:.2f}). :material/cancel:")

# --- where [CLS] looks -----------------------------------------------------------------------
st.subheader(f"Where [CLS] looks in layer {layer}")
weights = view["patterns"][layer]  # (H, 1 + N, 1 + N)
cls_row = weights[:, vision.CLS]  # (H, 1 + N): [CLS] over [CLS] and the patches
maps = vision.patch_grid(cls_row[:, 1:], shape.image_size, shape.patch_size)  # (H, rows, cols)
show_chart(figs.cls_attention(maps, view["image"], shape.patch_size, cls_self=cls_row[:, vision.CLS],
                              title=f"layer {layer}: [CLS]'s weight on each patch, per head", highlight=head),
           key="vit_cls_attention")
st.caption("Each panel is one head's softmax row for the query [CLS], laid out where the patches sit; the white line "
           "is the digit's outline. The weights on the 16 patches and on [CLS] itself add up to 1. In the last layer "
           "this row is all the class is read from; in layer 0 [CLS] is still the same vector for every image, so "
           "what changes from digit to digit is only the keys.")

# --- one head, every query --------------------------------------------------------------------
st.subheader(f"Layer {layer}, head {head}: every token's weights")
tokens = ["CLS"] + [f"patch {i + 1}" for i in range(shape.n_patches)]
show_chart(heatmap(weights[head], tokens, tokens, f"layer {layer}, head {head}: query → key weights", zmin=0,
                   zmax=1, height=520), key="vit_head_matrix")
st.caption("Row 0 is [CLS] (the panel above); the other rows are patches looking at each other, as words do in a "
           "sentence. No mask: every token sees every other, in both directions.")

# --- the patch stem: two ways to write one map ------------------------------------------------------
st.subheader("The patch stem: flattening + a linear map, or a convolution")
p, d = shape.patch_size, cfg.d_model
gap, disagree = stem_gap()
st.markdown(f"""
The linear stem cuts out each {p} × {p} patch, flattens its pixels row by row into {shape.patch_pixels} numbers and
multiplies by a {d} × {shape.patch_pixels} matrix. A convolution with {d} kernels of {p} × {p}, **stride {p}**, slides
over the image one whole patch at a time: each output position reads exactly one patch, and its kernel *is* a row of
that matrix laid out as a {p} × {p} picture. Same numbers, same tokens. Over the {len(images)} held-out digits the two
stems' logits differ by at most **{gap:.1e}**, and {disagree} digits are classified differently.
""")
show_chart(figs.stem_kernels(model.kernels().cpu().numpy(),
                             title=f"the {d} kernels of {p}×{p} (= the linear map's {d} rows)"), key="vit_kernels")
st.caption(f"Each tile is one feature of the token: red pixels of a patch push it up, blue ones down. Now the stem "
           f"is **{axes.label('patch_stem', stem)}** ({axes.row('patch_stem', stem).does}); switch it above and every "
           "figure of this page stays the same. A stride smaller than the kernel would let patches overlap — "
           "something only the convolution can say.")

st.markdown("**Trained as a choice.** Moving one model's weights shows the two stems are one map. Trained from the "
            "first step with each stem (the same settings and seed, a run of its own), do they learn the same?")
try:
    conv_model, conv_meta = conv_trained()
except (ValueError, OSError) as exc:  # CheckpointError is a ValueError
    st.error(f"The ViT trained with the convolution stem cannot be loaded: {exc}. Train it with "
             "`python -m transformer.vision --stem conv --out assets/checkpoints/vit-digits-conv`.")
else:
    st.dataframe(pd.DataFrame([
        {"stem it trained with": axes.label("patch_stem", m.shape.stem),
         "held-out digits right": f"{info['test_accuracy']:.1%} of {info['n_test']}",
         "training digits right": f"{info['train_accuracy']:.1%}", "parameters": info["parameters"],
         "CPU seconds": info.get("train_cpu_seconds")} for m, info in ((vit_model("linear")[0], meta),
                                                                       (conv_model, conv_meta))]), hide_index=True)
    gap = abs(conv_meta["test_accuracy"] - meta["test_accuracy"]) * meta["n_test"]
    st.caption(f"The two runs differ by {gap:.0f} held-out digit{'s' if round(gap) != 1 else ''}: the same map with "
               "the same start learns the same thing, up to the order in which the two compute their sums. Its "
               "kernels, below, are the convolution model's own.")
    show_chart(figs.stem_kernels(conv_model.kernels().cpu().numpy(), title=f"the convolution-trained model's {d} "
                                                                            f"kernels of {p}×{p}"),
               key="vit_conv_kernels")

st.download_button("Download this digit's figures (.npz)", on_click="ignore", mime="application/octet-stream",
                   file_name=f"vit_digit{index}.npz",
                   data=lambda: trace_npz({"image": view["image"], "label": np.asarray(label),
                                           "patches": view["patches"], "probabilities": probabilities,
                                           "cls_attention": maps, "patterns": view["patterns"]}),
                   help="image (8, 8), label, patches (N, p²), class probabilities, [CLS] maps of this layer "
                        "(H, rows, cols), every layer's weights (L, H, 1 + N, 1 + N)")
