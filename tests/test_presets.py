"""Presets: real-size parameter counts against published figures, classroom presets that build, run and
generate, bfloat16, and the device the model lives on."""
import pytest
import torch

from transformer import MODEL_CARDS, PRESETS, Transformer, default_device, kv_cache_bytes_per_token, param_counts
from transformer.costs import kv_cache_bytes, multiplied_params

# published totals (and active parameters per token of the MoE models), from the model papers and cards
PUBLISHED = [
    ("gpt2", "small", "total", 124e6),
    ("llama2", "7B", "total", 6.74e9),
    ("mistral", "7B", "total", 7.24e9),
    ("mixtral", "8x7B", "total", 46.7e9),
    ("mixtral", "8x7B", "active", 12.9e9),
    ("llama3", "8B", "total", 8.03e9),
    ("llama3", "70B", "total", 70.6e9),
    ("llama3", "405B", "total", 405e9),
    ("olmo2", "7B", "total", 7.30e9),
    ("qwen3", "8B", "total", 8.2e9),
    ("qwen3", "235B-A22B", "total", 235e9),
    ("qwen3", "235B-A22B", "active", 22e9),
    ("gemma3", "27B", "total", 27.0e9),
    ("gemma4", "31B", "total", 30.7e9),  # its Hugging Face model card  # the language model: Table 1's 1,416M embedding + 25,600M non-embedding
    ("deepseek-v3", "671B", "total", 671e9),  # without the 14B multi-token-prediction module
    ("deepseek-v3", "671B", "active", 37e9),
    ("gpt-oss", "120b", "total", 116.83e9),  # OpenAI's gpt-oss model card
    ("gpt-oss", "120b", "active", 5.13e9),  # counted without the embedding lookup (see ModelCard.active_counts)
    ("gpt-oss", "20b", "total", 20.91e9),
    ("gpt-oss", "20b", "active", 3.61e9),
    ("lfm2", "1.2B", "total", 1.17034e9),  # Liquid AI's model card: 1,170,340,608
    ("minimax", "Text-01", "total", 456e9),  # the MiniMax-01 report
    ("minimax", "Text-01", "active", 45.9e9),  # counted without the embedding and the output head
    ("deepseek-v3.2", "671B", "total", 671e9),  # DeepSeek-V3's model and an indexer in every layer, no MTP module
    ("deepseek-v3.2", "671B", "active", 37e9),  # counted as what a token multiplies by (ModelCard.active_counts)
    ("glm-5", "744B", "total", 744e9),
    ("glm-5", "744B", "active", 40e9),  # counted outside the embedding and the output matrix
    # Meta's Llama 4 release: the whole checkpoint, Scout's vision encoder included (its text model is 1.1% under);
    # active counts the embedding lookup
    ("llama4", "Scout", "total", 109e9),
    ("llama4", "Scout", "active", 17e9),
    ("llama4", "Maverick", "total", 400e9),
    ("llama4", "Maverick", "active", 17e9),
    ("smollm3", "3B", "total", 3.08e9),  # its Hugging Face model page
    ("olmo3", "7B", "total", 7.3e9),  # their Hugging Face model pages
    ("olmo3", "32B", "total", 32.2e9),
    ("bart", "large", "total", 406e6),  # its Hugging Face model page (bart-large)
    ("t5", "base", "total", 220e6),  # the T5 paper: about 220 million
    ("t5", "11B", "total", 11.3e9),  # the released 11B checkpoint
]


@pytest.mark.parametrize("key,size,kind,published", PUBLISHED)
def test_real_size_parameter_counts_match_published_figures(key, size, kind, published):
    card = MODEL_CARDS[key]
    assert card.published_params[size] == published if kind == "total" else card.published_active[size] == published
    counted = card.counted(size)[kind]
    assert abs(counted - published) / published < 0.02, f"{key} {size} {kind}: {counted:,} vs {published:,.0f}"


# published figures known to be rounded or counted another way, and how far off our exact count is
LOOSE = {("original", "base"): 0.05,  # the paper's "65M"; its dimensions give 63.1M with shared embeddings
         # Kimi Linear's "48B" and "A3B" name the release; its config gives 49.12B (2.3% over) and 3.11B (3.6% over)
         ("kimi-linear", "48B-A3B"): 0.025, ("kimi-linear", "48B-A3B", "active"): 0.04,
         # DeepSeek-V4-Flash's "13B" active is rounded: a token multiplies by 13.26B (2.03% over)
         ("deepseek-v4", "Flash", "active"): 0.025}


@pytest.mark.parametrize("key", list(MODEL_CARDS))
def test_every_card_is_within_two_percent_of_its_own_published_figures(key):
    card = MODEL_CARDS[key]
    for size, published in card.published_params.items():
        counted = card.counted(size)["total"]
        tolerance = LOOSE.get((key, size), 0.02)
        assert abs(counted - published) / published < tolerance, f"{key} {size}: {counted:,} vs {published:,.0f}"
    for size, published in card.published_active.items():
        counted = card.counted(size)["active"]
        tolerance = LOOSE.get((key, size, "active"), 0.02)
        assert abs(counted - published) / published < tolerance, f"{key} {size} active: {counted:,} vs {published:,.0f}"


def test_gpt_oss_counts_active_parameters_without_the_embedding_lookup():
    card = MODEL_CARDS["gpt-oss"]
    real = card.real["120b"]
    counts = param_counts(real)
    assert card.counted("120b")["active"] == multiplied_params(real) == counts["active"] - counts["embedding"]
    assert abs(counts["active"] - 5.13e9) / 5.13e9 > 0.1  # counting the embedding too would miss by 11%
    # OpenAI's table: 114.71B in the MLPs, 0.96B in attention, 1.16B in embedding and unembedding
    assert abs(counts["ffn"] - 114.71e9) / 114.71e9 < 0.001
    assert abs(counts["attention"] - 0.96e9) / 0.96e9 < 0.01
    assert abs(counts["embedding"] + counts["head"] - 1.16e9) / 1.16e9 < 0.01


# the choices a classroom config shares with its family's real sizes (widths and lengths are its own)
FAMILY_AXES = ("arch", "position", "norm", "norm_position", "norm_plus_one", "qk_norm", "attn_gate", "sinks",
               "scale_embeddings", "tie_embeddings", "bias", "parallel_block", "layer_pattern", "router",
               "expert_activation", "attention_kind")


@pytest.mark.parametrize("key", list(MODEL_CARDS))
def test_every_classroom_config_makes_its_familys_choices(key):
    card = MODEL_CARDS[key]
    for axis in FAMILY_AXES:
        assert getattr(card.config, axis) in {getattr(real, axis) for real in card.real.values()}, axis
    assert card.config.ffn == next(iter(card.real.values())).ffn  # the first size's FFN (Qwen3: dense 8B)
    local = [w for w in card.config.layer_windows() if w is not None]
    assert bool(local) == any(w is not None for real in card.real.values() for w in real.layer_windows())
    assert all(w <= card.config.max_len for w in local)


def test_the_modern_cards_real_dimensions():
    v3 = MODEL_CARDS["deepseek-v3"].real["671B"]
    assert (v3.d_head - v3.d_rope, v3.d_rope, v3.d_v, v3.kv_rank, v3.q_rank) == (128, 64, 128, 512, 1536)
    assert (v3.n_experts, v3.top_k, v3.n_shared_experts, v3.first_dense_layers, v3.d_expert) == (256, 8, 1, 3, 2048)
    gemma = MODEL_CARDS["gemma3"].real["27B"]
    assert gemma.n_heads * gemma.d_head != gemma.d_model and abs(gemma.score_scale - 168 ** -0.5) < 1e-12
    oss = MODEL_CARDS["gpt-oss"].real
    assert [(c.n_layers, c.n_experts, c.top_k, c.d_model, c.n_heads, c.d_head) for c in oss.values()] == \
        [(36, 128, 4, 2880, 64, 64), (24, 32, 4, 2880, 64, 64)]
    qwen = MODEL_CARDS["qwen3"].real
    assert qwen["8B"].ffn == "swiglu" and qwen["235B-A22B"].ffn == "moe"
    assert [c.n_layers for c in MODEL_CARDS["llama3"].real.values()] == [32, 80, 126]


def test_the_2025_cards_lay_out_their_layers_as_published():
    for size, experts in (("Scout", 16), ("Maverick", 128)):
        llama4 = MODEL_CARDS["llama4"].real[size]
        plan = llama4.layer_plan()
        nope = [spec.index for spec in plan if not spec.rotates]
        assert nope == list(range(3, 48, 4))  # Hugging Face's no_rope_layers: every fourth layer, counted from 1
        assert all(spec.chunk == 8192 for spec in plan if spec.rotates)  # the RoPE layers see their own chunk
        assert all(spec.chunk is None and spec.window is None for spec in plan if not spec.rotates)
        assert (llama4.n_experts, llama4.top_k, llama4.n_shared_experts, llama4.d_expert) == (experts, 1, 1, 8192)
    scout, maverick = MODEL_CARDS["llama4"].real.values()
    assert sum(map(scout.layer_is_moe, range(48))) == 48
    # half its layers route (1, 3, 5 ...), half keep a dense 16,384 FFN
    assert [i for i in range(48) if maverick.layer_is_moe(i)] == list(range(1, 48, 2))
    counts = param_counts(maverick)
    dense = 3 * 5120 * 16384  # W_gate, W_up, W_down of one dense layer
    every_layer_routed = param_counts(maverick.replace(moe_layers="all"))
    # a routed layer: 128 experts, 1 shared and a router, where a dense layer has one FFN of 16,384
    assert every_layer_routed["total"] - counts["total"] == 24 * (129 * 3 * 5120 * 8192 + 5120 * 128 - dense)
    smol = MODEL_CARDS["smollm3"].real["3B"]
    assert [spec.index for spec in smol.layer_plan() if not spec.rotates] == list(range(3, 36, 4))
    assert smol.tie_embeddings and all(spec.window is None for spec in smol.layer_plan())
    for size, layers in (("7B", 32), ("32B", 64)):
        olmo = MODEL_CARDS["olmo3"].real[size]
        windows = olmo.layer_windows()
        assert windows == tuple(None if i % 4 == 3 else 4096 for i in range(layers))  # 3 sliding : 1 full


def gib(held_bytes: int) -> float:
    """Bytes in GiB, exactly: these caches are whole multiples of 1/64 GiB."""
    return held_bytes / 2 ** 30


CONTEXTS = (4096, 131072, 1 << 20)  # 4k, 128k and 1M tokens


def test_llama_4_caches_full_only_on_its_nope_layers():
    for size in ("Scout", "Maverick"):
        real = MODEL_CARDS["llama4"].real[size]
        per_token = 2 * 8 * 128 * 2  # K and V of 8 kv heads of 128, bf16: 4,096 bytes a layer
        for context in CONTEXTS:
            held = kv_cache_bytes(real, context)
            assert held["local layers"] == 36 * min(context, 8192) * per_token  # chunked: one chunk at most
            assert held["global layers"] == 12 * context * per_token  # NoPE layers: every token
            unchunked = kv_cache_bytes(real.replace(attention_chunk=None, chunked_layers="all"), context)
            assert unchunked["total"] == 48 * context * per_token
            assert (unchunked["total"] > held["total"]) == (context > 8192)  # chunks save once the text passes one
        assert [gib(kv_cache_bytes(real, t)["total"]) for t in CONTEXTS] == [0.75, 7.125, 49.125]


def test_smollm3_nope_layers_cache_as_much_as_the_others():
    real = MODEL_CARDS["smollm3"].real["3B"]
    per_token = 2 * 4 * 128 * 2  # K and V of 4 kv heads of 128, bf16
    for context in CONTEXTS:
        held = kv_cache_bytes(real, context)
        assert held["per layer"] == (context * per_token,) * 36 and held["local layers"] == 0
        assert held["total"] == kv_cache_bytes(real.replace(nope_layers="none"), context)["total"]
    assert [gib(kv_cache_bytes(real, t)["total"]) for t in CONTEXTS] == [0.28125, 9.0, 72.0]


@pytest.mark.parametrize("size,kv_width,layers,expected_gib", [("7B", 32 * 128, 32, [2.0, 17.5, 129.5]),
                                                      ("32B", 8 * 128, 64, [1.0, 8.75, 64.75])])
def test_olmo_3_cache_saves_in_its_sliding_layers(size, kv_width, layers, expected_gib):
    real = MODEL_CARDS["olmo3"].real[size]
    per_token = 2 * kv_width * 2  # K and V, bf16
    for context in CONTEXTS:
        held = kv_cache_bytes(real, context)
        assert held["local layers"] == layers * 3 // 4 * min(context, 4096) * per_token
        assert held["global layers"] == layers // 4 * context * per_token
    assert [gib(kv_cache_bytes(real, t)["total"]) for t in CONTEXTS] == expected_gib


def test_deepseek_v4_flash_caches_a_window_and_pooled_blocks_not_a_key_per_token():
    flash = MODEL_CARDS["deepseek-v4"].real["Flash"]
    plan = flash.layer_plan()
    pooled = [s for s in plan if s.compress_rate == 128]
    indexed = [s for s in plan if s.compress_rate == 4 and s.indexes_blocks]
    assert (len(pooled), len(indexed), flash.n_layers) == (23, 20, 43)  # two by 128 first, then by turns
    for context in CONTEXTS:  # bf16; every context a whole number of blocks: no rows wait
        held = kv_cache_bytes(flash, context)
        window = 128 * 512 * 2  # the last 128 tokens' one head of 512, key and value at once
        assert held["window keys"] == 43 * window
        assert held["compressed keys"] == (23 * context // 128 + 20 * context // 4) * 512 * 2
        assert held["index keys"] == 20 * context // 4 * 128 * 2
        assert held["block rows"] == 20 * 4 * 2 * 2 * (512 + 128) * 2  # the overlapping series: the last block's
    # a million tokens: under a tenth of DeepSeek-V3's latents, which already cached 576 numbers, not 2 x 128 x 192
    million = kv_cache_bytes(flash, 1 << 20)["total"]
    assert million < 0.1 * kv_cache_bytes(MODEL_CARDS["deepseek-v3"].real["671B"], 1 << 20)["total"]
    assert round(gib(million), 2) == 6.44


def test_presets_are_the_cards_that_ship_checkpoints():
    assert set(PRESETS) <= set(MODEL_CARDS)
    assert all(PRESETS[key] == MODEL_CARDS[key].config for key in PRESETS)
    assert set(MODEL_CARDS) - set(PRESETS) == {"llama3", "olmo2", "gemma4", "kimi-linear", "qwen3-next", "lfm2",
                                               "minimax", "glm-5", "smollm3",
                                               "olmo3", "bart", "t5", "deepseek-v4"}  # real sizes only, no trained model
    assert {"qwen3", "deepseek-v3", "deepseek-v3.2", "gpt-oss", "gemma3", "qwen3.5", "llama4"} <= set(PRESETS)


def unique_parameter_count(model) -> int:
    """Each tensor once, however many modules share it (tied embeddings)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


CLASSROOM = {key: card.config for key, card in MODEL_CARDS.items()}  # every card's classroom size, presets included


@pytest.mark.parametrize("key", list(CLASSROOM))
def test_param_counts_equal_the_built_model(key):
    cfg = CLASSROOM[key]
    model = Transformer(cfg, device="cpu")
    counts = param_counts(cfg)
    assert counts["total"] == unique_parameter_count(model)
    if cfg.tie_embeddings:
        assert model.unembed.weight is model.embed.weight
    # active: everything except the experts a token does not use, in the layers that route
    routed_layers = sum(cfg.layer_is_moe(i) for i in range(cfg.n_layers)) if cfg.ffn == "moe" else 0
    expert_size = sum(p.numel() for n, p in model.named_parameters() if ".experts.0." in n) // max(routed_layers, 1)
    unused = routed_layers * (cfg.n_experts - cfg.top_k) * expert_size
    assert counts["active"] == counts["total"] - unused


def test_kv_cache_bytes_per_token_for_llama2_70b_in_fp16():
    by_hand = 2 * 80 * 8 * 128 * 2  # K and V x 80 layers x 8 kv heads x d_head 128 x 2 bytes
    assert by_hand == 327_680
    assert kv_cache_bytes_per_token(MODEL_CARDS["llama2"].real["70B"]) == by_hand
    # MHA at the same size would need 64 kv heads: GQA saves a factor 8
    mha = MODEL_CARDS["llama2"].real["70B"].replace(n_kv_heads=64)
    assert kv_cache_bytes_per_token(mha) == 8 * by_hand


def preset_inputs(cfg, B=2, T=6):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, cfg.vocab_size, (B, T), generator=g)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, :2] = 0  # a left-padded row
    return ids, mask


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("key", list(CLASSROOM))
def test_every_preset_builds_runs_and_generates(key, dtype):
    cfg = CLASSROOM[key].replace(dtype=dtype)
    torch.manual_seed(0)
    model = Transformer(cfg, device="cpu").eval()
    expected_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
    assert all(p.dtype == expected_dtype for p in model.parameters())
    ids, mask = preset_inputs(cfg)
    with torch.no_grad():
        args = (ids, ids[:, :4]) if cfg.arch == "encoder-decoder" else (ids,)
        logits = model(*args, attention_mask=mask)
    assert logits.shape == (2, args[-1].shape[1], cfg.vocab_size)
    assert logits.dtype == expected_dtype and torch.isfinite(logits.float()).all()
    if cfg.arch == "encoder":
        with pytest.raises(ValueError, match="does not generate"):
            model.generate(ids, 3)
        return
    out = model.generate(ids, 5, attention_mask=mask)
    assert out.shape == (2, (ids.shape[1] if cfg.arch == "decoder" else 1) + 5)
    assert ((out >= 0) & (out < cfg.vocab_size)).all()


def test_default_device_and_explicit_device():
    expected = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    assert default_device() == expected
    model = Transformer(PRESETS["gpt2"])
    assert model.device.type == expected.type
    assert all(p.device.type == expected.type for p in model.parameters())
    assert all(b.device.type == expected.type for b in model.buffers())
    on_cpu = Transformer(PRESETS["gpt2"], device="cpu")
    assert on_cpu.device == torch.device("cpu")
    assert all(p.device == torch.device("cpu") for p in on_cpu.parameters())


def test_model_runs_on_the_default_device_with_inputs_there():
    model = Transformer(PRESETS["mistral"]).eval()
    ids = torch.randint(0, 128, (1, 5), device=model.device)
    out = model.generate(ids, 3)
    assert out.device == model.device
    _, trace = model.run_with_trace(ids, names="blocks.0.attn.hook_pattern")
    assert trace["blocks.0.attn.hook_pattern"].device == model.device
