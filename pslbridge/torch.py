"""NeuPSL in plain PyTorch: PSL's loss as an autograd function of the networks' predictions.

For people who write their own training loops: the networks' predictions (torch tensors, one row per entity in
:meth:`pslbridge.Bridge.entities` order) go into a :class:`pslbridge.Bridge`; the returned loss is a torch scalar
whose ``backward()`` carries PSL's ``∂loss/∂prediction`` into the networks. :func:`psl_loss` is one step on one
program; :class:`PSLLoss` is a module for loops over several programs (mini-batches) that carries learned rule
weights from program to program.

Examples:
    >>> import torch
    >>> from pslbridge import Bridge
    >>> from pslbridge.examples.mnist_addition import add1_spec
    >>> net = torch.nn.Sequential(torch.nn.Linear(4, 10), torch.nn.Softmax(dim=-1))
    >>> with Bridge(add1_spec([(0, 1)], sums=[7], phase="learn")) as bridge:
    ...     loss = psl_loss(bridge, {"Neural": net(torch.eye(2, 4))})
    ...     loss.backward()
    >>> loss.item() > 0, net[0].weight.grad.shape
    (True, torch.Size([10, 4]))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from .bridge import Bridge
from .errors import ConfigurationError
from .learning import WeightOptimizer
from .losses import Loss
from .program_steps import ProgramSteps
from .psl_op.torch import PSLStep
from .results import InferenceResult, LearnResult

__all__ = ["PSLLoss", "psl_loss"]


def psl_loss(
    bridge: Bridge,
    predictions: Mapping[str, torch.Tensor],
    *,
    loss: str | Loss = "energy",
    weights: WeightOptimizer | None = None,
) -> torch.Tensor:
    """PSL's loss on ``bridge`` at ``predictions``, differentiable with respect to them.

    Args:
        bridge: The ground program (built with ``phase="learn"`` and labels for the bilevel losses).
        predictions: ``{neural predicate: tensor}`` of probabilities (entities × classes), e.g. ``net(images)``.
        loss: A loss of :meth:`pslbridge.Bridge.learn_step` (``"energy"``, ``"bce"``, ...).
        weights: A :class:`~pslbridge.learning.WeightOptimizer`: also take a rule-weight step (the new weights
            stay on ``bridge``).

    Returns:
        A float32 scalar on the predictions' device; ``backward()`` reaches every prediction.

    Raises:
        NeuralInputError: A prediction of the wrong shape, outside [0, 1], NaN, or a neural predicate missing.
        ConfigurationError: As :meth:`pslbridge.Bridge.learn_step`.

    Examples:
        >>> from pslbridge.examples.mnist_addition import add1_spec
        >>> p = torch.full((2, 10), 0.1, requires_grad=True)
        >>> with Bridge(add1_spec([(0, 1)], sums=[7], phase="learn")) as bridge:
        ...     psl_loss(bridge, {"Neural": p}).backward()
        >>> p.grad.shape
        torch.Size([2, 10])
    """
    return PSLLoss(loss=loss, weights=weights)(bridge, predictions)


class PSLLoss(torch.nn.Module):
    """PSL's loss as a module: ``criterion(bridge, {predicate: tensor})`` for each program of a training loop.

    With ``weights=`` it learns the rule weights too: each call takes one rule-weight step and the learned
    weights carry to the next program (every program must hold the same weighted rules, in any order: they are
    matched by text) and to :meth:`infer`.

    Args:
        loss: A loss of :meth:`pslbridge.Bridge.learn_step`.
        weights: A :class:`~pslbridge.learning.WeightOptimizer` (None: the rule weights stay as they are).

    Attributes:
        learned: The learned rule weights, kept by rule text (each program gets them in its own order).

    Examples:
        >>> from pslbridge.examples.mnist_addition import add1_spec
        >>> net = torch.nn.Sequential(torch.nn.Linear(4, 10), torch.nn.Softmax(dim=-1))
        >>> optimizer = torch.optim.Adam(net.parameters(), lr=0.01)
        >>> criterion = PSLLoss()
        >>> programs = [Bridge(add1_spec([(0, 1)], sums=[s], phase="learn")) for s in (3, 9)]
        >>> for bridge in programs * 5:  # five passes over two mini-batches
        ...     optimizer.zero_grad()
        ...     criterion(bridge, {"Neural": net(torch.eye(2, 4))}).backward()
        ...     optimizer.step()
        >>> criterion.last.energy >= 0
        True
        >>> for bridge in programs:
        ...     bridge.close()
    """

    def __init__(self, loss: str | Loss = "energy", weights: WeightOptimizer | None = None) -> None:
        super().__init__()
        self.steps = ProgramSteps([], loss, weights)  # the PSL side of each call
        self.loss, self.weights, self.learned = self.steps.loss, weights, self.steps.learned

    @property
    def last(self) -> LearnResult | None:
        """The last call's :class:`~pslbridge.results.LearnResult` (None before one, or after NaN predictions)."""
        return self.steps.last

    @property
    def rule_weights(self) -> np.ndarray | None:
        """The learned rule weights, in the first program's rule order (None until a weight step was taken)."""
        return self.learned.values

    def forward(self, bridge: Bridge, predictions: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """PSL's loss on ``bridge`` (see :func:`psl_loss`); a rule-weight step too with ``weights=``.

        Raises:
            ConfigurationError: ``predictions`` is not a mapping of tensors, or (learning rule weights) the program
                holds other weighted rules than the first one.
        """
        if not isinstance(predictions, Mapping) or not predictions:
            raise ConfigurationError(f"PSLLoss takes {{neural predicate: tensor}}, got {type(predictions).__name__}")
        names = list(predictions)
        tensors = []
        for name in names:
            tensor = predictions[name]
            if not isinstance(tensor, torch.Tensor):
                raise ConfigurationError(f"predictions for {name!r} are a {type(tensor).__name__}, not a torch tensor")
            tensors.append(tensor)
        self.steps.predicates = names
        loss, _energy = PSLStep.apply(lambda program, arrays: self.steps.step(bridge, arrays), 0, *tensors)
        return loss

    def infer(self, bridge: Bridge, predictions: Mapping[str, Any], **kwargs: Any) -> InferenceResult:
        """MAP inference on another program with the learned rule weights (if any) set on it first.

        Examples:
            >>> from pslbridge.examples.mnist_addition import add1_spec
            >>> with Bridge(add1_spec([(0, 1)])) as test:
            ...     PSLLoss().infer(test, {"Neural": torch.full((2, 10), 0.1)}).iterations > 0
            True
        """
        if self.learned.values is not None:
            bridge.rule_weights = self.learned.for_program(bridge.weighted_rules)
        return bridge.infer({n: _host(v) for n, v in predictions.items()}, **kwargs)


def _host(value: Any) -> Any:
    """A tensor as a numpy array on the CPU (anything else unchanged)."""
    return value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else value
