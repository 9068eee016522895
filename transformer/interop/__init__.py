"""Load Hugging Face models (huggingface.py) and torch.nn.Transformer (torch_nn.py) into our Transformer.

Every supported family is one configuration of the same skeleton: reading a model
means (1) saying which choice it makes on each axis -- a ``TransformerConfig`` --
and (2) renaming its weights to ours, splitting fused projections and transposing
where the source stores them differently. Nothing else is translated: the forward
pass that runs afterwards is our own, which is why matching outputs prove the
mapping (tests/test_interop.py checks logits, every attention pattern, every
residual stream, the MoE router and greedy generation).

``transformers`` is an optional dependency: it is imported only when a path or a
model id has to be loaded. Nothing is downloaded (``local_files_only=True``) unless a caller asks
hub.py's ``download_from_hub`` to fill the local cache first, and no remote code runs.
"""
from .huggingface import FAMILIES, SUPPORTED_CLASSES, HFMapping, describe_axes, describe_hf, from_hf
from .torch_nn import from_torch_transformer

__all__ = ["FAMILIES", "SUPPORTED_CLASSES", "HFMapping", "describe_axes", "describe_hf", "from_hf", "from_torch_transformer"]
