"""The same block on images: a picture cut into patches, each patch a token."""
from __future__ import annotations

import numpy as np
import torch

from ui.figures import lesson as lesson_figures
from ui.lessons.live import Live
from ui.lessons.steps.step import lesson_step

IMAGE_SIZE, PATCH = 8, 2


def synthetic_image() -> np.ndarray:
    """An 8 x 8 picture with something in every patch row: a frame's corner, a diagonal and a dot."""
    image = np.zeros((IMAGE_SIZE, IMAGE_SIZE))
    image[1, 1:6] = 1.0  # top bar
    image[1:6, 1] = 1.0  # left bar
    image[np.arange(3, 8), np.arange(3, 8)] = 0.7  # diagonal
    image[6, 2] = 0.4
    return image


def patches_of(image: np.ndarray, patch: int) -> np.ndarray:
    """(N, patch * patch): the image's patches in reading order, each flattened row by row."""
    try:
        from transformer.vision import patchify
    except ImportError:  # a library without the vision module: the same reshape
        side = image.shape[0]
        grid = image.reshape(side // patch, patch, side // patch, patch).transpose(0, 2, 1, 3)
        return grid.reshape(-1, patch * patch)
    return patchify(torch.from_numpy(image)[None], patch)[0].numpy()


@lesson_step(
    "images", "The same block on images",
    text="Nothing in the block knows it reads text. Cut an image into patches, flatten each patch into a vector and "
         "treat it as a token: a Vision Transformer is the encoder you already know, with a patch embedding instead "
         "of a token embedding.",
    question="How many tokens does an 8×8 image make?", kind="number",
    try_this="Think of 4×4 patches: the same image makes 4 tokens of 16 values — fewer, coarser tokens, and "
             "attention over them costs 16× less.",
    page="vit")
def patches_as_tokens() -> Live:
    image = synthetic_image()
    patches = patches_of(image, PATCH)
    n, area = patches.shape
    options = sorted({n // 4, n, 2 * n, IMAGE_SIZE * IMAGE_SIZE})
    return Live(
        question=(f"A Vision Transformer reads an {IMAGE_SIZE}×{IMAGE_SIZE} image cut into {PATCH}×{PATCH} patches, "
                  "each patch flattened into one token. How many tokens does it see (not counting [CLS])?"),
        choices=[str(k) for k in options], answer=options.index(n),
        why=(f"({IMAGE_SIZE} / {PATCH})² = {n} patches, read row by row like words; each is {area} pixel values, "
             "mapped to d_model by one linear layer (the image's token embedding). Then the very same encoder blocks "
             "run: no causal mask, learned positions, a [CLS] token in front whose output is the class."),
        figure=lesson_figures.image_as_tokens(image, patches, PATCH))
