"""Visual Sudoku puzzle classification (the paper's second experiment): generator, model, evaluation.

4x4 puzzles of unlabelled MNIST images of the digits 0-3; a puzzle is valid when no symbol repeats in
a row, column or 2x2 block. The network never sees digit labels: it learns to tell the four symbols
apart from the Sudoku rules (``visual-sudoku.psl`` beside this module) on valid puzzles, with the
first row of the first puzzle pinned to an arbitrary class order. A puzzle is classified valid when the
network's symbols (argmax per cell) satisfy every Sudoku rule.

Example:
    >>> len(valid_layouts())
    288
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pslbridge.model import ModelSpec, NeuralSpec, PredicateSpec, read_rules_file

__all__ = [
    "Puzzles",
    "distinguish_accuracy",
    "entity_images",
    "is_valid",
    "make_puzzles",
    "puzzle_accuracy",
    "puzzle_scores",
    "threshold_accuracy",
    "sudoku_spec",
    "valid_layouts",
]

RULES = Path(__file__).resolve().parent / "visual-sudoku.psl"
_BLOCKS = [(r, c) for r in (0, 2) for c in (0, 2)]


def is_valid(grid: np.ndarray) -> bool:
    """True when each of the four symbols appears once per row, column and 2x2 block.

    Example:
        >>> is_valid(valid_layouts()[0]), is_valid(np.zeros((4, 4), dtype=int))
        (True, False)
    """
    grid = np.asarray(grid)
    groups = [grid[i, :] for i in range(4)] + [grid[:, j] for j in range(4)]
    groups += [grid[r : r + 2, c : c + 2].ravel() for r, c in _BLOCKS]
    return all(len(set(g.tolist())) == 4 for g in groups)


def valid_layouts() -> list[np.ndarray]:
    """All 288 valid 4x4 Sudoku solutions over the symbols 0-3."""
    rows = list(itertools.permutations(range(4)))
    out = []
    for combo in itertools.product(rows, repeat=4):
        grid = np.array(combo)
        if is_valid(grid):
            out.append(grid)
    return out


@dataclass
class Puzzles:
    """Puzzles as MNIST indexes per cell, their symbols and labels.

    Attributes:
        images: ``(n, 4, 4)`` MNIST indexes.
        symbols: ``(n, 4, 4)`` digit class of each cell (never shown to NeuPSL's network).
        valid: ``(n,)`` whether the puzzle is a valid Sudoku.
    """

    images: np.ndarray
    symbols: np.ndarray
    valid: np.ndarray


def _corrupt(
    images: np.ndarray, symbols: np.ndarray, by_class: dict[int, np.ndarray], rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    while True:
        img, sym = images.copy(), symbols.copy()
        while True:
            if rng.random() < 0.5:  # replacement: a random cell gets an image of another class
                r, c = rng.integers(0, 4, size=2)
                new = int(rng.choice([k for k in range(4) if k != sym[r, c]]))
                img[r, c], sym[r, c] = rng.choice(by_class[new]), new
            else:  # substitution: two cells of the puzzle swap
                a, b = rng.choice(16, size=2, replace=False)
                (r1, c1), (r2, c2) = divmod(int(a), 4), divmod(int(b), 4)
                img[r1, c1], img[r2, c2] = img[r2, c2], img[r1, c1]
                sym[r1, c1], sym[r2, c2] = sym[r2, c2], sym[r1, c1]
            if rng.random() < 0.5:
                break
        if not is_valid(sym):
            return img, sym


def make_puzzles(
    labels: np.ndarray,
    n_valid: int,
    rng: np.random.Generator,
    *,
    n_unique: int | None = None,
    n_resampled: int = 0,
    exclude: np.ndarray | None = None,
) -> Puzzles:
    """``n_valid`` valid puzzles and one corrupted twin each (paper's generator).

    Args:
        labels: MNIST labels of the split to draw from (digits 0-3 are used).
        n_valid: Valid puzzles (each needs four images of each class).
        rng: Random generator.
        n_unique: Unique images (balanced per class; default ``16 * n_valid``).
        n_resampled: Extra images re-sampled with replacement from the unique ones (overlap variant).
        exclude: MNIST indexes not to use.
    """
    n_unique = 16 * n_valid if n_unique is None else n_unique
    pool = np.flatnonzero(labels < 4)
    if exclude is not None:
        pool = np.setdiff1d(pool, exclude)
    per_class = n_unique // 4
    chosen = {k: rng.choice(pool[labels[pool] == k], size=per_class, replace=False) for k in range(4)}
    extra = n_resampled // 4
    lists = {k: np.concatenate([v, rng.choice(v, size=extra, replace=True)]) for k, v in chosen.items()}
    for v in lists.values():
        rng.shuffle(v)
    layouts = valid_layouts()
    images, symbols, valid = [], [], []
    cursor = {k: 0 for k in range(4)}
    for _ in range(n_valid):
        layout = layouts[int(rng.integers(len(layouts)))]
        grid = np.empty((4, 4), dtype=np.int64)
        for k in range(4):
            cells = np.argwhere(layout == k)
            source = lists[k]
            picked = [source[(cursor[k] + i) % len(source)] for i in range(4)]
            cursor[k] += 4
            for (r, c), image in zip(cells, picked):
                grid[r, c] = image
        images.append(grid)
        symbols.append(layout.copy())
        valid.append(True)
        bad_img, bad_sym = _corrupt(grid, layout, lists, rng)
        images.append(bad_img)
        symbols.append(bad_sym)
        valid.append(False)
    return Puzzles(np.array(images), np.array(symbols), np.array(valid))


def sudoku_spec(n_puzzles: int, pinned: np.ndarray | None = None) -> ModelSpec:
    """The program for ``n_puzzles`` puzzles (ids ``p0``, ``p1``, ...).

    ``pinned`` gives the classes of the first row of puzzle ``p0`` (default 0, 1, 2, 3).

    Example:
        >>> sudoku_spec(2).predicate("Neural").neural.class_size
        4
    """
    pinned = np.arange(4) if pinned is None else np.asarray(pinned)
    cells = [(f"p{p}", str(x), str(y)) for p in range(n_puzzles) for x in range(4) for y in range(4)]
    first = [("p0", "0", str(y), str(k), 1.0 if k == pinned[y] else 0.0) for y in range(4) for k in range(4)]
    spec = ModelSpec.from_python(
        rules=RULES.read_text(),
        predicates={
            "Neural": PredicateSpec("Neural", 4, neural=NeuralSpec(4, [0, 1, 2])),
            "FirstPuzzle": PredicateSpec("FirstPuzzle", 4),
        },
        observations={"FirstPuzzle": first},
        targets={"Neural": [(*cell, str(k)) for cell in cells for k in range(4)]},
    )
    spec.rules = read_rules_file(RULES)
    spec.source = str(RULES)
    return spec


def distinguish_accuracy(predicted: np.ndarray, truth: np.ndarray) -> float:
    """Digit accuracy after the best one-to-one relabelling of the four predicted symbols.

    Example:
        >>> distinguish_accuracy(np.array([1, 0, 3, 2]), np.array([0, 1, 2, 3]))
        1.0
    """
    best = 0.0
    for perm in itertools.permutations(range(4)):
        best = max(best, float((np.asarray(perm)[predicted] == truth).mean()))
    return best


def entity_images(entities: Any, puzzles: Puzzles) -> np.ndarray:
    """MNIST indexes of the program's neural entities ``(p<i>, x, y)``, in entity order.

    Example:
        >>> import pandas as pd
        >>> p = Puzzles(np.arange(32).reshape(2, 4, 4), np.zeros((2, 4, 4), int), np.array([True, False]))
        >>> entity_images(pd.DataFrame({"arg0": ["p1"], "arg1": ["0"], "arg2": ["3"]}), p).tolist()
        [19]
    """
    index = entities["arg0"].str[1:].astype(int).to_numpy()
    return puzzles.images[index, entities["arg1"].astype(int).to_numpy(), entities["arg2"].astype(int).to_numpy()]


def puzzle_accuracy(symbol_predictions: np.ndarray, puzzles: Puzzles) -> float:
    """Accuracy of "valid iff the predicted symbols (``(n, 4, 4)``) satisfy every Sudoku rule".

    Example:
        >>> p = Puzzles(np.zeros((1, 4, 4), int), valid_layouts()[:1] * 1, np.array([True]))
        >>> puzzle_accuracy(np.array(valid_layouts()[:1]), p)
        1.0
    """
    predicted = np.array([is_valid(grid) for grid in symbol_predictions])
    return float((predicted == puzzles.valid).mean())


def puzzle_scores(probabilities: np.ndarray) -> np.ndarray:
    """How much each puzzle violates the Sudoku rules under the network's soft predictions.

    The sum over rows, columns and blocks and over symbols of ``(Σ p - 1)²``: the energy of the model's
    constraint rules for that puzzle (0 for a perfectly confident valid puzzle).

    Args:
        probabilities: ``(n, 4, 4, 4)``: puzzle, row, column, symbol.

    Example:
        >>> grid = np.eye(4)[valid_layouts()[0]][None]
        >>> float(puzzle_scores(grid)[0])
        0.0
    """
    p = np.asarray(probabilities, dtype=np.float64)
    rows = ((p.sum(axis=2) - 1) ** 2).sum(axis=(1, 2))
    cols = ((p.sum(axis=1) - 1) ** 2).sum(axis=(1, 2))
    blocks = sum(((p[:, r : r + 2, c : c + 2].sum(axis=(1, 2)) - 1) ** 2).sum(axis=1) for r, c in _BLOCKS)
    return rows + cols + blocks


def threshold_accuracy(scores: np.ndarray, valid: np.ndarray, threshold: float | None = None) -> tuple[float, float]:
    """Classify "valid iff score <= threshold".

    Without a threshold, pick the best one on these puzzles (do that on validation puzzles, then apply
    it to the test puzzles).

    Returns:
        (accuracy, threshold).

    Example:
        >>> threshold_accuracy(np.array([0.1, 2.0]), np.array([True, False]))
        (1.0, 0.1)
    """
    if threshold is None:
        candidates = np.unique(scores)
        accuracies = [float(((scores <= t) == valid).mean()) for t in candidates]
        threshold = float(candidates[int(np.argmax(accuracies))])
    return float(((scores <= threshold) == valid).mean()), float(threshold)
