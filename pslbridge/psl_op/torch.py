"""The PSL step on PyTorch: a ``torch.autograd.Function`` whose forward runs PSL and whose backward is its gradient."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from . import StepFunction, program_index

__all__ = ["COMPILES", "PSLStep", "psl_step"]

#: Whether the backend can compile a training function holding this op (torch.compile would break the graph at it).
COMPILES = False


class PSLStep(torch.autograd.Function):
    """``forward(step, program, *predictions) -> (loss, energy)``; ``backward`` scales ``step``'s gradients.

    Examples:
        >>> step = lambda program, arrays: (0.5, 0.0, [np.zeros_like(arrays[0])])
        >>> loss, energy = PSLStep.apply(step, 0, torch.zeros(1, 2))
        >>> float(loss)
        0.5
    """

    @staticmethod
    def forward(ctx: Any, step: StepFunction, program: Any, *predictions: torch.Tensor) -> tuple[Any, Any]:
        """Run PSL on the predictions (as float32 numpy on the CPU); keep the gradients for ``backward``."""
        index = program_index(program.detach().cpu().numpy() if isinstance(program, torch.Tensor) else program)
        arrays = [p.detach().to("cpu", torch.float32).numpy() for p in predictions]
        loss, energy, grads = step(index, arrays)
        ctx.grads = [torch.tensor(np.asarray(g), dtype=p.dtype, device=p.device) for g, p in zip(grads, predictions)]
        device = predictions[0].device if predictions else None
        loss_t = torch.tensor(float(loss), dtype=torch.float32, device=device)
        energy_t = torch.tensor(float(energy), dtype=torch.float32, device=device)
        ctx.mark_non_differentiable(energy_t)
        return loss_t, energy_t

    @staticmethod
    def backward(ctx: Any, upstream_loss: torch.Tensor, upstream_energy: Any) -> tuple[Any, ...]:
        """``upstream × ∂loss/∂prediction`` for each prediction; nothing for the step and the program."""
        return (None, None, *[upstream_loss * g for g in ctx.grads])


def psl_step(step: StepFunction, program: Any, predictions: Sequence[Any]) -> tuple[Any, Any]:
    """PSL's ``(loss, energy)`` as torch scalars; the loss's gradient is ``step``'s (see :mod:`pslbridge.psl_op`).

    Examples:
        >>> import numpy as np, torch
        >>> step = lambda program, arrays: (float(arrays[0].sum()), 1.0, [2 * np.ones_like(arrays[0])])
        >>> x = torch.ones((2, 2), requires_grad=True)
        >>> loss, energy = psl_step(step, np.array([0], dtype="int32"), [x])
        >>> loss.backward()
        >>> x.grad.tolist()
        [[2.0, 2.0], [2.0, 2.0]]
    """
    return PSLStep.apply(step, program, *predictions)
