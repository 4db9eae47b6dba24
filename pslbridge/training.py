"""Keras on the neural side: bind networks to neural predicates and train them through PSL.

A :class:`NeuralBinding` ties a Keras model to one neural predicate and the model inputs of
that predicate's entities (in :meth:`pslbridge.Bridge.entities` row order). The
:class:`Trainer` runs NeuPSL learning, Python-driven: each step calls every bound model,
pushes the predictions, calls :meth:`pslbridge.Bridge.learn_step`, and applies
``tape.gradient(predictions, model.trainable_variables, output_gradients=∂energy/∂prediction)``
with the model's optimizer (the chain rule through the energy, as in NeuPSL). Optionally it
takes symbolic weight steps, evaluates on a separate program each epoch, and drives Keras
callbacks (early stopping, checkpoints) and a progress bar. :meth:`Trainer.batched` trains on
mini-batches: several ground programs (:class:`Batch`) sharing one network per neural predicate.

TensorFlow is imported lazily; without it this module still imports.

Examples:
    >>> from pslbridge import Bridge
    >>> from pslbridge.examples.mnist_addition import add1_spec
    >>> from pslbridge.networks import TableNetwork
    >>> bridge = Bridge(add1_spec([(0, 1)], sums=[18], phase="learn"))   # 9 + 9
    >>> net = TableNetwork(2, 10, learning_rate=10.0)
    >>> nines = lambda: {"nines": float(net.forward()[:, 9].mean())}
    >>> trainer = Trainer(bridge, [NeuralBinding("Neural", net)], evaluate=nines)
    >>> history = trainer.fit(epochs=3, verbose=0)
    >>> history.history["nines"][-1] > 0.5
    True
    >>> bridge.close()
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import checkpoints
from .bridge import Bridge, LearnResult
from .errors import CheckpointError, ConfigurationError
from .learning import WeightOptimizer
from .losses import Loss
from .networks import KerasNetwork, Network, as_network
from .results import find_key

__all__ = ["Batch", "History", "NeuralBinding", "Trainer", "set_seed"]

log = logging.getLogger(__name__)


def set_seed(seed: int) -> None:
    """Seed Python, numpy and the Keras backend (when installed) for repeatable runs.

    On TensorFlow this is ``keras.utils.set_random_seed``. On the other backends it seeds Python, numpy and torch
    without importing TensorFlow (Keras' own function imports it whenever it is installed, to seed ``tf.data``,
    which a NeuPSL run on torch or JAX does not use; the import would also print TensorFlow's start-up noise).

    Examples:
        >>> set_seed(0)
    """
    random.seed(seed)
    np.random.seed(seed)
    try:
        import keras
    except ImportError:  # pragma: no cover - Keras is optional
        return
    backend = keras.backend.backend()
    if backend == "tensorflow":
        keras.utils.set_random_seed(seed)
    elif backend == "torch":
        import torch

        torch.manual_seed(seed)


@dataclass
class NeuralBinding:
    """A network feeding one neural predicate.

    Args:
        predicate: The neural predicate's name.
        model: A Keras model mapping ``inputs`` to ``(n_entities, n_classes)`` probabilities, or any
            :class:`~pslbridge.networks.Network` (such as :class:`~pslbridge.networks.TableNetwork`).
        inputs: Model inputs, one row per entity in :meth:`Bridge.entities` order (Keras models).
        optimizer: A Keras optimizer (default: the model's compiled optimizer, else Adam 1e-3).
        compiled: Keras models: graph-compiled forward and backward passes (default).

    Examples:
        >>> from pslbridge.networks import TableNetwork
        >>> NeuralBinding("Neural", TableNetwork(4, 10)).rows
        4
    """

    predicate: str
    model: Any
    inputs: Any = None
    optimizer: Any = None
    compiled: bool = True
    network: Network = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.network = as_network(self.model, self.inputs, self.optimizer, self.compiled)
        self.optimizer = getattr(self.network, "optimizer", None)

    @property
    def rows(self) -> int:
        """The number of entities the network predicts for."""
        return len(self.inputs) if self.inputs is not None else int(self.network.forward().shape[0])

    def predict(self, training: bool = False) -> np.ndarray:
        """The model's predictions for every entity (no update).

        Examples:
            >>> from pslbridge.networks import TableNetwork
            >>> NeuralBinding("Neural", TableNetwork(2, 3)).predict().shape
            (2, 3)
        """
        if isinstance(self.network, KerasNetwork):
            return np.asarray(self.model(self.inputs, training=training))
        return self.network.forward()


@dataclass
class Batch:
    """One mini-batch: its own ground program and the bindings that feed it.

    Args:
        bridge: The batch's training program (``phase="learn"``).
        bindings: One :class:`NeuralBinding` per neural predicate, with this batch's entity rows.

    Examples:
        >>> from pslbridge import Bridge
        >>> from pslbridge.examples.mnist_addition import add1_spec
        >>> from pslbridge.networks import TableNetwork
        >>> with Bridge(add1_spec([(0, 1)], sums=[3], phase="learn")) as bridge:
        ...     len(Batch(bridge, [NeuralBinding("Neural", TableNetwork(2, 10))]).bindings)
        1
    """

    bridge: Bridge
    bindings: Sequence[NeuralBinding]


@dataclass
class History:
    """Per-epoch metrics, like Keras' ``History``.

    Examples:
        >>> h = History(); h.append({"energy": 1.0}); h.history
        {'energy': [1.0]}
    """

    history: dict[str, list[float]] = field(default_factory=dict)
    epoch: list[int] = field(default_factory=list)

    def append(self, logs: Mapping[str, float]) -> None:
        """Record one epoch's logs."""
        self.epoch.append(len(self.epoch))
        for key, value in logs.items():
            self.history.setdefault(key, []).append(float(value))


class Trainer:
    """NeuPSL training driven from Python (full batch by default, as in the paper).

    Args:
        bridge: The training program (built with ``phase="learn"`` so labels are in the truth partition).
        bindings: One :class:`NeuralBinding` per neural predicate.
        weights: A :class:`~pslbridge.learning.WeightOptimizer` for symbolic weight steps, or None
            to keep the rule weights fixed.
        evaluate: Called after each epoch; returns metrics (e.g. validation accuracy by ``infer()``
            on a separate program) merged into the epoch's logs.
        loss: A loss of :meth:`pslbridge.Bridge.learn_step` (``"energy"``, ``"bce"``, ...).
        steps_per_epoch: Learning steps per epoch (with mini-batches: passes over all batches).
        compiled: Override every Keras binding's ``compiled`` (graph-compiled passes, or one eager tape across
            the PSL call); None keeps each binding's own.

    Examples:
        >>> from pslbridge import Bridge
        >>> from pslbridge.examples.mnist_addition import add1_spec
        >>> from pslbridge.networks import TableNetwork
        >>> bridge = Bridge(add1_spec([(0, 1), (2, 3)], sums=[0, 18], phase="learn"))
        >>> trainer = Trainer(bridge, [NeuralBinding("Neural", TableNetwork(4, 10, learning_rate=5.0))],
        ...                   steps_per_epoch=10)
        >>> history = trainer.fit(epochs=3, verbose=0)
        >>> history.history["energy"][-1] < history.history["energy"][0]
        True
        >>> bridge.close()
    """

    def __init__(
        self,
        bridge: Bridge,
        bindings: Sequence[NeuralBinding],
        *,
        weights: WeightOptimizer | None = None,
        evaluate: Callable[[], Mapping[str, float]] | None = None,
        loss: str | Loss = "energy",
        steps_per_epoch: int = 1,
        compiled: bool | None = None,
    ) -> None:
        if not isinstance(steps_per_epoch, int) or steps_per_epoch < 1:
            raise ConfigurationError(f"steps_per_epoch must be an integer >= 1, got {steps_per_epoch!r}")
        if compiled is not None:
            for binding in bindings:
                if isinstance(binding.network, KerasNetwork):
                    binding.network.compiled = bool(compiled)
        self.batches = [Batch(bridge, list(bindings))]
        _check_batch(self.batches[0], "")
        self.weights = weights
        self.evaluate = evaluate
        self.loss = loss
        self.steps_per_epoch = steps_per_epoch
        self.stop_training = False
        self.last_step: LearnResult | None = None
        self.shuffle = False
        self._order = np.random.default_rng(0)
        self._weights_from = 0  # the batch whose program holds the current rule weights

    @classmethod
    def batched(
        cls, batches: Sequence[Batch], *, shuffle: bool = True, seed: int | None = None, **kwargs: Any
    ) -> Trainer:
        """A trainer over mini-batches: one update per batch, ``steps_per_epoch`` passes per epoch.

        Each batch is its own ground program (for example a slice of the training examples, each
        slice grounded separately), fed by its own entity rows; every batch binds the same neural
        predicates to the same networks and optimizers, so all updates train one network per
        predicate. Rule weights (with ``weights=``) are shared too: each update starts from the
        weights the previous update left. Epoch logs sum ``loss`` and ``energy`` over one pass
        (the whole training set's value) and average them over the epoch's passes; times are per
        update.

        Args:
            batches: The mini-batches (at least one).
            shuffle: Visit the batches in a new random order on every pass (default); False keeps
                the given order.
            seed: Seed of the visiting order (default: drawn from numpy's global generator, so
                :func:`set_seed` makes runs repeatable). Checkpoints record the order's state.
            **kwargs: The remaining :class:`Trainer` arguments (``weights``, ``evaluate``, ...).

        Raises:
            ConfigurationError: No batch, or a batch binds other predicates, networks or
                optimizers than the first, or its inputs do not match its program.

        Examples:
            >>> from pslbridge import Bridge
            >>> from pslbridge.examples.mnist_addition import add1_spec
            >>> from pslbridge.networks import TableNetwork
            >>> net = TableNetwork(2, 10)
            >>> parts = [Bridge(add1_spec([(0, 1)], sums=[3], phase="learn")),
            ...          Bridge(add1_spec([(0, 1)], sums=[5], phase="learn"))]
            >>> trainer = Trainer.batched([Batch(b, [NeuralBinding("Neural", net)]) for b in parts], seed=0)
            >>> len(trainer.train_pass())
            2
            >>> for b in parts: b.close()
        """
        batches = list(batches)
        if not batches:
            raise ConfigurationError("Trainer.batched needs at least one batch")
        trainer = cls(batches[0].bridge, batches[0].bindings, **kwargs)
        for k, batch in enumerate(batches[1:], start=1):
            batch = Batch(batch.bridge, list(batch.bindings))
            _check_batch(batch, f"batch {k}: ")
            _check_shared(batch, trainer.batches[0], k)
            trainer.batches.append(batch)
        trainer.shuffle = shuffle
        trainer._order = np.random.default_rng(np.random.randint(2**31) if seed is None else seed)
        return trainer

    @property
    def bridge(self) -> Bridge:
        """The (first batch's) training program."""
        return self.batches[0].bridge

    @property
    def bindings(self) -> list[NeuralBinding]:
        """The (first batch's) bindings: one per neural predicate."""
        return list(self.batches[0].bindings)

    def train_step(self, batch: int = 0) -> dict[str, float]:
        """One learning step on one batch: predict, learn_step, backpropagate ∂loss/∂prediction.

        Args:
            batch: Which batch (the only one without mini-batches).

        Returns:
            ``{"loss", "energy", "step_time", "psl_time"}`` of this step.
        """
        current = self.batches[batch]
        if self.weights is not None and batch != self._weights_from:
            current.bridge.rule_weights = self.batches[self._weights_from].bridge.rule_weights
        self._weights_from = batch
        start = time.perf_counter()
        predictions = {binding.predicate: binding.network.forward() for binding in current.bindings}
        t = time.perf_counter()
        result = current.bridge.learn_step(
            predictions,
            loss=self.loss,
            weights=self.weights,
            # Φ is only needed for a weight step or a loss built from it; frozen weights skip its passes.
            potentials=self.weights is not None or self.loss != "energy",
        )
        psl_time = time.perf_counter() - t
        for binding in current.bindings:
            binding.network.backward(result.neural_gradients[find_key(result.neural_gradients, binding.predicate)])
        self.last_step = result
        return {
            "loss": result.loss,
            "energy": result.energy,
            "step_time": time.perf_counter() - start,
            "psl_time": psl_time,
        }

    def train_pass(self) -> list[dict[str, float]]:
        """One update on every batch (in a fresh random order when shuffling); the steps' logs."""
        n = len(self.batches)
        order = self._order.permutation(n) if self.shuffle else range(n)
        return [self.train_step(int(i)) for i in order]

    # -- checkpoints ------------------------------------------------------------------

    def save_checkpoint(self, path: str | Path, epoch: int, history: History) -> Path:
        """Write a checkpoint (see :mod:`pslbridge.checkpoints`: verified, atomic, the previous one kept).

        It holds every bound network's state (weights, optimizer), the rule weights, the weight optimizer's
        step count, the epoch, Python's and numpy's RNG states, the batch order's state, the metrics history
        and every batch program's atom values (the warm start of the next solve).
        """
        arrays: dict[str, np.ndarray] = {"rule_weights": self.batches[self._weights_from].bridge.rule_weights}
        networks = []
        for i, binding in enumerate(self.bindings):
            state = binding.network.get_state()
            arrays.update({f"net{i}/{j}": np.asarray(a) for j, a in enumerate(state)})
            networks.append({"predicate": binding.predicate, "arrays": len(state)})
        for k, batch in enumerate(self.batches):
            arrays[f"batch{k}/atom_values"] = batch.bridge.program.state()["atom_values"]
        kind, keys, pos, has_gauss, cached = np.random.get_state()
        arrays["numpy_rng"] = keys
        version, python_state, gauss = random.getstate()
        manifest = {
            "epoch": epoch,
            "history": {"history": history.history, "epoch": history.epoch},
            "networks": networks,
            "batches": len(self.batches),
            "weight_steps": None if self.weights is None else self.weights.steps_taken,
            "python_rng": [version, list(python_state), gauss],
            "numpy_rng": [kind, int(pos), int(has_gauss), float(cached)],
            "batch_order": self._order.bit_generator.state,
        }
        return checkpoints.write(path, manifest, arrays)

    def load_checkpoint(self, path: str | Path) -> tuple[int, History]:
        """Restore a checkpoint written by :meth:`save_checkpoint`; returns (epoch, history).

        Raises:
            CheckpointError: The file is missing, corrupt, from another version or does not match the bound
                networks, the batches or the programs (nothing is restored then).
        """
        manifest, arrays = checkpoints.read(path)
        networks = manifest["networks"]
        if [n["predicate"] for n in networks] != [b.predicate for b in self.bindings]:
            raise CheckpointError(f"it holds networks for {[n['predicate'] for n in networks]}", path=path)
        if manifest["batches"] != len(self.batches):
            raise CheckpointError(f"it has {manifest['batches']} batches, this trainer {len(self.batches)}", path=path)
        for k, batch in enumerate(self.batches):
            if arrays[f"batch{k}/atom_values"].shape[0] != batch.bridge.program.rv_count:
                raise CheckpointError(f"it was written for another program (batch {k})", path=path)
        for i, (binding, saved) in enumerate(zip(self.bindings, networks)):
            binding.network.set_state([arrays[f"net{i}/{j}"] for j in range(saved["arrays"])])
        for k, batch in enumerate(self.batches):
            saved = {"atom_values": arrays[f"batch{k}/atom_values"], "rule_weights": arrays["rule_weights"]}
            batch.bridge.program.restore(saved)
        self._weights_from = 0
        if self.weights is not None and manifest["weight_steps"] is not None:
            self.weights.steps_taken = int(manifest["weight_steps"])
        version, python_state, gauss = manifest["python_rng"]
        random.setstate((version, tuple(python_state), gauss))
        kind, pos, has_gauss, cached = manifest["numpy_rng"]
        np.random.set_state((kind, arrays["numpy_rng"], pos, has_gauss, cached))
        self._order.bit_generator.state = manifest["batch_order"]
        return int(manifest["epoch"]), History(manifest["history"]["history"], manifest["history"]["epoch"])

    # -- the loop ---------------------------------------------------------------------

    def fit(
        self,
        epochs: int,
        *,
        callbacks: Sequence[Any] = (),
        verbose: int = 1,
        checkpoint: str | Path | None = None,
        resume: bool = False,
    ) -> History:
        """Train for ``epochs`` epochs (or until a callback stops training).

        Args:
            epochs: Number of epochs (>= 0).
            callbacks: Keras callbacks (``EarlyStopping``, ``ModelCheckpoint``, ...); they see the first
                bound model as ``self.model`` and the epoch logs.
            verbose: 1 for a Keras progress bar per epoch, 0 for silence.
            checkpoint: Write a checkpoint here after every epoch (see :mod:`pslbridge.checkpoints`); the path
                is checked before the first epoch.
            resume: Continue from ``checkpoint`` (after the epoch it recorded) when it exists; when only the
                previous one (``<name>.prev``) is left (a crash between two renames), from that one.

        Returns:
            The per-epoch :class:`History` (``loss``, ``energy``, ``step_time`` and evaluation metrics).

        Raises:
            ConfigurationError: ``epochs`` is not a non-negative integer.
            CheckpointError: The checkpoint path cannot be written, or the checkpoint to resume from is corrupt.
        """
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 0:
            raise ConfigurationError(f"epochs must be an integer >= 0, got {epochs!r}")
        history, first_epoch = History(), 0
        if checkpoint is not None:
            checkpoint = checkpoints.check_path(checkpoint)
            source = checkpoints.resume_source(checkpoint) if resume else None
            if source is not None:
                done, history = self.load_checkpoint(source)
                first_epoch = done + 1
                log.info("resuming from %s after epoch %d", source, done)
        hooks = _Hooks(callbacks, verbose, self.bindings[0].model, epochs, self.steps_per_epoch * len(self.batches))
        hooks.train_begin()
        for epoch in range(first_epoch, epochs):
            epoch_logs = self._epoch(epoch, hooks)
            history.append(epoch_logs)
            hooks.epoch_end(epoch, epoch_logs)
            if checkpoint is not None:
                self.save_checkpoint(checkpoint, epoch, history)
            if hooks.stop_requested() or self.stop_training:
                break
        hooks.train_end()
        return history

    def _epoch(self, epoch: int, hooks: _Hooks) -> dict[str, float]:
        hooks.epoch_begin(epoch)
        steps: list[dict[str, float]] = []
        for _ in range(self.steps_per_epoch):
            for step in self.train_pass():
                steps.append(step)
                hooks.progress(len(steps), step)
        epoch_logs = _epoch_logs(steps, self.steps_per_epoch)
        if self.evaluate is not None:
            epoch_logs.update({k: float(v) for k, v in self.evaluate().items()})
        if self.weights is not None:
            for i, w in enumerate(self.batches[self._weights_from].bridge.rule_weights):
                epoch_logs[f"w{i}"] = float(w)
        hooks.progress_done({k: v for k, v in epoch_logs.items() if not k.startswith("w")})
        return epoch_logs


class _Hooks:
    """Keras callbacks and progress bar around the loop (Keras is imported only when they are used)."""

    def __init__(self, callbacks: Sequence[Any], verbose: int, model: Any, epochs: int, updates: int) -> None:
        self.updates, self.verbose, self.model = updates, verbose, model
        self.keras: Any = None
        self.callbacks: Any = None
        self.bar: Any = None
        if callbacks or verbose:
            import keras

            self.keras = keras
            self.callbacks = keras.callbacks.CallbackList(
                list(callbacks), add_history=False, add_progbar=False, model=model, epochs=epochs, steps=updates
            )
            model.stop_training = False

    def train_begin(self) -> None:
        if self.callbacks is not None:
            self.callbacks.on_train_begin()

    def epoch_begin(self, epoch: int) -> None:
        if self.callbacks is not None:
            self.callbacks.on_epoch_begin(epoch)
        if self.verbose:
            self.bar = self.keras.utils.Progbar(self.updates, stateful_metrics=["energy", "step_time", "psl_time"])

    def progress(self, done: int, logs: Mapping[str, float]) -> None:
        if self.bar is not None:
            self.bar.update(done, values=list(logs.items()), finalize=False)

    def progress_done(self, logs: Mapping[str, float]) -> None:
        if self.bar is not None:
            self.bar.update(self.updates, values=list(logs.items()), finalize=True)

    def epoch_end(self, epoch: int, logs: dict[str, float]) -> None:
        if self.callbacks is not None:
            self.callbacks.on_epoch_end(epoch, logs)

    def stop_requested(self) -> bool:
        return bool(getattr(self.model, "stop_training", False)) if self.callbacks is not None else False

    def train_end(self) -> None:
        if self.callbacks is not None:
            self.callbacks.on_train_end()


def _check_shared(batch: Batch, first: Batch, k: int) -> None:
    """A later batch binds the same networks and optimizers as the first, and has the same rules."""
    shared = {b.predicate.upper(): b for b in first.bindings}
    for binding in batch.bindings:
        other = shared[binding.predicate.upper()]
        if binding.model is not other.model:
            raise ConfigurationError(
                f"batch {k} binds {binding.predicate} to another network than batch 0; "
                "mini-batches train one network per neural predicate"
            )
        if binding.optimizer is not other.optimizer:
            raise ConfigurationError(
                f"batch {k}'s {binding.predicate} binding has its own optimizer; pass batch 0's "
                "optimizer to every binding (or compile the model with one)"
            )
    if len(batch.bridge.rule_weights) != len(first.bridge.rule_weights):
        raise ConfigurationError(f"batch {k}'s program has other rules than batch 0's")


def _check_batch(batch: Batch, where: str) -> None:
    """The bindings cover exactly the program's neural predicates, with one input row per entity."""
    bridge = batch.bridge
    names = {b.predicate.upper() for b in batch.bindings}
    expected = {p.upper() for p in bridge.neural_predicates}
    if names != expected or len(names) != len(batch.bindings):
        raise ConfigurationError(
            f"{where}bind exactly the neural predicates {sorted(bridge.neural_predicates)}; "
            f"got {sorted(b.predicate for b in batch.bindings)}"
        )
    for binding in batch.bindings:
        n = bridge.neural_shape(binding.predicate)[0]
        if binding.rows != n:
            raise ConfigurationError(
                f"{where}inputs for {binding.predicate} have {binding.rows} rows; the "
                f"program has {n} entities (see Bridge.entities)"
            )


def _epoch_logs(steps: list[dict[str, float]], passes: int) -> dict[str, float]:
    """An epoch's logs from its steps.

    ``loss`` and ``energy`` are summed over each pass (the training set's value) and averaged over the
    passes; the other entries are averaged over the steps.
    """
    logs = {key: float(np.mean([step[key] for step in steps])) for key in steps[0]}
    for key in ("loss", "energy"):
        logs[key] = float(np.sum([step[key] for step in steps])) / passes
    return logs
