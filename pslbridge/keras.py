"""Keras-native NeuPSL: a :class:`NeuPSLModel` is a ``keras.Model`` whose loss is computed by PSL.

``model.fit(ProgramData(...), epochs=...)`` trains the networks bound to neural predicates through the PSL
program(s) with Keras' own machinery: its ``History``, progress bar and every standard callback
(``EarlyStopping``, ``ModelCheckpoint``, ``TerminateOnNaN``, ``CSVLogger``, ``TensorBoard``, ``LambdaCallback``),
with the batch hooks called every step, on every Keras 3 backend that trains (``KERAS_BACKEND=tensorflow``, ``jax``
or ``torch``). Each step runs each network's forward pass once: the predictions go into PSL as one op of the
backend (:mod:`pslbridge.psl_op`) and ``∂loss/∂prediction`` comes back as that op's gradient, so the backend's own
backward pass continues from the same forward computation. Keras' own ``train_step`` runs; PSL's loss is
:meth:`NeuPSLModel.compute_loss`.

One Keras "batch" is one ground program (a :class:`pslbridge.Bridge` with its entities' network inputs): several
programs are mini-batches over one network per neural predicate, as :meth:`pslbridge.training.Trainer.batched`.
Learned rule weights (with ``weights=``) carry from one program to the next and to the programs given to
:meth:`NeuPSLModel.infer`. :meth:`NeuPSLModel.save_neupsl` writes one artefact (rules, learned weights, predicate
declarations, options and the networks in Keras' own format; no pickle) that :func:`load_neupsl` turns into a
:class:`NeuPSLPredictor` for new entities and observations.

Examples:
    >>> import keras
    >>> from pslbridge import Bridge
    >>> from pslbridge.examples.mnist_addition import add1_spec
    >>> net = keras.Sequential([keras.Input((4,)), keras.layers.Dense(10, activation="softmax")])
    >>> bridge = Bridge(add1_spec([(0, 1)], sums=[7], phase="learn"))
    >>> data = ProgramData([(bridge, {"Neural": np.eye(2, 4, dtype="float32")})])
    >>> model = NeuPSLModel({"Neural": net})
    >>> model.compile(optimizer=keras.optimizers.Adam(0.01))
    >>> history = model.fit(data, epochs=3, verbose=0)
    >>> sorted(history.history), history.history["loss"][-1] < history.history["loss"][0]
    (['energy', 'loss'], True)
    >>> bridge.close()
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import keras
import numpy as np

from .bridge import Bridge
from .errors import ConfigurationError, NeuralInputError, PslBridgeWarning
from .keras_data import ProgramData, keras_views
from .learning import LearnedWeights, WeightOptimizer
from .losses import Loss
from .neural_inputs import check_range
from .program_steps import ProgramSteps
from .psl_op import backend_module, psl_step
from .results import InferenceResult, find_key
from .saved import NeuPSLPredictor, load_neupsl, manifest_of, write_archive

# NeuPSLPredictor and load_neupsl: from .saved
__all__ = ["ClassBalance", "LogGradientSoftmax", "NeuPSLModel", "NeuPSLPredictor", "ProgramData", "load_neupsl"]

log = logging.getLogger(__name__)


@keras.saving.register_keras_serializable(package="pslbridge")
class ClassBalance(keras.layers.Layer):
    """A class-balance prior on a softmax output: ``weight * KL(uniform || mean prediction)``.

    Place it after the output layer: it passes the predictions through unchanged and, in training calls, adds
    the prior to the network's losses, which :class:`NeuPSLModel` adds to PSL's loss. Under weak supervision
    (MNIST-Addition's sums) a network can settle where some classes are never predicted (every 8 and 9 read as
    a 6 or 7) while the sums' energy is already low; the prior pushes the mean prediction back towards every
    class. It is 0 when the predictions average to uniform.

    With ``momentum = 0`` the mean is the batch's own. A small batch of a perfect classifier is rarely balanced
    (40 images hold some classes once or not at all), so that prior also pulls correct predictions towards
    softer ones. With ``0 < momentum < 1`` the mean is an exponential moving average over training calls
    (bias-corrected like Adam's moments; only the current batch's share carries a gradient): a prior on the
    training set's class marginal. Its gradient vanishes on a network whose running mean is uniform, whatever
    the batches hold, and is largest for the classes the network has stopped predicting.

    Args:
        weight: Strength of the prior (>= 0).
        momentum: Weight of the past in the running mean (0: each batch alone; must be in [0, 1)).

    Examples:
        >>> import numpy as np
        >>> prior = ClassBalance(1.0)
        >>> abs(float(prior.value(np.full((4, 2), 0.5, dtype="float32")))) < 1e-6  # balanced batch
        True
        >>> round(float(prior.value(np.array([[0.9, 0.1], [0.9, 0.1]], dtype="float32"))), 4)  # KL(u || (.9, .1))
        0.5108
        >>> _ = prior(np.array([[0.9, 0.1]], dtype="float32"), training=True)
        >>> len(prior.losses), len(ClassBalance(1.0).losses)
        (1, 0)
        >>> running = ClassBalance(1.0, momentum=0.5)
        >>> _ = running(np.array([[1.0, 0.0]], dtype="float32"), training=True)  # first call: that batch's mean
        >>> _ = running(np.array([[0.0, 1.0]], dtype="float32"), training=True)  # (.5 * (1, 0) + .5 * (0, 1)) / .75
        >>> [round(float(m), 4) for m in running.running_mean()]
        [0.3333, 0.6667]
    """

    def __init__(self, weight: float, momentum: float = 0.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not 0.0 <= weight < float("inf"):
            raise ConfigurationError(f"ClassBalance weight must be a finite number >= 0, got {weight}")
        if not 0.0 <= momentum < 1.0:
            raise ConfigurationError(f"ClassBalance momentum must lie in [0, 1), got {momentum}")
        self.weight = float(weight)
        self.momentum = float(momentum)

    def build(self, input_shape: Any) -> None:
        """Create the running mean's state (with ``momentum > 0``): the uncorrected average and a call count."""
        if self.momentum > 0:
            classes = int(input_shape[-1])
            self.running = self.add_weight(shape=(classes,), initializer="zeros", trainable=False, name="running")
            self.calls = self.add_weight(shape=(), initializer="zeros", trainable=False, name="calls")

    def running_mean(self) -> np.ndarray:
        """The bias-corrected running mean prediction so far (``momentum > 0`` only; uniform before any call)."""
        if self.momentum <= 0:
            raise ConfigurationError("ClassBalance.running_mean needs momentum > 0")
        if not self.built:
            raise ConfigurationError("ClassBalance.running_mean: the layer has not seen any predictions yet")
        running, calls = np.asarray(self.running), float(np.asarray(self.calls))
        if calls == 0:
            return np.full(running.shape, 1.0 / running.shape[0], dtype=running.dtype)
        return running / (1.0 - self.momentum**calls)

    def value(self, probabilities: Any) -> Any:
        """The prior's value for one batch's predictions (batch × classes), as if it were the only batch."""
        return self._divergence(keras.ops.mean(keras.ops.convert_to_tensor(probabilities), axis=0))

    def _divergence(self, mean: Any) -> Any:
        uniform = 1.0 / keras.ops.cast(keras.ops.shape(mean)[-1], mean.dtype)
        return self.weight * keras.ops.sum(uniform * (keras.ops.log(uniform) - keras.ops.log(mean + 1e-7)))

    def call(self, inputs: Any, training: bool | None = None) -> Any:
        """The predictions, unchanged; a training call also adds the prior to the losses."""
        if training and self.weight > 0:
            if self.momentum > 0:
                batch = keras.ops.mean(keras.ops.cast(inputs, self.running.dtype), axis=0)
                calls = self.calls + 1.0
                raw = self.momentum * self.running + (1.0 - self.momentum) * batch
                self.add_loss(self._divergence(raw / (1.0 - self.momentum**calls)))
                self.running.assign(keras.ops.stop_gradient(raw))
                self.calls.assign(calls)
            else:
                self.add_loss(self.value(inputs))
        return inputs

    def get_config(self) -> dict[str, Any]:
        """The weight, the momentum and the layer's own configuration (for saving)."""
        return {**super().get_config(), "weight": self.weight, "momentum": self.momentum}


@keras.saving.register_keras_serializable(package="pslbridge")
class LogGradientSoftmax(keras.layers.Layer):
    """A softmax whose backward pass reads the incoming gradient as one with respect to log-probabilities.

    The forward pass is ``softmax(z)``, exactly. The backward pass maps the gradient ``g`` of a loss with respect to
    the probabilities ``p`` to ``g - p * sum(g)`` for the logits, where the softmax's own is
    ``p * (g - sum(p * g))``: the gradient of the loss as if it were written in ``log p``. For a loss linear in
    ``p``, ``1 - p[y]``, that is cross-entropy's gradient ``p - onehot(y)``: a class the network gives little
    probability is not slowed by its own small ``p``. It goes in place of a ``softmax`` activation on a network's
    last layer (a ``Dense`` layer without activation before it). It changes the direction of training, not only
    its speed, so whether a model trains better with it is for measurement: no experiment preset uses it. Saved
    networks load it by name.

    Args:
        active: Start with the log-probability gradient (``False``: the softmax's own until :meth:`set_active`).

    Examples:
        >>> import numpy as np
        >>> logits = np.array([[2.0, 0.0, -1.0]], dtype="float32")
        >>> probs = keras.ops.convert_to_numpy(LogGradientSoftmax()(logits))
        >>> bool(np.allclose(probs, keras.ops.convert_to_numpy(keras.ops.softmax(logits))))
        True
        >>> net = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), LogGradientSoftmax(active=False)])
        >>> net.layers[-1].is_active()
        False
        >>> net.layers[-1].set_active(True)
        >>> net.layers[-1].is_active()
        True
    """

    def __init__(self, active: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.initially_active = bool(active)

    def build(self, input_shape: Any) -> None:
        """Create the switch (a non-trainable scalar, 1 for the log-probability gradient, 0 for the softmax's)."""
        initial = keras.initializers.Constant(float(self.initially_active))
        self.active = self.add_weight(shape=(), initializer=initial, trainable=False, name="active")

    def set_active(self, active: bool) -> None:
        """Switch the backward pass (compiled training steps read the switch at every call)."""
        if not self.built:
            raise ConfigurationError("LogGradientSoftmax.set_active: the layer has not been built (call it once)")
        self.active.assign(1.0 if active else 0.0)

    def is_active(self) -> bool:
        """Whether the backward pass is the log-probability gradient."""
        return bool(float(keras.ops.convert_to_numpy(self.active)) > 0.5) if self.built else self.initially_active

    def call(self, inputs: Any) -> Any:
        """The softmax of ``inputs`` (last axis), with the log-probability gradient while active."""
        softmax = keras.ops.softmax(inputs, axis=-1)
        probs = keras.ops.stop_gradient(softmax)
        mean = keras.ops.sum(probs * inputs, axis=-1, keepdims=True)  # its gradient in z is p
        logged = (inputs - keras.ops.stop_gradient(inputs)) - (mean - keras.ops.stop_gradient(mean))
        active = keras.ops.cast(self.active, inputs.dtype)
        return probs + active * logged + (1.0 - active) * (softmax - probs)  # the value: the softmax's

    def compute_output_shape(self, input_shape: Any) -> Any:
        """The input's shape."""
        return input_shape

    def get_config(self) -> dict[str, Any]:
        """Whether it starts active, and the layer's own configuration (for saving)."""
        return {**super().get_config(), "active": self.initially_active}


class NeuPSLModel(keras.Model):
    """Networks bound to neural predicates, trained through PSL with Keras' ``fit``.

    Args:
        networks: ``{neural predicate: keras.Model}`` mapping inputs to (entities × classes) probabilities.
        loss: A loss of :meth:`pslbridge.Bridge.learn_step` (``"energy"``, ``"bce"``, ...).
        weights: A :class:`~pslbridge.learning.WeightOptimizer` to learn rule weights too (None: frozen).

    The training data are a :class:`ProgramData`; ``compile(optimizer=...)`` sets the networks' optimizer. A
    prediction with NaN or infinity gives a NaN loss for that step (so ``TerminateOnNaN`` stops there) and no
    update; PSL never sees it.

    Examples:
        >>> import keras
        >>> model = NeuPSLModel({"Neural": keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])})
        >>> model.predicates
        ['Neural']
    """

    def __init__(
        self,
        networks: Mapping[str, Any],
        *,
        loss: str | Loss = "energy",
        weights: WeightOptimizer | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not networks:
            raise ConfigurationError("NeuPSLModel needs at least one network")
        self.networks = dict(networks)
        self.predicates = list(self.networks)
        self.steps = ProgramSteps(self.predicates, loss, weights)  # the PSL side of each step
        self.psl_loss, self.weight_optimizer = self.steps.loss, weights
        self.learned = self.steps.learned  # learned rule weights by rule text (none learned: programs keep theirs)
        self.psl_times = self.steps.times  # seconds in PSL (learn_step) per training step, in order
        self.data: ProgramData | None = None
        self.eval_data: ProgramData | None = None
        self._trackers = {name: keras.metrics.Mean(name=name) for name in ("loss", "energy")}
        self._step_error: BaseException | None = None

    @property
    def rule_weights(self) -> np.ndarray | None:
        """The learned rule weights, in the first training program's rule order (None: none learned)."""
        return self.learned.values

    @property
    def metrics(self) -> list[Any]:
        """The epoch-average trackers Keras resets every epoch."""
        return list(self._trackers.values())

    def call(self, inputs: Mapping[str, Any], training: bool = False) -> dict[str, Any]:
        """Every network's predictions for its inputs."""
        return {name: self.networks[name](inputs[name], training=training) for name in self.predicates}

    def compile(self, *args: Any, **kwargs: Any) -> None:
        """Keras' ``compile``: ``optimizer=`` sets the networks' optimizer; the loss is PSL's.

        A ``loss=`` or ``metrics=`` given here would be ignored (PSL's loss is chosen by ``NeuPSLModel(loss=...)``,
        and metrics come from evaluation programs), so they raise a warning.

        Examples:
            >>> import keras, warnings
            >>> model = NeuPSLModel({"Neural": keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])})
            >>> with warnings.catch_warnings(record=True) as caught:
            ...     warnings.simplefilter("always")
            ...     model.compile(optimizer="adam", loss="mse")
            >>> "ignored" in str(caught[0].message)
            True
        """
        ignored = [name for name in ("loss", "metrics", "loss_weights", "weighted_metrics") if kwargs.get(name)]
        if ignored:
            warnings.warn(
                f"NeuPSLModel.compile: {', '.join(ignored)} ignored; the loss is PSL's (NeuPSLModel(loss=...)), "
                "and accuracy comes from model.infer on evaluation programs",
                PslBridgeWarning,
                stacklevel=2,
            )
            kwargs = {k: v for k, v in kwargs.items() if k not in ignored}
        op = backend_module()  # refuses a backend that cannot train
        if not op.COMPILES:
            if kwargs.get("jit_compile") is True:
                warnings.warn(
                    f"NeuPSLModel.compile: jit_compile=True ignored on {keras.backend.backend()} (the PSL step runs "
                    "on the host, which XLA cannot compile)",
                    PslBridgeWarning,
                    stacklevel=2,
                )
            kwargs["jit_compile"] = False
        super().compile(*args, **kwargs)

    def fit(self, x: ProgramData | None = None, *args: Any, **kwargs: Any) -> Any:
        """Keras' ``fit`` on a :class:`ProgramData` (one step per program; ``epochs``, ``validation_data``, ...).

        Raises:
            ConfigurationError: ``x`` or ``validation_data`` is not a ProgramData, ``validation_split`` is given,
                the networks are keyed by other predicates, or programs sharing learned weights differ in rules.
            NeuralInputError: A network's output on program 0 has another shape or lies outside [0, 1].
            ClosedError: A program was closed.
        """
        if not isinstance(x, ProgramData):
            raise ConfigurationError(f"NeuPSLModel.fit takes a ProgramData, got {type(x).__name__}")
        validation = kwargs.get("validation_data")
        if kwargs.get("validation_split"):
            raise ConfigurationError(
                "NeuPSLModel.fit does not take validation_split (a program cannot be split by rows): give "
                "validation_data=ProgramData([...]) of evaluation programs"
            )
        if validation is not None and not isinstance(validation, ProgramData):
            raise ConfigurationError(
                f"NeuPSLModel.fit: validation_data must be a ProgramData of evaluation programs, got "
                f"{type(validation).__name__}"
            )
        if kwargs.get("batch_size") is not None:
            warnings.warn(
                "NeuPSLModel.fit: batch_size ignored; one Keras batch is one ground program (ProgramData)",
                PslBridgeWarning,
                stacklevel=2,
            )
            kwargs = {k: v for k, v in kwargs.items() if k != "batch_size"}
        _preflight(self.networks, self.weight_optimizer, self.learned, x)
        if validation is not None:
            _preflight(self.networks, self.weight_optimizer, self.learned, validation)
        self.data, self.eval_data = x, self.eval_data if validation is None else validation
        return self._reraising(super().fit, x, *args, **kwargs)

    def _reraising(self, method: Any, data: ProgramData, *args: Any, **kwargs: Any) -> Any:
        """Keras' ``fit``/``evaluate`` on views of the data (:func:`keras_views`); PSL's errors come out as such."""
        self._step_error = None
        with keras_views(data, kwargs) as view:
            try:
                return method(view, *args, **kwargs)
            except Exception as exc:
                error, self._step_error = self._step_error, None
                if error is None or error is exc:
                    raise
                raise error.with_traceback(None) from None  # PSL's own error, not the backend's wrapper of it

    def evaluate(self, x: ProgramData | None = None, *args: Any, **kwargs: Any) -> Any:
        """Keras' ``evaluate`` on a :class:`ProgramData` of evaluation programs: PSL's loss and energy, no update.

        Each program's step is a ``learn_step`` at the networks' predictions in inference mode, with the learned
        rule weights and no rule-weight step; the programs need labels (``phase="learn"``). ``fit`` calls it for
        ``validation_data``. MAP states and accuracies come from :meth:`infer`.

        Raises:
            ConfigurationError: ``x`` is not a ProgramData, or its programs do not fit this model.

        Examples:
            >>> import keras
            >>> from pslbridge.examples.mnist_addition import add1_spec
            >>> net = keras.Sequential([keras.Input((4,)), keras.layers.Dense(10, activation="softmax")])
            >>> model = NeuPSLModel({"Neural": net})
            >>> model.compile(optimizer="adam")
            >>> with Bridge(add1_spec([(0, 1)], sums=[7], phase="learn")) as held_out:
            ...     logs = model.evaluate(ProgramData([(held_out, {"Neural": np.eye(2, 4)})]), verbose=0,
            ...                           return_dict=True)
            >>> sorted(logs), logs["loss"] > 0
            (['energy', 'loss'], True)
        """
        if kwargs.get("_use_cached_eval_dataset"):  # fit's validation (eval_data): Keras evaluates its cached iterator
            return super().evaluate(x, *args, **kwargs)
        if not isinstance(x, ProgramData):
            raise ConfigurationError(f"NeuPSLModel.evaluate takes a ProgramData, got {type(x).__name__}")
        _preflight(self.networks, self.weight_optimizer, self.learned, x)
        self.eval_data = x
        return self._reraising(super().evaluate, x, *args, **kwargs)

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Not Keras' whole-model ``save`` (a NeuPSL model is networks plus a PSL program).

        Raises:
            ConfigurationError: Always; it names :meth:`save_neupsl` (and ``save_weights`` for the networks).

        Examples:
            >>> import keras
            >>> NeuPSLModel({"Neural": keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])}).save("m.keras")
            Traceback (most recent call last):
            ...
            pslbridge.errors.ConfigurationError: NeuPSLModel.save: ...
        """
        raise ConfigurationError(
            "NeuPSLModel.save: save the whole model with model.save_neupsl(path, bridge) (rules, rule weights, "
            "declarations and networks; load_neupsl reads it), or only the networks' weights with save_weights"
        )

    def compute_loss(
        self,
        x: Mapping[str, Any] | None = None,
        y: Any = None,
        y_pred: Mapping[str, Any] | None = None,
        sample_weight: Any = None,
        training: bool = True,
    ) -> Any:
        """PSL's loss for one program's predictions (one op; its gradient is PSL's) plus the networks' own losses.

        Keras' ``train_step`` and ``test_step`` (evaluation programs; no rule-weight step) call it on every backend.
        The networks' regularisation losses (``kernel_regularizer``, ``add_loss``, ...) are added, as Keras' own
        ``compute_loss`` adds them; the ``loss`` and ``energy`` trackers are updated here.
        """
        assert x is not None and y_pred is not None
        step = self._learn if training else self._evaluate
        loss, energy = psl_step(step, x["program"], [y_pred[n] for n in self.predicates])
        for extra in self.losses:
            loss = loss + keras.ops.sum(keras.ops.cast(extra, "float32"))
        self._trackers["loss"].update_state(loss)
        self._trackers["energy"].update_state(energy)
        return loss

    def _learn(self, program: int, arrays: list[np.ndarray]) -> tuple[float, float, list[np.ndarray]]:
        """The PSL side of a training step (runs on the host, inside the backend's training function)."""
        assert self.data is not None
        return self._host(self.data, program, arrays, training=True)

    def _evaluate(self, program: int, arrays: list[np.ndarray]) -> tuple[float, float, list[np.ndarray]]:
        """The PSL side of an evaluation step (no rule-weight step)."""
        assert self.eval_data is not None
        return self._host(self.eval_data, program, arrays, training=False)

    def _host(
        self, data: ProgramData, program: int, arrays: list[np.ndarray], training: bool
    ) -> tuple[float, float, list[np.ndarray]]:
        try:
            return self.steps.step(data.prepared(program), arrays, training=training)
        except Exception as exc:
            self._step_error = exc  # fit and evaluate re-raise it as itself, not as the backend's wrapper
            raise

    def resume_at(self, epoch: int) -> None:
        """Make the coming ``fit`` start at ``epoch`` (what a resuming callback sets in ``on_train_begin``).

        Examples:
            >>> import keras
            >>> model = NeuPSLModel({"Neural": keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])})
            >>> model.resume_at(4)
        """
        self._initial_epoch = int(epoch)

    def restore_learned_weights(self, rule_weights: np.ndarray | None, weight_steps: int | None) -> None:
        """Restore learned rule weights and the weight optimizer's step count (from a checkpoint).

        Examples:
            >>> import keras
            >>> model = NeuPSLModel({"Neural": keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])})
            >>> model.restore_learned_weights(np.array([0.5, 0.5]), None)
            >>> model.rule_weights.tolist()
            [0.5, 0.5]
        """
        self.learned.values = None if rule_weights is None else np.asarray(rule_weights, dtype=np.float64).copy()
        if self.weight_optimizer is not None and weight_steps is not None:
            self.weight_optimizer.steps_taken = int(weight_steps)

    # -- using the trained model ------------------------------------------------------

    def infer(self, bridge: Bridge, inputs: Mapping[str, Any], **kwargs: Any) -> InferenceResult:
        """MAP inference on another program (e.g. validation or test) with the networks' predictions.

        The learned rule weights, if any, are set on ``bridge`` first.

        Examples:
            >>> import keras
            >>> from pslbridge.examples.mnist_addition import add1_spec
            >>> net = keras.Sequential([keras.Input((2,)), keras.layers.Dense(10, activation="softmax")])
            >>> with Bridge(add1_spec([(0, 1)])) as test:
            ...     NeuPSLModel({"Neural": net}).infer(test, {"Neural": np.ones((2, 2))}).iterations > 0
            True
        """
        if self.learned.values is not None:
            bridge.rule_weights = self.learned.for_program(bridge.weighted_rules)
        predictions = {
            n: keras.ops.convert_to_numpy(self.networks[n](inputs[n], training=False)) for n in self.predicates
        }
        return bridge.infer(predictions, **kwargs)

    def save_neupsl(self, path: str | Path, bridge: Bridge) -> Path:
        """Write one artefact: ``bridge``'s rules and predicate declarations, the rule weights, options and networks.

        Args:
            path: The file (a zip; ``.neupsl`` by convention).
            bridge: A program of the model (its rules, declarations, options and, unless learned here, weights).

        Returns:
            The path. Load it with :func:`load_neupsl`.

        Raises:
            ConfigurationError: ``bridge`` is a program of another model (other neural predicates or rule count).
            CheckpointError: ``path`` is a folder or cannot be written (an existing file is left as it was).
        """
        path = Path(path)
        neural = {n.upper() for n in bridge.neural_predicates}
        if neural != {n.upper() for n in self.networks}:
            raise ConfigurationError(
                f"save_neupsl: the bridge's neural predicates {sorted(bridge.neural_predicates)} are not this "
                f"model's networks {sorted(self.networks)}; pass a program of this model"
            )
        learned = self.learned.for_program(bridge.weighted_rules) if self.learned.values is not None else None
        manifest = manifest_of(bridge, learned if learned is not None else bridge.rule_weights)
        manifest["networks"] = {name: f"networks/{name}.keras" for name in self.networks}
        write_archive(path, manifest, self.networks)
        return path


def _preflight(
    networks: Mapping[str, Any], weights: WeightOptimizer | None, learned: LearnedWeights, data: ProgramData
) -> None:
    """What can be checked before the first step, as pslbridge's errors rather than the backend's."""
    mine = {n.upper(): n for n in networks}
    for k, bridge in enumerate(data.bridges):
        theirs = set(bridge.neural_predicates)  # ClosedError for a closed program
        if {n.upper() for n in theirs} != set(mine):
            raise ConfigurationError(
                f"program {k}'s neural predicates are {sorted(theirs)}, this model's networks "
                f"{sorted(networks)}: key the networks by the program's neural predicates"
            )
    if weights is not None:
        for k, bridge in enumerate(data.bridges):
            learned.check(bridge.weighted_rules, k)
    bridge, inputs = data.bridges[0], data.inputs[0]
    for name in networks:  # the networks on the first program, eagerly
        output = networks[name](inputs[find_key(inputs, name)], training=False)
        shape, expected = tuple(getattr(output, "shape", ())), bridge.neural_shape(name)
        if not hasattr(output, "dtype") or shape != expected:
            what = f"a {type(output).__name__}" if not hasattr(output, "dtype") else f"shape {shape}"
            raise NeuralInputError(
                f"the network gives {what} for program 0's inputs; it must give {expected} (one row of "
                f"{expected[1]} probabilities per entity)",
                predicate=name,
            )
        check_range(name, keras.ops.convert_to_numpy(output))
