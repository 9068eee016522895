"""Where real models' caches save (KV heads page): the bytes held at a context beside every token in every layer,
and the words that say which layers hold less."""
import pytest

from transformer import MODEL_CARDS
from transformer.costs import every_token_bytes, kv_cache_bytes
from ui.compute.cache_savings import cache_row, savings

T = 131072


@pytest.mark.parametrize("key,size,words", [
    ("llama2", "70B", ""),
    ("llama4", "Scout", "36 of 48 layers a chunk of 8,192"),
    ("olmo3", "7B", "24 of 32 layers a window of 4,096"),
    ("qwen3.5", "9B", "24 of 32 layers a fixed state"),
    ("deepseek-v4", "Flash", "blocks pooled (20 by 4 and 23 by 128) beside a window of 128, one head as key and value"),
    ("deepseek-v3.2", "671B", "a latent of 512 + 64 per token (MLA)")])
def test_the_words_name_the_layers_that_hold_less(key, size, words):
    assert savings(MODEL_CARDS[key].real[size]) == words


def test_a_model_whose_layers_all_keep_every_token_saves_nothing_and_the_others_save_what_they_hold_less():
    llama = MODEL_CARDS["llama2"].real["70B"]
    row = cache_row(llama, T, 2)
    assert row[f"cache at {T:,} tokens (GiB)"] == row["every token in every layer (GiB)"] == 40.0
    assert row["where it saves"].startswith("nowhere")
    scout = MODEL_CARDS["llama4"].real["Scout"]  # 12 NoPE layers hold every token, 36 chunked ones 8,192
    per_layer_token = 2 * 8 * 128 * 2  # K and V of 8 kv heads of 128, bf16
    assert every_token_bytes(scout, T) == 48 * T * per_layer_token
    assert kv_cache_bytes(scout, T)["total"] == (12 * T + 36 * 8192) * per_layer_token
    qwen = MODEL_CARDS["qwen3.5"].real["9B"]  # its state layers would hold K and V as its softmax layers do
    softmax = [spec for spec in qwen.layer_plan() if not spec.row.keeps_state]
    per_layer_token = 2 * qwen.n_kv_heads * qwen.d_head * 2
    assert every_token_bytes(qwen, T) == 32 * T * per_layer_token
    assert kv_cache_bytes(qwen, T)["global layers"] == len(softmax) * T * per_layer_token == 8 * T * per_layer_token


def test_an_indexer_adds_its_keys_to_what_it_holds():
    v32 = MODEL_CARDS["deepseek-v3.2"].real["671B"]
    row = cache_row(v32, T, 2)
    keys = 61 * T * 128 * 2 / 2**30  # one key of 128 per token in each of 61 layers
    assert row["of it indexer keys (GiB)"] == round(keys, 3)
    assert row[f"cache at {T:,} tokens (GiB)"] == pytest.approx(row["every token in every layer (GiB)"] + keys,
                                                                 abs=0.002)
