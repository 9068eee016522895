"""The same block on images: a small Vision Transformer for the 8x8 digits scikit-learn ships.

An image is cut into square patches, read row by row like the words of a sentence. Each
patch's pixels go through one linear map (the patch embedding: the image's "token
embedding"; ``VisionShape.stem`` computes it by flattening each patch, or as one convolution
whose kernel and stride are the patch size: the same map), a learned [CLS] vector goes in
front, and the library's own encoder takes the sequence as ``inputs_embeds``: learned
positions, the same blocks, the same hook names (``blocks.0.attn.hook_pattern`` ...). The class is read from the [CLS] position, so the
[CLS] row of the attention weights shows which patches the model looked at.

    model, meta = load()                                  # the shipped one: assets/checkpoints/vit-digits
    split = digits_split()                                # the last 20% of the digits are held out
    logits, trace = model.run_with_trace(split.test_images[:1])   # logits (1, 10)
    trace["blocks.1.attn.hook_pattern"][0, :, CLS, 1:]    # (H, N): [CLS]'s weights on the patches

    model, report = train_vit(TrainSettings(seed=0))      # under half a minute of one CPU thread
    save(model, "my-vit", report)

    python -m transformer.vision --out assets/checkpoints/vit-digits
    python -m transformer.vision --stem conv --out assets/checkpoints/vit-digits-conv
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from . import axes, checkpoint_format
from .checkpoint_format import CheckpointError, checkpoint_paths, read_meta
from .config import TransformerConfig
from .hooks import Trace
from .model import Transformer

IMAGE_SIZE = 8  # the digits are 8 x 8 pixels
PIXEL_MAX = 16.0  # ... with values 0..16
N_CLASSES = 10
TEST_SHARE = 0.2  # the last 20% of the digits, never trained on
CLS = 0  # the [CLS] token sits at position 0, the patches after it
SHIPPED_PATH = checkpoint_format.SHIPPED_DIR / "vit-digits"
CONV_PATH = checkpoint_format.SHIPPED_DIR / "vit-digits-conv"  # the same settings, trained with the convolution stem
VISION_KEY = "vision"  # the JSON entry that marks a ViT checkpoint: its image and patch size (checkpoint.load reads it)


# --- patches ----------------------------------------------------------------------------


def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """(B, H, W) images -> (B, N, p*p) patches, in reading order (row by row), each flattened row by row."""
    B, H, W = images.shape
    p = patch_size
    if H % p or W % p:
        raise ValueError(f"a {H}x{W} image does not split into {p}x{p} patches; pick a patch size dividing {H} and {W}")
    grid = images.reshape(B, H // p, p, W // p, p)  # (B, rows, p, cols, p)
    grid = grid.permute(0, 1, 3, 2, 4)  # (B, rows, cols, p, p)
    return grid.reshape(B, (H // p) * (W // p), p * p)  # (B, N, p*p)


def unpatchify(patches: torch.Tensor, image_size: int) -> torch.Tensor:
    """(B, N, p*p) patches -> (B, H, W) images: the inverse of ``patchify`` for square images."""
    B, N, area = patches.shape
    p, side = round(area ** 0.5), image_size
    rows = side // p
    if p * p != area or rows * rows != N or rows * p != side:
        raise ValueError(f"{N} patches of {area} pixels do not tile a {side}x{side} image")
    grid = patches.reshape(B, rows, rows, p, p)  # (B, rows, cols, p, p)
    return grid.permute(0, 1, 3, 2, 4).reshape(B, side, side)  # (B, H, W)


def patch_grid(values: torch.Tensor, image_size: int, patch_size: int) -> torch.Tensor:
    """(..., N) one value per patch -> (..., rows, cols): laid out where the patches sit in the image."""
    rows = image_size // patch_size
    return values.reshape(*values.shape[:-1], rows, rows)


# --- the patch stems: one per row of the "patch_stem" axis (transformer/axes/vision.py) ----------------


class LinearStem(nn.Linear):
    """Cut the image into patches, flatten each row by row, one linear map: weight (d_model, p*p)."""

    def __init__(self, patch_size: int, d_model: int, device=None):
        super().__init__(patch_size * patch_size, d_model, device=device)
        self.patch_size = patch_size

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        patches = patchify(images, self.patch_size)  # (B, N, p*p)
        return super().forward(patches)  # (B, N, d_model)


class ConvStem(nn.Conv2d):
    """One convolution over the image, kernel = stride = p, so each output position reads exactly one patch:
    weight (d_model, 1, p, p), the linear stem's rows laid out as p x p kernels."""

    def __init__(self, patch_size: int, d_model: int, device=None):
        super().__init__(1, d_model, kernel_size=patch_size, stride=patch_size, device=device)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        features = super().forward(images[:, None])  # (B, d_model, rows, cols): one channel in, one vector per patch
        return features.flatten(2).transpose(1, 2)  # (B, N, d_model), in reading order as patchify's


PATCH_STEMS = {"linear": LinearStem, "conv": ConvStem}  # stem -> its module, (patch_size, d_model, device)


# --- the model --------------------------------------------------------------------------


@dataclass(frozen=True)
class VisionShape:
    """What the encoder's config does not say: how an image becomes tokens."""
    image_size: int = IMAGE_SIZE
    patch_size: int = 2  # 2x2 patches: 16 tokens, a 4x4 map of where [CLS] looks
    stem: str = "linear"  # a row of the "patch_stem" axis: flatten + linear, or a convolution (the same map)

    def __post_init__(self) -> None:
        if self.patch_size < 1 or self.image_size % self.patch_size:
            raise ValueError(f"patch_size={self.patch_size} must divide image_size={self.image_size}; "
                             f"pick one of {[p for p in range(1, self.image_size + 1) if self.image_size % p == 0]}")
        axes.AXES["patch_stem"].row(self.stem, "stem")  # an unknown stem names itself and lists the rows

    @property
    def n_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2

    @property
    def patch_pixels(self) -> int:
        return self.patch_size ** 2


def encoder_config(shape: VisionShape, **sizes) -> TransformerConfig:
    """The library config of a ViT's encoder: bidirectional, learned positions, LayerNorm before each sublayer,
    GELU; its "vocabulary" is the classes, so the library's output head is the classifier."""
    base = dict(arch="encoder", vocab_size=N_CLASSES, max_len=shape.n_patches + 1, d_model=32, n_heads=4, n_layers=2,
                d_ff=64, position="learned", norm="layernorm", norm_position="pre", ffn="gelu", bias=True,
                tie_embeddings=False, head_bias=True)
    return TransformerConfig(**{**base, **sizes})


class VisionTransformer(nn.Module):
    """images (B, H, W) -> class logits (B, n_classes), through the library's encoder.

    ``encoder.embed`` (the token table) is never read: patches enter as ``inputs_embeds``.
    """

    def __init__(self, cfg: TransformerConfig, shape: VisionShape = VisionShape(),
                 device: torch.device | str | None = None):
        super().__init__()
        if cfg.row("arch").causal:
            raise ValueError(f"a ViT reads the image in both directions: arch must be 'encoder', not {cfg.arch!r}")
        if cfg.max_len < shape.n_patches + 1:
            raise ValueError(f"max_len={cfg.max_len} is too short for {shape.n_patches} patches and [CLS]; "
                             f"use max_len={shape.n_patches + 1}")
        self.cfg, self.shape = cfg, shape
        self.encoder = Transformer(cfg, device=device)
        device = self.encoder.device
        self.patch_embed = PATCH_STEMS[shape.stem](shape.patch_size, cfg.d_model, device=device)  # patches -> tokens
        self.cls_token = nn.Parameter(torch.randn(cfg.d_model, device=device) * 0.02)  # (d_model,)

    @property
    def device(self) -> torch.device:
        return self.encoder.device

    def embed_image(self, images: torch.Tensor) -> torch.Tensor:
        """(B, H, W) pixels in 0..1 -> (B, 1 + N, d_model): [CLS], then one vector per patch."""
        side = self.shape.image_size
        if images.dim() != 3 or tuple(images.shape[1:]) != (side, side) or images.shape[0] == 0:
            raise ValueError(f"images must be a (batch, {side}, {side}) tensor, got shape {tuple(images.shape)}")
        tokens = self.patch_embed(images.to(self.device, torch.float32))  # (B, N, d_model)
        cls = self.cls_token.expand(images.shape[0], 1, -1)  # (B, 1, d_model)
        return torch.cat((cls, tokens), dim=1)  # (B, 1 + N, d_model)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        logits = self.encoder(inputs_embeds=self.embed_image(images))  # (B, 1 + N, n_classes)
        return logits[:, CLS]  # (B, n_classes)

    def run_with_trace(self, images: torch.Tensor, **kwargs) -> tuple[torch.Tensor, Trace]:
        """(class logits (B, n_classes), trace): the encoder's hook names, as for text (``names=`` etc. as there)."""
        with torch.no_grad():
            tokens = self.embed_image(images)  # (B, 1 + N, d_model)
        logits, trace = self.encoder.run_with_trace(inputs_embeds=tokens, **kwargs)
        return logits[:, CLS], trace

    def kernels(self) -> torch.Tensor:
        """(d_model, p, p): what each feature of the patch embedding weighs each pixel of a patch by, either stem."""
        p = self.shape.patch_size
        return self.patch_embed.weight.detach().reshape(self.cfg.d_model, p, p)  # (d_model, p, p)


def with_stem(model: VisionTransformer, stem: str) -> VisionTransformer:
    """The same model with the other stem: the linear map's rows become the convolution's p x p kernels (or back),
    every other weight copied. Both compute the same tokens, so the logits agree up to float rounding."""
    shape = dataclasses.replace(model.shape, stem=stem)
    other = VisionTransformer(model.cfg, shape, device=model.device)
    weights = model.state_dict()
    # (d_model, p*p) <-> (d_model, 1, p, p): patchify flattens a patch row by row, as the reshape reads a kernel
    weights["patch_embed.weight"] = weights["patch_embed.weight"].reshape(other.patch_embed.weight.shape)
    other.load_state_dict(weights)
    return other.eval()


# --- the data ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DigitSplit:
    train_images: torch.Tensor  # (N_train, 8, 8) in 0..1
    train_labels: torch.Tensor  # (N_train,)
    test_images: torch.Tensor  # (N_test, 8, 8): the last 20% of the data set, fixed
    test_labels: torch.Tensor  # (N_test,)


def digits_split(test_share: float = TEST_SHARE) -> DigitSplit:
    """scikit-learn's 1797 handwritten digits (shipped with it, no download), pixels scaled to 0..1;
    the last `test_share` held out, always the same ones."""
    from sklearn.datasets import load_digits  # only the vision code needs scikit-learn

    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32) / PIXEL_MAX  # (N, 8, 8)
    labels = torch.tensor(digits.target, dtype=torch.long)  # (N,)
    cut = len(images) - round(len(images) * test_share)
    return DigitSplit(images[:cut], labels[:cut], images[cut:], labels[cut:])


# --- training ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainSettings:
    seed: int = 0
    epochs: int = 60
    batch_size: int = 64
    lr: float = 5e-3  # the peak of a one-cycle schedule: 10% warm-up, then a cosine down to almost 0
    weight_decay: float = 0.3
    patch_size: int = 2
    stem: str = "linear"  # a row of the "patch_stem" axis
    d_model: int = 32
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 64
    dropout: float = 0.1
    position: str = "learned"  # sinusoidal did worse (docs/checkpoints.md)


@torch.no_grad()
def accuracy(model: VisionTransformer, images: torch.Tensor, labels: torch.Tensor) -> float:
    model.eval()
    predicted = model(images).argmax(-1).cpu()  # (B,)
    return float((predicted == labels).float().mean())


def train_vit(settings: TrainSettings = TrainSettings(), split: DigitSplit | None = None,
              device: torch.device | str = "cpu", log=None) -> tuple[VisionTransformer, dict]:
    """Train a ViT on the digits (same settings -> same weights) and measure it on the held-out split.

    Returns (model in eval mode, report): the settings, test and train accuracy, seconds, parameters.
    """
    split = split or digits_split()
    device = torch.device(device)
    shape = VisionShape(patch_size=settings.patch_size, stem=settings.stem)
    cfg = encoder_config(shape, d_model=settings.d_model, n_heads=settings.n_heads, n_layers=settings.n_layers,
                         d_ff=settings.d_ff, dropout=settings.dropout, position=settings.position)
    n_train = len(split.train_images)
    steps = settings.epochs * -(-n_train // settings.batch_size)
    order_of_batches = torch.Generator().manual_seed(settings.seed)  # the shuffles come from their own generator
    # fork_rng: seed the weights (and dropout) without disturbing the caller's random state
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(settings.seed)
        model = VisionTransformer(cfg, shape, device=device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
        schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=settings.lr, total_steps=steps, pct_start=0.1)
        start, cpu_start = time.perf_counter(), time.process_time()
        for epoch in range(settings.epochs):
            model.train()
            for batch in torch.randperm(n_train, generator=order_of_batches).split(settings.batch_size):
                logits = model(split.train_images[batch])  # (b, n_classes)
                loss = F.cross_entropy(logits, split.train_labels[batch].to(device))
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                schedule.step()
            if log is not None:
                log(f"epoch {epoch + 1}/{settings.epochs}  loss {loss.item():.3f}")
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    # wall-clock seconds, and the CPU seconds this process used: equal on an idle core, and the
    # second stays honest when other work shares the cores
    report = {"training": dataclasses.asdict(settings), "steps": steps, "train_seconds": round(seconds, 1),
              "train_cpu_seconds": round(cpu_seconds, 1),
              "test_accuracy": round(accuracy(model, split.test_images, split.test_labels), 4),
              "train_accuracy": round(accuracy(model, split.train_images, split.train_labels), 4),
              "n_test": len(split.test_images), "n_train": n_train,
              "parameters": sum(p.numel() for p in model.parameters())}
    return model.eval(), report


# --- checkpoints: the library's safetensors + JSON format, with the patch shape beside the config ---


def save(model: VisionTransformer, path: str | Path, meta: dict | None = None) -> tuple[Path, Path]:
    """PATH.safetensors + PATH.json, as transformer.checkpoint.save, with "vision" (image and patch size) added."""
    return checkpoint_format.save(model, path, {**(meta or {}), VISION_KEY: dataclasses.asdict(model.shape),
                                         "dataset": "scikit-learn digits (8x8), last 20% held out"})


def load(path: str | Path = SHIPPED_PATH, device: torch.device | str | None = "cpu") -> tuple[VisionTransformer, dict]:
    """(model in eval mode, meta); a missing, damaged or mismatched file raises CheckpointError naming it."""
    _, json_path = checkpoint_paths(path)
    document, cfg = read_meta(path)
    try:
        shape = VisionShape(**document[VISION_KEY])
    except KeyError:
        raise CheckpointError(f"{json_path}: has no \"{VISION_KEY}\" entry; it is not a vision checkpoint "
                              "(open text checkpoints with transformer.checkpoint.load)") from None
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{json_path}: its \"{VISION_KEY}\" entry is not valid: {error}") from None
    try:
        model = VisionTransformer(cfg, shape, device=device)
    except ValueError as error:
        raise CheckpointError(f"{json_path}: {error}") from None
    return checkpoint_format.load_weights(model, path), document


# --- command line -----------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Train the digits ViT and save it as a checkpoint.")
    parser.add_argument("--out", default=str(SHIPPED_PATH), help="checkpoint path without extension")
    parser.add_argument("--seed", type=int, default=TrainSettings.seed)
    parser.add_argument("--epochs", type=int, default=TrainSettings.epochs)
    parser.add_argument("--patch-size", type=int, default=TrainSettings.patch_size)
    parser.add_argument("--stem", default=TrainSettings.stem, choices=axes.keys("patch_stem"),
                        help="how patches become tokens: flatten + linear, or a convolution (the same map)")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # the figures in docs/checkpoints.md are for one thread
    settings = TrainSettings(seed=args.seed, epochs=args.epochs, patch_size=args.patch_size, stem=args.stem)
    model, report = train_vit(settings, log=None if args.quiet else print)
    save(model, args.out, report)
    print(json.dumps({k: report[k] for k in ("test_accuracy", "train_accuracy", "train_seconds", "train_cpu_seconds",
                                             "parameters")}))


if __name__ == "__main__":
    main()
