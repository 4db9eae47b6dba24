"""Which epoch to test, judged on validation data alone: the best one on validation, or the last one.

A run's validation record (``validation-*.npz``, written by :func:`experiments.mnist_add_n.runner.run_setting`)
holds, per epoch and validation addition, whether its sum was right. :func:`split_half_selection` splits the
validation additions at random into halves A and B many times; on each split it picks the best epoch on A (sum
accuracy, ties broken by the sum digits' accuracy, then the earliest, as the runner picks) and scores that epoch
and the last epoch on B. Half B plays the test: the mean score of each rule over the splits estimates how well
that rule's network does on additions it was not chosen on.

Run ``python -m experiments.mnist_add_n.selection out/validation-add-n15-seed100-split0.npz``.

Example:
    >>> sums = np.array([[1, 1, 0, 0], [0, 1, 1, 1], [1, 1, 1, 1]], dtype=bool)  # 3 epochs, 4 additions
    >>> scores = split_half_selection(sums, sums.astype(int), draws=200, rng=np.random.default_rng(0))
    >>> scores["last"]  # the last epoch gets every addition right, on any half
    100.0
    >>> scores["best"] <= scores["last"]
    True
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

__all__ = ["split_half_selection", "main"]


def split_half_selection(
    sums_right: np.ndarray, places_right: np.ndarray, draws: int = 1000, rng: np.random.Generator | None = None
) -> dict[str, float]:
    """Mean half-B sum accuracy (%) of the best-on-half-A epoch and of the last epoch over ``draws`` random halvings.

    Args:
        sums_right: ``(epochs, additions)`` booleans: each epoch's network got each validation sum right.
        places_right: ``(epochs, additions)`` counts of each sum's right digits (breaks ties, as in the runner).
        draws: Random halvings.
        rng: Draws the halvings (default: seed 0).

    Returns:
        ``{"best": ..., "last": ..., "best_is_last": ...}``: the two rules' mean half-B accuracy, and the share of
        the halvings in which the best epoch on A was the last one.

    Raises:
        ValueError: If the arrays' shapes differ, or there are fewer than two additions or no epochs.

    Example:
        >>> sums = np.array([[1, 1], [0, 0]], dtype=bool)  # epoch 0 gets both sums right, epoch 1 neither
        >>> split_half_selection(sums, sums.astype(int), draws=10)
        {'best': 100.0, 'last': 0.0, 'best_is_last': 0.0}
    """
    sums_right, places_right = np.asarray(sums_right, dtype=bool), np.asarray(places_right, dtype=float)
    if sums_right.shape != places_right.shape or sums_right.ndim != 2:
        raise ValueError(f"sums_right {sums_right.shape} and places_right {places_right.shape}: need equal 2-d shapes")
    epochs, additions = sums_right.shape
    if epochs < 1 or additions < 2:
        raise ValueError(f"need at least one epoch and two validation additions, got {sums_right.shape}")
    rng = np.random.default_rng(0) if rng is None else rng
    scale = (places_right.max() + 1) * additions  # sums first, then digits: one number per epoch
    best_scores, last_scores, best_is_last = [], [], 0
    for _ in range(draws):
        order = rng.permutation(additions)
        half_a, half_b = order[: additions // 2], order[additions // 2 :]
        key_a = sums_right[:, half_a].sum(axis=1) * scale + places_right[:, half_a].sum(axis=1)
        best = int(np.argmax(key_a))  # the first of equal keys: the earliest, as the runner keeps
        best_scores.append(sums_right[best, half_b].mean())
        last_scores.append(sums_right[-1, half_b].mean())
        best_is_last += best == epochs - 1
    return {
        "best": round(100 * float(np.mean(best_scores)), 4),
        "last": round(100 * float(np.mean(last_scores)), 4),
        "best_is_last": round(best_is_last / draws, 4),
    }


def main(argv: list[str] | None = None) -> int:
    """Print :func:`split_half_selection` for each validation record named on the command line."""
    prog, summary = "python -m experiments.mnist_add_n.selection", __doc__.split("\n")[0]
    parser = argparse.ArgumentParser(prog=prog, description=summary)
    parser.add_argument("records", nargs="+", type=Path, help="validation-*.npz files of the runner")
    parser.add_argument("--draws", type=int, default=1000, help="random halvings of the validation additions")
    args = parser.parse_args(argv)
    for path in args.records:
        with np.load(path) as record:
            sums, places = record["sums_right"], record["places_right"]
            scores = split_half_selection(sums, places, args.draws)
            print(f"{path}: {sums.shape[0]} epochs, {sums.shape[1]} additions, {scores}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
