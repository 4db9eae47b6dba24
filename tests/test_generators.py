import io
import tarfile

import numpy as np
import pytest

from experiments.mnist_add.runner import Setting, split_data
from pslbridge.datasets import mnist
from pslbridge.examples.mnist_addition import add2_spec, make_additions, place_rows, possible_digit_rows

LABELS = np.arange(5000) % 10


def test_add1_counts_and_sums():
    s = make_additions(LABELS, 1, 600, np.random.default_rng(0))
    assert s.n_additions == 300 and len(s.image_ids) == 600 and len(set(s.image_ids.tolist())) == 600
    np.testing.assert_array_equal(s.sums, LABELS[s.image_ids[s.groups[:, 0]]] + LABELS[s.image_ids[s.groups[:, 1]]])


@pytest.mark.parametrize("digits", [1, 2])
def test_batches_partition_the_additions(digits):
    s = make_additions(LABELS, digits, 400 * digits, np.random.default_rng(3), n_resampled=40)
    parts = s.batches(7)
    assert [p.n_additions for p in parts] == [len(c) for c in np.array_split(np.arange(s.n_additions), 7)]
    np.testing.assert_array_equal(np.concatenate([p.sums for p in parts]), s.sums)
    np.testing.assert_array_equal(
        np.concatenate([p.image_ids for p in parts]), s.image_ids[: s.n_additions * 2 * digits]
    )
    for p in parts:  # self-contained: positions 0..n-1, sums still match the images
        assert sorted(p.groups.ravel().tolist()) == list(range(len(p.image_ids)))
        if digits == 1:
            np.testing.assert_array_equal(
                p.sums, LABELS[p.image_ids[p.groups[:, 0]]] + LABELS[p.image_ids[p.groups[:, 1]]]
            )
    for bad in (0, s.n_additions + 1):
        with pytest.raises(ValueError, match="batches must be between 1 and"):
            s.batches(bad)


def test_add2_sums_use_tens_first():
    s = make_additions(LABELS, 2, 40, np.random.default_rng(1))
    d = LABELS[s.image_ids[s.groups]]
    np.testing.assert_array_equal(s.sums, 10 * d[:, 0] + d[:, 1] + 10 * d[:, 2] + d[:, 3])
    assert s.groups.shape == (10, 4)


@pytest.mark.parametrize(("n", "m"), [(40, 0), (40, 20), (60, 30), (80, 80)])
def test_overlap_variant_counts(n, m):
    s = make_additions(LABELS, 1, n, np.random.default_rng(2), n_resampled=m)
    assert len(s.image_ids) == (n + m) // 2 * 2
    assert len(set(s.image_ids.tolist())) == n  # the re-sampled images repeat unique ones only


def test_seeds_make_splits_repeatable():
    a = make_additions(LABELS, 1, 100, np.random.default_rng(7))
    b = make_additions(LABELS, 1, 100, np.random.default_rng(7))
    c = make_additions(LABELS, 1, 100, np.random.default_rng(8))
    np.testing.assert_array_equal(a.image_ids, b.image_ids)
    assert not np.array_equal(a.image_ids, c.image_ids)


def test_validation_and_test_images_are_disjoint():
    setting = Setting(additions=50, test_additions=200, val_additions=100)
    train, val, test = split_data(setting, split=3, seed=0, labels_train=LABELS, labels_test=LABELS[:2000])
    assert not set(val.image_ids.tolist()) & set(test.image_ids.tolist())
    assert test.n_additions == 200 and val.n_additions == 100 and train.n_additions == 50


def test_helper_relations():
    assert len(possible_digit_rows()) == 100
    rows = place_rows()
    # 57 = 10*Z10 + Z1 has (5, 7) and (4, 17); the tens digit of a 57 can be 0..5 (with a carry from the ones).
    assert {(z10, z1) for z10, z1, z in rows["PlaceNumberSum"] if z == 57} == {(5, 7), (4, 17)}
    assert {x for x, z in rows["PossibleTensDigits"] if z == 57} == set(range(6))
    spec = add2_spec([(0, 1, 2, 3)], [57])
    assert spec.predicate("Sum").arity == 5


def _idx(array: np.ndarray) -> bytes:
    header = bytes([0, 0, 8, array.ndim]) + b"".join(d.to_bytes(4, "big") for d in array.shape)
    return header + array.astype(np.uint8).tobytes()


def test_mnist_fetch_from_tarball_checks_checksum_and_parses(tmp_path, monkeypatch):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for key, member in mnist._FILES.items():
            shape = (3, 28, 28) if key.startswith("x") else (3,)
            data = _idx(np.full(shape, 7))
            info = tarfile.TarInfo(member)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    tarball = tmp_path / mnist.TARBALL
    tarball.write_bytes(buffer.getvalue())
    with pytest.raises(mnist.DataError, match="SHA-256"):
        mnist.fetch(cache=tmp_path / "cache", tarball=tarball)
    assert not (tmp_path / "cache" / "mnist" / "mnist.npz").exists()
    monkeypatch.setattr(mnist, "TARBALL_SHA256", mnist._sha256(tarball))
    path = mnist.fetch(cache=tmp_path / "cache", tarball=tarball)
    with np.load(path) as data:
        assert data["x_train"].shape == (3, 28, 28) and int(data["y_test"][0]) == 7


def test_missing_mnist_says_what_to_run(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(mnist.DataError, match="make data"):
        mnist.load_mnist(cache=tmp_path)


# --- Visual Sudoku --------------------------------------------------------------------------------

from experiments.visual_sudoku.model import (  # noqa: E402
    distinguish_accuracy,
    is_valid,
    make_puzzles,
    puzzle_scores,
    threshold_accuracy,
    valid_layouts,
)


@pytest.mark.slow
def test_sudoku_layouts_and_validity():
    layouts = valid_layouts()
    assert len(layouts) == 288 and all(is_valid(g) for g in layouts)
    broken = layouts[0].copy()
    broken[0, 0], broken[0, 1] = broken[0, 1], broken[0, 0]
    assert not is_valid(broken)


@pytest.mark.slow
def test_puzzle_generator_invariants():
    puzzles = make_puzzles(LABELS, 12, np.random.default_rng(3))
    assert len(puzzles.valid) == 24 and puzzles.valid.sum() == 12  # one corrupted twin per valid puzzle
    assert all(is_valid(s) == v for s, v in zip(puzzles.symbols, puzzles.valid))
    np.testing.assert_array_equal(LABELS[puzzles.images], puzzles.symbols)  # symbols are the images' digits
    assert set(np.unique(puzzles.symbols).tolist()) <= {0, 1, 2, 3}
    valid = puzzles.images[puzzles.valid]
    counts = np.bincount(LABELS[valid].ravel(), minlength=4)
    assert (counts == counts[0]).all()  # balanced per class
    again = make_puzzles(LABELS, 12, np.random.default_rng(3))
    np.testing.assert_array_equal(again.images, puzzles.images)


@pytest.mark.slow
@pytest.mark.parametrize(("n", "m"), [(64, 0), (64, 64), (64, 192), (128, 128)])
def test_puzzle_overlap_counts(n, m):
    puzzles = make_puzzles(LABELS, (n + m) // 16, np.random.default_rng(1), n_unique=n, n_resampled=m)
    used = puzzles.images[puzzles.valid].ravel()
    assert len(used) == n + m and len(set(used.tolist())) <= n
    assert len(set(used.tolist())) >= 0.6 * n  # re-sampling repeats images; most unique ones still appear


@pytest.mark.slow
def test_sudoku_scores_and_accuracies():
    layout = valid_layouts()[5]
    confident = np.eye(4)[layout][None]
    wrong = confident.copy()
    wrong[0, 0, 0], wrong[0, 0, 1] = wrong[0, 0, 1].copy(), wrong[0, 0, 0].copy()
    scores = puzzle_scores(np.concatenate([confident, wrong]))
    assert scores[0] == 0 and scores[1] > 0
    assert threshold_accuracy(scores, np.array([True, False]))[0] == 1.0
    assert distinguish_accuracy(np.array([2, 3, 0, 1]), np.array([0, 1, 2, 3])) == 1.0
