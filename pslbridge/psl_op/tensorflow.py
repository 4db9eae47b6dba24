"""The PSL step on TensorFlow: ``tf.numpy_function`` runs PSL, ``tf.custom_gradient`` hands back its gradient."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from . import StepFunction, program_index

__all__ = ["COMPILES", "psl_step"]

#: Whether the backend can compile a training function holding this op (XLA cannot compile a numpy function).
COMPILES = False


def psl_step(step: StepFunction, program: Any, predictions: Sequence[Any]) -> tuple[Any, Any]:
    """PSL's ``(loss, energy)`` as TensorFlow scalars; the loss's gradient is ``step``'s (:mod:`pslbridge.psl_op`).

    Examples:
        >>> import numpy as np, tensorflow as tf
        >>> step = lambda program, arrays: (float(arrays[0].sum()), 1.0, [2 * np.ones_like(arrays[0])])
        >>> x = tf.Variable(tf.ones((2, 2)))
        >>> with tf.GradientTape() as tape:
        ...     loss, energy = psl_step(step, np.array([0], dtype="int32"), [x])
        >>> tape.gradient(loss, x).numpy().tolist()
        [[2.0, 2.0], [2.0, 2.0]]
    """
    tensors = [tf.cast(p, tf.float32) for p in predictions]

    def host(program: np.ndarray, *arrays: np.ndarray) -> list[np.ndarray]:
        loss, energy, grads = step(program_index(program), list(arrays))
        return [np.float32(loss), np.float32(energy), *[np.asarray(g, np.float32) for g in grads]]

    @tf.custom_gradient
    def op(program: Any, *tensors: Any) -> Any:
        outputs = tf.numpy_function(host, [program, *tensors], [tf.float32] * (2 + len(tensors)), stateful=True)
        loss, energy, grads = outputs[0], outputs[1], outputs[2:]
        loss.set_shape(())
        energy.set_shape(())
        for grad, tensor in zip(grads, tensors):
            grad.set_shape(tensor.shape)

        def backward(upstream_loss: Any, upstream_energy: Any) -> list[Any]:
            return [None, *[upstream_loss * g for g in grads]]

        return (loss, energy), backward

    return op(program, *tensors)
