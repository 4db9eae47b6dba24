"""Symbolic weight steps: PSL 2.4's gradient-descent weight updates, in numpy.

:class:`WeightOptimizer` reproduces ``GradientDescent.weightGradientStep`` of the jar
(mirror descent on the unit simplex by default, projected gradient, or plain gradient
descent), with its step-size schedule, gradient clipping and the L2 / negative-log /
negative-entropy regularisers, so that a NeuPSL training loop driven from Python learns
the same rule weights as the jar's ``Energy`` learner. Defaults are the jar's defaults
(``gradientdescent.*`` options of PSL 2.4.0).

Examples:
    >>> import numpy as np
    >>> opt = WeightOptimizer(step_size=1.0, log_regularization=0.0, entropy_regularization=0.0)
    >>> w = opt.start(np.array([1.0, 1.0]))
    >>> w.tolist()
    [0.5, 0.5]
    >>> opt.step(w, potentials=np.array([1.0, 0.0])).round(4).tolist()
    [0.2689, 0.7311]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .errors import ConfigurationError

__all__ = ["EXTENSIONS", "LearnedWeights", "WeightOptimizer", "rule_order"]

EXTENSIONS = ("mirror_descent", "projected_gradient", "none")
_STRICT_EPSILON = 1e-8

_OPTION_NAMES = {
    "gradientdescent.extension": "extension",
    "gradientdescent.stepsize": "step_size",
    "gradientdescent.scalestepsize": "scale_step_size",
    "gradientdescent.clipweightgradient": "clip_gradient",
    "gradientdescent.maxgradientmagnitude": "max_gradient_magnitude",
    "gradientdescent.maxgradientnorm": "max_gradient_norm",
    "gradientdescent.l2regularization": "l2_regularization",
    "gradientdescent.negativelogregularization": "log_regularization",
    "gradientdescent.negativeentropyregularization": "entropy_regularization",
}


@dataclass
class WeightOptimizer:
    """Gradient steps on rule weights, as PSL 2.4's ``GradientDescent`` takes them.

    Attributes:
        extension: ``"mirror_descent"`` (normalised exponentiated gradient on the unit
            simplex, the paper's choice), ``"projected_gradient"`` (step then project onto the
            simplex) or ``"none"`` (plain step, clipped at 0).
        step_size: Base step size (``gradientdescent.stepsize``, default 0.1).
        scale_step_size: Divide the step by ``k + 1`` at step ``k`` (default True).
        clip_gradient: Rescale gradients whose norm exceeds ``max_gradient_magnitude``.
        max_gradient_magnitude: Clip threshold (default 25).
        max_gradient_norm: The p of the clipping norm (default inf: the max-abs norm).
        l2_regularization: Weight of ``w^2`` (default 0).
        log_regularization: Weight of ``-log w`` (default 1, PSL's default).
        entropy_regularization: Weight of ``w log w`` (default 10, PSL's default).
        steps_taken: Steps taken so far (drives the step-size schedule).
        rule_count: How many weights its steps move (set by the first step; an optimizer serves one model).

    Examples:
        >>> WeightOptimizer.from_psl_options({"gradientdescent.stepsize": "0.5"}).step_size
        0.5
    """

    extension: str = "mirror_descent"
    step_size: float = 0.1
    scale_step_size: bool = True
    clip_gradient: bool = True
    max_gradient_magnitude: float = 25.0
    max_gradient_norm: float = math.inf
    l2_regularization: float = 0.0
    log_regularization: float = 1.0
    entropy_regularization: float = 10.0
    steps_taken: int = field(default=0)
    rule_count: int | None = field(default=None)

    def __post_init__(self) -> None:
        self.extension = str(self.extension).lower()
        if self.extension not in EXTENSIONS:
            raise ConfigurationError(f"extension must be one of {EXTENSIONS}, got {self.extension!r}")
        if not self.step_size > 0:
            raise ConfigurationError(f"step_size must be positive, got {self.step_size}")
        for name in ("l2_regularization", "log_regularization", "entropy_regularization"):
            if getattr(self, name) < 0:
                raise ConfigurationError(f"{name} must be non-negative, got {getattr(self, name)}")

    @classmethod
    def from_psl_options(cls, options: dict[str, object]) -> WeightOptimizer:
        """Build from PSL ``gradientdescent.*`` option names (others are ignored).

        Examples:
            >>> WeightOptimizer.from_psl_options({"gradientdescent.extension": "NONE"}).extension
            'none'
        """
        kwargs: dict[str, object] = {}
        for key, value in options.items():
            name = _OPTION_NAMES.get(key.lower())
            if name is None:
                continue
            default = cls.__dataclass_fields__[name].default
            if isinstance(default, bool):
                kwargs[name] = str(value).lower() in ("true", "1", "yes")
            elif isinstance(default, float):
                kwargs[name] = float(str(value).replace("Infinity", "inf"))
            else:
                kwargs[name] = str(value)
        return cls(**kwargs)  # type: ignore[arg-type]

    def start(self, weights: np.ndarray) -> np.ndarray:
        """Initial weights: scaled onto the unit simplex for the simplex extensions.

        PSL does this before its first step.

        Examples:
            >>> WeightOptimizer().start(np.array([2.0, 6.0])).tolist()
            [0.25, 0.75]
        """
        weights = np.asarray(weights, dtype=np.float64)
        if self.extension in ("mirror_descent", "projected_gradient"):
            total = float(np.sum(weights.astype(np.float32), dtype=np.float32))
            if total <= 0:
                raise ConfigurationError("rule weights sum to 0; cannot scale them onto the simplex")
            weights = (weights.astype(np.float32) / np.float32(total)).astype(np.float64)
        return weights

    def regularization(self, weights: np.ndarray) -> float:
        """The regulariser's value at ``weights``."""
        w = np.asarray(weights, dtype=np.float64)
        log_w = np.log(np.maximum(w, _STRICT_EPSILON))
        return float(
            np.sum(
                self.l2_regularization * w**2
                - self.log_regularization * log_w
                + self.entropy_regularization * w * log_w
            )
        )

    def gradient(self, weights: np.ndarray, potentials: np.ndarray) -> np.ndarray:
        """Loss gradient ``potentials`` plus the regulariser's gradient, clipped as configured.

        Examples:
            >>> WeightOptimizer(log_regularization=0, entropy_regularization=0).gradient(
            ...     np.array([0.5, 0.5]), np.array([30.0, 0.0])).tolist()
            [25.0, 0.0]
        """
        w = np.asarray(weights, dtype=np.float64)
        safe = np.maximum(w, _STRICT_EPSILON)
        grad = np.asarray(potentials, dtype=np.float64) + (
            2.0 * self.l2_regularization * w
            - self.log_regularization / safe
            + self.entropy_regularization * (np.log(safe) + 1.0)
        )
        grad = grad.astype(np.float32).astype(np.float64)
        if self.clip_gradient:
            norm = _p_norm(grad, self.max_gradient_norm)
            if norm > self.max_gradient_magnitude:
                grad = self.max_gradient_magnitude * grad / norm
        return grad

    def current_step_size(self) -> float:
        """The step size of the next step (``step_size / (k + 1)`` when scaled)."""
        return self.step_size / (self.steps_taken + 1) if self.scale_step_size else self.step_size

    def step(self, weights: np.ndarray, potentials: np.ndarray) -> np.ndarray:
        """Take one step from ``weights`` given the per-rule potentials (the loss gradient).

        Args:
            weights: Current weights of the weighted rules.
            potentials: ``dL/dw`` of the learning loss (Φ for the energy loss).

        Returns:
            The new weights.

        Raises:
            ConfigurationError: The weights are of another number of rules than its earlier steps'.

        Examples:
            >>> opt = WeightOptimizer()
            >>> _ = opt.step(np.array([0.5, 0.5]), np.zeros(2))
            >>> opt.step(np.array([0.2, 0.3, 0.5]), np.zeros(3))
            Traceback (most recent call last):
            ...
            pslbridge.errors.ConfigurationError: this WeightOptimizer has stepped the weights of 2 rules, ...
        """
        w = np.asarray(weights, dtype=np.float64)
        if self.rule_count is None:
            self.rule_count = len(w)
        elif len(w) != self.rule_count:
            raise ConfigurationError(
                f"this WeightOptimizer has stepped the weights of {self.rule_count} rules, now it is given "
                f"{len(w)}: its step-size schedule belongs to one model; give each model its own optimizer"
            )
        grad = self.gradient(w, potentials)
        eta = self.current_step_size()
        if self.extension == "mirror_descent":
            scaled = w * np.exp(-eta * grad)
            total = float(np.sum(scaled.astype(np.float32), dtype=np.float32))
            new = scaled / total
        elif self.extension == "projected_gradient":
            new = _simplex_project(w - eta * grad)
        else:
            new = np.maximum(w - eta * grad, 0.0)
        self.steps_taken += 1
        return new.astype(np.float32).astype(np.float64)


def rule_order(reference: Sequence[str], rules: Sequence[str], program: int | str = "this program") -> np.ndarray:
    """Where each of ``rules`` sits in ``reference``, matched by text (the k-th copy of a rule to the k-th).

    Args:
        reference: The weighted rules learned weights are kept for, in their order.
        rules: A program's weighted rules (:attr:`pslbridge.Bridge.weighted_rules`).
        program: How to name the program in an error.

    Returns:
        ``order`` with ``rules[i] == reference[order[i]]``.

    Raises:
        ConfigurationError: The program holds other weighted rules than ``reference`` (not only another order).

    Examples:
        >>> rule_order(["1: A(x) -> B(x)", "2: B(x) -> C(x)"], ["2: B(x) -> C(x)", "1: A(x) -> B(x)"]).tolist()
        [1, 0]
        >>> rule_order(["1: A(x) -> B(x)"], ["1: A(x) -> C(x)"], program=1)
        Traceback (most recent call last):
        ...
        pslbridge.errors.ConfigurationError: program 1 has other weighted rules than the first program ...
    """
    if sorted(rules) != sorted(reference):
        extra = sorted(set(rules) ^ set(reference)) or ["(the same rules, repeated another number of times)"]
        name = f"program {program}" if isinstance(program, int) else program
        raise ConfigurationError(
            f"{name} has other weighted rules than the first program ({len(rules)} against {len(reference)}; e.g. "
            f"{extra[0]!r}); learned rule weights are matched to rules by their text, so every program must hold "
            "the same weighted rules (in any order)"
        )
    slots: dict[str, list[int]] = {}
    for position, rule in enumerate(reference):
        slots.setdefault(rule, []).append(position)
    return np.array([slots[rule].pop(0) for rule in rules], dtype=np.int64)


class LearnedWeights:
    """Learned rule weights shared by programs, kept by rule text: each program gets them in its own order.

    Attributes:
        rules: The weighted rules the values are kept for (the first program's order; None until one is seen).
        values: The learned weights in that order (None until a weight step was taken).

    Examples:
        >>> learned = LearnedWeights()
        >>> learned.update(["1: A(x) -> B(x)", "2: B(x) -> C(x)"], np.array([0.3, 0.7]))
        >>> learned.for_program(["2: B(x) -> C(x)", "1: A(x) -> B(x)"]).tolist()
        [0.7, 0.3]
    """

    def __init__(self) -> None:
        self.rules: list[str] | None = None
        self.values: np.ndarray | None = None

    def adopt(self, rules: Sequence[str]) -> None:
        """Keep the weights for ``rules`` (in their order) unless rules were already adopted."""
        if self.rules is None:
            self.rules = list(rules)

    def check(self, rules: Sequence[str], program: int | str = "this program") -> np.ndarray:
        """The order of ``rules`` in the kept ones (see :func:`rule_order`); adopts ``rules`` if none are kept."""
        self.adopt(rules)
        assert self.rules is not None
        return rule_order(self.rules, rules, program)

    def for_program(self, rules: Sequence[str]) -> np.ndarray | None:
        """The learned weights in the order of a program's ``rules`` (None before any weight step)."""
        order = self.check(rules)
        return None if self.values is None else self.values[order]

    def update(self, rules: Sequence[str], weights: np.ndarray) -> None:
        """Keep ``weights``, given in the order of a program's ``rules``."""
        order = self.check(rules)
        values = np.empty(len(order), dtype=np.float64)
        values[order] = np.asarray(weights, dtype=np.float64)
        self.values = values


def _p_norm(vector: np.ndarray, p: float) -> float:
    if p <= 0:
        raise ConfigurationError("the p-norm needs p > 0")
    if math.isinf(p):
        return float(np.max(np.abs(vector))) if vector.size else 0.0
    return float(np.sum(np.abs(vector) ** p) ** (1.0 / p))


def _simplex_project(weights: np.ndarray) -> np.ndarray:
    """Euclidean projection onto the unit simplex (the algorithm PSL uses).

    Examples:
        >>> _simplex_project(np.array([0.8, 0.8])).tolist()
        [0.5, 0.5]
    """
    ordered = np.sort(weights)[::-1]
    cumulative, tau = 0.0, 0.0
    for i, value in enumerate(ordered, start=1):
        next_cumulative = cumulative + value
        next_tau = (next_cumulative - 1.0) / i
        if next_tau >= value:
            break
        cumulative, tau = next_cumulative, next_tau
    return np.maximum(weights - tau, 0.0)
