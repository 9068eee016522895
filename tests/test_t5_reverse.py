"""T5 at classroom size trained to write a word backwards: it reverses fresh words, its cross-attention draws the
anti-diagonal where random-init weights spread evenly, and the Masks page shows both side by side."""
import json

import numpy as np
import pytest
import torch

from apptest_helpers import assert_clean, open_page
from transformer import checkpoint
from transformer.training.task_measures import head_scores
from transformer.training.tasks import get_task
from ui.compute import encoder_decoder_measure as measure


@pytest.fixture(scope="module")
def reverser():
    model, meta = checkpoint.load(checkpoint.SHIPPED_DIR / measure.TRAINED, device="cpu")
    return model.eval(), meta


def test_the_shipped_t5_is_t5_and_reverses_fresh_words(reverser):
    model, meta = reverser
    assert meta["preset"] == "t5" and meta["task"] == "reverse"
    assert model.cfg.arch == "encoder-decoder" and model.cfg.position == "t5" and model.cfg.norm == "rmsnorm"
    task = get_task("reverse")
    right = []
    for seed in range(4):  # every length the task draws, on batches training never saw (it drew from seed 0)
        batch = task.sample(128, seed=100 + seed)
        with torch.no_grad():
            logits = model(*batch.model_args())
        right.append(task.accuracy(logits, batch))
    assert np.mean(right) >= 0.95 and meta["accuracy"] >= 0.95  # 0.98 when trained
    source = torch.tensor([task.encode("transformer")])
    written = model.generate(source, max_new_tokens=11, tgt_ids=torch.tensor([[task.token_id("<bos>")]]))
    assert "".join(task.decode(written[0, 1:])) == "remrofsnart"


def test_its_cross_attention_finds_the_mirrored_letter_and_random_weights_do_not(reverser):
    model, _ = reverser
    task = get_task("reverse")
    batch = task.sample(256, seed=7)
    trained = head_scores(model, task, batch)["solution"]  # (L, H)
    assert float(trained.max()) > 0.8  # 0.93 when trained
    for seed in measure.RANDOM_SEEDS:
        torch.manual_seed(seed)
        fresh = type(model)(model.cfg, device="cpu").eval()
        assert float(head_scores(fresh, task, batch)["solution"].max()) < 0.25  # about 1 / (n + 1)


def test_a_word_it_cannot_read_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="at most 12"):
        measure.check_word("a" * 13)
    with pytest.raises(ValueError, match="no token for"):
        measure.check_word("naïve")
    with pytest.raises(ValueError, match="type a word"):
        measure.check_word("")


def test_the_masks_page_shows_the_trained_t5_beside_random_init_and_survives_a_bad_word():
    at = open_page("pages/masks.py", text="the cat sat")
    at.session_state["mask_tab"] = "cross-attention"
    assert_clean(at.run())
    assert any("writes **remrofsnart**" in s.value for s in at.success)
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    trained = [t for t in titles if t.startswith("trained: cross-attention")]
    assert trained and [t for t in titles if t.startswith("random init: cross-attention")]
    assert any("Weight on the mirrored source letter" in c.value for c in at.caption)
    charts = len(titles)
    at.text_input(key="mask_word").set_value("über").run()
    assert_clean(at, errors_allowed=True)
    assert any("cannot read this" in e.value and "'ü'" in e.value for e in at.error)
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    assert len(titles) == charts - 2  # the random twin's matrices stay; only the trained pair is withheld
