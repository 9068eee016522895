"""The same block on images: patches, inputs_embeds, the shipped digits ViT, its figures and its page."""
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from transformer import vision
from transformer.checkpoint import CheckpointError
from transformer.checkpoint import load as load_checkpoint
from transformer.vision import CLS, TrainSettings, VisionShape, VisionTransformer
from ui.app.navigation import PAGES
from ui.figures import vision as figs
from apptest_helpers import assert_clean, open_page, values

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def split():
    return vision.digits_split()


@pytest.fixture(scope="module")
def shipped():
    return vision.load()


# --- patches -----------------------------------------------------------------------------------


@pytest.mark.parametrize("patch_size", [1, 2, 4, 8])
def test_patches_reassemble_the_image(patch_size):
    images = torch.rand(3, 8, 8)
    patches = vision.patchify(images, patch_size)
    assert patches.shape == (3, (8 // patch_size) ** 2, patch_size ** 2)
    assert torch.equal(vision.unpatchify(patches, 8), images)


def test_patches_are_in_reading_order():
    image = torch.arange(64.0).reshape(1, 8, 8)
    patches = vision.patchify(image, 2)[0]  # (16, 4)
    assert patches[0].tolist() == [0, 1, 8, 9]  # top-left, row by row
    assert patches[1].tolist() == [2, 3, 10, 11]  # the patch to its right
    assert patches[4].tolist() == [16, 17, 24, 25]  # first patch of the second row
    grid = vision.patch_grid(torch.arange(16.0), 8, 2)
    assert grid.shape == (4, 4) and grid[1, 0] == 4


def test_patch_sizes_that_do_not_tile_are_refused():
    with pytest.raises(ValueError, match="does not split into 3x3 patches"):
        vision.patchify(torch.rand(1, 8, 8), 3)
    with pytest.raises(ValueError, match="patch_size=3 must divide image_size=8"):
        VisionShape(patch_size=3)


# --- inputs_embeds: the library's encoder on vectors that are no tokens -------------------------


@pytest.mark.parametrize("arch", ["encoder", "decoder"])
def test_ids_and_their_embeddings_give_identical_logits(tiny_model, arch):
    model = tiny_model(arch=arch, position="learned")
    ids = torch.randint(0, 32, (2, 7))
    with torch.no_grad():
        assert torch.equal(model(ids), model(inputs_embeds=model.embed(ids)))
    _, trace = model.run_with_trace(inputs_embeds=model.embed(ids))
    assert trace["blocks.1.attn.hook_pattern"].shape == (2, 4, 7, 7)


def test_inputs_embeds_misuse_is_refused(tiny_model):
    model = tiny_model(arch="encoder")
    ids = torch.randint(0, 32, (1, 5))
    with pytest.raises(ValueError, match="not both"):
        model(ids, inputs_embeds=model.embed(ids))
    with pytest.raises(ValueError, match="input_ids is missing"):
        model()
    with pytest.raises(ValueError, match=r"d_model=16\) tensor .* got shape \(1, 5, 8\)"):
        model(inputs_embeds=torch.zeros(1, 5, 8))
    with pytest.raises(ValueError, match="inputs_embeds is for arch='decoder' or 'encoder'"):
        tiny_model(arch="encoder-decoder")(inputs_embeds=torch.zeros(1, 5, 16), tgt_ids=ids)


# --- the shipped ViT -------------------------------------------------------------------------------


def test_the_split_is_fixed_and_held_out(split):
    assert split.train_images.shape == (1438, 8, 8) and split.test_images.shape == (359, 8, 8)
    assert 0.0 <= float(split.test_images.min()) and float(split.test_images.max()) <= 1.0
    again = vision.digits_split()
    assert torch.equal(again.test_images, split.test_images) and torch.equal(again.test_labels, split.test_labels)


def test_the_shipped_vit_reaches_its_accuracy_on_held_out_digits(shipped, split):
    model, meta = shipped
    measured = vision.accuracy(model, split.test_images, split.test_labels)
    assert measured >= 0.9
    assert measured == pytest.approx(meta["test_accuracy"], abs=1e-4)  # the JSON says what the weights do
    assert meta["train_cpu_seconds"] < 60  # one thread; the wall clock also counts whatever shares the cores
    assert meta["vision"] == {"image_size": 8, "patch_size": 2}


def test_the_shipped_vit_records_the_text_models_hook_names_and_its_rows_sum_to_one(shipped, split):
    model, _ = shipped
    logits, trace = model.run_with_trace(split.test_images[:5])
    assert logits.shape == (5, 10)
    n_tokens = 1 + model.shape.n_patches  # [CLS] + 16 patches
    for layer in range(model.cfg.n_layers):
        pattern = trace[f"blocks.{layer}.attn.hook_pattern"]  # the name a text model records
        assert pattern.shape == (5, model.cfg.n_heads, n_tokens, n_tokens)
        assert torch.allclose(pattern.sum(-1), torch.ones(()), atol=1e-5)  # every query, over [CLS] and the patches
        cls_row = pattern[:, :, CLS]  # (B, H, 1 + N)
        assert torch.allclose(cls_row[..., 1:].sum(-1) + cls_row[..., CLS], torch.ones(()), atol=1e-5)
    assert {"hook_embed", "hook_pos_embed", "blocks.0.hook_resid_post", "ln_final.hook_normalized",
            "hook_logits"} <= set(trace.names())
    with torch.no_grad():  # the plain forward takes the fused attention path: the same up to float rounding
        assert torch.allclose(model(split.test_images[:5]), logits, rtol=1e-4, atol=1e-4)


def test_the_one_loader_reads_the_vit_and_the_vision_loader_refuses_text(shipped, tmp_path):
    model, meta = load_checkpoint(vision.SHIPPED_PATH)  # transformer.checkpoint.load dispatches on the JSON
    assert isinstance(model, vision.VisionTransformer) and meta["vision"] == shipped[1]["vision"]
    images = torch.rand(3, 8, 8)
    assert torch.equal(model(images), shipped[0](images))
    with pytest.raises(CheckpointError, match='no "vision" entry'):
        vision.load(ROOT / "assets" / "checkpoints" / "bert-mirror")
    with pytest.raises(CheckpointError, match="no such checkpoint file"):
        vision.load(tmp_path / "nowhere")
    model, meta = shipped
    vision.save(model, tmp_path / "vit", {"test_accuracy": meta["test_accuracy"]})
    (tmp_path / "vit.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(CheckpointError, match="cannot be read as safetensors"):
        vision.load(tmp_path / "vit")


def test_training_is_seeded_and_the_cli_writes_a_loadable_checkpoint(split, tmp_path):
    small = dataclasses.replace(split, train_images=split.train_images[:256], train_labels=split.train_labels[:256])
    settings = TrainSettings(seed=3, epochs=1)
    first, report = vision.train_vit(settings, small)
    second, _ = vision.train_vit(settings, small)
    other, _ = vision.train_vit(dataclasses.replace(settings, seed=4), small)
    for name, tensor in first.state_dict().items():
        assert torch.equal(tensor, second.state_dict()[name]), name
    assert not torch.equal(first.patch_embed.weight, other.patch_embed.weight)
    assert report["steps"] == 4 and report["n_train"] == 256 and report["training"]["seed"] == 3

    out = tmp_path / "vit-cli"
    vision.main(["--out", str(out), "--epochs", "1", "--quiet"])
    model, meta = vision.load(out)
    assert isinstance(model, VisionTransformer) and meta["training"]["epochs"] == 1
    assert json.loads((tmp_path / "vit-cli.json").read_text())["format"] == "attention-lab-checkpoint"


def test_a_vit_needs_an_encoder_long_enough_for_its_patches():
    with pytest.raises(ValueError, match="arch must be 'encoder'"):
        VisionTransformer(vision.encoder_config(VisionShape(), arch="decoder"), device="cpu")
    with pytest.raises(ValueError, match="max_len=8 is too short for 16 patches"):
        VisionTransformer(vision.encoder_config(VisionShape(), max_len=8), device="cpu")
    model = VisionTransformer(vision.encoder_config(VisionShape()), device="cpu")
    with pytest.raises(ValueError, match=r"images must be a \(batch, 8, 8\) tensor"):
        model(torch.zeros(2, 64))


# --- figures ---------------------------------------------------------------------------------------


def test_the_digit_figure_draws_the_image_and_its_patch_grid():
    image = np.random.default_rng(0).random((8, 8))
    fig = figs.digit_patches(image, 2)
    assert np.allclose(values(fig.data[0].z), image)
    assert len(fig.layout.shapes) == 1 + 2 * 3  # the frame, three inner borders each way
    assert list(fig.data[1].text) == [str(i) for i in range(1, 17)]  # token numbers, [CLS] is 0
    assert (fig.data[1].x[5], fig.data[1].y[5]) == (1.5, 1.5)  # patch 6 starts at pixel (2, 2)
    assert len(figs.digit_patches(image, 4).layout.shapes) == 1 + 2


def test_the_cls_figure_lays_each_heads_weights_over_the_image():
    maps = np.random.default_rng(1).random((4, 4, 4))
    image = np.zeros((8, 8))
    image[2:6, 3:5] = 1.0
    fig = figs.cls_attention(maps, image, 2, cls_self=np.array([0.1, 0.2, 0.3, 0.4]), highlight=2)
    heat = [t for t in fig.data if t.type == "heatmap"]
    outlines = [t for t in fig.data if t.type == "contour"]
    assert len(heat) == len(outlines) == 4
    for h, trace in enumerate(heat):
        drawn = values(trace.z)
        assert drawn.shape == (8, 8)
        assert np.allclose(drawn[::2, ::2], maps[h]) and np.allclose(drawn[1::2, 1::2], maps[h])
    assert fig.layout.coloraxis.cmax == pytest.approx(maps.max())
    titles = [a.text for a in fig.layout.annotations]
    assert titles[2].startswith("▶ head 2") and "[CLS] itself 0.30" in titles[2]


def test_the_class_bars_mark_the_prediction_and_the_truth():
    p = np.array([0.05, 0.7, 0.25] + [0.0] * 7)
    right = figs.class_probabilities(p, true_label=1)
    assert np.allclose(values(right.data[0].y), p)
    assert right.data[0].marker.color[1] == figs.RIGHT and right.data[0].marker.line.width[1] == 4
    wrong = figs.class_probabilities(p, true_label=2)
    assert wrong.data[0].marker.color[1] == figs.WRONG and wrong.data[0].marker.line.width[2] == 4
    assert "true: 2" in wrong.layout.title.text and wrong.data[0].text[2].startswith("true")


# --- the page --------------------------------------------------------------------------------------


def test_the_page_is_in_the_navigation():
    assert "pages/vit.py" in {page.script for page in PAGES}


def test_the_vit_page_renders_and_follows_the_digit(shipped, split):
    at = open_page("pages/vit.py", text=None)
    assert_clean(at)
    assert at.number_input(key="vit_digit").value == 0
    charts = at.get("plotly_chart")
    assert len(charts) == 6  # the digit, the probabilities, [CLS] per head, one head's matrix, both stems' kernels
    first = json.loads(charts[0].proto.spec)["data"][0]["z"]
    assert np.allclose(values(first), split.test_images[0].numpy())

    at.number_input(key="vit_digit").set_value(17).run()
    assert_clean(at)
    assert at.query_params["vit_digit"] in ("17", ["17"])  # the digit is in the link
    drawn = json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]["z"]
    assert np.allclose(values(drawn), split.test_images[17].numpy())
    label = int(split.test_labels[17])
    assert any(f"true label is {label}" in m.value or f"true label is **{label}**" in m.value for m in at.markdown)

    at.selectbox(key="vit_layer").set_value(0).run()
    at.selectbox(key="vit_head").set_value(3).run()
    assert_clean(at)
    cls_panels = json.loads(at.get("plotly_chart")[2].proto.spec)
    assert "layer 0" in cls_panels["layout"]["title"]["text"]


def test_the_vit_page_opens_a_shared_link_and_jumps_to_a_mistake(shipped, split):
    at = open_page("pages/vit.py", text=None, vit_digit=5, vit_layer=0, vit_head=2)
    assert_clean(at)
    assert (at.number_input(key="vit_digit").value, at.selectbox(key="vit_layer").value,
            at.selectbox(key="vit_head").value) == (5, 0, 2)
    model, _ = shipped
    with torch.no_grad():
        wrong = np.flatnonzero(model(split.test_images).argmax(-1).numpy() != split.test_labels.numpy())
    if len(wrong):
        at.button[0].click().run()
        assert_clean(at)
        assert at.number_input(key="vit_digit").value == int(wrong[wrong > 5][0] if (wrong > 5).any() else wrong[0])
        assert any("but the true label is" in m.value for m in at.markdown)


def test_the_vit_page_says_plainly_when_the_checkpoint_is_broken(monkeypatch, tmp_path):
    from ui.compute import vision_measure
    vision_measure.vit_model.clear()
    monkeypatch.setattr(vision, "SHIPPED_PATH", tmp_path / "missing")
    try:
        at = open_page("pages/vit.py", text=None)
        assert_clean(at, errors_allowed=True)
        assert any("cannot be loaded" in e.value and "no such checkpoint file" in e.value for e in at.error)
    finally:
        vision_measure.vit_model.clear()
