"""MAP inference on the resident terms, and what learning reads at a MAP state: objective, Φ, gradients.

:class:`Solver` wraps PSL's inference application of one program. Solve statistics come from the solve
itself: the objective is ``inference()``'s return value and the iteration count the reasoner's closing
event (collected for the calling thread only, see :mod:`pslbridge.engine.logs`). The dual-BCD reasoners
optimise a regularised objective (``λ Σ x²`` over unfixed atoms is added); every objective and Φ this module
reports is the unregularised one, as PSL's own ``DualBCDReasoner.optimize`` returns it.

Examples:
    >>> from pslbridge.model import ModelSpec
    >>> from pslbridge.program import GroundProgram
    >>> spec = ModelSpec.from_python(rules=["1: SvA(X) -> SvB(X) ^2", "1: !SvB(X) ^2"],
    ...     predicates={"SvA": 1, "SvB": 1}, observations={"SvA": [("x", 1.0)]}, targets={"SvB": [("x",)]})
    >>> with GroundProgram(spec) as program:
    ...     stats = program.solve(reset=True)
    ...     (round(float(program.read_targets()["SvB"][0]), 3), round(stats.objective, 3))
    (0.5, 0.5)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import jvm
from ..engine import classes, datastore, logs, setup
from ..engine import reasoner as java_reasoner
from ..engine.failures import guard

__all__ = ["SolveStats", "Solver", "WarmStart"]


@dataclass
class SolveStats:
    """What one solve reported.

    Attributes:
        objective: The weighted objective at the MAP state (unregularised).
        violated_constraints: Hard-constraint ground rules violated at the MAP state.
        iterations: Reasoner iterations (None if the reasoner reported none).

    Examples:
        >>> SolveStats(1.5, 0, 12).iterations
        12
    """

    objective: float
    violated_constraints: int
    iterations: int | None


@dataclass
class WarmStart:
    """A saved reasoner state (term states and atom values) to start a later solve from.

    Examples:
        >>> WarmStart(None, np.zeros(2, dtype=np.float32)).values.shape
        (2,)
    """

    terms: Any
    values: np.ndarray


class Solver:
    """The reasoner of one grounded program.

    Args:
        app: PSL's inference application.
        reasoner: The reasoner's name (a key of :data:`pslbridge.engine.classes.REASONERS`).
        rules: The compiled rules in model order.
        weighted: Whether each rule is weighted.

    Examples:
        >>> program.solver.dual, program.solver.solve(reset=False).iterations > 0
        (False, True)
    """

    def __init__(self, app: Any, reasoner: str, rules: Sequence[Any], weighted: Sequence[bool]) -> None:
        self.app = app
        self.name = reasoner
        self.rules = list(rules)
        self.weighted = list(weighted)
        self.term_store = app.getTermStore()
        self.reasoner = app.getReasoner()
        self.atom_store = app.getDatabase().getAtomStore()
        self.regularization = java_reasoner.regularization_parameter(self.reasoner)
        self._rv_gradient: Any = None
        self._deep_gradient: Any = None

    @property
    def dual(self) -> bool:
        """Whether the reasoner is one of the dual-BCD reasoners (regularised objective)."""
        return self.name in classes.DUAL_REASONERS

    def solve(self, reset: bool) -> SolveStats:
        """Run MAP inference on the resident terms (no commit to the database).

        Args:
            reset: Restart the reasoner from the current atom values instead of its last state.
        """
        if int(self.term_store.size()) == 0:
            # Nothing to optimise (PSL's ADMM would spin to its iteration cap); as the jar reports: objective 0.
            return SolveStats(0.0, 0, 0)
        jvm.sync_log_level()
        if self.name == "admm":
            java_reasoner.clear_admm_cache()
        with logs.solve_events() as events, guard("inference"), setup.watch_workers("inference"):
            objective = float(self.app.inference(False, bool(reset)))
        if events:
            return SolveStats(objective, int(events[-1]["violated"]), int(events[-1]["iterations"]))
        return SolveStats(objective, self.objective(np.zeros(0, dtype=bool))[1], None)

    def objective(self, unfixed: np.ndarray) -> tuple[float, int]:
        """Weighted objective (unregularised) and violated hard constraints at the current values.

        Args:
            unfixed: Mask of the atoms the reasoner solves for (used to remove the dual reasoners'
                regularisation); ignored by the other reasoners.
        """
        with guard("computing the objective"), setup.watch_workers("computing the objective"):
            objective, violated = java_reasoner.compute_objective(self.reasoner, self.term_store)
        if self.dual and unfixed.any():
            values = self.values(unfixed.size).astype(np.float64)
            objective -= self.regularization * float(np.dot(values[unfixed], values[unfixed]))
        return objective, violated

    def values(self, upto: int) -> np.ndarray:
        """A copy of the first ``upto`` atom values (float32)."""
        return np.array(self.atom_store.getAtomValues()[0:upto], dtype=np.float32)

    def potentials(
        self, terms: Any, values: Callable[[], np.ndarray], rule_indexes: Sequence[int], squared_hinge: bool
    ) -> np.ndarray:
        """Φ per rule of ``rule_indexes`` (float64).

        From the term table (``terms``, a :class:`.terms.Terms`, at ``values()``) on the dual reasoners or for the
        squared hinge, else by :meth:`per_rule_passes`.
        """
        if self.dual or squared_hinge:
            per_rule = terms.table().per_rule(values(), len(self.rules), squared_hinge=squared_hinge)
            return per_rule[list(rule_indexes)]
        return self.per_rule_passes(rule_indexes)[0]

    def violations(self, hard: Sequence[bool]) -> np.ndarray:
        """Violated ground constraints per rule (``hard`` marks the constraints; 0 for the others)."""
        indexes = [i for i, h in enumerate(hard) if h]
        out = np.zeros(len(hard), dtype=np.int64)
        if indexes:
            out[indexes] = self.per_rule_passes(indexes)[1]
        return out

    def per_rule_passes(self, rule_indexes: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Φ (float64) and violated constraints per rule: one objective pass per rule, that rule alone active.

        Weighted rules are evaluated at weight 1 (their incompatibility); the reasoner's own parallel
        objective does the work. Not for the dual reasoners (their objective carries the regulariser):
        use the term table there.
        """
        rules = self.rules
        weights = [float(rules[i].getWeight()) if self.weighted[i] else None for i in rule_indexes]
        active = [bool(r.isActive()) for r in rules]
        out = np.zeros(len(rule_indexes), dtype=np.float64)
        violated = np.zeros(len(rule_indexes), dtype=np.int64)
        try:
            with guard("computing rule potentials"), setup.watch_workers("computing rule potentials"):
                for rule in rules:
                    rule.setActive(False)
                for k, i in enumerate(rule_indexes):
                    rules[i].setActive(True)
                    if weights[k] is not None:
                        rules[i].setWeight(1.0)
                    out[k], violated[k] = java_reasoner.compute_objective(self.reasoner, self.term_store)
                    rules[i].setActive(False)
                    if weights[k] is not None:
                        rules[i].setWeight(weights[k])
        finally:
            for rule, was in zip(rules, active):
                rule.setActive(was)
            for k, i in enumerate(rule_indexes):
                if weights[k] is not None:
                    rules[i].setWeight(weights[k])
        return out, violated

    def gradient(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        """∂energy/∂atom at the current values: (deep-atom gradient, random-variable gradient).

        PSL's ``computeOptimalValueGradient``; hard-constraint terms are skipped (ADMM), and the dual
        reasoners read it from their dual variables.
        """
        total = int(self.atom_store.size())  # proximity atoms may follow the model's atoms
        if self._rv_gradient is None or len(self._rv_gradient) < total:
            self._rv_gradient = datastore.new_float_array(total)
            self._deep_gradient = datastore.new_float_array(total)
        with guard("computing neural gradients"), setup.watch_workers("computing neural gradients"):
            self.reasoner.computeOptimalValueGradient(self.term_store, self._rv_gradient, self._deep_gradient)
        deep = np.array(self._deep_gradient[0:size], dtype=np.float32)
        rv = np.array(self._rv_gradient[0:size], dtype=np.float32)
        return deep, rv

    def save(self, into: WarmStart | None = None) -> WarmStart:
        """The reasoner's current state (term states and every atom value), to warm-start a later solve.

        Args:
            into: A state saved earlier from this solver, to overwrite in place (no new Java objects).
        """
        with guard("saving the reasoner state"):
            if into is None or into.terms is None:
                terms = self.term_store.saveState()
            else:
                self.term_store.saveState(into.terms)
                terms = into.terms
        return WarmStart(terms, self.values(int(self.atom_store.size())))

    def load(self, state: WarmStart, unfixed: np.ndarray) -> None:
        """Restore a saved state: term states, and the values of the unfixed atoms (PSL's warm start).

        Args:
            state: A state from :meth:`save`.
            unfixed: Mask of the atoms to restore (the ones the reasoner solves for; atoms past its end,
                such as proximity atoms, keep their current values).
        """
        n = min(unfixed.size, state.values.size)
        with guard("loading the reasoner state"):
            self.term_store.loadState(state.terms)
            java_values = self.atom_store.getAtomValues()
            values = np.array(java_values[0:n], dtype=np.float32)
            values[unfixed[:n]] = state.values[:n][unfixed[:n]]
            java_values[0:n] = values
            self.atom_store.sync()
