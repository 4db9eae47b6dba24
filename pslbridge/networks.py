"""The networks that feed neural predicates, behind one small protocol.

A training loop needs three things from a network: its predictions for every entity (:meth:`Network.forward`),
an update from ``∂loss/∂prediction`` (:meth:`Network.backward`), and its state for checkpoints. Keras models
get an adapter (:class:`KerasNetwork`); :class:`TableNetwork` is a dependency-free network (a softmax over a
learnable logit table) so that training logic can be tested and demonstrated without TensorFlow.

Examples:
    >>> net = TableNetwork(entities=2, classes=3, learning_rate=1.0, seed=0)
    >>> net.forward().shape
    (2, 3)
    >>> before = net.forward()[0, 2]
    >>> net.backward(np.array([[0.0, 0.0, -1.0], [0.0, 0.0, 0.0]], dtype=np.float32))
    >>> bool(net.forward()[0, 2] > before)
    True
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from .errors import ConfigurationError

__all__ = ["KerasNetwork", "Network", "TableNetwork", "as_network"]


@runtime_checkable
class Network(Protocol):
    """What a training loop needs from a network bound to a neural predicate.

    Examples:
        >>> isinstance(TableNetwork(1, 2), Network)
        True
    """

    def forward(self) -> np.ndarray:
        """Predictions (entities × classes, float32) for every entity, in training mode."""
        ...

    def backward(self, gradient: np.ndarray) -> None:
        """Update the network from ``∂loss/∂prediction`` at the last :meth:`forward`."""
        ...

    def get_state(self) -> list[np.ndarray]:
        """Everything needed to resume: weights and optimizer state."""
        ...

    def set_state(self, arrays: list[np.ndarray]) -> None:
        """Restore :meth:`get_state`."""
        ...


class TableNetwork:
    """A network without inputs: one learnable logit per (entity, class), softmax, plain gradient steps.

    Args:
        entities: Rows of the prediction array.
        classes: Columns.
        learning_rate: Step size on the logits.
        seed: Seed of the initial logits (small random values).

    Examples:
        >>> TableNetwork(3, 4, seed=1).forward().sum(axis=1).round(6).tolist()
        [1.0, 1.0, 1.0]
    """

    def __init__(self, entities: int, classes: int, learning_rate: float = 0.5, seed: int = 0) -> None:
        self.logits = np.random.default_rng(seed).normal(0.0, 0.01, size=(entities, classes))
        self.learning_rate = float(learning_rate)
        self.forward_calls = 0

    def forward(self) -> np.ndarray:
        """Softmax of the logits."""
        self.forward_calls += 1
        shifted = np.exp(self.logits - self.logits.max(axis=1, keepdims=True))
        return (shifted / shifted.sum(axis=1, keepdims=True)).astype(np.float32)

    def backward(self, gradient: np.ndarray) -> None:
        """One gradient step on the logits (chain rule through the softmax)."""
        p = self.forward().astype(np.float64)
        self.forward_calls -= 1  # the recomputation is not a new forward pass
        g = np.asarray(gradient, dtype=np.float64)
        self.logits -= self.learning_rate * p * (g - (g * p).sum(axis=1, keepdims=True))

    def get_state(self) -> list[np.ndarray]:
        """The logits."""
        return [self.logits.copy()]

    def set_state(self, arrays: list[np.ndarray]) -> None:
        """Restore the logits."""
        self.logits = np.array(arrays[0], dtype=np.float64)


class KerasNetwork:
    """A Keras model and its inputs as a :class:`Network`.

    Args:
        model: A Keras model mapping ``inputs`` to ``(entities, classes)`` probabilities.
        inputs: Model inputs, one row per entity.
        optimizer: A Keras optimizer (default: the model's compiled optimizer, else Adam 1e-3).
        compiled: Graph-compiled forward and backward passes (the backward pass recomputes the forward pass
            inside one graph, as NeuPSL's fit does; on CPU faster than an eager tape across the PSL call).
            False keeps one eager ``GradientTape`` from :meth:`forward` to :meth:`backward`.

    Examples:
        >>> import keras
        >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3, activation="softmax")])
        >>> net = KerasNetwork(model, np.ones((4, 2), dtype=np.float32))
        >>> net.forward().shape
        (4, 3)
    """

    def __init__(self, model: Any, inputs: Any, optimizer: Any = None, compiled: bool = True) -> None:
        import keras

        if keras.backend.backend() != "tensorflow":
            raise ConfigurationError(
                f"KerasNetwork (the Trainer's Keras adapter) runs on TensorFlow; Keras runs on "
                f"{keras.backend.backend()!r}: train with pslbridge.keras.NeuPSLModel.fit, which runs on every backend"
            )
        if optimizer is None:
            optimizer = getattr(model, "optimizer", None)
        if optimizer is None:
            optimizer = keras.optimizers.Adam(1e-3)
        self.model, self.inputs, self.optimizer, self.compiled = model, inputs, optimizer, compiled
        self._steps: tuple[Any, Any] | None = None
        self._tape: tuple[Any, Any] | None = None

    def forward(self) -> np.ndarray:
        """The model's predictions in training mode."""
        if self.compiled:
            return np.asarray(self._compiled()[0]())
        import tensorflow as tf

        with tf.GradientTape() as tape:
            output = self.model(self.inputs, training=True)
        self._tape = (tape, output)
        return np.asarray(output)

    def backward(self, gradient: np.ndarray) -> None:
        """Apply ``tape.gradient(predictions, variables, output_gradients=gradient)`` with the optimizer."""
        import tensorflow as tf

        upstream = tf.convert_to_tensor(gradient, dtype=tf.float32)
        if self.compiled:
            self._compiled()[1](upstream)
            return
        if self._tape is None:
            raise RuntimeError("backward() needs a forward() first")
        tape, output = self._tape
        self._tape = None
        variables = self.model.trainable_variables
        grads = tape.gradient(output, variables, output_gradients=tf.cast(upstream, output.dtype))
        self.optimizer.apply_gradients([(g, v) for g, v in zip(grads, variables) if g is not None])

    def _compiled(self) -> tuple[Any, Any]:
        if self._steps is None:
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

            self._steps = (forward, backward)
        return self._steps

    def get_state(self) -> list[np.ndarray]:
        """Model weights, then the optimizer's variables (after a marker of their count)."""
        weights = [np.asarray(w) for w in self.model.get_weights()]
        optimizer = [np.asarray(v.numpy()) for v in self.optimizer.variables]
        return [np.array([len(weights)], dtype=np.int64), *weights, *optimizer]

    def set_state(self, arrays: list[np.ndarray]) -> None:
        """Restore :meth:`get_state`."""
        n = int(arrays[0][0])
        self.model.set_weights(list(arrays[1 : 1 + n]))
        optimizer = arrays[1 + n :]
        if optimizer:
            self.optimizer.build(self.model.trainable_variables)
            for variable, value in zip(self.optimizer.variables, optimizer):
                variable.assign(value)


def as_network(model: Any, inputs: Any = None, optimizer: Any = None, compiled: bool = True) -> Network:
    """``model`` itself when it is a :class:`Network`, else a :class:`KerasNetwork` over it.

    Examples:
        >>> net = TableNetwork(1, 2)
        >>> as_network(net) is net
        True
    """
    if isinstance(model, Network):
        return model
    return KerasNetwork(model, inputs, optimizer, compiled)
