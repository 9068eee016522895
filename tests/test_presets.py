"""Presets: real-size parameter counts against published figures, classroom presets that build, run and
generate, bfloat16, and the device the model lives on."""
import pytest
import torch

from transformer import MODEL_CARDS, PRESETS, Transformer, default_device, kv_cache_bytes_per_token, param_counts

# published totals (and Mixtral's active parameters per token), from the model papers and cards
PUBLISHED = [
    ("gpt2", "small", "total", 124e6),
    ("llama2", "7B", "total", 6.74e9),
    ("mistral", "7B", "total", 7.24e9),
    ("mixtral", "8x7B", "total", 46.7e9),
    ("mixtral", "8x7B", "active", 12.9e9),
]


@pytest.mark.parametrize("key,size,kind,published", PUBLISHED)
def test_real_size_parameter_counts_match_published_figures(key, size, kind, published):
    counted = param_counts(MODEL_CARDS[key].real[size])[kind]
    assert abs(counted - published) / published < 0.02, f"{key} {size} {kind}: {counted:,} vs {published:,.0f}"


@pytest.mark.parametrize("key", list(MODEL_CARDS))
def test_every_card_is_near_its_own_published_figures(key):
    card = MODEL_CARDS[key]
    for size, published in {**card.published_params}.items():
        counted = param_counts(card.real[size])["total"]
        assert abs(counted - published) / published < 0.05, f"{key} {size}: {counted:,} vs {published:,.0f}"
    for size, published in card.published_active.items():
        counted = param_counts(card.real[size])["active"]
        assert abs(counted - published) / published < 0.05


def unique_parameter_count(model) -> int:
    """Each tensor once, however many modules share it (tied embeddings)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


@pytest.mark.parametrize("key", list(PRESETS))
def test_param_counts_equal_the_built_model(key):
    model = Transformer(PRESETS[key], device="cpu")
    counts = param_counts(PRESETS[key])
    assert counts["total"] == unique_parameter_count(model)
    if PRESETS[key].tie_embeddings:
        assert model.unembed.weight is model.embed.weight
    # active: everything except the experts a token does not use
    cfg = PRESETS[key]
    expert_size = sum(p.numel() for n, p in model.named_parameters() if ".experts.0." in n) // cfg.n_layers
    unused = cfg.n_layers * (cfg.n_experts - cfg.top_k) * expert_size if cfg.ffn == "moe" else 0
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
@pytest.mark.parametrize("key", list(PRESETS))
def test_every_preset_builds_runs_and_generates(key, dtype):
    cfg = PRESETS[key].replace(dtype=dtype)
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
