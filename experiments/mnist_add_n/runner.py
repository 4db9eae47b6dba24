"""MNIST-Add-N (N = 4, 15, 100): NeuPSL on the field's scalability benchmark, A-NeSI's protocol.

For N digits a split draws ``train_images / (2 N)`` training additions and ``10,000 / (2 N)`` test additions
without replacement from MNIST train and test; ``val_images`` training images are set aside first for validation
additions (model selection). Training programs are mini-batches of ``additions_per_batch`` additions, found as
connected components by :func:`pslbridge.batching.component_batches`, each its own resident program; the
network is trained with :class:`pslbridge.keras.NeuPSLModel` until ``epochs`` or ``minutes`` of training, whichever
comes first. After every epoch the network decodes the validation sums (each digit its argmax, added exactly)
and the best epoch's network is kept (the last epoch's with ``select="last"``). The test reports the sum accuracy
decoded that way and by PSL inference over the test programs, the digit accuracy and a test-accuracy-against-
training-time curve (never used to choose).

Run ``python -m experiments mnist-add-n --preset n4 --splits 3 --seed 7`` (or ``make reproduce-mnist-add-n``);
rows go to ``<out>/results.csv``, the table to ``<out>/results.md``.

Example:
    >>> setting = Setting(places=2, train_images=160, val_images=40, test_images=40, epochs=1, psl_test=False)
    >>> row = run_split(setting, split=0, seed=3)
    >>> row["method"], row["train_additions"], row["test_additions"], 0 <= row["sum_acc"] <= 100
    ('NeuPSL', 40, 10, True)
"""

from __future__ import annotations

import argparse
import logging
import math
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from pslbridge.batching import component_batches
from pslbridge.bridge import Bridge
from pslbridge.datasets.mnist import load_mnist
from pslbridge.examples.mnist_addition import lenet, prepare_images
from pslbridge.neural_inputs import entity_keys
from pslbridge.training import set_seed

from ..arguments import DefaultsHelpFormatter, positive_int
from ..harness import failed_row, finish_table, plain, run_splits
from ..presets import by_name, load_presets
from ..reporting import WholeRun, append_csv, mean_std, non_defaults, read_groups, write_rows
from ..sweep import BASE_MEMORY_MB, RayOptions, Run, add_ray_arguments, run_digest, workers_text
from .model import AdditionsN, abduced_places, addition_n_spec, make_additions_n, sum_digits
from .relabelled import RelabelledPlaces

__all__ = [
    "BEST_REPORTED",
    "ITERATION_CAPS",
    "PRESETS",
    "SCHEDULES",
    "SELECTIONS",
    "Setting",
    "main",
    "network_sums",
    "predict_digits",
    "restart_optimizer",
    "run_split",
    "run_split_task",
    "split_data",
    "sum_accuracy",
    "write_table",
]

log = logging.getLogger(__name__)
PRESETS = load_presets(Path(__file__).parent / "presets")
#: Best reported sum accuracy (%) and training minutes (DeepProofLog, AAAI 2026, Table 1).
BEST_REPORTED = {4: (94.0, 25.4), 15: (80.8, 41.8), 100: (37.8, 105.8)}
#: The PSL option that caps each reasoner's iterations.
ITERATION_CAPS = {"admm": "admmreasoner.maxiterations", "dualbcd": "duallcqp.maxiterations"}
#: Learning-rate factors against the run's progress in [0, 1]: constant, or cosine annealing to zero at the end.
SCHEDULES = {"constant": lambda progress: 1.0, "cosine": lambda progress: 0.5 * (1 + math.cos(math.pi * progress))}
#: Which epoch's network is tested: the best on validation (sum accuracy, then sum digits), or the last one.
SELECTIONS = ("best", "last")


@dataclass(frozen=True)
class Setting:
    """One MNIST-Add-N setting: every field a preset holds.

    Attributes:
        places: N, the digits of each number.
        train_images: MNIST training images the training additions are drawn from (after the validation slice).
        val_images: Training images set aside for validation additions.
        test_images: MNIST test images the test additions are drawn from (10,000: the protocol's).
        form: Rule file (:data:`experiments.mnist_add_n.model.FORMS`).
        additions_per_batch: Additions per training program (one learning step each).
        program_places: Places per end-place and one-place training program (0: ``additions_per_batch`` times N,
            as many as a whole-addition program holds).
        epochs: Passes over the training programs, at most.
        minutes: Training time limit in minutes (0: none); checked after every epoch.
        learning_rate: Adam's learning rate (at the start, with a schedule).
        schedule: A key of :data:`SCHEDULES`: the learning rate's factor against the run's progress (the larger
            of the time used of ``minutes`` and the steps done of ``epochs``), set before every step.
        admm_iterations: Iteration cap of a learning step's reasoner (warm-started from the program's previous
            solve; dual BCD's cap with ``reasoner="dualbcd"``).
        test_admm_iterations: Iteration cap of the test programs' inference (``test_reasoner``'s).
        loss: The learning step's loss (:meth:`pslbridge.Bridge.learn_step`): ``"energy"``, or a bilevel loss
            such as ``"bce"`` (needs ``reasoner="dualbcd"``).
        reasoner: The training programs' MAP reasoner, a key of :data:`ITERATION_CAPS`.
        test_reasoner: The test programs' MAP reasoner (PSL-inference decoding), a key of :data:`ITERATION_CAPS`.
        shift: Training images move by up to this fraction of their size (0: off).
        rotation: Training images turn by up to this fraction of a full turn either way (0: off).
        zoom: Training images scale by a factor in ``[1 - zoom, 1 + zoom]`` (0: off).
        log_gradient: The network's softmax passes PSL's gradient back as one in the log-probabilities
            (:class:`~pslbridge.keras.LogGradientSoftmax`; the predictions are unchanged).
        log_gradient_after: With ``log_gradient``, epochs trained with the softmax's own gradient first (counted
            over the whole run; 0: the log-probability gradient from the start). At the switch Adam's moments and
            step count restart (:func:`restart_optimizer`): the new gradient's scale is another.
        warmup_epochs: First train this many epochs on the ends of every addition only: its lowest and its
            highest ``warmup_places`` places, where the known carry in (ones place) and carry out (top place)
            pin the latent carries down; then on whole additions (0: off; ``epochs`` or more: ends only, and the
            whole additions' programs are not built).
        warmup_places: Places kept at each end in the warm-up.
        abduce_every: In the warm-up, from epoch ``abduce_after`` on, every this many epochs the network's
            digits decode the training additions, and the places whose carries they settle consistently with the
            label (:func:`~experiments.mnist_add_n.model.abduced_places`) and have no program yet join the end
            places as one-place programs with those carries given (a settled place keeps its program; 0: off).
        abduce_after: Epochs of the warm-up before the first abduction.
        abduce_from_top: Also abduce the places the label settles from its top place down (``from_top`` of
            :func:`~experiments.mnist_add_n.model.abduced_places`).
        abduce_between: Also abduce the lowest place where the network's sum disagrees with the label, when the
            top settles its carry out (``between`` of :func:`~experiments.mnist_add_n.model.abduced_places`):
            where an addition has one wrong digit, that digit's place with its true total.
        label_totals: Label the abduced places' totals too (``label_totals`` of
            :func:`~experiments.mnist_add_n.model.addition_n_spec`): their learning steps then need no solve.
        relabel_places: With ``label_totals``, serve the abduced places from one resident program per batch
            size, relabelled before each step (:class:`~experiments.mnist_add_n.relabelled.RelabelledPlaces`):
            the same batches, energies and gradients, and no grounding in an abduction round (False: each
            round grounds its places' programs).
        drop_settled_ends: From each abduction round on, train only the end-place programs that hold a place
            not abduced yet: a program whose every place has a one-place program leaves training (its places
            are trained there, with their carries observed).
        select: A member of :data:`SELECTIONS`: test the epoch with the best validation sum accuracy (ties broken
            by the sum digits' accuracy), or the last epoch (no choice among noisy validation scores).
        psl_test: Also decode the test sums by PSL inference (besides the network's digits).
        curve: Record test sum accuracy after every epoch (timer paused; never used to choose).
        curve_seconds: Record it only once this many training seconds have passed since the last point (0: after
            every epoch).
        test_per_program: Test additions per inference program.
        heap: The JVM's maximum heap (``-Xmx``), applied if this process has not started Java yet.
    """

    places: int = 4
    train_images: int = 55000
    val_images: int = 5000
    test_images: int = 10000
    form: str = "carry"
    additions_per_batch: int = 100
    program_places: int = 0
    epochs: int = 10
    minutes: float = 0.0
    learning_rate: float = 1e-3
    schedule: str = "constant"
    admm_iterations: int = 50
    test_admm_iterations: int = 500
    loss: str = "energy"
    reasoner: str = "admm"
    test_reasoner: str = "admm"
    shift: float = 0.0
    rotation: float = 0.0
    zoom: float = 0.0
    log_gradient: bool = False
    log_gradient_after: int = 0
    warmup_epochs: int = 0
    warmup_places: int = 1
    abduce_every: int = 0
    abduce_after: int = 0
    abduce_from_top: bool = False
    abduce_between: bool = False
    label_totals: bool = False
    relabel_places: bool = True
    drop_settled_ends: bool = False
    select: str = "best"
    psl_test: bool = True
    curve: bool = True
    curve_seconds: float = 0.0
    test_per_program: int = 200
    heap: str = "4g"

    @property
    def name(self) -> str:
        """Row label, e.g. ``add-n4``."""
        return f"add-n{self.places}"


def split_data(setting: Setting, split: int, seed: int, y_train: np.ndarray, y_test: np.ndarray) -> tuple:
    """``(train, val, test)`` :class:`~experiments.mnist_add_n.model.AdditionsN` of one split (seed ``seed + split``).

    Example:
        >>> labels = np.arange(1000) % 10
        >>> train, val, test = split_data(Setting(places=2, train_images=400, val_images=100), 0, 0, labels, labels)
        >>> train.n_additions, val.n_additions, test.n_additions
        (100, 25, 250)
    """
    rng = np.random.default_rng([seed, split])
    order = rng.permutation(len(y_train))
    val_pool, train_pool = order[: setting.val_images], order[setting.val_images :][: setting.train_images]
    train = make_additions_n(y_train, train_pool, setting.places, rng)
    val = make_additions_n(y_train, val_pool, setting.places, rng)
    test = make_additions_n(y_test, rng.permutation(len(y_test))[: setting.test_images], setting.places, rng)
    return train, val, test


def predict_digits(model: Any, images: np.ndarray) -> np.ndarray:
    """The network's digit probabilities for ``images``."""
    return np.asarray(model.predict(images, batch_size=2000, verbose=0))


def network_sums(probs: np.ndarray, data: AdditionsN) -> tuple[np.ndarray, np.ndarray]:
    """Each addition's sum decoded from the argmax digits of ``probs`` (rows: ``data.pool``), and those digits."""
    digits = np.asarray(probs).argmax(1)[data.images]
    return sum_digits(digits), digits


def sum_accuracy(probs: np.ndarray, data: AdditionsN) -> float:
    """Per cent of ``data``'s additions whose whole sum :func:`network_sums` decodes from ``probs``.

    Example:
        >>> from experiments.mnist_add_n.model import make_additions_n
        >>> data = make_additions_n(np.arange(40) % 10, np.arange(40), 2, np.random.default_rng(0))
        >>> probs = np.eye(10)[(np.arange(40) % 10)[data.pool]]  # every digit right (rows: the pool's order)
        >>> sum_accuracy(probs, data)
        100.0
        >>> probs[data.images[0, 0, 0]] = np.roll(probs[data.images[0, 0, 0]], 1)  # one digit of 10 additions wrong
        >>> sum_accuracy(probs, data)
        90.0
    """
    return 100 * float(data.correct_sums(network_sums(probs, data)[0]).mean())


def _psl_sums(probs: np.ndarray, data: AdditionsN, setting: Setting) -> np.ndarray:
    """Each addition's sum decoded by MAP inference (argmax of every place's digit and of the last carry)."""
    out = np.zeros_like(data.sum_digits)
    options = {ITERATION_CAPS[setting.test_reasoner]: str(setting.test_admm_iterations)}
    for lo in range(0, data.n_additions, setting.test_per_program):
        part = data.take(range(lo, min(lo + setting.test_per_program, data.n_additions)))
        spec = addition_n_spec(part, labelled=False, phase="infer", form=setting.form)
        with Bridge(spec, options=options, reasoner=setting.test_reasoner) as bridge:
            keys = [int(k) for k in entity_keys(bridge.entities("Neural"))]
            result = bridge.infer({"Neural": probs[keys]})
            for name in ("SumDigit", "Carry"):  # every place's digit; the carries: only the top one is the sum's
                best = result.argmax(name).astype({"arg0": int, "arg1": int, "arg2": int})
                if name == "Carry":
                    best = best[best["arg1"] == data.places]
                out[lo + best["arg0"].to_numpy(), best["arg1"].to_numpy()] = best["arg2"].to_numpy()
    return out


def _programs(setting: Setting, data: AdditionsN, images: np.ndarray, seed: int, warmup: bool = False) -> list:
    """Resident training programs of ``data`` (``images``: its pool's prepared images), one mini-batch each.

    The warm-up's programs keep only each addition's end places and hold about as many places as the others.
    """
    places, per_batch = None, setting.additions_per_batch
    if warmup:
        ends = min(setting.warmup_places, data.places)
        places = sorted({*range(ends), *range(data.places - ends, data.places)})
        per_batch = max(1, (setting.program_places or per_batch * data.places) // len(places))
    return component_batches(
        addition_n_spec(data, form=setting.form, places=places),
        {"Neural": (range(len(data.pool)), images)},
        per_batch,
        entities={"Place": [0]},
        seed=seed,
        options={ITERATION_CAPS[setting.reasoner]: str(setting.admm_iterations)},
        reasoner=setting.reasoner,
    )


def _abduced_programs(
    setting: Setting,
    network: Any,
    data: AdditionsN,
    images: np.ndarray,
    seed: int,
    settled: set[int],
    relabelled: RelabelledPlaces | None = None,
) -> tuple[list, set[int]]:
    """One-place training programs of the places the network's digits settle, but for those ``settled`` already.

    Args:
        setting: The run's setting.
        network: The digit network (``predict``).
        data: The training additions; ``images`` their pool's prepared images.
        seed: Shuffles the places into programs.
        settled: The places that have programs, each named by the entity id of its first image (unique).
        relabelled: Serve the places from these resident programs (``(bridge, inputs, labels)`` per batch, the
            bridges shared) instead of grounding a program per batch; needs ``label_totals``.

    Returns:
        The new programs, and the places they hold (named alike).
    """
    predicted = network_sums(predict_digits(network, images), data)[1]
    places = abduced_places(data, predicted, from_top=setting.abduce_from_top, between=setting.abduce_between)
    places = places.take(np.flatnonzero(~np.isin(places.images[:, 0, 0], list(settled))))
    if not places.n_additions:
        log.info("%s: no more places abduced (%d before)", setting.name, len(settled))
        return [], set()
    totals = places.digits[:, 0, 0] + places.digits[:, 1, 0] + places.carry_in  # the true digits' (diagnostic)
    log.info(
        "%s: %d more of %d places abduced (%d before), %.1f %% of them true of the true digits",
        setting.name,
        places.n_additions,
        data.n_additions * data.places,
        len(settled),
        100 * float(np.mean(totals == places.sum_digits @ [1, 10])),
    )
    per_batch = setting.program_places or setting.additions_per_batch * data.places
    held = {int(i) for i in places.images[:, 0, 0]}
    if relabelled is not None:
        if not setting.label_totals:
            raise ValueError("relabelled one-place programs need label_totals (every target labelled)")
        return relabelled.batches(places, images, per_batch, seed), held
    return component_batches(
        addition_n_spec(places, form=setting.form, label_totals=setting.label_totals),
        {"Neural": (range(len(data.pool)), images)},
        per_batch,
        entities={"Place": [0]},
        seed=seed,
        options={ITERATION_CAPS[setting.reasoner]: str(setting.admm_iterations)},
        reasoner=setting.reasoner,
    ), held


def _unsettled(programs: list, data: AdditionsN, settled: set[int]) -> list:
    """The programs of ``data``'s places that hold a place not in ``settled``, in order.

    A place is named by its first number's image (as :func:`_abduced_programs` names the places it settles); a
    program's places are read from its network inputs' entity keys (both numbers' images, as integers).
    """
    place_of = np.zeros(len(data.pool), dtype=np.int64)
    for number in (0, 1):
        place_of[data.images[:, number]] = data.images[:, 0]
    named = np.fromiter(settled, dtype=np.int64, count=len(settled))
    held = [np.asarray([int(key) for key in inputs["Neural"][0]], dtype=np.int64) for _, inputs in programs]
    return [p for p, ids in zip(programs, held, strict=True) if not np.isin(place_of[ids], named).all()]


def run_split(setting: Setting, split: int, seed: int) -> dict[str, Any]:
    """Train and test one split; the result row.

    Besides the table's fields the row holds ``curve``, ``history`` (per epoch) and ``test_by_select``: the test
    sum accuracy (network digits) of the best epoch on validation and of the last epoch, whichever ``select``
    tests (logged, for the held-out check of that choice).
    """
    import keras

    from pslbridge import jvm
    from pslbridge.keras import NeuPSLModel, ProgramData

    start = time.perf_counter()
    if setting.schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {setting.schedule!r}; choose one of {sorted(SCHEDULES)}")
    if setting.select not in SELECTIONS:
        raise ValueError(f"unknown select {setting.select!r}; choose one of {list(SELECTIONS)}")
    for reasoner in (setting.reasoner, setting.test_reasoner):
        if reasoner not in ITERATION_CAPS:
            raise ValueError(f"unknown reasoner {reasoner!r}; choose one of {sorted(ITERATION_CAPS)}")
    if not jvm.is_started():
        jvm.configure(max_heap=setting.heap)
    x_train, y_train, x_test, y_test = load_mnist()
    train, val, test = split_data(setting, split, seed, y_train, y_test)
    set_seed(seed + split)
    network = lenet(
        learning_rate=setting.learning_rate,
        shift=setting.shift,
        rotation=setting.rotation,
        zoom=setting.zoom,
        log_gradient=setting.log_gradient,
    )
    if setting.log_gradient:
        network.layers[-1].set_active(setting.log_gradient_after <= 0)
    t0 = time.perf_counter()
    train_images = prepare_images(x_train[train.pool])
    warm_epochs = min(setting.warmup_epochs, setting.epochs)
    warm = _programs(setting, train, train_images, seed + split, warmup=True) if warm_epochs else []
    batches = _programs(setting, train, train_images, seed + split) if setting.epochs > warm_epochs else []
    build_s = time.perf_counter() - t0
    log.info(
        "%s split %d: %d whole-addition and %d end-place training programs built in %.0f s",
        setting.name,
        split,
        len(batches),
        len(warm),
        build_s,
    )
    val_images, test_images = prepare_images(x_train[val.pool]), prepare_images(x_test[test.pool])
    best = {"key": (-1.0, -1.0), "epoch": -1, "weights": network.get_weights()}  # key: validation sum acc, digits
    keys = ("val_sum_acc", "val_place_acc", "energy", "seconds", "lr", "abduced", "log_gradient")
    keys += ("val_sums_right", "val_places_right")
    history: dict[str, list[Any]] = {key: [] for key in keys}
    curve: list[tuple[float, float]] = []
    clock = {"start": time.perf_counter(), "paused": 0.0}

    def epoch_end(epoch: int, logs: dict[str, float]) -> None:
        paused = time.perf_counter()
        seconds = training_seconds()  # evaluation is not counted
        decoded_val = network_sums(predict_digits(network, val_images), val)[0]
        sums_right, places_right = val.correct_sums(decoded_val), (decoded_val == val.sum_digits).sum(axis=1)
        accuracy = 100 * float(sums_right.mean())
        place_accuracy = 100 * float(places_right.mean() / val.sum_digits.shape[1])  # breaks ties of sum accuracy
        epoch = len(history["val_sum_acc"])  # counted over the warm-up and the whole-addition epochs
        if (accuracy, place_accuracy) > best["key"]:
            best.update(key=(accuracy, place_accuracy), epoch=epoch, weights=network.get_weights())
        if setting.curve and (not curve or seconds - curve[-1][0] >= setting.curve_seconds):
            curve.append((seconds, sum_accuracy(predict_digits(network, test_images), test)))
        clock["paused"] += time.perf_counter() - paused
        history["val_sum_acc"].append(accuracy)
        history["val_place_acc"].append(place_accuracy)
        history["energy"].append(float(logs.get("energy", logs.get("loss", np.nan))))
        history["seconds"].append(seconds)
        history["lr"].append(float(keras.ops.convert_to_numpy(model.optimizer.learning_rate)))
        history["abduced"].append(stage["abduced"])
        history["log_gradient"].append(bool(setting.log_gradient) and network.layers[-1].is_active())
        history["val_sums_right"].append(sums_right.astype(int).tolist())
        history["val_places_right"].append(places_right.astype(int).tolist())
        log.info(
            "%s split %d epoch %d: %.0f s, validation sum accuracy %.1f %%, sum digits %.1f %%",
            setting.name,
            split,
            epoch,
            seconds,
            accuracy,
            place_accuracy,
        )

    stage = {"programs": 1, "abduced": 0}  # the current fit's programs per epoch, and abduced places

    def training_seconds() -> float:
        return time.perf_counter() - clock["start"] - clock["paused"]

    def out_of_time() -> bool:
        return bool(setting.minutes) and training_seconds() >= 60 * setting.minutes

    def used(batch: int) -> float:
        """The run's progress: the larger of the time limit's and the epoch budget's fraction used."""
        limit = training_seconds() / (60 * setting.minutes) if setting.minutes else 0.0
        return min(1.0, max(limit, (len(history["val_sum_acc"]) + batch / stage["programs"]) / setting.epochs))

    def epoch_begin(epoch: int, logs: Any = None) -> None:
        switch = len(history["val_sum_acc"]) >= setting.log_gradient_after  # epochs counted over the whole run
        if setting.log_gradient and switch != network.layers[-1].is_active():
            network.layers[-1].set_active(switch)
            restart_optimizer(model.optimizer)

    def batch_begin(batch: int, logs: Any = None) -> None:
        model.optimizer.learning_rate.assign(setting.learning_rate * SCHEDULES[setting.schedule](used(batch)))

    def batch_end(batch: int, logs: Any = None) -> None:
        if out_of_time():
            model.stop_training = True  # the epoch ends after this step: validated, selected, recorded

    model = NeuPSLModel({"Neural": network}, loss=setting.loss)
    model.compile(optimizer=keras.optimizers.Adam(setting.learning_rate))
    callback = keras.callbacks.LambdaCallback(
        on_epoch_begin=epoch_begin,
        on_epoch_end=epoch_end,
        on_train_batch_begin=batch_begin,
        on_train_batch_end=batch_end,
    )
    abduced: list = []
    settled: set[int] = set()
    relabelled = None
    if setting.label_totals and setting.relabel_places:
        options = {ITERATION_CAPS[setting.reasoner]: str(setting.admm_iterations)}
        relabelled = RelabelledPlaces(setting.form, options=options, reasoner=setting.reasoner)
    try:
        done = 0
        while done < setting.epochs and not out_of_time():
            programs, length = batches, setting.epochs - done
            if done < warm_epochs:
                programs, length = warm, warm_epochs - done
                if setting.abduce_every and done >= setting.abduce_after:
                    more, new = _abduced_programs(
                        setting, network, train, train_images, seed + split + done, settled, relabelled
                    )
                    abduced, settled = abduced + more, settled | new
                    stage["abduced"] = len(settled)
                    ends = _unsettled(warm, train, settled) if setting.drop_settled_ends else warm
                    if len(ends) < len(warm):
                        log.info("%s: %d of %d end-place programs left in training", setting.name, len(ends), len(warm))
                    programs, length = ends + abduced, min(length, setting.abduce_every)
                elif setting.abduce_every:
                    length = min(length, setting.abduce_after - done)
            stage["programs"] = len(programs)
            model.fit(ProgramData(programs, seed=seed + split + done), epochs=length, verbose=0, callbacks=[callback])
            done += length
    finally:
        _close([*warm, *batches, *abduced])
        if relabelled is not None:
            relabelled.close()
    learn_s = training_seconds()
    t1 = time.perf_counter()
    last = len(history["val_sum_acc"]) - 1
    final_key = (history["val_sum_acc"][last], history["val_place_acc"][last]) if last >= 0 else best["key"]
    keys_of = {"best": best["key"], "last": final_key}
    epochs_of = {"best": best["epoch"], "last": last}
    probs_of = {"last": predict_digits(network, test_images)}  # the network as training left it
    network.set_weights(best["weights"])
    probs_of["best"] = predict_digits(network, test_images)
    by_select = {rule: sum_accuracy(p, test) for rule, p in probs_of.items()}
    log.info(
        "%s split %d: test sum accuracy of the best epoch on validation (%d) %.2f %%, of the last (%d) %.2f %%",
        setting.name,
        split,
        epochs_of["best"],
        by_select["best"],
        last,
        by_select["last"],
    )
    probs = probs_of[setting.select]  # one forward pass for both decodes
    decoded, digits = network_sums(probs, test)
    psl = _psl_sums(probs, test, setting) if setting.psl_test else None
    return {
        **asdict(setting),
        "setting": setting.name,
        "split": split,
        "seed": seed,
        "method": "NeuPSL",
        "sum_acc": 100 * float(test.correct_sums(decoded).mean()),
        "psl_sum_acc": None if psl is None else 100 * float(test.correct_sums(psl).mean()),
        "digit_acc": 100 * float((digits == test.digits).mean()),
        "val_sum_acc": keys_of[setting.select][0],
        "val_place_acc": keys_of[setting.select][1],
        "best_epoch": epochs_of[setting.select],
        "trained_epochs": len(history["val_sum_acc"]),
        "train_additions": train.n_additions,
        "test_additions": test.n_additions,
        "build_s": build_s,
        "learn_s": learn_s,
        "test_s": time.perf_counter() - t1,
        "wall_s": time.perf_counter() - start,
        "curve": curve,
        "history": history,
        "test_by_select": by_select,
    }


def restart_optimizer(optimizer: Any) -> None:
    """Zero a Keras optimizer's slots (Adam's moments) and its step count; its learning rate stays.

    Examples:
        >>> import keras, numpy as np
        >>> net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        >>> net.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
        >>> _ = net.fit(np.ones((4, 3)), np.zeros((4, 2)), verbose=0)
        >>> restart_optimizer(net.optimizer)
        >>> slots = [v for v in net.optimizer.variables if "momentum" in v.path or "velocity" in v.path]
        >>> [float(np.abs(v).sum()) for v in slots], int(net.optimizer.iterations.numpy())
        ([0.0, 0.0, 0.0, 0.0], 0)
        >>> round(float(net.optimizer.learning_rate.numpy()), 4)
        0.01
    """
    import keras

    for variable in optimizer.variables:
        if variable.path != optimizer.learning_rate.path:
            variable.assign(keras.ops.zeros(variable.shape, variable.dtype))


def _close(programs: list) -> None:
    """Close the bridges of ``programs`` (each ``(bridge, inputs)`` or ``(bridge, inputs, labels)``)."""
    for program in programs:
        program[0].close()


def run_split_task(setting: dict[str, Any], split: int, seed: int) -> dict[str, Any]:
    """:func:`run_split` as a sweep run: plain arguments in, JSON-serialisable row out."""
    return {"row": plain(run_split(Setting(**setting), split, seed))}


_FIELDS = [
    "setting",
    "split",
    "seed",
    "method",
    "sum_acc",
    "psl_sum_acc",
    "digit_acc",
    "val_sum_acc",
    "val_place_acc",
    "best_epoch",
    "trained_epochs",
    "train_additions",
    "test_additions",
    "build_s",
    "learn_s",
    "test_s",
    "wall_s",
    *Setting.__dataclass_fields__,
]


def run_setting(
    setting: Setting, splits: int, seed: int, out: Path, ray: RayOptions | None = None
) -> list[dict[str, Any]]:
    """Run ``splits`` splits (here, or as Ray tasks); rows to ``results.csv``, curve points to ``curve.csv``.

    Each split's validation record goes to ``validation-<setting>-seed<seed>-split<k>.npz``: per epoch (rows) and
    validation addition (columns), whether its sum was right (``sums_right``) and how many of its sum digits
    (``places_right``); ``seconds``, the training seconds at each epoch's end (for
    :func:`experiments.mnist_add_n.selection.split_half_selection`).
    """
    rows: list[dict[str, Any]] = []

    def record(run: Run, result: dict[str, Any]) -> None:
        if "error" in result:
            identity = {"setting": setting.name, "split": run.kwargs["split"], "seed": seed, **asdict(setting)}
            rows.extend(write_rows(out / "results.csv", [failed_row(identity, result)], _FIELDS))
            return
        row = dict(result["row"])
        for seconds, accuracy in row.pop("curve"):
            point = {"setting": setting.name, "split": row["split"], "seed": seed, "seconds": seconds}
            append_csv(out / "curve.csv", {**point, "test_sum_acc": accuracy}, [*point, "test_sum_acc"])
        history = row.pop("history")
        row.pop("test_by_select")
        out.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(
            out / f"validation-{setting.name}-seed{seed}-split{row['split']}.npz",
            sums_right=np.asarray(history["val_sums_right"], dtype=bool),
            places_right=np.asarray(history["val_places_right"], dtype=np.int16),
            seconds=np.asarray(history["seconds"], dtype=float),
        )
        rows.extend(write_rows(out / "results.csv", [row], _FIELDS))

    arguments = {"setting": asdict(setting), "seed": seed}
    runs = [
        Run(
            f"{setting.name}-split{split}-{run_digest(arguments)}",
            "experiments.mnist_add_n.runner:run_split_task",
            {**arguments, "split": split},
            BASE_MEMORY_MB + _megabytes(setting.heap),
        )
        for split in range(splits)
    ]
    run_splits(runs, out, ray, record)
    return rows


def _megabytes(heap: str) -> int:
    """``-Xmx`` text in MB (``"4g"`` -> 4096)."""
    scale = {"g": 1024, "m": 1, "k": 1 / 1024}
    return int(float(heap[:-1]) * scale[heap[-1].lower()]) if heap[-1].lower() in scale else int(heap) // 2**20


def write_table(out: Path) -> str:
    """Summarise ``results.csv`` into ``results.md``.

    Example:
        >>> import contextlib, io, tempfile
        >>> out = Path(tempfile.mkdtemp())
        >>> row = {"setting": "add-n4", "split": 0, "seed": 7, "method": "NeuPSL", "sum_acc": 90.0,
        ...        "psl_sum_acc": 89.0, "digit_acc": 98.7, "learn_s": 1500, **by_name(PRESETS, "n4").fields}
        >>> with contextlib.redirect_stdout(io.StringIO()):  # write_rows prints each row
        ...     _ = write_rows(out / "results.csv", [row, {**row, "split": 1, "sum_acc": 92.0}], _FIELDS)
        >>> [line for line in write_table(out).splitlines() if line.startswith("| add-n4")]
        ['| add-n4 | 7 | 2 | 91.00 ± 1.41 | 89.00 ± 0.00 | 98.70 ± 0.00 | 25.0 | 94.0 (25.4 min) | defaults |']
    """
    lines = [
        "# MNIST-Add-N results (test sum accuracy %, mean ± std over splits)",
        "",
        "| setting | seed | splits | sum accuracy (network digits) | sum accuracy (PSL inference) | digit accuracy | "
        "training min | best reported | options |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for (name, seed, *_), group in read_groups(
        out / "results.csv", ["setting", "seed", *Setting.__dataclass_fields__]
    ).items():
        group = [r for r in group if not r.get("error")]
        if not group:
            continue

        def values(key: str, rows: list[dict[str, str]] = group) -> list[float]:
            return [float(r[key]) for r in rows if r.get(key) not in (None, "")]

        places = int(group[0]["places"])
        best = BEST_REPORTED.get(places)
        preset = next((p for p in PRESETS if p.fields.get("places") == places), None)
        options = non_defaults(group[0], {**asdict(Setting()), **(preset.fields if preset else {})})
        lines.append(
            f"| {name} | {seed} | {len(group)} | {mean_std(values('sum_acc'))} | "
            f"{mean_std(values('psl_sum_acc')) if values('psl_sum_acc') else '–'} | {mean_std(values('digit_acc'))} | "
            f"{np.mean(values('learn_s')) / 60:.1f} | {f'{best[0]} ({best[1]} min)' if best else '–'} | {options} |"
        )
    return finish_table(out, lines, ["setting", "split"])


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (``python -m experiments mnist-add-n ...``)."""
    parser = argparse.ArgumentParser(
        prog="python -m experiments mnist-add-n",
        description="MNIST-Add-N (A-NeSI's protocol): NeuPSL on N-digit additions.",
        formatter_class=DefaultsHelpFormatter,
    )
    parser.add_argument("--preset", default="n4", choices=[p.name for p in PRESETS], help="the setting's preset")
    parser.add_argument("--splits", type=positive_int, default=3, help="splits (each its own data and network)")
    parser.add_argument("--seed", type=int, default=7, help="base seed of the splits")
    parser.add_argument("--set", nargs="*", default=[], metavar="FIELD=VALUE", help="override preset fields")
    parser.add_argument("--out", type=Path, default=Path("out/mnist-add-n"), help="results folder")
    add_ray_arguments(parser)
    args = parser.parse_args(argv)
    if not log.handlers:  # this runner's progress only: PSL's own INFO log stays quiet
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    ray = RayOptions.from_args(args, parser)
    setting = Setting(**by_name(PRESETS, args.preset).fields)
    types = {f.name: type(getattr(setting, f.name)) for f in fields(Setting)}
    for item in args.set:
        key, _, text = item.partition("=")
        if key not in types:
            parser.error(f"--set {item}: no field {key!r} (fields: {', '.join(types)})")
        value = text.lower() in ("1", "true", "yes") if types[key] is bool else types[key](text)
        setting = replace(setting, **{key: value})
    whole = WholeRun("mnist-add-n", argv, args.seed, 0, args.splits, args.splits, workers_text(ray))
    rows = run_setting(setting, args.splits, args.seed, args.out, ray)
    whole.record(args.out, ran=len(rows))
    print(write_table(args.out))
    return 0
