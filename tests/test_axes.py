"""The table of choices (transformer/axes) is the one place a choice is named: the config validates against
it, every module builds one thing per row, and no caller compares a choice by its name."""
import ast
import json
from pathlib import Path

import pytest

from transformer import AXES, TransformerConfig, choices, masks
from transformer.attention import KV_HEAD_MODULES
from transformer.axes import FIELD_AXES
from transformer.checkpoint import load, save
from transformer.ffn import EXPERTS, FFN_MODULES, GATES, MLP_ACTIVATIONS
from transformer.costs import RESERVATIONS
from transformer.model import CACHE_LAYOUTS, Transformer
from transformer.norms import NORM_MODULES
from transformer.positions import POSITION_EMBEDDINGS, ROPE_SCALES

ROOT = Path(__file__).resolve().parent.parent


def keys_where(axis: str, flag) -> set[str]:
    return {key for key, row in AXES[axis].choices.items() if flag(row)}


def test_every_choice_field_is_an_axis_of_the_table():
    assert set(FIELD_AXES) == {"arch", "position", "rope_scaling", "norm", "norm_position", "qk_norm", "ffn", "router",
                               "expert_activation", "attention_pattern", "gelu_approximate", "dtype"}
    for field, axis in FIELD_AXES.items():
        assert choices(field) == tuple(AXES[axis].choices), field  # the menus list the rows, in the table's order


def test_the_derived_axes_read_their_keys_off_the_config():
    kinds = {TransformerConfig(n_heads=4, n_kv_heads=g).attention_kind for g in (1, 2, 4)}
    kinds.add(TransformerConfig(n_heads=4, kv_rank=8, rope_dim=8, head_dim=16).attention_kind)
    assert set(AXES["kv_heads"].choices) == kinds
    assert TransformerConfig(n_kv_heads=1).row("kv_heads").label == "MQA"
    assert TransformerConfig(parallel_block=True).row("block").parallel
    assert not TransformerConfig().row("block").parallel
    with pytest.raises(ValueError, match="mask"):
        TransformerConfig().row("mask")
    for mask in AXES["mask"].choices.keys() - {"none"}:
        assert callable(getattr(masks, mask, None)), mask  # each row names a mask the library builds


def test_each_module_builds_one_thing_per_row():
    assert set(POSITION_EMBEDDINGS) == keys_where("position", lambda r: r.adds_embedding)
    assert set(ROPE_SCALES) == keys_where("rope_scaling", lambda r: r.rescales)
    assert set(NORM_MODULES) == set(AXES["norm"].choices)
    assert set(FFN_MODULES) == set(AXES["ffn"].choices)
    assert set(MLP_ACTIVATIONS) == keys_where("ffn", lambda r: not r.gated)
    assert set(GATES) == keys_where("ffn", lambda r: r.gated and not r.routed)
    assert {row.dense_kind for row in AXES["expert_activation"].choices.values()} <= set(GATES)
    assert set(EXPERTS) == set(AXES["expert_activation"].choices)
    assert set(KV_HEAD_MODULES) == set(AXES["kv_heads"].choices)
    assert set(CACHE_LAYOUTS) == set(RESERVATIONS) == set(AXES["kv_cache"].choices)
    positions = masks.torch.arange(6)
    for pattern in keys_where("attention_pattern", lambda r: r.sparse):
        assert masks.sparse(pattern, positions, positions, 2, True, 1).shape == (6, 6)


def test_every_row_has_words_and_every_formula_or_op_names_a_hook_site():
    from transformer.hook_sites import SITES

    for name, axis in AXES.items():
        for key, row in axis.choices.items():
            assert row.label and row.does and row.solves, (name, key)
            assert set(row.formulas) <= set(SITES) and set(row.ops) <= set(SITES), (name, key)


@pytest.mark.parametrize("field", sorted(FIELD_AXES))
def test_an_unknown_choice_names_itself_and_lists_the_valid_ones(field):
    with pytest.raises(ValueError) as error:
        TransformerConfig(**{field: "nonsense"})
    message = str(error.value)
    assert f"{field}='nonsense'" in message
    assert all(repr(key) in message for key in choices(field))


def test_an_unknown_choice_in_a_url_or_a_checkpoint_is_refused_by_name(tmp_path):
    text = TransformerConfig().to_json().replace('"position": "rope"', '"position": "xpos2"')
    with pytest.raises(ValueError, match="position='xpos2'.*'rope'"):
        TransformerConfig.from_json(text)
    model = Transformer(TransformerConfig(vocab_size=16, d_model=16, n_layers=1), device="cpu")
    save(model, tmp_path / "tiny", {"task": "test"})
    meta = json.loads((tmp_path / "tiny.json").read_text())
    meta["config"]["ffn"] = "swishglu"
    (tmp_path / "tiny.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="ffn='swishglu'.*'swiglu'"):
        load(tmp_path / "tiny")


# --- the layer plan --------------------------------------------------------------------------------

def test_the_layer_plan_gives_each_layer_its_window_positions_and_kv():
    cfg = TransformerConfig(n_layers=8, sliding_window=4, layer_pattern="alternate", nope_layers="every 4",
                            rope_local_theta=1000.0)
    plan = cfg.layer_plan()
    assert [s.window for s in plan] == [4, None] * 4
    assert [s.rotates for s in plan] == [True, True, True, False] * 2  # Llama 4's every fourth layer
    assert [s.rope_theta for s in plan] == [1000.0, 10000.0, 1000.0, None] * 2
    assert [s.kv_from for s in plan] == list(range(8))
    assert {s.kind for s in plan} == {"softmax"}
    assert [s.hf_layer_type for s in plan[:2]] == ["sliding_attention", "full_attention"]
    assert TransformerConfig(n_layers=4, nope_layers="0, 2").layer_windows() == (None,) * 4
    assert [s.rotates for s in TransformerConfig(n_layers=4, nope_layers="0, 2").layer_plan()] == [False, True] * 2


@pytest.mark.parametrize("changes, message", [
    (dict(n_layers=2, layer_pattern="local,global,local", sliding_window=4), "names 3 layers but n_layers=2"),
    (dict(n_layers=4, nope_layers="1, 5"), "names layer 5, but n_layers=4"),
    (dict(n_layers=4, nope_layers="every 2", position="alibi"), "layer 1, but position='alibi'"),
    (dict(n_layers=2, nope_layers="every 1"), "all 2 layers"),
    (dict(n_layers=4, nope_layers="every other"), "does not parse"),
])
def test_a_layer_plan_that_does_not_fit_the_model_is_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        TransformerConfig(**changes)


def test_a_block_reads_its_row_of_the_plan():
    cfg = TransformerConfig(vocab_size=16, d_model=16, n_layers=4, nope_layers="every 2")
    model = Transformer(cfg, device="cpu")
    assert [block.spec for block in model.blocks] == list(cfg.layer_plan())
    _, trace = model.run_with_trace(masks.torch.tensor([[1, 2, 3, 4]]), names="*rot_q")
    assert trace.names() == ["blocks.0.attn.hook_rot_q", "blocks.2.attn.hook_rot_q"]  # layers 1 and 3 rotate nothing


# --- nobody but the table compares a choice by its name ---------------------------------------------

CHOICE_NAMES = set(FIELD_AXES) - {"dtype"} | {"attention_kind"}  # the number format is no architecture choice
HOLDERS = CHOICE_NAMES | {"mask", "pattern"}  # variables that hold a choice of an axis without a field of its own
SCANNED = ("app.py", "pages", "ui", "transformer", "scripts", "benchmarks")
THE_TABLE = ("transformer/axes/", "transformer/config.py")  # where the keys are defined and derived


def _names_a_choice(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr in CHOICE_NAMES
    if isinstance(node, ast.Name):
        return node.id in HOLDERS
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return node.slice.value in CHOICE_NAMES  # fields["position"]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
        return isinstance(node.args[0], ast.Constant) and node.args[0].value in CHOICE_NAMES  # changes.get("arch")
    return False


def _is_key(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and bool(node.elts) and all(map(_is_key, node.elts))


def name_comparisons(source: str) -> list[int]:
    """Lines that compare a choice with a name (``cfg.position == "rope"``, ``arch in ("decoder",)``) or infer a
    kind from a field (``cfg.kv_rank is not None``)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare) or len(node.ops) != 1:
            continue
        left, op, right = node.left, node.ops[0], node.comparators[0]
        if isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) and (
                (_names_a_choice(left) and _is_key(right)) or (_names_a_choice(right) and _is_key(left))):
            lines.append(node.lineno)
        elif (isinstance(op, (ast.Is, ast.IsNot)) and isinstance(left, ast.Attribute) and left.attr == "kv_rank"
              and isinstance(right, ast.Constant) and right.value is None):
            lines.append(node.lineno)
    return sorted(lines)


def test_the_counter_finds_each_kind_of_name_comparison():
    planted = '''
if cfg.position == "rope": pass
if model.cfg.arch != "decoder": pass
if fields["ffn"] in ("moe",): pass
if changes.get("arch") == "encoder-decoder": pass
if "MLA" == cfg.attention_kind: pass
if pattern == "block-local" or mask != "causal": pass
if real.kv_rank is not None: pass
if cfg.row("position").rotates_qk and cfg.kv_rank > 4 and cfg.dtype == "float32": pass
'''
    assert name_comparisons(planted) == [2, 3, 4, 5, 6, 7, 7, 8]


def test_no_place_outside_the_table_compares_a_choice_by_its_name():
    found = []
    for top in SCANNED:
        paths = [ROOT / top] if top.endswith(".py") else sorted((ROOT / top).rglob("*.py"))
        for path in paths:
            relative = path.relative_to(ROOT).as_posix()
            if relative.startswith(THE_TABLE):
                continue
            found += [f"{relative}:{line}" for line in name_comparisons(path.read_text())]
    assert found == [], f"{len(found)} places compare a choice by its name; ask its row (cfg.row(axis)): {found}"
