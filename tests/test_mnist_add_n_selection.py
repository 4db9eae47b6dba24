"""The split-half comparison of testing the best or the last validation epoch, against every halving enumerated."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from experiments.mnist_add_n.selection import main, split_half_selection


def exact(sums: np.ndarray, digits: np.ndarray) -> dict[str, float]:
    """Both rules' half-B accuracy (%) averaged over every halving: the expectation the random draws estimate."""
    epochs, additions = sums.shape
    best_scores, last_scores = [], []
    for half_a in combinations(range(additions), additions // 2):
        half_b = [k for k in range(additions) if k not in half_a]
        a = list(half_a)
        best = max(range(epochs), key=lambda e: (sums[e, a].sum(), digits[e, a].sum(), -e))  # earliest of equals
        best_scores.append(sums[best, half_b].mean())
        last_scores.append(sums[-1, half_b].mean())
    return {"best": 100 * float(np.mean(best_scores)), "last": 100 * float(np.mean(last_scores))}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_draws_estimate_the_mean_over_every_halving(seed):
    rng = np.random.default_rng(seed)
    digits = rng.integers(0, 4, size=(5, 8))  # 5 epochs, 8 additions of 3 sum digits; many ties on a half
    sums = digits == 3
    found = split_half_selection(sums, digits, draws=20000, rng=np.random.default_rng(seed))
    expected = exact(sums, digits)
    assert found["best"] == pytest.approx(expected["best"], abs=1.5)  # 20,000 draws: standard error under 0.4
    assert found["last"] == pytest.approx(expected["last"], abs=1.5)
    assert 0.0 <= found["best_is_last"] <= 1.0


def test_ties_on_half_a_go_to_the_digits_then_to_the_earliest_epoch():
    sums = np.array([[1, 0], [1, 0], [1, 0]], dtype=bool)  # equal sums on any half
    digits = np.array([[3, 1], [3, 2], [3, 2]])  # epoch 1 and 2 tie on digits too: epoch 1 is kept
    sums[1, 1] = False
    scores = split_half_selection(sums, digits, draws=50)
    assert scores["best_is_last"] == 0.0  # epoch 2 is never the one picked
    assert scores == split_half_selection(sums, digits, draws=50)  # seeded by default: reproducible


def test_a_last_epoch_right_everywhere_is_picked_on_every_half():
    sums = np.zeros((4, 10), dtype=bool)
    sums[-1] = True
    assert split_half_selection(sums, sums.astype(int), draws=30) == {"best": 100.0, "last": 100.0, "best_is_last": 1.0}


@pytest.mark.parametrize(
    ("sums", "digits", "message"),
    [(np.ones((2, 3)), np.ones((2, 4)), "equal 2-d shapes"), (np.ones((2, 1)), np.ones((2, 1)), "two validation")],
)
def test_bad_records_are_named(sums, digits, message):
    with pytest.raises(ValueError, match=message):
        split_half_selection(sums, digits)


def test_the_command_line_reads_a_runner_record(tmp_path, capsys):
    path = tmp_path / "validation-add-n2-seed3-split0.npz"
    sums = np.array([[1, 1, 0, 0], [0, 0, 0, 0]], dtype=bool)
    np.savez(path, sums_right=sums, places_right=sums.astype(np.int16) * 3, seconds=np.array([1.0, 2.0]))
    assert main([str(path), "--draws", "20"]) == 0
    assert f"{path}: 2 epochs, 4 additions, {{'best': " in capsys.readouterr().out
