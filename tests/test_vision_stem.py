"""The ViT's patch stem as a choice: a convolution with kernel = stride = patch is flattening plus a linear map."""
import json

import numpy as np
import pytest
import torch

from transformer import AXES, vision
from transformer.vision import PATCH_STEMS, ConvStem, LinearStem, TrainSettings, VisionShape
from ui.figures import vision as figs
from apptest_helpers import assert_clean, open_page, values


def test_every_row_of_the_patch_stem_axis_has_its_module():
    assert set(PATCH_STEMS) == set(AXES["patch_stem"].choices)
    for key, row in AXES["patch_stem"].choices.items():
        assert isinstance(PATCH_STEMS[key](2, 8), torch.nn.Conv2d) == row.convolves, key


@pytest.mark.parametrize("patch_size", [1, 2, 4, 8])
def test_the_convolution_equals_flattening_plus_a_linear_layer_when_its_kernels_are_the_rows(patch_size):
    torch.manual_seed(patch_size)
    linear, conv = LinearStem(patch_size, 16), ConvStem(patch_size, 16)
    with torch.no_grad():
        conv.weight.copy_(linear.weight.reshape(16, 1, patch_size, patch_size))  # row k -> kernel k, row by row
        conv.bias.copy_(linear.bias)
    images = torch.rand(5, 8, 8)
    flattened = linear(images)  # (5, N, 16)
    convolved = conv(images)  # (5, N, 16)
    assert convolved.shape == flattened.shape == (5, (8 // patch_size) ** 2, 16)
    assert torch.allclose(convolved, flattened, atol=1e-6)
    if patch_size > 1:  # the reshape's order matters: kernels laid out column by column give other tokens
        with torch.no_grad():
            conv.weight.copy_(conv.weight.transpose(2, 3).clone())
        assert (conv(images) - flattened).abs().max() > 1e-2


def test_a_patch_size_that_does_not_divide_the_image_is_refused_with_both_numbers():
    for stem in PATCH_STEMS:
        with pytest.raises(ValueError, match=r"patch_size=3 must divide image_size=8; pick one of \[1, 2, 4, 8\]"):
            VisionShape(patch_size=3, stem=stem)
    with pytest.raises(ValueError, match=r"stem='pixels' is not a valid choice; choose one of 'linear', 'conv'"):
        VisionShape(stem="pixels")


def test_the_shipped_vit_gives_the_same_logits_through_either_stem():
    model, _ = vision.load()
    conv = vision.with_stem(model, "conv")
    assert isinstance(conv.patch_embed, ConvStem) and isinstance(model.patch_embed, LinearStem)
    assert torch.equal(conv.kernels(), model.kernels())  # (d_model, p, p), the same numbers
    images = vision.digits_split().test_images[:100]
    with torch.no_grad():
        assert torch.allclose(conv(images), model(images), atol=1e-5)
        back = vision.with_stem(conv, "linear")
        assert torch.equal(back.patch_embed.weight, model.patch_embed.weight)


def test_a_conv_stem_vit_trains_and_its_checkpoint_names_its_stem(tmp_path):
    model, report = vision.train_vit(TrainSettings(epochs=1, stem="conv"))
    assert isinstance(model.patch_embed, ConvStem) and report["training"]["stem"] == "conv"
    vision.main(["--out", str(tmp_path / "vit-conv"), "--epochs", "1", "--stem", "conv", "--quiet"])
    loaded, meta = vision.load(tmp_path / "vit-conv")
    assert json.loads((tmp_path / "vit-conv.json").read_text())["vision"]["stem"] == "conv"
    assert isinstance(loaded.patch_embed, ConvStem) and loaded.patch_embed.weight.shape == (32, 1, 2, 2)
    for name, tensor in model.state_dict().items():  # the command line trained the same conv-stem model
        assert torch.equal(tensor, loaded.state_dict()[name]), name


def test_the_kernel_figure_tiles_each_kernel_with_gaps():
    kernels = np.arange(2 * 3 * 3, dtype=float).reshape(2, 3, 3) - 8  # two 3x3 kernels
    z = values(figs.stem_kernels(kernels, columns=2).to_dict()["data"][0]["z"])
    assert z.shape == (3, 7)  # two tiles of 3 side by side, one blank column between
    assert np.array_equal(z[:, :3], kernels[0]) and np.array_equal(z[:, 4:], kernels[1])
    assert np.isnan(z[:, 3]).all()


def test_the_vit_page_offers_the_stem_and_shows_the_kernels_and_the_equivalence():
    at = assert_clean(open_page("pages/vit.py"))
    stem = next(r for r in at.radio if r.key == "vit_stem")
    assert stem.value == "linear" and list(stem.options) == ["flatten + linear", "convolution"]
    before = at.markdown
    assert any("differ by at most" in m.value for m in before)
    stem.set_value("conv").run()
    assert_clean(at)
    assert any("convolution" in c.value for c in at.caption)
    kernels = next(json.loads(chart.proto.spec) for chart in at.get("plotly_chart")
                   if "kernels of" in json.loads(chart.proto.spec)["layout"]["title"]["text"])
    assert values(kernels["data"][0]["z"]).shape == (4 * 3 - 1, 8 * 3 - 1)  # 32 kernels of 2x2, 8 to a row


def test_with_one_seed_both_stems_start_from_the_same_weights():
    # nn.Linear(p*p, d) and nn.Conv2d(1, d, p) draw their weights alike (fan_in p*p), so a seeded recipe trained
    # through either stem starts from one model
    cfg = vision.encoder_config(VisionShape())
    built = {}
    for stem in PATCH_STEMS:
        torch.manual_seed(0)
        built[stem] = vision.VisionTransformer(cfg, VisionShape(stem=stem), device="cpu")
    linear, conv = built["linear"].state_dict(), built["conv"].state_dict()
    assert linear.keys() == conv.keys()
    for name, tensor in conv.items():
        assert torch.equal(tensor.reshape(linear[name].shape), linear[name]), name


def test_the_model_trained_with_the_convolution_stem_is_its_own_run_and_learns_what_the_linear_one_does():
    conv, meta = vision.load(vision.CONV_PATH)
    linear, linear_meta = vision.load(vision.SHIPPED_PATH)
    assert conv.shape.stem == "conv" and meta["training"]["stem"] == "conv" and linear.shape.stem == "linear"
    assert {k: v for k, v in meta["training"].items() if k != "stem"} == {
        k: v for k, v in linear_meta["training"].items() if k != "stem"}  # the same settings and seed
    split = vision.digits_split()
    assert vision.accuracy(conv, split.test_images, split.test_labels) == pytest.approx(meta["test_accuracy"],
                                                                                       abs=1e-4)
    assert abs(meta["test_accuracy"] - linear_meta["test_accuracy"]) * meta["n_test"] <= 3  # 1 digit when trained
    assert not torch.equal(conv.kernels(), linear.kernels())  # trained apart: not the linear weights moved


def test_the_vit_page_shows_both_trained_stems_and_says_so_when_one_is_missing(monkeypatch, tmp_path):
    at = assert_clean(open_page("pages/vit.py"))
    table = next(d.value for d in at.dataframe if "stem it trained with" in d.value.columns)
    assert list(table["stem it trained with"]) == ["flatten + linear", "convolution"]
    assert any("convolution-trained model" in json.loads(c.proto.spec)["layout"]["title"]["text"]
               for c in at.get("plotly_chart"))
    from ui.compute import vision_measure
    vision_measure.conv_trained.clear()
    monkeypatch.setattr(vision, "CONV_PATH", tmp_path / "missing")
    try:
        at = open_page("pages/vit.py")
        assert_clean(at, errors_allowed=True)
        assert any("convolution stem cannot be loaded" in e.value for e in at.error)
        assert any("kernels of" in json.loads(c.proto.spec)["layout"]["title"]["text"]
                   for c in at.get("plotly_chart"))  # the rest of the page still draws
    finally:
        vision_measure.conv_trained.clear()
