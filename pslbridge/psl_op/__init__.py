"""The PSL step as one op of the active Keras backend: predictions in, PSL's loss out, its gradient given.

A *step function* takes a program index and the networks' predictions as float32 numpy arrays and returns
``(loss, energy, gradients)`` (``gradients`` shaped like the predictions: ``∂loss/∂prediction``). :func:`psl_step`
wraps it as one op of the backend Keras runs on (``keras.backend.backend()``), so the network's forward pass runs
once per step and the backend's own backward pass continues from PSL's gradient:

============  =====================================================
backend       op
============  =====================================================
tensorflow    ``tf.numpy_function`` + ``tf.custom_gradient``
jax           ``jax.experimental.io_callback`` + ``jax.custom_vjp``
torch         ``torch.autograd.Function``
============  =====================================================
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import ConfigurationError

__all__ = ["BACKENDS", "StepFunction", "psl_step"]

#: The step a backend op wraps: (program index, float32 predictions) -> (loss, energy, d loss / d predictions).
StepFunction = Callable[[int, list[np.ndarray]], tuple[float, float, list[np.ndarray]]]

#: The module holding each Keras backend's op (each defines ``psl_step(step, program, predictions)``).
BACKENDS = {
    "tensorflow": "pslbridge.psl_op.tensorflow",
    "jax": "pslbridge.psl_op.jax",
    "torch": "pslbridge.psl_op.torch",
}


def psl_step(step: StepFunction, program: Any, predictions: Sequence[Any]) -> tuple[Any, Any]:
    """PSL's loss and energy for ``predictions`` as tensors of the active backend (the loss differentiable).

    Args:
        step: The step function (see the module's description).
        program: A one-element integer tensor: the index of the program in the training data.
        predictions: One tensor per neural predicate, in the order ``step`` expects.

    Returns:
        ``(loss, energy)``, scalar float32 tensors; the loss's gradient with respect to each prediction is what
        ``step`` returned, the energy has none.

    Raises:
        ConfigurationError: Keras runs on a backend without a PSL op (e.g. ``numpy``, which cannot train).

    Examples:
        >>> import numpy as np, keras
        >>> def step(program, arrays):  # loss = sum(p), so d loss / d p = 1
        ...     return float(arrays[0].sum()), 0.0, [np.ones_like(arrays[0])]
        >>> loss, energy = psl_step(step, np.array([0], dtype="int32"), [keras.ops.ones((2, 3))])
        >>> float(keras.ops.convert_to_numpy(loss))
        6.0
    """
    return backend_module().psl_step(step, program, predictions)


def backend_module(name: str | None = None) -> Any:
    """The op module of backend ``name`` (default: the one Keras runs on).

    Examples:
        >>> backend_module("tensorflow").__name__
        'pslbridge.psl_op.tensorflow'
    """
    import keras

    name = name or keras.backend.backend()
    if name not in BACKENDS:
        raise ConfigurationError(
            f"NeuPSL training needs a Keras backend with gradients, one of {sorted(BACKENDS)}; Keras runs on "
            f"{name!r} (set KERAS_BACKEND before importing keras)"
        )
    return importlib.import_module(BACKENDS[name])


def program_index(program: Any) -> int:
    """The integer inside a one-element program tensor (as numpy, after the backend handed it over).

    Examples:
        >>> program_index(np.array([3], dtype="int32"))
        3
    """
    return int(np.asarray(program).reshape(-1)[0])
