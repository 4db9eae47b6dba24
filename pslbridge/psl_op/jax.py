"""The PSL step on JAX: ``io_callback`` runs PSL once per step, ``jax.custom_vjp`` hands back its gradient.

``io_callback`` (not ``pure_callback``) because a step has effects (warm starts, learned rule weights): JAX must
neither drop nor repeat it. It runs inside ``jax.jit`` (Keras compiles a JAX ``train_step``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

from . import StepFunction, program_index

__all__ = ["COMPILES", "psl_step"]

#: Whether the backend can compile a training function holding this op (jax.jit runs io_callback).
COMPILES = True


def psl_step(step: StepFunction, program: Any, predictions: Sequence[Any]) -> tuple[Any, Any]:
    """PSL's ``(loss, energy)`` as JAX scalars; the loss's gradient is ``step``'s (see :mod:`pslbridge.psl_op`).

    Examples:
        >>> import jax, jax.numpy as jnp, numpy as np
        >>> step = lambda program, arrays: (float(arrays[0].sum()), 1.0, [2 * np.ones_like(arrays[0])])
        >>> grad = jax.grad(lambda x: psl_step(step, np.array([0], dtype="int32"), [x])[0])(jnp.ones((2, 2)))
        >>> np.asarray(grad).tolist()
        [[2.0, 2.0], [2.0, 2.0]]
    """
    tensors = [jnp.asarray(p, jnp.float32) for p in predictions]
    scalar = jax.ShapeDtypeStruct((), jnp.float32)
    shapes = (scalar, scalar, *[jax.ShapeDtypeStruct(t.shape, jnp.float32) for t in tensors])

    def host(program: np.ndarray, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
        loss, energy, grads = step(program_index(program), [np.asarray(a) for a in arrays])
        return (np.float32(loss), np.float32(energy), *[np.asarray(g, np.float32) for g in grads])

    def run(program: Any, *tensors: Any) -> tuple[Any, ...]:
        return io_callback(host, shapes, program, *tensors, ordered=False)

    @jax.custom_vjp
    def op(program: Any, *tensors: Any) -> tuple[Any, Any]:
        outputs = run(program, *tensors)
        return outputs[0], outputs[1]

    def forward(program: Any, *tensors: Any) -> tuple[tuple[Any, Any], tuple[Any, ...]]:
        outputs = run(program, *tensors)
        return (outputs[0], outputs[1]), (program, *outputs[2:])

    def backward(saved: tuple[Any, ...], upstream: tuple[Any, Any]) -> tuple[Any, ...]:
        program, *grads = saved
        return (jnp.zeros_like(program), *[upstream[0] * g for g in grads])

    op.defvjp(forward, backward)
    return op(jnp.asarray(program, jnp.float32), *tensors)
