"""MNIST-Addition models as PSL programs (data tables built in memory).

The symbolic model is ``models/mnist-addition/mnist-add1.psl``. Images are identified
by integers; the network's predictions go into the neural predicate ``Neural``.

Example:
    >>> spec = add1_spec([(0, 1), (2, 3)], sums=[7, 12])
    >>> len(spec.tables("ImageSum", "targets")[0])
    38
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..model_files import ModelSpec, NeuralSpec, PredicateSpec, read_rules_file

__all__ = [
    "ADD1_RULES",
    "ADD2_RULES",
    "add1_spec",
    "add2_spec",
    "digit_sum_rows",
    "place_rows",
    "possible_digit_rows",
]

_MODELS = Path(__file__).resolve().parent.parent.parent / "models" / "mnist-addition"
ADD1_RULES = _MODELS / "mnist-add1.psl"
ADD2_RULES = _MODELS / "mnist-add2.psl"


def digit_sum_rows() -> list[tuple[int, int, int]]:
    """``DigitSum(X, Y, Z)`` rows: every pair of digits and their sum.

    Example:
        >>> len(digit_sum_rows())
        100
    """
    return [(x, y, x + y) for x in range(10) for y in range(10)]


def possible_digit_rows() -> list[tuple[int, int]]:
    """``PossibleDigits(X, Z)`` rows: digit X can be part of a sum Z of two digits.

    Example:
        >>> (9, 0) in possible_digit_rows(), (9, 17) in possible_digit_rows()
        (False, True)
    """
    return [(x, z) for z in range(19) for x in range(10) if 0 <= z - x <= 9]


def add1_spec(
    pairs: Sequence[tuple[int, int]],
    sums: Sequence[int] | None = None,
    *,
    phase: str = "infer",
    options: dict[str, str] | None = None,
) -> ModelSpec:
    """Build the MNIST-Add1 program for image pairs.

    Args:
        pairs: ``(image1, image2)`` ids per addition.
        sums: Labels (the sum of each addition) for the truth partition, or None.
        phase: ``"infer"`` or ``"learn"``.
        options: PSL options.

    Returns:
        The model; ``Neural`` has one entity per distinct image, in first-appearance order.

    Example:
        >>> add1_spec([(0, 1)]).predicate("ImageSum").arity
        3
    """
    pairs_arr = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    images = list(dict.fromkeys(pairs_arr.ravel().tolist()))
    ints = ["UniqueIntID"]
    preds = {
        "Neural": PredicateSpec("Neural", 2, ints * 2, neural=NeuralSpec(10, [0])),
        "ImageSum": PredicateSpec("ImageSum", 3, ints * 3),
        "ImageSumBlock": PredicateSpec("ImageSumBlock", 2, ints * 2),
        "DigitSum": PredicateSpec("DigitSum", 3, ints * 3),
        "PossibleDigits": PredicateSpec("PossibleDigits", 2, ints * 2),
    }
    neural_targets = [(img, d) for img in images for d in range(10)]
    targets = [(a, b, z) for a, b in pairs_arr.tolist() for z in range(19)]
    truth = None
    if sums is not None:
        sums_arr = np.asarray(sums, dtype=np.int64)
        truth = {
            "ImageSum": [
                (a, b, z, 1.0 if z == s else 0.0)
                for (a, b), s in zip(pairs_arr.tolist(), sums_arr.tolist())
                for z in range(19)
            ]
        }
    spec = ModelSpec.from_python(
        rules=ADD1_RULES.read_text(),
        predicates=preds,
        observations={
            "ImageSumBlock": [tuple(p) for p in pairs_arr.tolist()],
            "DigitSum": digit_sum_rows(),
            "PossibleDigits": possible_digit_rows(),
        },
        targets={"Neural": neural_targets, "ImageSum": targets},
        truth=truth,
        options=options,
    )
    spec.rules = read_rules_file(ADD1_RULES)
    spec.phase = phase
    spec.source = str(ADD1_RULES)
    return spec


def place_rows() -> dict[str, list[tuple[int, ...]]]:
    """Helper relations of MNIST-Add2 (tens digit sum Z10, ones digit sum Z1, total Z = 10·Z10 + Z1).

    Returns:
        ``PlaceNumberSum(Z10, Z1, Z)``, ``PossibleTensDigits(X, Z)``, ``PossibleOnesDigits(X, Z)``,
        ``PossibleTensSums(Z10, Z)`` and ``PossibleOnesSums(Z1, Z)`` rows.

    Example:
        >>> rows = place_rows()
        >>> len(rows["PlaceNumberSum"]), (1, 198) in rows["PossibleTensDigits"]
        (361, False)
    """
    place = [(z10, z1, 10 * z10 + z1) for z10 in range(19) for z1 in range(19)]
    tens_sums = sorted({(z10, z) for z10, _, z in place})
    ones_sums = sorted({(z1, z) for _, z1, z in place})
    tens_digits = sorted({(x, z) for z10, z in tens_sums for x in range(10) if 0 <= z10 - x <= 9})
    ones_digits = sorted({(x, z) for z1, z in ones_sums for x in range(10) if 0 <= z1 - x <= 9})
    return {
        "PlaceNumberSum": place,
        "PossibleTensDigits": tens_digits,
        "PossibleOnesDigits": ones_digits,
        "PossibleTensSums": tens_sums,
        "PossibleOnesSums": ones_sums,
    }


def add2_spec(
    quads: Sequence[tuple[int, int, int, int]],
    sums: Sequence[int | None] | None = None,
    *,
    phase: str = "infer",
    options: dict[str, str] | None = None,
) -> ModelSpec:
    """Build the MNIST-Add2 program: numbers (img1 img2) + (img3 img4), img1/img3 the tens digits.

    Args:
        quads: ``(img1, img2, img3, img4)`` per addition.
        sums: Labels (0..198) per addition; ``None`` entries (or no list) leave an addition unlabelled.
        phase: ``"infer"`` or ``"learn"``.
        options: PSL options.

    Returns:
        The model; ``ImageDigitSum`` atoms are latent (never labelled).

    Example:
        >>> spec = add2_spec([(0, 1, 2, 3)], sums=[57])
        >>> len(spec.tables("Sum", "targets")[0]), len(spec.tables("ImageDigitSum", "targets")[0])
        (199, 38)
    """
    quads_arr = np.asarray(quads, dtype=np.int64).reshape(-1, 4)
    images = list(dict.fromkeys(quads_arr.ravel().tolist()))
    ints = ["UniqueIntID"]
    helpers = place_rows()
    preds = {
        "Neural": PredicateSpec("Neural", 2, ints * 2, neural=NeuralSpec(10, [0])),
        "Sum": PredicateSpec("Sum", 5, ints * 5),
        "ImageDigitSum": PredicateSpec("ImageDigitSum", 3, ints * 3),
        "SumBlock": PredicateSpec("SumBlock", 4, ints * 4),
        "DigitSum": PredicateSpec("DigitSum", 3, ints * 3),
        "PossibleDigits": PredicateSpec("PossibleDigits", 2, ints * 2),
        **{name: PredicateSpec(name, len(rows[0]), ints * len(rows[0])) for name, rows in helpers.items()},
    }
    pairs = list(
        dict.fromkeys([(a, c) for a, _, c, _ in quads_arr.tolist()] + [(b, d) for _, b, _, d in quads_arr.tolist()])
    )
    truth = None
    if sums is not None:
        truth = {
            "Sum": [
                (*q, z, 1.0 if z == s else 0.0)
                for q, s in zip(quads_arr.tolist(), sums)
                if s is not None
                for z in range(199)
            ]
        }
    spec = ModelSpec.from_python(
        rules=ADD2_RULES.read_text(),
        predicates=preds,
        observations={
            "SumBlock": [tuple(q) for q in quads_arr.tolist()],
            "DigitSum": digit_sum_rows(),
            "PossibleDigits": possible_digit_rows(),
            **helpers,
        },
        targets={
            "Neural": [(img, d) for img in images for d in range(10)],
            "Sum": [(*q, z) for q in quads_arr.tolist() for z in range(199)],
            "ImageDigitSum": [(a, b, z) for a, b in pairs for z in range(19)],
        },
        truth=truth,
        options=options,
    )
    spec.rules = read_rules_file(ADD2_RULES)
    spec.phase = phase
    spec.source = str(ADD2_RULES)
    return spec
