"""Hugging Face models (and torch.nn.Transformer) loaded into our Transformer give the same numbers.

Each case builds a small HF model from a config (random weights, nothing downloaded) and checks,
in float32, on a right-padded batch: logits, the attention weights of every layer and head, the
residual stream after every block, the MoE router probabilities, and 20 greedy tokens.
"""
import operator

import pytest
import torch
import transformers as tf
from torch import nn

from transformer import Transformer
from transformer.interop import SUPPORTED_CLASSES, describe_hf, from_hf, from_torch_transformer

LOGITS_TOL, PATTERN_TOL, RESID_TOL, ROUTER_TOL = 1e-4, 1e-5, 1e-4, 1e-5
V, T = 61, 12
# random weights large enough that attention patterns and routing are far from uniform
COMMON = dict(attn_implementation="eager", initializer_range=0.3, bos_token_id=None, eos_token_id=None, pad_token_id=0)


def llama_like(config_class, **sizes):
    return config_class(vocab_size=V, max_position_embeddings=64, **COMMON, **sizes)


CASES = {  # name -> (model class, config)
    "gpt2 1L 2H": (tf.GPT2LMHeadModel, tf.GPT2Config(vocab_size=V, n_embd=16, n_head=2, n_layer=1, n_positions=40, **COMMON)),
    "gpt2 3L 4H exact-gelu": (tf.GPT2LMHeadModel, tf.GPT2Config(vocab_size=V, n_embd=32, n_head=4, n_layer=3, n_inner=48,
                                                                  n_positions=40, activation_function="gelu", **COMMON)),
    "llama MHA 2L": (tf.LlamaForCausalLM, llama_like(tf.LlamaConfig, hidden_size=32, intermediate_size=40,
                                                     num_attention_heads=4, num_key_value_heads=4, num_hidden_layers=2)),
    "llama GQA 3L theta5e5 tied attn-bias": (tf.LlamaForCausalLM, llama_like(
        tf.LlamaConfig, hidden_size=32, intermediate_size=40, num_attention_heads=4, num_key_value_heads=2,
        num_hidden_layers=3, rope_parameters={"rope_type": "default", "rope_theta": 5e5}, tie_word_embeddings=True,
        attention_bias=True)),
    "llama MQA 1L 8H": (tf.LlamaForCausalLM, llama_like(tf.LlamaConfig, hidden_size=32, intermediate_size=40,
                                                        num_attention_heads=8, num_key_value_heads=1, num_hidden_layers=1)),
    "mistral GQA W4": (tf.MistralForCausalLM, llama_like(tf.MistralConfig, hidden_size=32, intermediate_size=40,
                                                         num_attention_heads=4, num_key_value_heads=2,
                                                         num_hidden_layers=2, sliding_window=4)),
    "mistral MQA W3 3L": (tf.MistralForCausalLM, llama_like(tf.MistralConfig, hidden_size=32, intermediate_size=40,
                                                            num_attention_heads=4, num_key_value_heads=1,
                                                            num_hidden_layers=3, sliding_window=3)),
    "mixtral E4 top2 GQA": (tf.MixtralForCausalLM, llama_like(tf.MixtralConfig, hidden_size=32, intermediate_size=40,
                                                              num_attention_heads=4, num_key_value_heads=2,
                                                              num_hidden_layers=2, num_local_experts=4)),
    "mixtral E3 top2 MQA W5 3L": (tf.MixtralForCausalLM, llama_like(tf.MixtralConfig, hidden_size=32, intermediate_size=40,
                                                                    num_attention_heads=4, num_key_value_heads=1,
                                                                    num_hidden_layers=3, num_local_experts=3,
                                                                    sliding_window=5)),
    "bloom 4H 2L": (tf.BloomForCausalLM, tf.BloomConfig(vocab_size=V, hidden_size=32, n_head=4, n_layer=2, **COMMON)),
    "bloom 6H 3L": (tf.BloomForCausalLM, tf.BloomConfig(vocab_size=V, hidden_size=36, n_head=6, n_layer=3, **COMMON)),
    "falcon MQA parallel 2L": (tf.FalconForCausalLM, tf.FalconConfig(
        vocab_size=V, hidden_size=32, num_attention_heads=4, num_hidden_layers=2, multi_query=True, parallel_attn=True,
        new_decoder_architecture=False, alibi=False, **COMMON)),
    "falcon MQA parallel 3L 8H bias": (tf.FalconForCausalLM, tf.FalconConfig(
        vocab_size=V, hidden_size=32, num_attention_heads=8, num_hidden_layers=3, multi_query=True, parallel_attn=True,
        new_decoder_architecture=False, alibi=False, bias=True, **COMMON)),
    "falcon MHA sequential": (tf.FalconForCausalLM, tf.FalconConfig(
        vocab_size=V, hidden_size=32, num_attention_heads=4, num_hidden_layers=2, multi_query=False,
        parallel_attn=False, new_decoder_architecture=False, alibi=False, **COMMON)),
    "bert MLM 2L": (tf.BertForMaskedLM, tf.BertConfig(vocab_size=V, hidden_size=32, num_attention_heads=4,
                                                      num_hidden_layers=2, intermediate_size=48,
                                                      max_position_embeddings=40, **COMMON)),
    "bert MLM 3L 2H tanh-gelu": (tf.BertForMaskedLM, tf.BertConfig(vocab_size=V, hidden_size=16, num_attention_heads=2,
                                                                   num_hidden_layers=3, intermediate_size=40,
                                                                   max_position_embeddings=40, hidden_act="gelu_new",
                                                                   **COMMON)),
}

# where each family keeps its list of blocks, below model.base_model
LAYER_LISTS = {"gpt2": "h", "llama": "layers", "mistral": "layers", "mixtral": "layers", "bloom": "h", "falcon": "h",
               "bert": "encoder.layer"}


def build(name: str, seed: int = 0):
    model_class, config = CASES[name]
    torch.manual_seed(seed)
    return model_class(config).eval()


def right_padded_batch(seed: int = 0):
    """(3, T) ids and mask: a full row and two right-padded rows."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, V, (3, T), generator=g)
    mask = torch.ones(3, T, dtype=torch.long)
    mask[1, 9:] = 0
    mask[2, 5:] = 0
    return ids.masked_fill(mask == 0, 0), mask


def block_outputs(hf_model, n_layers: int) -> tuple[list, list]:
    """Forward hooks on HF's blocks: their raw outputs (before any final norm), and the handles."""
    family, _ = SUPPORTED_CLASSES[type(hf_model).__name__]
    layers = operator.attrgetter(LAYER_LISTS[family])(hf_model.base_model)
    assert len(layers) == n_layers
    captured = []
    hook = lambda module, args, out: captured.append(out[0] if isinstance(out, tuple) else out)  # noqa: E731
    return captured, [layer.register_forward_hook(hook) for layer in layers]


def differences(hf_model, ours: Transformer, ids, mask) -> dict[str, float]:
    """Max abs difference of everything the two models expose, on one batch."""
    L = ours.cfg.n_layers
    is_moe = ours.cfg.ffn == "moe"
    captured, handles = block_outputs(hf_model, L)
    with torch.no_grad():
        extra = dict(output_router_logits=True) if is_moe else {}
        out = hf_model(ids, attention_mask=mask, output_attentions=True, output_hidden_states=True, **extra)
        logits, trace = ours.run_with_trace(ids, attention_mask=mask)  # recording runs the explicit attention
        fused_logits = ours(ids, attention_mask=mask)  # the default fused (SDPA) path
    for h in handles:
        h.remove()
    diff = lambda a, b: (a - b).abs().max().item()  # noqa: E731
    final = trace["ln_final.hook_normalized"] if ours.cfg.has_final_norm else trace[f"blocks.{L - 1}.hook_resid_post"]
    # HF's hidden_states: [input of block 0, output of blocks 0 .. L-2, the final (normalised) output]
    ours_hidden = [trace["blocks.0.hook_resid_pre"]] + [trace[f"blocks.{i}.hook_resid_post"] for i in range(L - 1)] + [final]
    hf_out = out.logits if hasattr(out, "logits") else out.last_hidden_state
    result = {
        "logits": max(diff(hf_out, logits), diff(hf_out, fused_logits)) if hasattr(out, "logits") else diff(hf_out, final),
        "pattern": max(diff(out.attentions[i], trace[f"blocks.{i}.attn.hook_pattern"]) for i in range(L)),
        "hidden_states": max(diff(h, o) for h, o in zip(out.hidden_states, ours_hidden, strict=True)),
        "resid_post": max(diff(captured[i], trace[f"blocks.{i}.hook_resid_post"]) for i in range(L)),
    }
    if is_moe:
        probs = [r.float().softmax(-1).view(*ids.shape, -1) for r in out.router_logits]  # (B, T, E) per layer
        result["router"] = max(diff(probs[i], trace[f"blocks.{i}.mlp.hook_router_probs"]) for i in range(L))
    return result


def assert_agree(d: dict[str, float]) -> None:
    assert d["logits"] <= LOGITS_TOL, d
    assert d["pattern"] <= PATTERN_TOL, d
    assert d["hidden_states"] <= RESID_TOL, d
    assert d["resid_post"] <= RESID_TOL, d
    assert d.get("router", 0.0) <= ROUTER_TOL, d


@pytest.mark.parametrize("name", list(CASES))
def test_forward_matches_hugging_face(name):
    hf_model = build(name)
    ours = from_hf(hf_model)
    ids, mask = right_padded_batch()
    d = differences(hf_model, ours, ids, mask)
    assert_agree(d)
    # the comparison has teeth: the patterns are far from uniform and the logits far from equal
    pattern = ours.run_with_trace(ids, attention_mask=mask, names=["blocks.0.attn.hook_pattern"])[1]["blocks.0.attn.hook_pattern"]
    assert pattern[0, :, -1].max() > 3 / T
    assert ours(ids, attention_mask=mask).std() > 1000 * LOGITS_TOL


@pytest.mark.parametrize("name", [n for n, (cls, _) in CASES.items() if cls is not tf.BertForMaskedLM])
def test_greedy_generation_matches_hugging_face(name):
    hf_model = build(name)
    ours = from_hf(hf_model)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, V, (2, 6), generator=g)
    left_padded = torch.ones_like(ids)
    left_padded[1, :2] = 0
    for mask in (None, left_padded):
        hf_tokens = hf_model.generate(ids, attention_mask=mask if mask is not None else torch.ones_like(ids),
                                      do_sample=False, max_new_tokens=20)
        our_tokens = ours.generate(ids, 20, attention_mask=mask)
        assert our_tokens.shape == (2, 26)
        assert torch.equal(hf_tokens, our_tokens)
        assert len(set(our_tokens[0, 6:].tolist())) > 2  # not one token repeated: many distinct argmax steps agree


def test_the_mapping_says_what_each_model_is():
    ours = from_hf(build("mistral GQA W4"))
    cfg = ours.cfg
    assert (cfg.arch, cfg.position, cfg.norm, cfg.norm_position, cfg.ffn) == ("decoder", "rope", "rmsnorm", "pre", "swiglu")
    assert (cfg.n_heads, cfg.n_kv_heads, cfg.sliding_window, cfg.attention_kind) == (4, 2, 4, "GQA")
    assert from_hf(build("llama MQA 1L 8H")).cfg.attention_kind == "MQA"
    assert from_hf(build("mixtral E3 top2 MQA W5 3L")).cfg.n_experts == 3
    gpt2 = from_hf(build("gpt2 3L 4H exact-gelu")).cfg
    assert (gpt2.position, gpt2.ffn, gpt2.gelu_approximate, gpt2.d_ff, gpt2.tie_embeddings) == ("learned", "gelu", "none", 48, True)
    bloom = from_hf(build("bloom 6H 3L")).cfg
    assert (bloom.position, bloom.embed_norm, bloom.gelu_approximate) == ("alibi", True, "tanh")
    falcon = from_hf(build("falcon MQA parallel 2L")).cfg
    assert (falcon.parallel_block, falcon.attention_kind, falcon.ffn) == (True, "MQA", "gelu")
    bert = from_hf(build("bert MLM 2L")).cfg
    assert (bert.arch, bert.norm_position, bert.embed_norm, bert.head_transform, bert.head_bias) == (
        "encoder", "post", True, True, True)

    mapping = describe_hf(build("mixtral E4 top2 GQA"))
    assert (mapping.family, mapping.hf_class) == ("Mixtral", "MixtralForCausalLM")
    assert mapping.axes["KV heads"] == "GQA: 4 query heads share 2 kv heads"
    assert mapping.axes["FFN"] == "MoE: 4 SwiGLU experts, top-2"
    assert mapping.axes["head"] == "its own matrix"
    assert describe_hf(build("mistral MQA W3 3L")).axes["mask"] == "causal, sliding window of 3 keys"
    assert describe_hf(build("falcon MQA parallel 2L")).axes["block"] == "parallel attention + FFN"


def test_base_models_without_a_head_match_their_hidden_states():
    torch.manual_seed(0)
    for model in (tf.BertModel(CASES["bert MLM 2L"][1]), tf.GPT2Model(CASES["gpt2 1L 2H"][1]),
                  tf.LlamaModel(CASES["llama GQA 3L theta5e5 tied attn-bias"][1])):
        model.eval()
        ours = from_hf(model)
        d = differences(model, ours, *right_padded_batch())
        assert_agree(d)  # "logits" compares last_hidden_state here
        assert describe_hf(model).axes["head"] == "none (hidden states only)"


def test_dtype_and_device_follow_the_source():
    hf_model = build("llama GQA 3L theta5e5 tied attn-bias")
    ours = from_hf(hf_model)
    assert ours.cfg.dtype == "float32" and ours.device == torch.device("cpu")
    assert all(p.dtype == torch.float32 for p in ours.parameters())
    ids, mask = right_padded_batch()
    with torch.no_grad():
        reference = hf_model(ids, attention_mask=mask).logits  # float32
        hf_bf16 = hf_model.to(torch.bfloat16)
        ours_bf16 = from_hf(hf_bf16)
        assert ours_bf16.cfg.dtype == "bfloat16" and all(p.dtype == torch.bfloat16 for p in ours_bf16.parameters())
        hf_error = (hf_bf16(ids, attention_mask=mask).logits.float() - reference).abs().max()
        our_error = (ours_bf16(ids, attention_mask=mask).float() - reference).abs().max()
    # bfloat16 keeps about 3 significant digits: ours rounds about as much as HF's own bfloat16 run
    assert our_error <= 2 * hf_error
    with pytest.raises(ValueError, match="float16.*model.float()"):
        from_hf(hf_model.to(torch.float16))


def test_weights_are_copied_not_shared():
    hf_model = build("gpt2 1L 2H")
    ours = from_hf(hf_model)
    ids, mask = right_padded_batch()
    before = ours(ids, attention_mask=mask)
    with torch.no_grad():
        hf_model.transformer.h[0].attn.c_attn.weight.add_(1.0)
    assert torch.equal(ours(ids, attention_mask=mask), before)


def test_unsupported_class_is_refused_by_name():
    torch.manual_seed(0)
    opt = tf.OPTForCausalLM(tf.OPTConfig(vocab_size=V, hidden_size=16, num_attention_heads=2, num_hidden_layers=1,
                                         ffn_dim=32, max_position_embeddings=32, word_embed_proj_dim=16))
    with pytest.raises(ValueError, match=r"OPTForCausalLM is not supported; supported .*GPT2LMHeadModel.*LlamaForCausalLM"):
        from_hf(opt)
    with pytest.raises(ValueError, match="OPTForCausalLM is not supported"):
        describe_hf(opt)


def test_unsupported_settings_are_refused_with_the_reason():
    falcon = tf.FalconConfig(vocab_size=V, hidden_size=32, num_attention_heads=4, num_hidden_layers=1, alibi=True,
                             **COMMON)
    with pytest.raises(ValueError, match="FalconForCausalLM with alibi=True is not supported.*1/sqrt"):
        from_hf(tf.FalconForCausalLM(falcon))
    phi3 = tf.Phi3Config(vocab_size=V, hidden_size=32, intermediate_size=40, num_attention_heads=4, num_hidden_layers=1,
                         max_position_embeddings=64, original_max_position_embeddings=32, **COMMON,
                         rope_parameters={"rope_type": "longrope", "rope_theta": 1e4, "short_factor": [1.0] * 4,
                                          "long_factor": [2.0] * 4})
    with pytest.raises(ValueError, match="rope_type='longrope'.*linear, dynamic, yarn and llama3"):
        from_hf(tf.Phi3ForCausalLM(phi3))


def test_loads_a_saved_directory_without_downloading(tmp_path):
    hf_model = build("mixtral E4 top2 GQA")
    hf_model.save_pretrained(tmp_path)
    ours = from_hf(str(tmp_path))
    ids, mask = right_padded_batch()
    assert_agree(differences(hf_model, ours, ids, mask))
    mapping = describe_hf(tmp_path)  # reads only the config
    assert (mapping.hf_class, mapping.config.n_experts) == ("MixtralForCausalLM", 4)


def test_a_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match=r"no Hugging Face model found .*\(nothing is downloaded\)"):
        from_hf(str(tmp_path / "nowhere"))


# --- torch.nn.Transformer ----------------------------------------------------------------

def torch_stacks(norm_first: bool, activation: str, d_model=32, n_heads=4, d_ff=48, n_layers=2):
    """nn.TransformerEncoder/Decoder; with norm_first=True each stack ends on a LayerNorm, as in the pre-norm recipe."""
    layer = dict(d_model=d_model, nhead=n_heads, dim_feedforward=d_ff, dropout=0.0, activation=activation,
                 norm_first=norm_first, batch_first=True)
    final = (lambda: nn.LayerNorm(d_model)) if norm_first else (lambda: None)
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(**layer), n_layers, norm=final(), enable_nested_tensor=False)
    decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(**layer), n_layers, norm=final())
    return encoder, decoder


def randomise_norms(module: nn.Module) -> None:
    """LayerNorms start at weight 1, bias 0; random values show that each one went to the right place."""
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.1)


def torch_pass(encoder, decoder, src, tgt, src_pad, memory_norm=True):
    """Run torch's layers one by one: (per-layer encoder outputs, encoder output, per-layer decoder outputs, output)."""
    causal = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
    enc_layers, x = [], src
    for layer in encoder.layers:
        x = layer(x, src_key_padding_mask=src_pad)
        enc_layers.append(x)
    memory = encoder.norm(x) if encoder.norm is not None else x
    dec_layers, y = [], tgt
    for layer in decoder.layers:
        y = layer(y, memory, tgt_mask=causal, tgt_is_causal=True, memory_key_padding_mask=src_pad)
        dec_layers.append(y)
    out = decoder.norm(y) if decoder.norm is not None else y
    return enc_layers, memory, dec_layers, out


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_torch_encoder_decoder_layers_match(norm_first, activation):
    torch.manual_seed(0)
    encoder, decoder = torch_stacks(norm_first, activation)
    randomise_norms(encoder), randomise_norms(decoder)
    encoder.eval(), decoder.eval()
    embedding = nn.Embedding(V, 32)
    ours = from_torch_transformer((encoder, decoder), V, embedding)
    assert (ours.cfg.arch, ours.cfg.position, ours.cfg.norm_position, ours.cfg.ffn, ours.cfg.bias) == (
        "encoder-decoder", "none", "pre" if norm_first else "post", activation, True)

    src, src_mask = right_padded_batch()
    tgt = torch.randint(1, V, (3, 7), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        enc_layers, memory, dec_layers, out = torch_pass(encoder, decoder, embedding(src), embedding(tgt), src_mask == 0)
        logits, trace = ours.run_with_trace(src, tgt, attention_mask=src_mask)
    diff = lambda a, b: (a - b).abs().max().item()  # noqa: E731
    for i in range(2):
        assert diff(enc_layers[i], trace[f"encoder.blocks.{i}.hook_resid_post"]) <= RESID_TOL
        assert diff(dec_layers[i], trace[f"decoder.blocks.{i}.hook_resid_post"]) <= RESID_TOL
    our_memory = trace["encoder.ln_final.hook_normalized"] if norm_first else trace["encoder.blocks.1.hook_resid_post"]
    our_out = trace["decoder.ln_final.hook_normalized"] if norm_first else trace["decoder.blocks.1.hook_resid_post"]
    assert diff(memory, our_memory) <= RESID_TOL
    assert diff(out, our_out) <= RESID_TOL
    assert diff(out @ embedding.weight.T, logits) <= LOGITS_TOL * out.abs().max().item()  # N(0, 1) embeddings: large logits


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")  # torch's own padded fast path
def test_torch_transformer_module_with_its_final_norms():
    """nn.Transformer always ends both stacks on a LayerNorm, even with post-norm layers: final_norm=True keeps it."""
    torch.manual_seed(0)
    module = nn.Transformer(d_model=16, nhead=2, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=24,
                            dropout=0.0, batch_first=True).eval()
    randomise_norms(module)
    ours = from_torch_transformer(module, V)
    assert (ours.cfg.norm_position, ours.cfg.final_norm) == ("post", True)
    src, src_mask = right_padded_batch()
    tgt = torch.randint(1, V, (3, 5), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        expected = module(ours.embed(src), ours.embed(tgt), tgt_mask=nn.Transformer.generate_square_subsequent_mask(5),
                          tgt_is_causal=True, src_key_padding_mask=src_mask == 0, memory_key_padding_mask=src_mask == 0)
        _, trace = ours.run_with_trace(src, tgt, attention_mask=src_mask, names=["decoder.ln_final.hook_normalized"])
    assert (expected - trace["decoder.ln_final.hook_normalized"]).abs().max() <= RESID_TOL


def test_torch_stacks_of_different_depths_are_refused():
    encoder, _ = torch_stacks(False, "relu", n_layers=2)
    _, decoder = torch_stacks(False, "relu", n_layers=3)
    with pytest.raises(ValueError, match="encoder has 2 layers and the decoder 3"):
        from_torch_transformer((encoder, decoder), V)
