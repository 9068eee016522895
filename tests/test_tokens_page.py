"""The Tokens page: its figures as plain functions (no server), its measures, and the page itself (AppTest)."""
import numpy as np
import pytest

from transformer import tokens
from ui.compute import token_counts
from ui.figures import tokens as figs
from apptest_helpers import assert_clean, figures_by_title, open_page, values


def test_token_tiles_draw_each_piece_with_its_id_in_reading_order():
    pieces, ids = ["The", "␣cat", "␣sat", "."], [510, 1203, 977, 16]
    fig = figs.token_tiles(pieces, ids, "t", per_row=3)
    heat = fig.data[0]
    assert np.asarray(heat.z).shape == (2, 3)
    assert heat.text[0][1] == "␣cat<br><sub>1203</sub>" and heat.text[1][0] == ".<br><sub>16</sub>"
    assert np.isnan(np.asarray(heat.z, dtype=float)[1, 2])  # no fifth token: an empty tile
    assert list(np.asarray(heat.z)[0]) == [0, 1, 0]  # neighbours alternate colour


def test_language_costs_divide_tokens_by_characters_per_tokenizer():
    fig = figs.language_costs(["en", "he"], [10, 8], {"characters": [10, 16], "bpe": [3, 16]})
    assert [bar.name for bar in fig.data] == ["characters", "bpe"]
    assert list(fig.data[1].y) == pytest.approx([0.3, 2.0])


def test_merge_curve_and_vocabulary_share():
    fig = figs.merge_curve([9, 7, 6, 4], current=2)
    assert list(fig.data[0].y) == [9, 7, 6, 4] and list(fig.data[1].x) == [2]
    fig = figs.vocabulary_share(["a", "b"], [32000, 262208], [0.039, 0.10])
    assert list(fig.data[0].x) == pytest.approx([0.039, 0.10]) and fig.data[0].text[1] == "V = 262,208"


def test_the_vocabulary_share_counts_the_tables_that_grow_with_v():
    rows = {r.model: r for r in token_counts.vocabulary_shares()}
    llama, gemma = rows["LLaMA 2 7B"], rows["Gemma 3 27B"]
    assert llama.vocabulary_params == 2 * 32000 * 4096  # untied: embedding and unembedding
    assert gemma.vocabulary_params == gemma.vocab_size * gemma.d_model  # tied: one table
    assert gemma.vocab_size > 8 * llama.vocab_size and gemma.share > llama.share
    assert 0.03 < llama.share < 0.045


def test_every_sample_sentence_costs_our_english_bpe_more_tokens_per_character_than_english():
    bpe = tokens.get_tokenizer("bpe")
    counts = token_counts.language_costs({"bpe": bpe.encode})["bpe"]
    per_char = [n / len(s) for n, s in zip(counts, token_counts.SAMPLES.values())]
    assert list(token_counts.SAMPLES)[0] == "English"
    assert all(cost > per_char[0] for cost in per_char[1:])
    assert per_char[0] < 0.5  # English: several characters per token


# --- the page -----------------------------------------------------------------------------------------

SENTENCE = "The cat sat on the mat. The cat sat on the mat."


def test_the_page_splits_the_text_and_replays_the_merges():
    at = assert_clean(open_page("pages/tokens.py", SENTENCE))
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["characters"] == "47"
    bpe = tokens.get_tokenizer("bpe")
    assert metrics[f"byte-level BPE ({bpe.vocab_size:,} tokens)"] == f"{len(bpe.encode(SENTENCE))} tokens" == "16 tokens"
    drawn = figures_by_title(at)
    assert any(title.startswith("characters (362 tokens): 47 tokens") for title in drawn)
    assert "Tokens per character, one meaning in 12 languages" in drawn
    slider = at.slider(key="tok_step")
    slider.set_value(slider.max).run()
    assert_clean(at)
    last = tokens.merge_steps(bpe, SENTENCE)[-1]
    title = f"After {int(slider.max)} merges: {len(last.pieces)} tokens"
    assert title in figures_by_title(at)
    assert list(values(figures_by_title(at)[title]["data"][0]["z"]).shape) == [2, 12]


def test_empty_and_very_long_text_get_a_clear_message():
    at = open_page("pages/tokens.py", "")
    assert not at.exception and "empty" in at.error[0].value
    at = assert_clean(open_page("pages/tokens.py", "The cat sat. " * 800))
    assert any("10,400 characters" in w.value for w in at.warning)


def test_an_open_hugging_face_model_adds_its_own_tokenizer(tmp_path):
    from hf_factories import FACTORIES
    from test_hf_page_modern import save_with_tokenizer

    save_with_tokenizer(FACTORIES["gemma3_pattern"](), tmp_path)
    text = "the cat sat on the mat and the dog ran to it"
    at = assert_clean(open_page("pages/tokens.py", text, weights=f"hf:{tmp_path}"))
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[f"{tmp_path.name} (13 tokens)"] == "12 tokens"  # its word-level vocabulary: one token per word
    drawn = figures_by_title(at)
    own = drawn[f"{tmp_path.name} (13 tokens): 12 tokens"]["data"][0]
    assert own["text"][0][:3] == ["the<br><sub>1</sub>", "cat<br><sub>2</sub>", "sat<br><sub>3</sub>"]
    assert [bar["name"] for bar in drawn["Tokens per character, one meaning in 12 languages"]["data"]][-1] == \
        f"{tmp_path.name} (13 tokens)"


def test_the_readme_says_what_the_page_measures():
    from pathlib import Path

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    rows = {r.model: r for r in token_counts.vocabulary_shares()}
    llama, gemma = rows["LLaMA 2 7B"], rows["Gemma 3 27B"]
    assert f"LLaMA 2 7B's {llama.vocab_size:,} tokens: {llama.share:.1%}" in readme
    assert f"Gemma 3 27B's {gemma.vocab_size:,}: {gemma.share:.1%}" in readme
    sentence_tokens = len(tokens.get_tokenizer("bpe").encode(SENTENCE))
    assert f"(47 tokens for \"{SENTENCE}\"), the lab's byte-level BPE ({sentence_tokens})" in readme


def test_a_bpe_checkpoint_reads_the_text_in_its_own_tokens_on_every_page(tmp_path):
    """A checkpoint trained on BPE (here a tiny one, untrained) labels its rows with its pieces; one whose tokenizer
    file is missing says so on the page instead of a traceback."""
    import torch

    from transformer import TransformerConfig, checkpoint
    from transformer.model import Transformer

    bpe = tokens.get_tokenizer("bpe")
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=bpe.vocab_size, d_model=32, n_heads=2, n_layers=2, max_len=256),
                        device="cpu")
    checkpoint.save(model, tmp_path / "tiny-bpe", {"task": "language", "tokenizer": bpe.describe()})
    at = assert_clean(open_page("pages/playground.py", SENTENCE, weights=f"ckpt:{tmp_path / 'tiny-bpe'}"))
    labelled = [spec for spec in figures_by_title(at).values() if spec["data"] and "x" in spec["data"][0]
                and any("␣cat" in str(x) for x in spec["data"][0]["x"])]
    assert labelled  # a heatmap whose keys are BPE pieces
    assert len(labelled[0]["data"][0]["x"]) == 1 + len(bpe.encode(SENTENCE))  # <bos> and 16 pieces

    checkpoint.save(model, tmp_path / "lost-bpe", {"task": "language", "tokenizer": {**bpe.describe(),
                                                                                      "file": "gone.json"}})
    at = open_page("pages/playground.py", SENTENCE, weights=f"ckpt:{tmp_path / 'lost-bpe'}")
    assert not at.exception and any("gone.json" in e.value and "missing" in e.value for e in at.error)


def test_a_step_past_the_texts_last_merge_shows_the_last_one():
    at = assert_clean(open_page("pages/tokens.py", SENTENCE, tok_step=500))
    assert at.slider(key="tok_step").value == at.slider(key="tok_step").max == 13


def test_bits_by_tokenizer_draws_one_bar_per_tokenizer_per_family():
    fig = figs.bits_by_tokenizer(["LLaMA 2", "Qwen3"], {"characters": [1.96, 1.84], "BPE": [1.71, 1.69]})
    assert [bar.name for bar in fig.data] == ["characters", "BPE"] and list(fig.data[0].x) == ["LLaMA 2", "Qwen3"]
    assert list(fig.data[1].y) == pytest.approx([1.71, 1.69]) and fig.data[1].text[0] == "1.71"


def test_each_family_trained_on_both_pairs_its_character_checkpoint_with_its_bpe_one():
    import json

    from transformer import checkpoint
    from transformer.checkpoint_format import checkpoint_paths

    both = {row.family: row for row in token_counts.trained_on_both()}
    assert "LLaMA 2" in both
    for row in both.values():
        assert set(row.names) == {"characters", "bpe"} and row.names["bpe"] == row.names["characters"].replace(
            "-language", "-bpe-language")
        for name, checkpoint_name in row.names.items():
            meta = json.loads(checkpoint_paths(checkpoint.SHIPPED_DIR / checkpoint_name)[1].read_text())
            assert row.bits_per_char[name] == meta["figures"]["bits_per_char"]
            assert row.parameters[name] == meta["parameters"]
        assert row.parameters["bpe"] > row.parameters["characters"]  # 2,048 rows in the token tables, not 362


def test_the_page_shows_the_families_trained_on_both_tokenizers():
    at = assert_clean(open_page("pages/tokens.py", SENTENCE))
    spec = figures_by_title(at)["Held-out English, bits per character: the same recipe, two tokenizers"]
    families = [row.family for row in token_counts.trained_on_both()]
    assert list(spec["data"][0]["x"]) == families and len(spec["data"]) == 2
    assert any("llama2-bpe-language" in str(frame.value.to_dict()) for frame in at.dataframe)
