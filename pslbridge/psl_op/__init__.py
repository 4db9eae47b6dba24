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

__all__ = ["BACKENDS", "PREFERRED", "StepFunction", "psl_step", "use_preferred_backend"]

#: The step a backend op wraps: (program index, float32 predictions) -> (loss, energy, d loss / d predictions).
StepFunction = Callable[[int, list[np.ndarray]], tuple[float, float, list[np.ndarray]]]

#: The module holding each Keras backend's op (each defines ``psl_step(step, program, predictions)``).
BACKENDS = {
    "tensorflow": "pslbridge.psl_op.tensorflow",
    "jax": "pslbridge.psl_op.jax",
    "torch": "pslbridge.psl_op.torch",
}


#: The Keras backends pslbridge's own programs (``python -m pslbridge demo``, the MNIST-Addition runner) prefer,
#: fastest first: on 2 CPU cores the LeNet step of MNIST-Add1 took 0.078 s on torch, 0.138 s on TensorFlow and
#: 0.157 s on JAX at 300 additions (benchmarks/NOTES.md), with the same validation accuracy.
PREFERRED = ("torch", "tensorflow", "jax")


def use_preferred_backend(environ: dict[str, str] | None = None) -> str:
    """Choose Keras' backend for a program of pslbridge's own: ``KERAS_BACKEND`` if set, else the fastest installed.

    Only programs call this, before Keras is imported (the library itself never changes the backend). Once Keras
    is imported its backend stays; this then returns it.

    Examples:
        >>> env = {"KERAS_BACKEND": "jax"}
        >>> use_preferred_backend(env), env["KERAS_BACKEND"]
        ('jax', 'jax')
    """
    import importlib.util
    import os
    import sys

    environ = os.environ if environ is None else environ  # type: ignore[assignment]
    if environ is os.environ and "keras" in sys.modules:
        return sys.modules["keras"].backend.backend()
    if environ.get("KERAS_BACKEND"):
        return environ["KERAS_BACKEND"]
    for name in PREFERRED:
        if importlib.util.find_spec(name) is not None:
            environ["KERAS_BACKEND"] = name
            return name
    return "tensorflow"


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
