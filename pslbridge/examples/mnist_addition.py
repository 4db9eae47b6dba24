"""MNIST-Addition models as PSL programs (data tables built in memory).

The symbolic models are the ``.psl`` files in ``pslbridge/examples/rules/`` (shipped with the package). Images
are identified by integers; the network's predictions go into the neural predicate ``Neural``.

Examples:
    >>> spec = add1_spec([(0, 1), (2, 3)], sums=[7, 12])
    >>> len(spec.tables("ImageSum", "targets")[0])
    38
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..model import ModelSpec, NeuralSpec, PredicateSpec, read_rules_file

__all__ = [
    "AdditionSet",
    "addition_spec",
    "lenet",
    "make_additions",
    "prepare_images",
    "sample_images",
    "ADD1_MODELS",
    "ADD1_RULES",
    "ADD2_RULES",
    "add1_spec",
    "add2_spec",
    "digit_sum_rows",
    "place_rows",
    "possible_digit_rows",
]

_MODELS = Path(__file__).resolve().parent / "rules"
ADD1_RULES = _MODELS / "mnist-add1.psl"
ADD1_NEUPSL_RULES = _MODELS / "mnist-add1-neupsl.psl"
ADD2_RULES = _MODELS / "mnist-add2.psl"
ADD2_NEUPSL_RULES = _MODELS / "mnist-add2-neupsl.psl"

#: MNIST-Add2 rule files by name: the paper figure, or the NeuPSL authors' experiment form
#: (linear constraint hinges and a class-balance prior).
ADD2_MODELS = {"figure": ADD2_RULES, "neupsl": ADD2_NEUPSL_RULES}
#: MNIST-Add1 rule files by name, likewise.
ADD1_MODELS = {"figure": ADD1_RULES, "neupsl": ADD1_NEUPSL_RULES}


def digit_sum_rows() -> list[tuple[int, int, int]]:
    """``DigitSum(X, Y, Z)`` rows: every pair of digits and their sum.

    Examples:
        >>> len(digit_sum_rows())
        100
    """
    return [(x, y, x + y) for x in range(10) for y in range(10)]


def possible_digit_rows() -> list[tuple[int, int]]:
    """``PossibleDigits(X, Z)`` rows: digit X can be part of a sum Z of two digits.

    Examples:
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
    model: str = "figure",
) -> ModelSpec:
    """Build the MNIST-Add1 program for image pairs.

    Args:
        pairs: ``(image1, image2)`` ids per addition.
        sums: Labels (the sum of each addition) for the truth partition, or None.
        phase: ``"infer"`` or ``"learn"``.
        options: PSL options.
        model: ``"figure"`` (the paper figure's rules) or ``"neupsl"`` (the NeuPSL authors' experiment form).

    Returns:
        The model; ``Neural`` has one entity per distinct image, in first-appearance order.

    Examples:
        >>> add1_spec([(0, 1)]).predicate("ImageSum").arity
        3
    """
    if model not in ADD1_MODELS:
        raise ValueError(f"unknown MNIST-Add1 model {model!r}; choose one of {sorted(ADD1_MODELS)}")
    pairs_arr = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    return _addition_program(
        ADD1_MODELS[model],
        pairs_arr,
        sums,
        "ImageSum",
        "ImageSumBlock",
        19,
        latent={},
        helpers={},
        phase=phase,
        options=options,
    )


def _addition_program(
    rules: Path,
    groups: np.ndarray,
    sums: Sequence[int | None] | None,
    sum_name: str,
    block_name: str,
    n_sums: int,
    *,
    latent: dict[str, list[tuple[int, ...]]],
    helpers: dict[str, list[tuple[int, ...]]],
    phase: str,
    options: dict[str, str] | None,
) -> ModelSpec:
    """The program shared by Add1 and Add2: neural digits, blocked sums (one-hot truth), helper relations."""
    images = list(dict.fromkeys(groups.ravel().tolist()))
    width = groups.shape[1]
    ints = ["UniqueIntID"]
    preds = {
        "Neural": PredicateSpec("Neural", 2, ints * 2, neural=NeuralSpec(10, [0])),
        sum_name: PredicateSpec(sum_name, width + 1, ints * (width + 1)),
        block_name: PredicateSpec(block_name, width, ints * width),
        **{name: PredicateSpec(name, len(rows[0]), ints * len(rows[0])) for name, rows in latent.items()},
        **{
            name: PredicateSpec(name, len(rows[0]), ints * len(rows[0]))
            for name, rows in {"DigitSum": digit_sum_rows(), "PossibleDigits": possible_digit_rows(), **helpers}.items()
        },
    }
    truth = None
    if sums is not None:
        truth = {
            sum_name: [
                (*g, z, 1.0 if z == s else 0.0)
                for g, s in zip(groups.tolist(), sums)
                if s is not None
                for z in range(n_sums)
            ]
        }
    spec = ModelSpec.from_python(
        rules=rules.read_text(),
        predicates=preds,
        observations={
            block_name: [tuple(g) for g in groups.tolist()],
            "DigitSum": digit_sum_rows(),
            "PossibleDigits": possible_digit_rows(),
            **helpers,
        },
        targets={
            "Neural": [(img, d) for img in images for d in range(10)],
            sum_name: [(*g, z) for g in groups.tolist() for z in range(n_sums)],
            **latent,
        },
        truth=truth,
        options=options,
    )
    spec.rules = read_rules_file(rules)
    spec.phase = phase
    spec.source = str(rules)
    return spec


def place_rows() -> dict[str, list[tuple[int, ...]]]:
    """Helper relations of MNIST-Add2 (tens digit sum Z10, ones digit sum Z1, total Z = 10·Z10 + Z1).

    Returns:
        ``PlaceNumberSum(Z10, Z1, Z)``, ``PossibleTensDigits(X, Z)``, ``PossibleOnesDigits(X, Z)``,
        ``PossibleTensSums(Z10, Z)`` and ``PossibleOnesSums(Z1, Z)`` rows.

    Examples:
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
    model: str = "figure",
) -> ModelSpec:
    """Build the MNIST-Add2 program: numbers (img1 img2) + (img3 img4), img1/img3 the tens digits.

    Args:
        quads: ``(img1, img2, img3, img4)`` per addition.
        sums: Labels (0..198) per addition; ``None`` entries (or no list) leave an addition unlabelled.
        phase: ``"infer"`` or ``"learn"``.
        options: PSL options.
        model: ``"figure"`` (``mnist-add2.psl``, the paper figure) or ``"neupsl"``
            (``mnist-add2-neupsl.psl``, the authors' experiment form); see :data:`ADD2_MODELS`.

    Raises:
        ValueError: ``model`` is not a key of :data:`ADD2_MODELS`.

    Returns:
        The model; ``ImageDigitSum`` atoms are latent (never labelled).

    Examples:
        >>> spec = add2_spec([(0, 1, 2, 3)], sums=[57])
        >>> len(spec.tables("Sum", "targets")[0]), len(spec.tables("ImageDigitSum", "targets")[0])
        (199, 38)
    """
    if model not in ADD2_MODELS:
        raise ValueError(f"unknown MNIST-Add2 model {model!r}; choose one of {sorted(ADD2_MODELS)}")
    quads_arr = np.asarray(quads, dtype=np.int64).reshape(-1, 4)
    places = [(a, c) for a, _, c, _ in quads_arr.tolist()] + [(b, d) for _, b, _, d in quads_arr.tolist()]
    latent = {"ImageDigitSum": [(a, b, z) for a, b in dict.fromkeys(places) for z in range(19)]}
    return _addition_program(
        ADD2_MODELS[model],
        quads_arr,
        sums,
        "Sum",
        "SumBlock",
        199,
        latent=latent,
        helpers=place_rows(),
        phase=phase,
        options=options,
    )


# --- data sets (paper appendix "Dataset Details") ---------------------------------------------


def sample_images(
    labels: np.ndarray, n_unique: int, n_resampled: int, rng: np.random.Generator, exclude: np.ndarray | None = None
) -> np.ndarray:
    """Pick image ids: ``n_unique`` distinct images plus ``n_resampled`` re-drawn from them.

    The re-drawn ones are sampled with replacement and shuffled in (the overlap variant;
    ``n_resampled=0`` is the plain one).

    Examples:
        >>> ids = sample_images(np.arange(100) % 10, 40, 20, np.random.default_rng(0))
        >>> len(ids), len(set(ids.tolist()))
        (60, 40)
    """
    pool = np.arange(len(labels))
    if exclude is not None and len(exclude):
        pool = np.setdiff1d(pool, exclude)
    if n_unique > len(pool):
        raise ValueError(f"asked for {n_unique} images, only {len(pool)} available")
    unique = rng.choice(pool, size=n_unique, replace=False)
    extra = rng.choice(unique, size=n_resampled, replace=True) if n_resampled else np.empty(0, dtype=np.int64)
    ids = np.concatenate([unique, extra])
    rng.shuffle(ids)
    return ids


@dataclass
class AdditionSet:
    """Additions built from MNIST images.

    Attributes:
        image_ids: MNIST indexes of the images used (entity ``i`` of the program is ``image_ids[i]``
            only through :attr:`groups`).
        groups: ``(n_additions, 2 * digits)`` array of positions into ``image_ids``:
            ``(a, b)`` for Add1, ``(a1, a2, b1, b2)`` (tens first) for Add2.
        sums: The label of each addition.
        digits: 1 or 2.

    Examples:
        >>> s = make_additions(np.arange(40) % 10, 1, 20, np.random.default_rng(0))
        >>> s.groups.shape, int(s.sums[0]) == int(sum((np.arange(40) % 10)[s.image_ids[s.groups[0]]]))
        ((10, 2), True)
    """

    image_ids: np.ndarray
    groups: np.ndarray
    sums: np.ndarray
    digits: int

    @property
    def n_additions(self) -> int:
        """Number of additions."""
        return int(self.groups.shape[0])

    def digit_sums(self, digits: np.ndarray) -> np.ndarray:
        """The sum of each addition composed from one digit per image (``digits[k]``: the digit of ``image_ids[k]``).

        Examples:
            >>> labels = np.array([1, 2, 3, 4])  # 12 + 34
            >>> s = make_additions(labels, 2, 4, np.random.default_rng(0))
            >>> s.digit_sums(labels[s.image_ids]).tolist() == s.sums.tolist()
            True
        """
        place = 10 ** np.arange(self.digits - 1, -1, -1)
        numbers = digits[self.groups].reshape(len(self.groups), 2, self.digits)
        return (numbers * place).sum(axis=(1, 2))

    def batches(self, n: int) -> list[AdditionSet]:
        """Split into ``n`` consecutive batches of additions (sizes differ by at most one).

        Each batch is a self-contained :class:`AdditionSet` (its groups index its own
        ``image_ids``), so it gets its own ground program: a mini-batch of the training
        program's connected components.

        Raises:
            ValueError: ``n`` is not between 1 and the number of additions.

        Examples:
            >>> s = make_additions(np.arange(40) % 10, 1, 20, np.random.default_rng(0))
            >>> [b.n_additions for b in s.batches(3)], s.batches(3)[1].groups[0].tolist()
            ([4, 3, 3], [0, 1])
        """
        if not 1 <= n <= self.n_additions:
            raise ValueError(f"batches must be between 1 and {self.n_additions} (the additions); got {n}")
        per = self.groups.shape[1]
        out = []
        for chunk in np.array_split(np.arange(self.n_additions), n):
            lo, hi = int(chunk[0]), int(chunk[-1]) + 1
            groups = self.groups[lo:hi]
            first, last = int(groups.min()), int(groups.max()) + 1
            if last - first != (hi - lo) * per:
                raise ValueError("batches need the additions' images in order (as make_additions builds them)")
            out.append(AdditionSet(self.image_ids[first:last], groups - first, self.sums[lo:hi], self.digits))
        return out


def make_additions(
    labels: np.ndarray,
    digits: int,
    n_images: int,
    rng: np.random.Generator,
    *,
    n_resampled: int = 0,
    exclude: np.ndarray | None = None,
) -> AdditionSet:
    """Shuffle a list of images and partition it in order into additions (paper's generator).

    Args:
        labels: MNIST labels of the split to draw from.
        digits: 1 (Add1) or 2 (Add2).
        n_images: Unique images to draw.
        rng: Random generator (seeded by the caller).
        n_resampled: Extra images re-sampled with replacement from the unique ones (overlap variant).
        exclude: MNIST indexes not to use (e.g. the test images when drawing validation).

    Returns:
        The additions; leftover images that do not fill an addition are dropped.

    Examples:
        >>> labels = np.arange(100) % 10  # stand-ins for MNIST labels
        >>> additions = make_additions(labels, 1, 10, np.random.default_rng(0))
        >>> additions.n_additions, additions.groups[0].tolist()
        (5, [0, 1])
        >>> bool((labels[additions.image_ids[additions.groups]].sum(1) == additions.sums).all())
        True
    """
    if digits not in (1, 2):
        raise ValueError("digits must be 1 or 2")
    ids = sample_images(labels, n_images, n_resampled, rng, exclude)
    per = 2 * digits
    n_add = len(ids) // per
    ids = ids[: n_add * per]
    groups = np.arange(n_add * per).reshape(n_add, per)
    values = labels[ids].astype(np.int64)
    if digits == 1:
        sums = values[groups[:, 0]] + values[groups[:, 1]]
    else:
        sums = 10 * values[groups[:, 0]] + values[groups[:, 1]] + 10 * values[groups[:, 2]] + values[groups[:, 3]]
    # Entities are positions in the list, so a re-sampled image is its own entity.
    return AdditionSet(ids, groups, sums, digits)


def addition_spec(
    additions: AdditionSet,
    *,
    labelled: bool = True,
    phase: str = "learn",
    options: dict[str, str] | None = None,
    model: str = "figure",
) -> ModelSpec:
    """The PSL program of an :class:`AdditionSet` (entities are list positions).

    ``model`` picks the rule file (see :func:`add1_spec` and :func:`add2_spec`).

    Examples:
        >>> s = make_additions(np.arange(40) % 10, 1, 8, np.random.default_rng(0))
        >>> addition_spec(s).predicate("ImageSum").arity
        3
    """
    sums = additions.sums.tolist() if labelled else None
    if additions.digits == 1:
        return add1_spec([tuple(g) for g in additions.groups.tolist()], sums, phase=phase, options=options, model=model)
    return add2_spec([tuple(g) for g in additions.groups.tolist()], sums, phase=phase, options=options, model=model)


# --- networks (paper's neural architecture table) ----------------------------------------------


def lenet(
    classes: int = 10,
    learning_rate: float = 1e-3,
    input_shape: tuple[int, ...] = (28, 28, 1),
    shift: float = 0.0,
    class_prior: float = 0.0,
    prior_momentum: float = 0.0,
    rotation: float = 0.0,
    zoom: float = 0.0,
    log_gradient: bool = False,
) -> Any:
    """The paper's LeNet-style CNN, compiled with Adam.

    conv 6@5x5, maxpool, ReLU, conv 16@5x5, maxpool, ReLU, dense 120, dense 84, dense ``classes`` softmax.

    Args:
        classes: Output classes.
        learning_rate: Adam's learning rate.
        input_shape: Shape of one image.
        shift: With ``shift > 0``, training calls first move each image by a random fraction of its size up to
            ``shift`` along each axis (zero padding; inference calls are unchanged): data augmentation.
        class_prior: With ``class_prior > 0``, the output layer carries a
            :class:`~pslbridge.keras.ClassBalance` prior of that weight (a last layer that adds it to the losses
            of training calls; 0: off, the paper's network).
        prior_momentum: The prior's momentum (its mean prediction runs over training calls; 0: each batch's).
        rotation: With ``rotation > 0``, training calls also turn each image by a random angle of up to this
            fraction of a full turn either way (``1 / 36``: 10 degrees); inference calls are unchanged.
        zoom: With ``zoom > 0``, training calls also scale each image by a random factor in
            ``[1 - zoom, 1 + zoom]``; inference calls are unchanged.
        log_gradient: The output softmax is a :class:`~pslbridge.keras.LogGradientSoftmax`: the same
            predictions, with the backward pass of a loss in their logarithms.

    Raises:
        ValueError: ``shift`` or ``zoom`` outside ``[0, 1)``, or ``rotation`` outside ``[0, 0.5)``.

    Examples:
        >>> lenet().count_params()
        44426
        >>> import numpy as np
        >>> net, image = lenet(shift=0.1), np.random.default_rng(0).random((1, 28, 28, 1))
        >>> bool(np.allclose(net(image, training=False), net(image, training=False)))  # inference: unshifted
        True
    """
    import keras

    for option, value, top in (("shift", shift, 1.0), ("zoom", zoom, 1.0), ("rotation", rotation, 0.5)):
        if not 0.0 <= value < top:
            raise ValueError(f"{option} must lie in [0, {top:g}), got {value}")
    augment = [
        make()
        for value, make in (
            (rotation, lambda: keras.layers.RandomRotation(rotation, fill_mode="constant")),
            (zoom, lambda: keras.layers.RandomZoom(zoom, fill_mode="constant")),
            (shift, lambda: keras.layers.RandomTranslation(shift, shift, fill_mode="constant")),
        )
        if value > 0
    ]
    layers = lenet_layers(input_shape)
    prior = []
    if class_prior > 0:
        from ..keras import ClassBalance

        prior = [ClassBalance(class_prior, momentum=prior_momentum)]
    output = [keras.layers.Dense(classes, activation="softmax")]
    if log_gradient:
        from ..keras import LogGradientSoftmax

        output = [keras.layers.Dense(classes), LogGradientSoftmax()]
    model = keras.Sequential([layers[0], *augment, *layers[1:], *output, *prior])
    model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss="categorical_crossentropy")
    return model


def lenet_layers(input_shape: tuple[int, ...] = (28, 28, 1), hidden: tuple[int, ...] = (120, 84)) -> list[Any]:
    """The paper's convolutional stack and dense ReLU layers, without an output layer.

    conv 6@5x5, maxpool, ReLU, conv 16@5x5, maxpool, ReLU, flatten, then ``hidden`` dense layers.

    Examples:
        >>> len(lenet_layers())
        10
    """
    import keras

    return [
        keras.Input(shape=input_shape),
        keras.layers.Conv2D(6, 5),
        keras.layers.MaxPooling2D(2),
        keras.layers.ReLU(),
        keras.layers.Conv2D(16, 5),
        keras.layers.MaxPooling2D(2),
        keras.layers.ReLU(),
        keras.layers.Flatten(),
        *[keras.layers.Dense(units, activation="relu") for units in hidden],
    ]


def prepare_images(images: np.ndarray) -> np.ndarray:
    """uint8 28x28 images -> float32 (n, 28, 28, 1) in [0, 1].

    Examples:
        >>> prepare_images(np.zeros((2, 28, 28), dtype=np.uint8)).shape
        (2, 28, 28, 1)
    """
    return (np.asarray(images, dtype=np.float32) / 255.0)[..., None]
