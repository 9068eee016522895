"""The vision page's cached work: the shipped digits ViT (with either patch stem), the held-out digits, one digit's
recorded forward pass, and how far the two stems' logits are apart."""
from __future__ import annotations

import numpy as np
import streamlit as st
import torch

from transformer import vision
from transformer.hooks import hook_name


@st.cache_resource(show_spinner="Loading the digits ViT…")
def vit_model(stem: str = "linear") -> tuple[vision.VisionTransformer, dict]:
    """(model, meta) of assets/checkpoints/vit-digits with the patch stem `stem` (its weights carried over where the
    checkpoint has the other one); CheckpointError (a ValueError) when it cannot be read."""
    model, meta = vision.load(vision.SHIPPED_PATH, device="cpu")
    return (model if model.shape.stem == stem else vision.with_stem(model, stem)), meta


@st.cache_resource(show_spinner="Loading the digits ViT trained with the convolution stem…")
def conv_trained() -> tuple[vision.VisionTransformer, dict]:
    """(model, meta) of assets/checkpoints/vit-digits-conv: the same settings and seed, trained with the convolution
    stem from the first step (its own run, not the linear model's weights moved)."""
    return vision.load(vision.CONV_PATH, device="cpu")


@st.cache_resource(show_spinner="Loading the digits…")
def held_out() -> tuple[np.ndarray, np.ndarray]:
    """(N, 8, 8) held-out images in 0..1 and their (N,) labels: the split the model never trained on."""
    split = vision.digits_split()
    return split.test_images.numpy(), split.test_labels.numpy()


@st.cache_data(show_spinner="Classifying the held-out digits…")
def held_out_logits(stem: str = "linear") -> np.ndarray:
    """(N, n_classes) the model's logits for every held-out digit, through the patch stem `stem`."""
    model, _ = vit_model(stem)
    images, _ = held_out()
    with torch.no_grad():
        return model(torch.from_numpy(images)).numpy()


def held_out_predictions(stem: str = "linear") -> np.ndarray:
    """(N,) the class the model predicts for every held-out digit."""
    return held_out_logits(stem).argmax(-1)


def stem_gap() -> tuple[float, int]:
    """(largest |logit difference|, digits classified differently) between the two stems over the held-out digits."""
    linear, conv = held_out_logits("linear"), held_out_logits("conv")  # (N, n_classes) each
    return float(np.abs(linear - conv).max()), int((linear.argmax(-1) != conv.argmax(-1)).sum())


@st.cache_data(max_entries=64, show_spinner=False)
def digit_view(index: int, stem: str = "linear") -> dict[str, np.ndarray]:
    """One held-out digit through the model: its image, patches, class probabilities and every layer's weights."""
    model, _ = vit_model(stem)
    images, labels = held_out()
    image = torch.from_numpy(images[index:index + 1])  # (1, 8, 8)
    logits, trace = model.run_with_trace(image, names="blocks.*.attn.hook_pattern")  # (1, n_classes)
    patterns = torch.stack([trace[hook_name(i, "attn.hook_pattern")][0]
                            for i in range(model.cfg.n_layers)])  # (L, H, 1 + N, 1 + N)
    return {"image": images[index], "label": np.int64(labels[index]),
            "patches": vision.patchify(image, model.shape.patch_size)[0].numpy(),  # (N, p*p)
            "probabilities": logits[0].softmax(-1).numpy(), "patterns": patterns.numpy()}
