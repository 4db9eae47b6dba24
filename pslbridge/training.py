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

Example:
    >>> binding = NeuralBinding("Neural", model, images)  # doctest: +SKIP
    >>> trainer = Trainer(bridge, [binding], evaluate=lambda: {"val_acc": 0.9})  # doctest: +SKIP
    >>> history = trainer.fit(epochs=10)  # doctest: +SKIP
    >>> history.history["energy"][-1]  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
import pickle
import random
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .bridge import Bridge, LearnResult
from .errors import ConfigurationError
from .learning import WeightOptimizer

__all__ = ["Batch", "History", "NeuralBinding", "Trainer", "set_seed"]

log = logging.getLogger(__name__)


def set_seed(seed: int) -> None:
    """Seed Python, numpy and TensorFlow/Keras (when installed) for repeatable runs.

    Example:
        >>> set_seed(0)
    """
    random.seed(seed)
    np.random.seed(seed)
    try:
        import keras

        keras.utils.set_random_seed(seed)
    except ImportError:  # pragma: no cover - TensorFlow is optional
        pass


@dataclass
class NeuralBinding:
    """A Keras model feeding one neural predicate.

    Args:
        predicate: The neural predicate's name.
        model: A Keras model mapping ``inputs`` to ``(n_entities, n_classes)`` probabilities.
        inputs: Model inputs, one row per entity in :meth:`Bridge.entities` order.
        optimizer: A Keras optimizer (default: the model's compiled optimizer, else Adam 1e-3).

    Example:
        >>> NeuralBinding("Neural", model, images[ids])  # doctest: +SKIP
    """

    predicate: str
    model: Any
    inputs: Any
    optimizer: Any = None

    def __post_init__(self) -> None:
        if self.optimizer is None:
            self.optimizer = getattr(self.model, "optimizer", None)
        if self.optimizer is None:
            import keras

            self.optimizer = keras.optimizers.Adam(1e-3)

    def predict(self, training: bool = False) -> np.ndarray:
        """The model's predictions for every entity (no gradient)."""
        return np.asarray(self.model(self.inputs, training=training))

    def compiled_step(self) -> tuple[Callable[[], Any], Callable[[Any], None]]:
        """Graph-compiled ``forward()`` and ``backward(output_gradients)`` for this binding.

        The backward pass recomputes the forward pass inside one compiled graph (as NeuPSL's
        fit does), which on CPU is faster than keeping an eager tape across the PSL call.
        """
        cached = getattr(self, "_compiled", None)
        if cached is not None:
            return cached
        import tensorflow as tf

        inputs = tf.convert_to_tensor(self.inputs)
        model, optimizer = self.model, self.optimizer

        @tf.function
        def forward() -> Any:
            return model(inputs, training=True)

        @tf.function
        def backward(upstream: Any) -> None:
            with tf.GradientTape() as tape:
                output = model(inputs, training=True)
            variables = model.trainable_variables
            grads = tape.gradient(output, variables, output_gradients=upstream)
            optimizer.apply_gradients([(g, v) for g, v in zip(grads, variables) if g is not None])

        self._compiled = (forward, backward)
        return self._compiled


@dataclass
class Batch:
    """One mini-batch: its own ground program and the bindings that feed it.

    Args:
        bridge: The batch's training program (``phase="learn"``).
        bindings: One :class:`NeuralBinding` per neural predicate, with this batch's entity rows.

    Example:
        >>> Batch(bridges[0], [NeuralBinding("Neural", cnn, images[:60])])  # doctest: +SKIP
    """

    bridge: Bridge
    bindings: Sequence[NeuralBinding]


@dataclass
class History:
    """Per-epoch metrics, like Keras' ``History``.

    Example:
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
        loss: ``"energy"`` or ``"structured_perceptron"``.
        steps_per_epoch: Learning steps per epoch (with mini-batches: passes over all batches).
        compiled: Run the networks' forward and backward passes as compiled TensorFlow graphs
            (default); False keeps one eager ``GradientTape`` across the PSL call.

    Example:
        >>> Trainer(bridge, [NeuralBinding("Neural", cnn, images)]).fit(epochs=5)  # doctest: +SKIP
    """

    def __init__(
        self,
        bridge: Bridge,
        bindings: Sequence[NeuralBinding],
        *,
        weights: WeightOptimizer | None = None,
        evaluate: Callable[[], Mapping[str, float]] | None = None,
        loss: str = "energy",
        steps_per_epoch: int = 1,
        compiled: bool = True,
    ) -> None:
        if steps_per_epoch < 1:
            raise ConfigurationError("steps_per_epoch must be >= 1")
        self.batches = [Batch(bridge, list(bindings))]
        _check_batch(self.batches[0], "")
        self.weights = weights
        self.evaluate = evaluate
        self.loss = loss
        self.steps_per_epoch = steps_per_epoch
        self.compiled = compiled
        self.stop_training = False
        self.last_step: LearnResult | None = None
        self.shuffle = False
        self._order = np.random.default_rng(0)
        self._weights_from = 0  # the batch whose program holds the current rule weights

    @classmethod
    def batched(
        cls,
        batches: Sequence[Batch],
        *,
        shuffle: bool = True,
        seed: int | None = None,
        **kwargs: Any,
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

        Example:
            >>> parts = train_set.batches(5)  # doctest: +SKIP
            >>> trainer = Trainer.batched(  # doctest: +SKIP
            ...     [Batch(Bridge(addition_spec(p)), [NeuralBinding("Neural", cnn, x[p.image_ids])]) for p in parts],
            ...     steps_per_epoch=4, seed=0)
        """
        batches = list(batches)
        if not batches:
            raise ConfigurationError("Trainer.batched needs at least one batch")
        trainer = cls(batches[0].bridge, batches[0].bindings, **kwargs)
        first = {b.predicate.upper(): b for b in trainer.bindings}
        for k, batch in enumerate(batches[1:], start=1):
            batch = Batch(batch.bridge, list(batch.bindings))
            _check_batch(batch, f"batch {k}: ")
            for binding in batch.bindings:
                shared = first[binding.predicate.upper()]
                if binding.model is not shared.model:
                    raise ConfigurationError(
                        f"batch {k} binds {binding.predicate} to another network than batch 0; "
                        "mini-batches train one network per neural predicate"
                    )
                if binding.optimizer is not shared.optimizer:
                    raise ConfigurationError(
                        f"batch {k}'s {binding.predicate} binding has its own optimizer; pass batch 0's "
                        "optimizer to every binding (or compile the model with one)"
                    )
            if len(batch.bridge.rule_weights) != len(trainer.bridge.rule_weights):
                raise ConfigurationError(f"batch {k}'s program has other rules than batch 0's")
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
        """One learning step on one batch: predict, learn_step, backpropagate ∂energy/∂prediction.

        Args:
            batch: Which batch (the only one without mini-batches).

        Returns:
            ``{"loss", "energy", "step_time", "psl_time"}`` of this step.
        """
        import tensorflow as tf

        current = self.batches[batch]
        if self.weights is not None and batch != self._weights_from:
            current.bridge.rule_weights = self.batches[self._weights_from].bridge.rule_weights
        self._weights_from = batch
        if self.compiled:
            return self._compiled_train_step(current)
        start = time.perf_counter()
        tapes, predictions = [], {}
        for binding in current.bindings:
            with tf.GradientTape() as tape:
                output = binding.model(binding.inputs, training=True)
            tapes.append((binding, tape, output))
            predictions[binding.predicate] = output.numpy()
        result, psl_time = self._learn(current.bridge, predictions)
        for binding, tape, output in tapes:
            grad = self._gradient(current.bridge, result, binding)
            variables = binding.model.trainable_variables
            grads = tape.gradient(output, variables, output_gradients=tf.convert_to_tensor(grad, output.dtype))
            binding.optimizer.apply_gradients([(g, v) for g, v in zip(grads, variables) if g is not None])
        return self._logs(result, start, psl_time)

    def train_pass(self) -> list[dict[str, float]]:
        """One update on every batch (in a fresh random order when shuffling); the steps' logs.

        Example:
            >>> [step["energy"] for step in trainer.train_pass()]  # doctest: +SKIP
            [3.1, 2.7, 2.9]
        """
        n = len(self.batches)
        order = self._order.permutation(n) if self.shuffle else range(n)
        return [self.train_step(int(i)) for i in order]

    def _learn(self, bridge: Bridge, predictions: dict[str, np.ndarray]) -> tuple[LearnResult, float]:
        """``learn_step`` on the predictions, and the seconds it took.

        Φ is only needed for a weight step or a loss built from it; frozen weights skip its passes.
        """
        start = time.perf_counter()
        result = bridge.learn_step(
            predictions,
            loss=self.loss,
            weights=self.weights,
            potentials=self.weights is not None or self.loss != "energy",
        )
        return result, time.perf_counter() - start

    @staticmethod
    def _gradient(bridge: Bridge, result: LearnResult, binding: NeuralBinding) -> np.ndarray:
        """∂loss/∂prediction for one binding's predicate."""
        return result.neural_gradients[bridge._block(binding.predicate).spec.name]

    def _logs(self, result: LearnResult, start: float, psl_time: float) -> dict[str, float]:
        self.last_step = result
        return {
            "loss": result.loss,
            "energy": result.energy,
            "step_time": time.perf_counter() - start,
            "psl_time": psl_time,
        }

    def _compiled_train_step(self, batch: Batch) -> dict[str, float]:
        import tensorflow as tf

        start = time.perf_counter()
        steps = [(binding, *binding.compiled_step()) for binding in batch.bindings]
        predictions = {binding.predicate: forward().numpy() for binding, forward, _ in steps}
        result, psl_time = self._learn(batch.bridge, predictions)
        for binding, _, backward in steps:
            grad = self._gradient(batch.bridge, result, binding)
            backward(tf.convert_to_tensor(grad, dtype=tf.float32))
        return self._logs(result, start, psl_time)

    # -- checkpoints ------------------------------------------------------------------

    def save_checkpoint(self, path: str | Path, epoch: int, history: History) -> Path:
        """Write a checkpoint atomically (temporary file, fsync, rename: never a half-written file).

        It holds every bound network's weights and optimizer state, the rule weights, the weight
        optimizer's step count, the epoch, Python's and numpy's RNG states, the batch order's state,
        the metrics history and every batch program's atom values (the warm start of the next solve).
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {
            "format": 2,
            "epoch": epoch,
            "history": {"history": history.history, "epoch": history.epoch},
            "networks": [
                {
                    "predicate": b.predicate,
                    "weights": b.model.get_weights(),
                    "optimizer": [v.numpy() for v in b.optimizer.variables],
                }
                for b in self.bindings
            ],
            "rule_weights": self.batches[self._weights_from].bridge.rule_weights,
            "weight_steps": None if self.weights is None else self.weights.steps_taken,
            "python_rng": random.getstate(),
            "numpy_rng": np.random.get_state(),
            "batch_order": self._order.bit_generator.state,
            "atom_values": [b.bridge.program.atom_values(b.bridge.program.rv_count) for b in self.batches],
        }
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                pickle.dump(state, handle, protocol=pickle.HIGHEST_PROTOCOL)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        for stale in path.parent.glob(path.name + ".*.tmp"):  # left by a process killed while writing
            stale.unlink(missing_ok=True)
        return path

    def load_checkpoint(self, path: str | Path) -> tuple[int, History]:
        """Restore a checkpoint written by :meth:`save_checkpoint`; returns (epoch, history).

        Raises:
            ConfigurationError: The checkpoint does not match the bound networks, the batches or the programs.
        """
        with open(path, "rb") as handle:
            state = pickle.load(handle)  # noqa: S301 - our own checkpoint files
        if [n["predicate"] for n in state["networks"]] != [b.predicate for b in self.bindings]:
            raise ConfigurationError(f"checkpoint {path} is for networks {[n['predicate'] for n in state['networks']]}")
        values = state["atom_values"] if state.get("format", 1) >= 2 else [state["atom_values"]]
        if len(values) != len(self.batches):
            raise ConfigurationError(
                f"checkpoint {path} has {len(values)} batches; this trainer has {len(self.batches)}"
            )
        for k, (batch, saved) in enumerate(zip(self.batches, values)):
            if saved.shape[0] != batch.bridge.program.rv_count:
                raise ConfigurationError(f"checkpoint {path} was written for another program (batch {k})")
        for binding, saved in zip(self.bindings, state["networks"]):
            binding.model.set_weights(saved["weights"])
            if saved["optimizer"]:
                binding.optimizer.build(binding.model.trainable_variables)
                for variable, value in zip(binding.optimizer.variables, saved["optimizer"]):
                    variable.assign(value)
        for batch in self.batches:
            batch.bridge.rule_weights = state["rule_weights"]
        self._weights_from = 0
        if self.weights is not None and state["weight_steps"] is not None:
            self.weights.steps_taken = state["weight_steps"]
        random.setstate(state["python_rng"])
        np.random.set_state(state["numpy_rng"])
        if "batch_order" in state:
            self._order.bit_generator.state = state["batch_order"]
        for batch, saved in zip(self.batches, values):
            program = batch.bridge.program
            program._atom_store.getAtomValues()[0 : program.rv_count] = saved
            program._dirty_atoms = True
        history = History(state["history"]["history"], state["history"]["epoch"])
        return int(state["epoch"]), history

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
            epochs: Number of epochs.
            callbacks: Keras callbacks (``EarlyStopping``, ``ModelCheckpoint``, ...); they see the first
                bound model as ``self.model`` and the epoch logs.
            verbose: 1 for a Keras progress bar per epoch, 0 for silence.
            checkpoint: Write a checkpoint here after every epoch (atomically).
            resume: Continue from ``checkpoint`` if it exists (after the epoch it recorded).

        Returns:
            The per-epoch :class:`History` (``loss``, ``energy``, ``step_time`` and evaluation metrics).
        """
        import keras

        history = History()
        first_epoch = 0
        if resume and checkpoint is not None and Path(checkpoint).is_file():
            done, history = self.load_checkpoint(checkpoint)
            first_epoch = done + 1
            log.info("resuming from %s after epoch %d", checkpoint, done)
        model = self.bindings[0].model
        updates = self.steps_per_epoch * len(self.batches)
        callback_list = keras.callbacks.CallbackList(
            list(callbacks),
            add_history=False,
            add_progbar=False,
            model=model,
            epochs=epochs,
            steps=updates,
        )
        model.stop_training = False
        callback_list.on_train_begin()
        for epoch in range(first_epoch, epochs):
            callback_list.on_epoch_begin(epoch)
            bar = keras.utils.Progbar(updates, verbose=verbose, stateful_metrics=["energy", "step_time", "psl_time"])
            steps: list[dict[str, float]] = []
            for _ in range(self.steps_per_epoch):
                for step in self.train_pass():
                    steps.append(step)
                    bar.update(len(steps), values=list(step.items()), finalize=False)
            epoch_logs = _epoch_logs(steps, self.steps_per_epoch)
            if self.evaluate is not None:
                epoch_logs.update({k: float(v) for k, v in self.evaluate().items()})
            if self.weights is not None:
                for i, w in enumerate(self.batches[self._weights_from].bridge.rule_weights):
                    epoch_logs[f"w{i}"] = float(w)
            bar.update(updates, values=[(k, v) for k, v in epoch_logs.items() if not k.startswith("w")], finalize=True)
            history.append(epoch_logs)
            callback_list.on_epoch_end(epoch, epoch_logs)
            if checkpoint is not None:
                self.save_checkpoint(checkpoint, epoch, history)
            if model.stop_training or self.stop_training:
                break
        callback_list.on_train_end()
        return history


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
        if len(binding.inputs) != n:
            raise ConfigurationError(
                f"{where}inputs for {binding.predicate} have {len(binding.inputs)} rows; the "
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
