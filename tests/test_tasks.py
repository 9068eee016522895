"""Synthetic tasks: seeded generators, labels that are right, text <-> ids, accuracy and pattern scores."""
import pytest
import torch

from transformer.training.task_measures import attention_mass, specialisation
from transformer.training.tasks import TASKS, get_task, induction_targets, previous_token_targets


def batch_tensors(batch):
    return {name: t for name in ("input_ids", "src_ids", "tgt_in", "targets", "loss_mask")
            if (t := getattr(batch, name)) is not None}


@pytest.mark.parametrize("name", TASKS)
def test_same_seed_gives_the_same_batch_and_another_seed_does_not(name):
    task = TASKS[name]
    first, again, other = task.sample(16, seed=3), task.sample(16, seed=3), task.sample(16, seed=4)
    for key, tensor in batch_tensors(first).items():
        assert torch.equal(tensor, batch_tensors(again)[key]), key
    assert any(not torch.equal(t, batch_tensors(other)[k]) if t.shape == batch_tensors(other)[k].shape else True
               for k, t in batch_tensors(first).items())


@pytest.mark.parametrize("name", TASKS)
def test_a_generator_moves_on_and_every_batch_has_answer_positions(name):
    task = TASKS[name]
    generator = torch.Generator().manual_seed(0)
    a, b = task.sample(8, generator=generator), task.sample(8, generator=generator)
    assert not (a.targets.shape == b.targets.shape and torch.equal(a.targets, b.targets))
    assert a.loss_mask.any(dim=1).all()  # every row is scored somewhere
    ids = a.input_ids if a.input_ids is not None else a.src_ids
    assert ids.shape[1] <= task.max_tokens and int(ids.max()) < len(task.vocab)
    with pytest.raises(ValueError, match="generator or a seed"):
        task.sample(2, generator=generator, seed=1)


def test_induction_target_is_the_token_after_the_previous_occurrence():
    task = TASKS["induction"]
    batch = task.sample(64, seed=11)
    distances = set()
    for ids, targets, mask in zip(batch.input_ids.tolist(), batch.targets.tolist(), batch.loss_mask.tolist()):
        scored = [t for t, m in enumerate(mask) if m]
        assert scored == list(range(scored[0], scored[-1] + 1))  # one contiguous repeated stretch
        for t in scored:
            earlier = [p for p in range(t) if ids[p] == ids[t]]
            assert len(earlier) == 1  # a segment letter appears once before, so the answer is unambiguous
            assert targets[t] == ids[earlier[0] + 1] == ids[t + 1]
            distances.add(t - earlier[0])
    assert len(distances) >= 4  # the offset varies, so position alone cannot solve it


def test_copy_and_reverse_targets():
    for name, expected in (("copy", lambda s: s), ("reverse", lambda s: s.flip(1))):
        task = TASKS[name]
        batch = task.sample(8, seed=2)
        letters = batch.src_ids[:, :-1]
        assert (batch.src_ids[:, -1] == task.token_id("<eos>")).all()
        assert torch.equal(batch.tgt_out, expected(letters))
        assert (batch.tgt_in[:, 0] == task.token_id("<bos>")).all()
        assert torch.equal(batch.tgt_in[:, 1:], batch.tgt_out[:, :-1])  # teacher forcing: shifted right
        assert batch.loss_mask.all()
    assert "".join(TASKS["reverse"].decode(TASKS["reverse"].sample(1, seed=0).tgt_out[0])) == \
        "".join(TASKS["reverse"].decode(TASKS["reverse"].sample(1, seed=0).src_ids[0, :-1]))[::-1]


def test_sort_answer_is_the_input_sorted():
    task = TASKS["sort"]
    batch = task.sample(16, seed=5)
    for ids, targets, mask in zip(batch.input_ids.tolist(), batch.targets.tolist(), batch.loss_mask.tolist()):
        sep = ids.index(task.token_id("<sep>"))
        digits = ids[1:sep]
        answer = [t for t, m in zip(targets, mask) if m]
        assert answer == sorted(digits)
        assert ids[sep + 1:] == answer  # the sequence itself ends with the sorted digits


def test_mirror_masks_one_twin_and_asks_for_the_hidden_letter():
    task = TASKS["mirror"]
    batch = task.sample(32, seed=7)
    mask_id = task.token_id("<mask>")
    T = batch.input_ids.shape[1]
    for ids, targets, mask in zip(batch.input_ids.tolist(), batch.targets.tolist(), batch.loss_mask.tolist()):
        word = targets[1:-1]
        assert word == word[::-1]  # a palindrome
        for i, masked in enumerate(mask):
            assert (ids[i] == mask_id) == masked
            if masked:
                twin = T - 1 - i
                assert not mask[twin] and ids[twin] == targets[i]  # its twin is visible and holds the answer


def test_mixed_adds_the_key_to_digits_and_leaves_letters_alone():
    task = TASKS["mixed"]
    batch = task.sample(16, seed=1)
    for ids, targets, mask in zip(batch.input_ids.tolist(), batch.targets.tolist(), batch.loss_mask.tolist()):
        tokens, answers = task.decode(ids), task.decode(targets)
        assert tokens[0] == "<bos>" and tokens[1].isdigit() and mask[:2] == [False, False]
        key = int(tokens[1])
        for token, answer in zip(tokens[2:], answers[2:]):
            assert answer == (str((int(token) + key) % 10) if token.isdigit() else token)
        assert all(mask[2:])
    kinds = task.kind_of(batch.input_ids)
    assert not (kinds["digit"] & kinds["letter"]).any()
    assert torch.equal((kinds["digit"] | kinds["letter"])[:, 2:], batch.loss_mask[:, 2:])


@pytest.mark.parametrize("name", TASKS)
def test_encode_frames_the_example_and_decode_labels_it(name):
    task = TASKS[name]
    ids = task.encode(task.example_text)
    labels = task.decode(ids)
    typed = "".join(next((c for c, tok in task.typed_specials.items() if tok == label), label)
                    for label in labels if label not in task.specials or label in task.typed_specials.values())
    assert typed == task.example_text
    assert all(0 <= i < len(task.vocab) for i in ids)


def test_encode_names_unknown_characters_and_the_valid_symbols():
    with pytest.raises(ValueError) as error:
        TASKS["sort"].encode("12a4!")
    message = str(error.value)
    assert "'a'" in message and "'!'" in message and "0123456789" in message
    with pytest.raises(ValueError, match="needs some text"):
        TASKS["induction"].encode("")
    with pytest.raises(ValueError, match="outside"):
        TASKS["copy"].decode([0, 99])
    with pytest.raises(ValueError, match="unknown task"):
        get_task("parity")


def test_accuracy_counts_answer_positions_only():
    task = TASKS["sort"]
    batch = task.sample(4, seed=0)
    perfect = torch.nn.functional.one_hot(batch.targets, len(task.vocab)).float()  # (B, T, V)
    assert task.accuracy(perfect, batch) == 1.0
    wrong_elsewhere = perfect.clone()
    wrong_elsewhere[~batch.loss_mask] = perfect[~batch.loss_mask].roll(1, dims=-1)
    assert task.accuracy(wrong_elsewhere, batch) == 1.0
    half_wrong = perfect.clone()
    answer_rows, answer_cols = batch.loss_mask.nonzero(as_tuple=True)
    flip = answer_rows % 2 == 0
    half_wrong[answer_rows[flip], answer_cols[flip]] = half_wrong[answer_rows[flip], answer_cols[flip]].roll(1, dims=-1)
    assert task.accuracy(half_wrong, batch) == pytest.approx(1 - flip.float().mean().item())


def test_induction_targets_on_a_hand_made_sequence():
    ids = torch.tensor([[0, 1, 2, 3, 9, 1, 2, 3]])  # "abc x abc" after <bos>
    query = torch.tensor([[False] * 5 + [True, True, False]])
    targets = induction_targets(ids, query)[0]
    assert targets[5].nonzero().flatten().tolist() == [2]  # second 'a' looks at what followed the first: 'b'
    assert targets[6].nonzero().flatten().tolist() == [3]
    assert not targets[7].any()  # not a query
    previous = previous_token_targets(1, 4)[0]
    assert previous.nonzero().tolist() == [[1, 0], [2, 1], [3, 2]]


def test_attention_mass_and_specialisation():
    targets = torch.zeros(1, 3, 3, dtype=torch.bool)
    targets[0, 1, 0] = targets[0, 2, 1] = True
    on_target = targets.float()[:, None]  # (1, 1, 3, 3): all weight on the target
    uniform = torch.full((1, 1, 3, 3), 1 / 3)
    pattern = torch.cat((on_target, uniform), dim=1)  # two heads
    assert attention_mass(pattern, targets).tolist() == pytest.approx([1.0, 1 / 3])
    assert specialisation({"a": torch.tensor([0.5, 0.5, 0, 0]), "b": torch.tensor([0, 0, 0.5, 0.5])}) == 1.0
    assert specialisation({"a": torch.tensor([0.25] * 4), "b": torch.tensor([0.25] * 4)}) == 0.0
