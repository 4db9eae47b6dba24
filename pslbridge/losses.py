"""The learning losses of :meth:`pslbridge.Bridge.learn_step`, as PSL 2.4.0's learners compute them per step.

=========================  ======================================================  ====================
loss                       what one step computes                                  PSL 2.4.0 learner
=========================  ======================================================  ====================
``"energy"``               energy at (labels, latent MAP); NeuPSL's loss           ``Energy``
``"structured_perceptron"``  that energy minus the energy of the full MAP state    ``StructuredPerceptron``
``"bce"``                  binary cross-entropy of the MAP state, bilevel          ``BinaryCrossEntropy``
``"squared_error"``        squared error of the MAP state, bilevel                 ``SquaredError``
=========================  ======================================================  ====================

The two bilevel losses (Dickens et al., ICML 2024) are functions of the MAP state. PSL's ``Minimizer`` makes
them differentiable with an augmented Lagrangian: besides the MAP problem it solves an *augmented* problem
whose proximity terms ``w_p (x − p)²`` pull the targets towards proximity targets ``p``, learns ``p`` by
gradient steps on the supervised loss, and penalises the energy difference Δ between the two problems with
``(ρ/2) Δ² + λ Δ``; ρ and λ follow PSL's schedule. The gradients for rule weights and neural outputs are
``(ρ Δ + λ)`` times the difference of the two problems' Φ and optimal-value gradients. They run on the
dual-BCD reasoner only (``Bridge(..., reasoner="dualbcd")``), as in the jar.

Examples:
    >>> BinaryCrossEntropy.from_psl_options({"minimizer.initialsquaredpenalty": "2"}).initial_squared_penalty
    2.0
    >>> resolve_loss("bce").name
    'bce'
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from .errors import ConfigurationError
from .program import GroundProgram

__all__ = [
    "LOSSES",
    "BinaryCrossEntropy",
    "EnergyLoss",
    "Loss",
    "LossOutput",
    "MinimizerLoss",
    "SquaredError",
    "StepContext",
    "StructuredPerceptron",
    "check_loss",
    "resolve_loss",
    "warn_without_truth",
]

_EPSILON_FLOAT = 1e-4  # PSL's MathUtils.EPSILON_FLOAT, the BCE clip
_WARNED_WITHOUT_TRUTH: set[int] = set()


@dataclass
class StepContext:
    """What a loss step may use.

    Attributes:
        program: The training program (predictions already pushed).
        reset: Restart solves from the current atom values instead of warm-starting.
        potentials: Compute Φ (``∂loss/∂w``).
        constraint_learning: Skip latent inference (energy losses).

    Examples:
        >>> StepContext(program).potentials
        True
    """

    program: GroundProgram
    reset: bool = False
    potentials: bool = True
    constraint_learning: bool = False


@dataclass
class LossOutput:
    """One step's loss, its gradients and what it cost.

    Attributes:
        loss: The loss at the weights and predictions the step started from.
        energy: The energy the loss is built on (see :class:`pslbridge.results.LearnResult`).
        weight_gradient: ``∂loss/∂w`` per weighted rule, or None when not computed.
        atom_gradient: ``∂loss/∂x`` for every model atom (the neural atoms' entries are used).
        iterations: Reasoner iterations per solve.
        timings: Seconds per phase.
        details: Loss-specific values.

    Examples:
        >>> out = LossOutput(1.0, 1.0, None, np.zeros(3))
        >>> out.loss, out.atom_gradient.shape
        (1.0, (3,))
    """

    loss: float
    energy: float
    weight_gradient: np.ndarray | None
    atom_gradient: np.ndarray
    iterations: dict[str, int | None] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    details: dict[str, float] = field(default_factory=dict)


class Loss:
    """A learning loss: :meth:`step` computes it and its gradients; :meth:`finish` runs after the weight step.

    Examples:
        >>> EnergyLoss().needs_potentials
        False
    """

    name = "loss"
    #: Φ is needed even without a weight step.
    needs_potentials = False
    #: Correct on a program whose labels were grounded as observations (:meth:`ModelSpec.observe_labels`): only a
    #: loss that solves with the labels fixed, never free, is.
    accepts_observed_labels = False

    def step(self, ctx: StepContext) -> LossOutput:
        """Compute the loss and its gradients at the pushed predictions and current weights."""
        raise NotImplementedError

    def finish(self, program: GroundProgram, weight_change: float) -> None:
        """Called after the caller's weight step (``weight_change``: L1 change of the weights)."""


class EnergyLoss(Loss):
    """NeuPSL's energy loss: labelled targets fixed to their labels, the latent ones solved for.

    Φ and ``∂energy/∂prediction`` (Danskin) are read at that latent MAP state; this is what the jar's
    ``Energy`` learner computes per step (``OptimalValue.computeLatentInferenceIncompatibility``).

    Examples:
        >>> EnergyLoss().name
        'energy'
    """

    name = "energy"
    accepts_observed_labels = True

    def step(self, ctx: StepContext) -> LossOutput:
        """Latent inference with the labels fixed, then energy, Φ and gradients at that state."""
        program, labels = ctx.program, ctx.program.labels
        timings: dict[str, float] = {}
        iterations: dict[str, int | None] = {}
        t = time.perf_counter()
        labels.fix()
        try:
            timings["fix"] = _lap(t)
            t = time.perf_counter()
            latent = not ctx.constraint_learning and labels.latent_count > 0
            iterations["latent"] = program.solve(reset=ctx.reset).iterations if latent else 0
            timings["solve"] = _lap(t)
            t = time.perf_counter()
            phi = program.rule_potentials() if ctx.potentials else None
            energy = float(np.dot(program.rule_weights, phi)) if phi is not None else program.objective()[0]
            timings["potentials"] = _lap(t)
            t = time.perf_counter()
            deep, _ = program.energy_gradient()
            timings["gradient"] = _lap(t)
        finally:
            labels.unfix()
        return LossOutput(energy, energy, phi, deep, iterations, timings)


class StructuredPerceptron(EnergyLoss):
    """The energy at (labels, latent MAP) minus the energy of the full MAP state (a second solve).

    Examples:
        >>> StructuredPerceptron().needs_potentials
        True
    """

    name = "structured_perceptron"
    needs_potentials = True
    accepts_observed_labels = False

    def step(self, ctx: StepContext) -> LossOutput:
        """The energy step, then the full MAP state's Φ and gradient subtracted."""
        out = super().step(ctx)
        program = ctx.program
        t = time.perf_counter()
        out.iterations["map"] = program.solve(reset=ctx.reset).iterations
        phi_map = program.rule_potentials()
        deep_map, _ = program.energy_gradient()
        assert out.weight_gradient is not None
        out.loss = out.energy - float(np.dot(program.rule_weights, phi_map))
        out.weight_gradient = out.weight_gradient - phi_map
        out.atom_gradient = out.atom_gradient - deep_map
        out.timings["map"] = _lap(t)
        return out


_OPTION_NAMES = {
    "minimizer.proxruleweight": "proximity_weight",
    "minimizer.initialsquaredpenalty": "initial_squared_penalty",
    "minimizer.squaredpenaltyincreaserate": "squared_penalty_increase_rate",
    "minimizer.initiallinearpenalty": "initial_linear_penalty",
    "minimizer.objectivedifferencetolerance": "objective_difference_tolerance",
    "minimizer.finalparametermovementconvergencetolerance": "final_parameter_movement_tolerance",
    "gradientdescent.stepsize": "step_size",
    "gradientdescent.scalestepsize": "scale_step_size",
}


@dataclass
class MinimizerLoss(Loss):
    """The bilevel losses' shared machinery: PSL 2.4.0's ``Minimizer``, one learning iteration per step.

    Defaults are PSL's (option names in brackets). Each program keeps its own state (proximity targets,
    penalty coefficients, three warm starts: MAP, latent, augmented).

    Attributes:
        proximity_weight: Weight of the proximity terms (``minimizer.proxruleweight``, 0.01).
        initial_squared_penalty: ρ at the start (``minimizer.initialsquaredpenalty``, 10).
        squared_penalty_increase_rate: ρ's growth factor (``minimizer.squaredpenaltyincreaserate``, 2).
        initial_linear_penalty: λ at the start (``minimizer.initiallinearpenalty``, 0.1).
        objective_difference_tolerance: Final tolerance on Δ (``minimizer.objectivedifferencetolerance``, 0.01).
        final_parameter_movement_tolerance: ``minimizer.finalparametermovementconvergencetolerance`` (0.01).
        step_size: Step size of the proximity targets (``gradientdescent.stepsize``, 0.1; PSL's weight steps
            use the same option).
        scale_step_size: Divide it by ``k + 1`` at step ``k`` (``gradientdescent.scalestepsize``, true).

    Examples:
        >>> loss = BinaryCrossEntropy(proximity_weight=0.1)
        >>> isinstance(loss, MinimizerLoss), loss.proximity_weight, loss.initial_squared_penalty
        (True, 0.1, 10.0)
    """

    proximity_weight: float = 0.01
    initial_squared_penalty: float = 10.0
    squared_penalty_increase_rate: float = 2.0
    initial_linear_penalty: float = 0.1
    objective_difference_tolerance: float = 0.01
    final_parameter_movement_tolerance: float = 0.01
    step_size: float = 0.1
    scale_step_size: bool = True
    _states: dict[int, _MinimizerState] = field(default_factory=dict, init=False, repr=False, compare=False)

    needs_potentials = True

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name.startswith("_") or isinstance(value, bool):
                continue
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
                raise ConfigurationError(f"{type(self).__name__}.{f.name} must be a finite number >= 0, got {value!r}")

    @classmethod
    def from_psl_options(cls, options: dict[str, Any]) -> MinimizerLoss:
        """Build from PSL option names (``minimizer.*``, ``gradientdescent.stepsize``); others are ignored.

        Raises:
            ConfigurationError: A value is not a number (or a boolean where one is expected).
        """
        kwargs: dict[str, Any] = {}
        for key, value in options.items():
            name = _OPTION_NAMES.get(str(key).lower())
            if name is None:
                continue
            text = str(value).strip().lower()
            try:
                if name == "scale_step_size":
                    if text not in ("true", "false"):
                        raise ValueError(text)
                    kwargs[name] = text == "true"
                else:
                    kwargs[name] = float(text)
            except ValueError:
                raise ConfigurationError(f"option {key}={value!r} is not a valid {name.replace('_', ' ')}") from None
        return cls(**kwargs)

    # -- the loss itself --------------------------------------------------------------

    def supervised(self, p: np.ndarray, truth: np.ndarray) -> tuple[float, np.ndarray]:
        """The supervised loss at proximity targets ``p`` of the labelled atoms, and its gradient."""
        raise NotImplementedError

    def step(self, ctx: StepContext) -> LossOutput:
        """One Minimizer iteration up to (not including) its gradient steps."""
        program = ctx.program
        if not ctx.potentials:
            raise ConfigurationError(f"potentials=False: the {self.name!r} loss always needs Φ (its energy difference)")
        state = self._states.get(program.id)
        if state is None or state.program is not program:
            state = self._states[program.id] = _MinimizerState(self, program)
        return state.step(ctx)

    def finish(self, program: GroundProgram, weight_change: float) -> None:
        """Step the proximity targets and queue the penalty update, as PSL's ``gradientStep``."""
        self._states[program.id].finish(weight_change)


@dataclass
class BinaryCrossEntropy(MinimizerLoss):
    """Binary cross-entropy of the MAP state against the labels (bilevel; PSL's ``BinaryCrossEntropy``).

    Examples:
        >>> loss, grad = BinaryCrossEntropy().supervised(np.array([0.5, 0.9]), np.array([1.0, 0.0]))
        >>> round(loss, 4), grad.round(2).tolist()
        (2.9957, [-2.0, 10.0])
    """

    name = "bce"

    def supervised(self, p: np.ndarray, truth: np.ndarray) -> tuple[float, np.ndarray]:
        """``−Σ y log p + (1 − y) log(1 − p)`` (clipped at 1e-4 like PSL) and its gradient."""
        up, down = np.maximum(p, _EPSILON_FLOAT), np.maximum(1.0 - p, _EPSILON_FLOAT)
        loss = -float(np.sum(truth * np.log(up) + (1.0 - truth) * np.log(down)))
        return loss, -(truth / up - (1.0 - truth) / down)


@dataclass
class SquaredError(MinimizerLoss):
    """Squared error of the MAP state against the labels (bilevel; PSL's ``SquaredError``).

    Examples:
        >>> SquaredError().supervised(np.array([0.5]), np.array([1.0]))
        (0.25, array([-1.]))
    """

    name = "squared_error"

    def supervised(self, p: np.ndarray, truth: np.ndarray) -> tuple[float, np.ndarray]:
        """``Σ (p − y)²`` and its gradient."""
        diff = p.astype(np.float64) - truth
        return float(np.sum(diff * diff)), 2.0 * diff


class _MinimizerState:
    """One program's Minimizer state across steps."""

    def __init__(self, loss: MinimizerLoss, program: GroundProgram) -> None:
        labels = program.labels
        if labels.label_index.size == 0:
            raise ConfigurationError(
                f"the {loss.name!r} loss needs labels: this program has no truth rows for its targets "
                "(build it with phase='learn' from data with a truth partition)"
            )
        self.loss, self.program = loss, program
        self.proximity = program.proximity(loss.proximity_weight)
        position = {int(a): j for j, a in enumerate(self.proximity.targets)}
        self.label_slots = np.array([position[int(a)] for a in labels.label_index], dtype=np.int64)
        self.unfixed = np.zeros(program.atom_count, dtype=bool)
        self.unfixed[self.proximity.targets] = True
        self.squared_rules = np.array([program.rules[i].squared for i in program.weighted_rules], dtype=bool)
        self.map_state = program.save_warm_start()
        self.latent_state = program.save_warm_start()
        self.augmented_state = program.save_warm_start()
        self.squared_penalty = loss.initial_squared_penalty
        self.linear_penalty = loss.initial_linear_penalty
        self.movement_tolerance = 1.0 / loss.initial_squared_penalty
        self.constraint_tolerance = 1.0 / loss.initial_squared_penalty**0.1
        self.iteration, self.outer_iteration = 0, 1
        self.initialized = False
        self.pending: float | None = None
        self.neural_values: np.ndarray | None = None
        self.stats: dict[str, np.ndarray] = {}
        self.proximity_gradient = np.zeros(self.proximity.targets.size)

    @property
    def truth(self) -> np.ndarray:
        """The labels now (a program relabelled with ``set_labels`` between steps gives its new ones)."""
        return self.program.labels.label_values.astype(np.float64)

    # -- one iteration ----------------------------------------------------------------

    def step(self, ctx: StepContext) -> LossOutput:
        program, timings, iterations = self.program, {}, {}
        neural = program.atom_values()[program.atoms.deep_mask]
        if self.pending is not None and self.neural_values is not None:
            self.update_penalties(self.pending + float(np.abs(neural - self.neural_values).sum()))
        self.neural_values = neural
        t = time.perf_counter()
        iterations["map"] = program.solve_from(self.map_state).iterations
        self.map_state = program.save_warm_start(into=self.map_state)
        self.stats.update(_statistics(program, "map"))
        timings["map"] = _lap(t)
        if not self.initialized:
            t = time.perf_counter()
            iterations["latent"] = self.initialize()
            timings["latent"] = _lap(t)
        t = time.perf_counter()
        self.proximity.activate(True)
        try:
            iterations["augmented"] = program.solve_from(self.augmented_state).iterations
            self.augmented_state = program.save_warm_start(into=self.augmented_state)
            self.stats.update(_statistics(program, "augmented"))
        finally:
            self.proximity.activate(False)
        timings["augmented"] = _lap(t)
        return self.gradients(iterations, timings)

    def initialize(self) -> int | None:
        """Proximity targets start at the latent MAP state, the labelled ones at their labels."""
        program, labels = self.program, self.program.labels
        labels.fix()
        try:
            iterations = program.solve_from(self.latent_state).iterations
            self.latent_state = program.save_warm_start(into=self.latent_state)
        finally:
            labels.unfix()
        values = program.atom_values()
        targets = values[self.proximity.targets].copy()
        targets[self.label_slots] = self.truth
        self.proximity.set(targets)
        # PSL starts the augmented problem's values from the latent state too.
        self.augmented_state.values[: program.atom_count] = self.latent_state.values[: program.atom_count]
        self.initialized = True
        return iterations

    def gradients(self, iterations: dict[str, int | None], timings: dict[str, float]) -> LossOutput:
        loss, program, s = self.loss, self.program, self.stats
        p = self.proximity.values().astype(np.float64)
        difference = self.energy_difference(program.rule_weights)
        gap = p - s["augmented_values"][self.proximity.targets]
        proximity_value = loss.proximity_weight * float(np.dot(gap, gap))
        delta = difference + proximity_value
        supervised, supervised_gradient = loss.supervised(p[self.label_slots], self.truth)
        moreau = 2.0 * loss.proximity_weight * gap
        gradient = np.zeros_like(p)
        np.add.at(gradient, self.label_slots, supervised_gradient)
        self.proximity_gradient = gradient + (self.linear_penalty + self.squared_penalty * delta) * moreau
        factor = self.squared_penalty * delta + self.linear_penalty
        value = 0.5 * self.squared_penalty * delta**2 + self.linear_penalty * delta + supervised
        details = {
            "supervised_loss": supervised,
            "energy_difference": difference,
            "proximity_value": proximity_value,
            "squared_penalty": self.squared_penalty,
            "linear_penalty": self.linear_penalty,
        }
        return LossOutput(
            value,
            difference,
            factor * (s["augmented_phi"] - s["map_phi"]),
            (factor * (s["augmented_gradient"] - s["map_gradient"])).astype(np.float32),
            iterations,
            timings,
            details,
        )

    def energy_difference(self, weights: np.ndarray) -> float:
        """PSL's ``computeTotalEnergyDifference``: augmented minus MAP energy, with the dual regulariser."""
        s, lam = self.stats, self.program.solver.regularization
        d_phi = s["augmented_phi"] - s["map_phi"]
        d_sq = s["augmented_squared"] - s["map_squared"]
        total = float(np.sum(np.where(self.squared_rules, (weights + lam) * d_phi, weights * d_phi + lam * d_sq)))
        aug, full = s["augmented_values"][self.unfixed], s["map_values"][self.unfixed]
        return total + lam * float(np.dot(aug, aug) - np.dot(full, full))

    # -- after the weight step ----------------------------------------------------------

    def finish(self, weight_change: float) -> None:
        loss = self.loss
        step = loss.step_size / (self.iteration + 1) if loss.scale_step_size else loss.step_size
        old = self.proximity.values().astype(np.float64)
        new = np.clip(old - step * self.proximity_gradient, 0.0, 1.0)
        self.proximity.set(new)
        self.pending = weight_change + float(np.abs(old - new.astype(np.float32)).sum())
        self.iteration += 1

    def update_penalties(self, movement: float) -> None:
        """PSL's augmented-Lagrangian schedule, applied for the previous iteration (its movement now known)."""
        loss = self.loss
        p = self.proximity.values().astype(np.float64)
        gap = p - self.stats["augmented_values"][self.proximity.targets]
        delta = self.energy_difference(self.program.rule_weights) + loss.proximity_weight * float(np.dot(gap, gap))
        previous = self.iteration - 1
        self.pending = None
        if previous <= 0 or movement >= self.movement_tolerance:
            return
        self.outer_iteration += 1
        if delta < self.constraint_tolerance:
            if delta < loss.objective_difference_tolerance and movement < loss.final_parameter_movement_tolerance:
                return  # converged
            self.linear_penalty += 2.0 * self.squared_penalty * delta
            self.constraint_tolerance /= self.squared_penalty**0.9
            self.movement_tolerance /= self.squared_penalty
        else:
            self.squared_penalty *= loss.squared_penalty_increase_rate
            self.constraint_tolerance = 1.0 / self.squared_penalty**0.1
            self.movement_tolerance = 1.0 / self.squared_penalty


def _statistics(program: GroundProgram, prefix: str) -> dict[str, np.ndarray]:
    """Φ, squared-hinge Φ, atom values and the optimal-value gradient at the current state."""
    deep, _ = program.energy_gradient()
    return {
        f"{prefix}_phi": program.rule_potentials(),
        f"{prefix}_squared": program.rule_potentials(squared_hinge=True),
        f"{prefix}_values": program.atom_values().astype(np.float64),
        f"{prefix}_gradient": deep.astype(np.float64),
    }


LOSSES = {
    "energy": EnergyLoss,
    "structured_perceptron": StructuredPerceptron,
    "bce": BinaryCrossEntropy,
    "binary_cross_entropy": BinaryCrossEntropy,
    "squared_error": SquaredError,
}


def check_loss(loss: str | Loss) -> str | Loss:
    """``loss`` itself when it names a loss (or is one), without building it (bilevel ones need a program's options).

    Raises:
        ConfigurationError: An unknown name or a value that is not a loss.

    Examples:
        >>> check_loss("BCE")
        'BCE'
        >>> check_loss("bogus")
        Traceback (most recent call last):
        ...
        pslbridge.errors.ConfigurationError: loss must be one of [...] or a pslbridge.losses.Loss, got 'bogus'
    """
    if not isinstance(loss, Loss) and (not isinstance(loss, str) or loss.lower() not in LOSSES):
        raise ConfigurationError(f"loss must be one of {sorted(LOSSES)} or a pslbridge.losses.Loss, got {loss!r}")
    return loss


def resolve_loss(loss: str | Loss, options: dict[str, Any] | None = None) -> Loss:
    """A loss object from a name (bilevel ones configured from PSL ``options``) or a :class:`Loss` itself.

    Raises:
        ConfigurationError: An unknown name or a value that is not a loss.

    Examples:
        >>> resolve_loss("squared_error", {"minimizer.proxruleweight": "0.5"}).proximity_weight
        0.5
    """
    if isinstance(check_loss(loss), Loss):
        return loss  # type: ignore[return-value]
    cls = LOSSES[loss.lower()]  # type: ignore[union-attr]
    if issubclass(cls, MinimizerLoss):
        return cls.from_psl_options(dict(options or {}))
    return cls()


def warn_without_truth(program: GroundProgram, out: LossOutput) -> None:
    """Warn (once per program) when an energy step on a program without labels came out exactly zero.

    Without labels every target is latent; when the rules are also satisfied at the MAP state the energy and
    every gradient are 0 and the step learns nothing (an unsupervised program whose rules conflict with the
    predictions, such as Visual Sudoku's, still learns and is not warned about). A program whose labels are
    observed (:meth:`~pslbridge.model.ModelSpec.observe_labels`) has its data as evidence and is not warned
    about either.

    Examples:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     warn_without_truth(program, LossOutput(0.0, 0.0, None, np.zeros(3)))
        >>> len(caught)  # the acquaintances program has labels: no warning
        0
    """
    if program.labels.label_index.size or program.spec.observed_labels or program.id in _WARNED_WITHOUT_TRUTH:
        return
    if out.energy == 0.0 and not np.any(out.atom_gradient):
        warnings.warn(
            "learn_step on a program without truth rows gave energy 0 and zero gradients: every target is latent "
            "and the rules are satisfied at the MAP state, so nothing is learned; build the training program "
            "with phase='learn' from data with labels",
            UserWarning,
            stacklevel=3,
        )
        _WARNED_WITHOUT_TRUTH.add(program.id)


def _lap(start: float) -> float:
    return time.perf_counter() - start
