"""How an image becomes a ViT's tokens: each patch flattened through one linear map, or one convolution over the image.

Not a field of the model's config: a ViT checkpoint's JSON names its stem beside its image and patch size
(``VisionShape.stem``), and ``transformer.vision`` builds one stem per row of this axis.
"""
from __future__ import annotations

from dataclasses import dataclass

from .base import Axis, Choice


@dataclass(frozen=True, kw_only=True)
class PatchStemChoice(Choice):
    convolves: bool  # slides a kernel over the image (kernel = stride = patch) instead of cutting patches out first


PATCH_STEM = Axis("Patch stem", {
    "linear": PatchStemChoice(
        "flatten + linear", "each p x p patch cut out, its pixels flattened row by row, through one linear map",
        "Makes an image a sequence of vectors with the text model's own tool, a matrix per token.",
        "ViT (Dosovitskiy et al., 2020), as written in the paper", convolves=False),
    "conv": PatchStemChoice(
        "convolution", "one Conv2d over the whole image, kernel = stride = p: each output position is one patch",
        "The same map, written as image code writes it: no patches are cut out, each of the d_model kernels is a "
        "p x p picture of what its feature looks for, and a stride below the kernel (overlap) is one setting away.",
        "ViT's released code, timm's PatchEmbed", convolves=True),
}, problem="A Transformer reads vectors; an image is a grid of pixels. Flattening each patch through a linear map and "
           "sliding a convolution whose kernel and stride are the patch size compute the same tokens.")
