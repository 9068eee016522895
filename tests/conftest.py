"""Shared fixtures: tiny models (vocab 32, d_model 16, 4 heads, 2 layers) that run in milliseconds on a CPU."""
import pytest
import torch

from transformer import Transformer, TransformerConfig

# Test tensors are tiny: one thread is faster than several, and far faster when the cores are busy.
torch.set_num_threads(1)

TINY = dict(vocab_size=32, d_model=16, n_heads=4, n_layers=2, max_len=32)


@pytest.fixture
def tiny_config():
    """tiny_config(**changes) -> a TransformerConfig at test size."""
    return lambda **changes: TransformerConfig(**{**TINY, **changes})


@pytest.fixture
def tiny_model(tiny_config):
    """tiny_model(**changes) -> a seeded Transformer on the CPU, in eval mode."""
    def build(seed: int = 0, **changes) -> Transformer:
        torch.manual_seed(seed)
        return Transformer(tiny_config(**changes), device="cpu").eval()
    return build


@pytest.fixture
def logits_of():
    """logits_of(model, ids, mask) for any arch; an encoder-decoder reads `ids` as source and `tgt` as target."""
    def call(model, ids, mask=None, tgt=None, tgt_mask=None):
        if model.cfg.arch == "encoder-decoder":
            tgt = ids if tgt is None else tgt
            return model(ids, tgt, attention_mask=mask, tgt_attention_mask=tgt_mask)
        return model(ids, attention_mask=mask)
    return call
