"""MNIST-Add-N data (the A-NeSI protocol) and its NeuPSL model, built with ``ModelSpec.from_python``.

An addition is two N-digit numbers, one MNIST image per digit, labelled only by their sum. Its program has one
block per place (:file:`mnist-add-n.psl`): the two digits and the carry in make a latent total (0..19), whose
last digit is the label's digit at that place and whose tens digit is the carry into the next. The ground
program grows linearly in N and every addition is its own connected component, so training programs are
mini-batches of additions (:func:`pslbridge.batching.component_batches`).

Example:
    >>> labels = np.arange(40) % 10
    >>> data = make_additions_n(labels, np.arange(40), 2, np.random.default_rng(0))
    >>> data.n_additions, data.images.shape, data.sum_digits.shape  # 40 images, 4 per addition
    (10, (10, 2, 2), (10, 3))
    >>> spec = addition_n_spec(data.take(range(2)), phase="learn")
    >>> len(spec.tables("PlaceSum", "targets")[0])  # 2 additions x 2 places x 20 totals
    80
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pslbridge.model import ModelSpec, NeuralSpec, PredicateSpec

__all__ = [
    "FORMS",
    "AdditionsN",
    "abduced_places",
    "addition_n_spec",
    "carries",
    "carries_from_top",
    "helper_rows",
    "make_additions_n",
    "sum_digits",
]

_HERE = Path(__file__).resolve().parent
#: Rule files by form name: ``carry`` (one digit-pair rule per place) and ``pairs`` (with its two negated forms).
FORMS = {"carry": _HERE / "mnist-add-n.psl", "pairs": _HERE / "mnist-add-n-pairs.psl"}


def carries(numbers: np.ndarray) -> np.ndarray:
    """The carries of adding two numbers given as digit arrays: into each place, and out of the top one.

    Args:
        numbers: ``(n, 2, N)`` digits, ``numbers[k, i, p]`` the digit at place ``p`` (0 = ones) of number ``i``.

    Returns:
        ``(n, N + 1)`` carries, ``[:, p]`` the carry into place ``p`` (0 at the ones place, the final carry last).

    Example:
        >>> carries(np.array([[[9, 5], [3, 4]]])).tolist()  # 59 + 43: 9 + 3 carries 1, 5 + 4 + 1 carries 1
        [[0, 1, 1]]
    """
    n, _, places = numbers.shape
    out = np.zeros((n, places + 1), dtype=np.int64)
    for p in range(places):
        out[:, p + 1] = (numbers[:, 0, p] + numbers[:, 1, p] + out[:, p]) // 10
    return out


def sum_digits(numbers: np.ndarray) -> np.ndarray:
    """The digits of the sum of two numbers given as digit arrays, ones place first, with the final carry.

    Args:
        numbers: ``(n, 2, N)`` digits, ``numbers[k, i, p]`` the digit at place ``p`` (0 = ones) of number ``i``.

    Returns:
        ``(n, N + 1)`` digits of each sum, ones place first.

    Example:
        >>> sum_digits(np.array([[[9, 5], [3, 4]]])).tolist()  # 59 + 43 = 102 (ones first)
        [[2, 0, 1]]
    """
    carry = carries(numbers)
    return np.concatenate([(numbers[:, 0] + numbers[:, 1] + carry[:, :-1]) % 10, carry[:, -1:]], axis=1)


@dataclass(frozen=True)
class AdditionsN:
    """N-digit additions over a pool of images.

    Attributes:
        images: ``(n, 2, N)`` entity ids of the digit images, ones place first (entity ``e`` is ``pool[e]``).
        pool: MNIST indexes of the entities' images.
        digits: ``(n, 2, N)`` the true digits (for digit accuracy only; never a training label).
        sum_digits: ``(n, N + 1)`` the label: the sum's digits, ones place first.
        carry_in: ``(n,)`` each addition's observed carry into its ones place (``None``: all 0, a whole
            addition); :func:`abduced_places` makes one-place additions with a carry in.

    Example:
        >>> data = make_additions_n(np.arange(20) % 10, np.arange(20), 1, np.random.default_rng(0))
        >>> data.take([0, 1]).n_additions, data.places
        (2, 1)
    """

    images: np.ndarray
    pool: np.ndarray
    digits: np.ndarray
    sum_digits: np.ndarray
    carry_in: np.ndarray | None = None

    @property
    def n_additions(self) -> int:
        """Number of additions."""
        return int(self.images.shape[0])

    @property
    def places(self) -> int:
        """N, the digits of each number."""
        return int(self.images.shape[2])

    def take(self, rows: Iterable[int]) -> AdditionsN:
        """The additions at ``rows`` (same pool and entity ids)."""
        index = np.asarray(list(rows), dtype=np.int64)
        carry_in = None if self.carry_in is None else self.carry_in[index]
        return AdditionsN(self.images[index], self.pool, self.digits[index], self.sum_digits[index], carry_in)

    def correct_sums(self, predicted: np.ndarray) -> np.ndarray:
        """Whether each predicted ``(n, N + 1)`` sum-digit array is the whole sum."""
        return (np.asarray(predicted) == self.sum_digits).all(axis=1)


def make_additions_n(labels: np.ndarray, pool: np.ndarray, places: int, rng: np.random.Generator) -> AdditionsN:
    """Draw ``len(pool) // (2 N)`` additions from the images ``pool`` without replacement (A-NeSI's protocol).

    Args:
        labels: MNIST labels of the split the pool indexes.
        pool: MNIST indexes to draw from (each used at most once; leftovers are dropped).
        places: N.
        rng: Seeded generator.

    Example:
        >>> data = make_additions_n(np.arange(30) % 10, np.arange(30), 2, np.random.default_rng(1))
        >>> data.n_additions, len(set(data.pool[data.images.ravel()].tolist()))  # 28 distinct images
        (7, 28)
    """
    if places < 1:
        raise ValueError(f"places must be >= 1, got {places}")
    count = len(pool) // (2 * places)
    chosen = rng.permutation(np.asarray(pool))[: count * 2 * places]
    images = np.arange(count * 2 * places, dtype=np.int64).reshape(count, 2, places)
    digits = np.asarray(labels)[chosen][images].astype(np.int64)
    return AdditionsN(images, chosen, digits, sum_digits(digits))


def carries_from_top(numbers: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The carries a sum's digits imply, read from its top place down, and how far down they stay possible.

    From the label's final carry down, the carry into place ``p`` is what the label's digit at ``p`` and the
    carry out of ``p`` leave once the two digits are taken away; it is possible while it is 0 or 1 (0 at the
    ones place) at ``p`` and at every place above.

    Args:
        numbers: ``(n, 2, N)`` digits, ones place first.
        labels: ``(n, N + 1)`` the sums' digits, ones place first.

    Returns:
        ``possible`` ``(n, N)``, whether the carries into places ``p..N-1`` are all possible, and ``carry``
        ``(n, N + 1)``, the implied carry into each place (meaningful where possible; the final carry last).

    Example:
        >>> possible, carry = carries_from_top(np.array([[[9, 5], [3, 4]]]), np.array([[2, 0, 1]]))  # 59 + 43
        >>> possible.tolist(), carry.tolist()
        ([[True, True]], [[0, 1, 1]])
        >>> carries_from_top(np.array([[[8, 5], [3, 4]]]), np.array([[2, 0, 1]]))[0].tolist()  # 58 + 43 != 102
        [[False, True]]
    """
    n, _, places = numbers.shape
    carry = np.zeros((n, places + 1), dtype=np.int64)
    carry[:, places] = labels[:, places]
    possible = np.zeros((n, places), dtype=bool)
    ok = np.ones(n, dtype=bool)
    for p in range(places - 1, -1, -1):
        carry[:, p] = labels[:, p] + 10 * carry[:, p + 1] - numbers[:, 0, p] - numbers[:, 1, p]
        ok &= (carry[:, p] == 0) | ((carry[:, p] == 1) & (p > 0))
        possible[:, p] = ok
    return possible, carry


def abduced_places(
    data: AdditionsN, predicted: np.ndarray, *, from_top: bool = False, between: bool = False
) -> AdditionsN:
    """One-place additions for the places whose carries the network's digits settle, consistently with the label.

    The network's digits (``predicted``, shaped like ``data.digits``) are added exactly; where their sum agrees
    with the label at every place from the ones place up to place ``p + 1`` (the final carry for the top place),
    place ``p`` becomes a one-place addition: its two images, the label's digit at ``p``, and as carry in and
    carry out the carries the network's digits give (abduced, never read from the true digits). The middle
    places, whose carries an addition's label leaves latent, are so trained like the ones place. With
    ``from_top``, a place is also kept where the carries read from the label's top down
    (:func:`carries_from_top`) stay possible down to the place below it (to the ones place for the ones place),
    with those carries: a wrong digit then spoils only the places below it, not the whole addition (where both
    readings keep a place, their carries are the same). With ``between``, the lowest place where the sum
    disagrees with the label is also kept if its carry out is settled from the top (the carries read from the
    top stay possible down to the place above it): its carry in is the network's from below, where the sum
    agrees, and with the label's digit these fix its total although the network's two digits there do not make
    it. Its neighbours, which neither reading keeps when it is wrong, are kept too: the place below with the
    carries from below, the place above with those from the top. Where one digit of an addition is wrong,
    every place is so kept, the wrong digit's with its true total.

    Args:
        data: The additions.
        predicted: ``(n, 2, N)`` the network's digits of ``data.images``.
        from_top: Also keep the places settled from the top down.
        between: Also keep the lowest disagreeing place where the top settles its carry out, and its neighbours.

    Returns:
        One-place :class:`AdditionsN` (same pool; ``digits`` the true ones, for accuracy only), ``carry_in`` set.

    Example:
        >>> data = make_additions_n(np.arange(8) % 10, np.arange(8), 2, np.random.default_rng(9))
        >>> data.digits.tolist(), data.sum_digits.tolist()  # 73 + 25 = 98 and 04 + 16 = 20 (ones place first)
        ([[[3, 7], [5, 2]], [[4, 0], [6, 1]]], [[8, 9, 0], [0, 2, 0]])
        >>> guess = data.digits.copy()
        >>> guess[0, 0, 1] = 2  # 23 + 25 = 48: the first sum disagrees at place 1, so none of its places is kept
        >>> places = abduced_places(data, guess)
        >>> places.n_additions, places.images[:, :, 0].tolist(), places.carry_in.tolist()
        (2, [[4, 6], [5, 7]], [0, 1])
        >>> places.sum_digits.tolist()  # the label's digit, the abduced carry out
        [[0, 1], [2, 0]]
        >>> digits = np.array([[[3, 2, 1], [6, 5, 4]]])  # 123 + 456 = 579 (ones place first)
        >>> data = AdditionsN(np.arange(6).reshape(1, 2, 3), np.arange(6), digits, sum_digits(digits))
        >>> guess = digits.copy()
        >>> guess[0, 0, 0] = 4  # 124 + 456 = 580: no place agrees from the ones place up
        >>> abduced_places(data, guess).n_additions
        0
        >>> top = abduced_places(data, guess, from_top=True)  # from the top, 1 + 4 = 5 settles place 2
        >>> top.images[:, :, 0].tolist(), top.carry_in.tolist(), top.sum_digits.tolist()
        ([[2, 5]], [0], [[5, 0]])
        >>> guess = digits.copy()
        >>> guess[0, 1, 1] = 9  # 123 + 496 = 619: only place 1 is wrong, and neither reading keeps a place
        >>> abduced_places(data, guess, from_top=True).n_additions
        0
        >>> mid = abduced_places(data, guess, between=True)  # place 1: carry in 0 (3 + 6), out 0 (5 - 1 - 4)
        >>> mid.images[:, :, 0].tolist(), mid.carry_in.tolist(), mid.sum_digits.tolist()  # total 7 at place 1
        ([[0, 3], [1, 4], [2, 5]], [0, 0, 0], [[9, 0], [7, 0], [5, 0]])
    """
    predicted = np.asarray(predicted)
    agrees = np.cumprod(sum_digits(predicted) == data.sum_digits, axis=1).astype(bool)  # places 0..q all agree
    keep, carry = agrees[:, 1:], carries(predicted)  # place p is kept when places 0..p+1 agree
    carry_in, carry_out = carry[:, :-1], carry[:, 1:]
    possible, top_carry = carries_from_top(predicted, data.sum_digits)
    if from_top:
        below = np.concatenate([possible[:, :1], possible[:, :-1]], axis=1)  # possible down to the place below
        carry_in = np.where(keep, carry_in, top_carry[:, :-1])
        carry_out = np.where(keep, carry_out, top_carry[:, 1:])
        keep = keep | below
    if between:
        n = data.n_additions
        under = np.concatenate([np.ones((n, 1), dtype=bool), agrees[:, :-2]], axis=1)  # places 0..p-1 agree
        over = np.concatenate([possible[:, 1:], np.ones((n, 1), dtype=bool)], axis=1)  # possible down to p + 1
        pair = data.sum_digits[:, :-1] + 10 * top_carry[:, 1:] - carry[:, :-1]  # what the two digits must make
        both = under & ~agrees[:, :-1] & over & (pair >= 0) & (pair <= 18) & ~keep  # the lowest disagreeing
        lower = np.concatenate([both[:, 1:], np.zeros((n, 1), dtype=bool)], axis=1) & ~keep
        upper = np.concatenate([np.zeros((n, 1), dtype=bool), both[:, :-1]], axis=1) & ~keep
        carry_in = np.where(both | lower, carry[:, :-1], np.where(upper, top_carry[:, :-1], carry_in))
        carry_out = np.where(lower, carry[:, 1:], np.where(both | upper, top_carry[:, 1:], carry_out))
        keep = keep | both | lower | upper
    adds, places = np.nonzero(keep)
    return AdditionsN(
        data.images[adds, :, places][:, :, None],
        data.pool,
        data.digits[adds, :, places][:, :, None],
        np.stack([data.sum_digits[adds, places], carry_out[adds, places]], axis=1),
        carry_in[adds, places],
    )


def helper_rows() -> dict[str, list[tuple[int, ...]]]:
    """The value tables every program shares: totals of two digits and a carry, and a total's digit and carry.

    Example:
        >>> rows = helper_rows()
        >>> len(rows["Add3"]), (13, 3) in rows["TotalDigit"], (13, 1) in rows["TotalCarry"], len(rows["CanMake"])
        (200, True, True, 110)
    """
    add3 = [(x, y, c, x + y + c) for x in range(10) for y in range(10) for c in (0, 1)]
    can_make = sorted({(x, z) for x, _, _, z in add3})
    return {
        "Add3": add3,
        "TotalDigit": [(z, z % 10) for z in range(20)],
        "TotalCarry": [(z, z // 10) for z in range(20)],
        "CanMake": can_make,
    }


def addition_n_spec(
    data: AdditionsN,
    *,
    labelled: bool = True,
    phase: str = "learn",
    form: str = "carry",
    places: Iterable[int] | None = None,
    label_totals: bool = False,
    label_carry_in: bool = False,
) -> ModelSpec:
    """The NeuPSL program of ``data``: place blocks with latent totals and carries.

    Args:
        data: The additions.
        labelled: Give the sums' digits as truth (training); otherwise they are inferred (test).
        phase: ``"learn"`` or ``"infer"``.
        form: A key of :data:`FORMS`.
        places: Only these places of every addition (default: all). A kept place's carry in is observed only at
            the ones place and its carry out is labelled only at the top place; elsewhere both are latent, so a
            window of places is trained on exactly what the sum says about it.
        label_totals: One-place additions with a carry in (:func:`abduced_places`) only: label each place's
            total too, ``Z = digit + 10 * carry out``, which the label's digit, the carry out and the hard
            constraints already fix. No target is then latent, so a learning step reads the energy and its
            gradient at the labels without a solve: the latent program's values at its exact MAP state, where
            the capped reasoner only approaches it.
        label_carry_in: With ``label_totals``: the carry in is a labelled target instead of an observation. A
            learning step reads the same energy and gradient (no target is latent), and every label can then
            be given new values in place (:meth:`pslbridge.Bridge.set_labels`): one ground program serves any
            one-place additions of its size (:class:`~experiments.mnist_add_n.relabelled.RelabelledPlaces`).

    Raises:
        ValueError: ``form`` is not a key of :data:`FORMS`, ``places`` is empty or outside ``0..N-1``, or
            ``label_totals`` without labels, on more than one place or without a carry in, or
            ``label_carry_in`` without ``label_totals``.

    Example:
        >>> data = make_additions_n(np.arange(8) % 10, np.arange(8), 2, np.random.default_rng(0))
        >>> spec = addition_n_spec(data, labelled=False, phase="infer")
        >>> len(spec.tables("SumDigit", "targets")[0]), len(spec.tables("Carry", "targets")[0])  # 2x2x10, 2x2x2
        (40, 8)
        >>> top = addition_n_spec(data, places=[1])  # the top place: carry in latent, carry out labelled
        >>> len(top.tables("Carry", "targets")[0]), len(top.tables("Carry", "truth")[0])  # carries 1 and 2
        (8, 4)
    """
    if form not in FORMS:
        raise ValueError(f"unknown MNIST-Add-N form {form!r}; choose one of {sorted(FORMS)}")
    n, top = data.n_additions, data.places
    kept = sorted(set(range(top) if places is None else (int(p) for p in places)))
    if not kept or kept[0] < 0 or kept[-1] >= top:
        raise ValueError(f"places must be a non-empty subset of 0..{top - 1}, got {kept}")
    if label_totals and (not labelled or top != 1 or data.carry_in is None):
        raise ValueError(
            "label_totals needs labelled one-place additions with a carry in (abduced_places), got "
            f"{top} place(s), labelled={labelled}, carry_in {'set' if data.carry_in is not None else 'None'}"
        )
    if label_carry_in and not label_totals:
        raise ValueError("label_carry_in needs label_totals (every other target labelled too)")
    carries = sorted({c for p in kept for c in (p, p + 1)})
    carry_in = np.zeros(n, dtype=np.int64) if data.carry_in is None else data.carry_in
    ints = ["UniqueIntID"]
    helpers = {**helper_rows(), "Next": [(p, p + 1) for p in kept]}
    preds = {
        "Neural": PredicateSpec("Neural", 2, ints * 2, neural=NeuralSpec(10, [0])),
        "Place": PredicateSpec("Place", 4, ints * 4),
        "Carry": PredicateSpec("Carry", 3, ints * 3),
        "PlaceSum": PredicateSpec("PlaceSum", 3, ints * 3),
        "SumDigit": PredicateSpec("SumDigit", 3, ints * 3),
        **{name: PredicateSpec(name, len(rows[0]), ints * len(rows[0])) for name, rows in helpers.items()},
    }
    adds = range(n)
    place_rows = [(a, p, int(data.images[a, 0, p]), int(data.images[a, 1, p])) for a in adds for p in kept]
    sum_rows = [(a, p, d) for a in adds for p in kept for d in range(10)]
    carry_rows = [(a, p, c) for a in adds for p in carries if p > 0 for c in (0, 1)]
    truth = None
    if labelled:
        labels = data.sum_digits
        truth = {
            "SumDigit": [(a, p, d, float(labels[a, p] == d)) for a, p, d in sum_rows],
            "Carry": [(a, p, c, float(labels[a, p] == c)) for a, p, c in carry_rows if p == top],
        }
        if label_totals:  # one place (p = 0): the total is the label's digit plus ten times the carry out
            totals = labels[:, 0] + 10 * labels[:, 1]
            truth["PlaceSum"] = [(a, 0, z, float(totals[a] == z)) for a in adds for z in range(20)]
    carry_in_rows = [(a, 0, c, float(c == carry_in[a])) for a in adds for c in (0, 1)] if kept[0] == 0 else []
    if label_carry_in:
        assert truth is not None
        truth["Carry"] += carry_in_rows
        carry_rows += [row[:3] for row in carry_in_rows]
    entities = sorted({i for _, _, i1, i2 in place_rows for i in (i1, i2)})
    spec = ModelSpec.from_python(
        rules=FORMS[form].read_text(),
        predicates=preds,
        observations={
            "Place": place_rows,
            **({"Carry": carry_in_rows} if carry_in_rows and not label_carry_in else {}),
            **helpers,
        },
        targets={
            "Neural": [(e, d) for e in entities for d in range(10)],
            "PlaceSum": [(a, p, z) for a in adds for p in kept for z in range(20)],
            "SumDigit": sum_rows,
            "Carry": carry_rows,
        },
        truth=truth,
    )
    spec.phase = phase
    return spec
