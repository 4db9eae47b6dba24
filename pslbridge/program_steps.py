"""The PSL side of training on several programs: one learning step per call, learned rule weights carried along.

:class:`ProgramSteps` is what :class:`pslbridge.keras.NeuPSLModel` and :class:`pslbridge.torch.PSLLoss` run on the
host inside their backend's op: it sets the learned rule weights on the program (matched by rule text), runs
:meth:`pslbridge.Bridge.learn_step`, keeps the new weights and times the step. Predictions with NaN or infinity
give a NaN loss and zero gradients (warned once) and never reach PSL. An evaluation step (``training=False``) takes
no rule-weight step and changes nothing it keeps.

Examples:
    >>> import numpy as np
    >>> from pslbridge import Bridge
    >>> from pslbridge.examples.mnist_addition import add1_spec
    >>> steps = ProgramSteps(["Neural"])
    >>> with Bridge(add1_spec([(0, 1)], sums=[7], phase="learn")) as bridge:
    ...     loss, energy, grads = steps.step(bridge, [np.full((2, 10), 0.1, dtype=np.float32)])
    >>> loss == energy, grads[0].shape, len(steps.times)
    (True, (2, 10), 1)
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from .errors import PslBridgeWarning
from .learning import LearnedWeights, WeightOptimizer
from .losses import Loss, check_loss
from .results import LearnResult, find_key

__all__ = ["ProgramSteps"]


class ProgramSteps:
    """Learning steps on programs of one model, for the networks of ``predicates``.

    Args:
        predicates: The neural predicates, in the order the predictions are given.
        loss: A loss of :meth:`pslbridge.Bridge.learn_step`.
        weights: A :class:`~pslbridge.learning.WeightOptimizer` to learn the rule weights (None: frozen; each
            program keeps its own).

    Attributes:
        learned: The learned rule weights, by rule text.
        times: Seconds in ``learn_step`` per training step, in order.
        last: The last step's :class:`~pslbridge.results.LearnResult` (None before one, or after a NaN step).

    Examples:
        >>> ProgramSteps(["Digit"], loss="bce").loss
        'bce'
    """

    def __init__(
        self, predicates: Sequence[str], loss: str | Loss = "energy", weights: WeightOptimizer | None = None
    ) -> None:
        self.predicates = list(predicates)
        self.loss = check_loss(loss)
        self.weights = weights
        self.learned = LearnedWeights()
        self.times: list[float] = []
        self.last: LearnResult | None = None
        self._warned_nan = False

    def step(
        self, bridge: Any, arrays: Sequence[np.ndarray], *, training: bool = True
    ) -> tuple[float, float, list[np.ndarray]]:
        """One step on ``bridge`` at ``arrays`` (one per predicate): ``(loss, energy, ∂loss/∂prediction)``.

        Raises:
            NeuralInputError: A prediction of the wrong shape or outside [0, 1].
            ConfigurationError: The program holds other weighted rules than the earlier ones (with learned
                weights), or as :meth:`pslbridge.Bridge.learn_step`.
        """
        arrays = [np.asarray(a, dtype=np.float32) for a in arrays]
        if any(not np.isfinite(a).all() for a in arrays):
            if not self._warned_nan:
                warnings.warn(
                    "a network predicted NaN or infinity: the step's loss is NaN and nothing is updated "
                    "(keras.callbacks.TerminateOnNaN stops there)",
                    PslBridgeWarning,
                    stacklevel=2,
                )
                self._warned_nan = True
            self.last = None
            return float("nan"), float("nan"), [np.zeros_like(a) for a in arrays]
        learning = training and self.weights is not None
        if self.weights is not None:
            learned = self.learned.for_program(bridge.weighted_rules)  # refuses a program of other rules
            if learned is not None:
                bridge.rule_weights = learned
        start = time.perf_counter()
        result = bridge.learn_step(
            dict(zip(self.predicates, arrays)),
            loss=self.loss,
            weights=self.weights if learning else None,
            potentials=learning or self.loss != "energy",
        )
        if training:
            self.times.append(time.perf_counter() - start)
        if learning:
            self.learned.update(bridge.weighted_rules, result.rule_weights)
        self.last = result
        grads = result.neural_gradients
        return float(result.loss), float(result.energy), [grads[find_key(grads, n)] for n in self.predicates]
