"""The table of axis choices (transformer/axes.py) has one row per choice the library offers, and no other."""
from transformer import AXES, TransformerConfig, choices, masks
from transformer.config import CHOICES


def test_every_choice_has_one_row_in_the_axes_table():
    details = {"gelu_approximate", "dtype"}  # settings of a model family, not axes of the skeleton
    axis_fields = CHOICES.keys() - details
    assert AXES.keys() == axis_fields | {"kv_heads", "mask", "block", "scores"}  # the four derived from other fields
    for field in axis_fields:
        assert tuple(AXES[field].choices) == choices(field), field  # the same strings, in the menus' order
    kinds = {TransformerConfig(n_heads=4, n_kv_heads=g).attention_kind for g in (1, 2, 4)}
    kinds.add(TransformerConfig(n_heads=4, kv_rank=8, rope_dim=8, head_dim=16).attention_kind)
    assert AXES["kv_heads"].choices.keys() == kinds
    for mask in AXES["mask"].choices.keys() - {"none"}:
        assert callable(getattr(masks, mask, None)), mask  # each row names a mask the library builds
