"""A tiny model whose every parameter is moved off its initial value (sinks, biases, norms), so a term a path drops
shows in its output: what the long-input and long-context tests build their cases from."""
import torch

from transformer import Transformer, TransformerConfig

TINY = dict(vocab_size=32, d_model=16, n_heads=4, n_kv_heads=2, n_layers=2, max_len=64)


def build(changes: dict) -> Transformer:
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(**{**TINY, **changes}), device="cpu").eval()
    with torch.no_grad():
        for tensor in model.parameters():
            tensor.add_(0.3 * torch.randn_like(tensor))
    return model
