"""The grounded program that stays resident in the JVM, behind a numpy/pandas facade.

A :class:`GroundProgram` takes a :class:`~pslbridge.model.ModelSpec`, checks it in Python, declares
its predicates, compiles its rules, loads its data, grounds it once and keeps the term store, reasoner and
atom store alive. It is the only holder of Java objects: everything it returns is numpy, pandas or plain
Python, and its pieces each own one job (:mod:`.registry`, :mod:`.grounding`, :mod:`.atoms`,
:mod:`.labels`, :mod:`.solver`, :mod:`.terms`).

Examples:
    >>> from pslbridge.model import ModelSpec
    >>> spec = ModelSpec.from_python(rules=["1: GpA(X) -> GpB(X) ^2", "1: !GpB(X) ^2"],
    ...     predicates={"GpA": 1, "GpB": 1}, observations={"GpA": [("x", 1.0)]}, targets={"GpB": [("x",)]})
    >>> with GroundProgram(spec) as program:
    ...     _ = program.solve(reset=True)
    ...     (program.atom_count, program.term_count, program.rule_weights.tolist())
    (2, 2, [1.0, 1.0])
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .. import jvm
from ..engine.failures import guard
from ..errors import ClosedError, ConfigurationError, EngineError
from ..model import ModelSpec
from ..neural_inputs import as_prediction_array
from .atoms import AtomIndex, NeuralBlock, TargetRows
from .grounding import build
from .labels import Labels
from .proximity import Proximity
from .solver import Solver, SolveStats, WarmStart
from .terms import Terms

__all__ = ["GroundProgram"]

log = logging.getLogger(__name__)
_ids = itertools.count(1)


class GroundProgram:
    """A model grounded once in the PSL engine and kept resident.

    Args:
        spec: The model description.
        options: PSL options for this program (override ``spec.options``), applied while its reasoner is built.
        reasoner: ``"admm"`` (default), ``"dualbcd"``, ``"distributeddualbcd"`` or ``"sgd"``.

    Raises:
        ModelFileError: A rule does not compile, data conflict, a predicate clashes.
        EngineError: Grounding failed in the engine.

    Attributes:
        lock: Held by every operation that moves values or solves; a learning step holds it throughout.

    Examples:
        >>> program.atom_count, program.rv_count, program.term_count
        (89, 56, 446)
    """

    @jvm.required
    def __init__(
        self,
        spec: ModelSpec,
        options: Mapping[str, Any] | None = None,
        reasoner: str = "admm",
        functions: Mapping[str, Callable[..., float]] | None = None,
    ) -> None:
        self.spec = spec
        self.id = next(_ids)
        self.options = {**spec.options, **{k: _option_text(v) for k, v in (options or {}).items()}}
        self.reasoner_name = str(reasoner).lower()
        self.lock = threading.RLock()
        self._closed = False
        self._dirty = False  # neural values written to the value array but not yet to the atom objects
        self._labels: Labels | None = None
        self._proximity: Proximity | None = None
        built = build(spec, self.options, self.reasoner_name, functions)
        self._registry, self._rules, self._grounded = built.registry, built.rules, built.grounded
        self._predicates = built.predicates
        self._atoms, self._terms, self._solver = built.atoms, built.terms, built.solver
        self.rules = self._rules.info
        self.weighted_rules = self._rules.weighted
        self.term_count = self._terms.count
        self.timings = built.timings
        log.info("program %d: %d atoms, %d terms (%s)", self.id, self.atom_count, self.term_count, self.timings)

    # -- what the program holds -------------------------------------------------------

    @property
    def atom_count(self) -> int:
        """Ground atoms of the model (proximity atoms added for bilevel learning not counted)."""
        return self._atoms.atom_count

    @property
    def rv_count(self) -> int:
        """Atoms PSL may change (random variables: targets and neural atoms); they come first."""
        return self._atoms.rv_count

    @property
    def targets(self) -> dict[str, TargetRows]:
        """Target rows of each open predicate (by upper-cased name), in the order the user gave them."""
        return self._atoms.targets

    @property
    def neural(self) -> dict[str, NeuralBlock]:
        """The neural predicates' blocks (by upper-cased name)."""
        return self._atoms.neural

    @property
    def atoms(self) -> AtomIndex:
        """Row ↔ atom-store index maps, atom names and kinds (:class:`.atoms.AtomIndex`)."""
        self.check_open()
        return self._atoms

    @property
    def terms(self) -> Terms:
        """The ground terms: counts per rule, the numpy export, the terms of one atom (:class:`.terms.Terms`)."""
        self.check_open()
        return self._terms

    @property
    def solver(self) -> Solver:
        """The reasoner (solve, objective, Φ, gradients, warm starts)."""
        self.check_open()
        return self._solver

    @property
    def labels(self) -> Labels:
        """Labelled targets and fixing them to their truth values (built on first use)."""
        self.check_open()
        if self._labels is None:
            truth = self._grounded.truth_db.getAtomStore()
            self._labels = Labels(self.spec, self._atoms, self._grounded.atom_store, truth)
        return self._labels

    def check_open(self) -> None:
        """Raise :class:`ClosedError` after :meth:`close`."""
        if self._closed:
            raise ClosedError(f"program {self.id} is closed; build a new Bridge to continue")

    # -- values ------------------------------------------------------------------------

    def atom_values(self, upto: int | None = None) -> np.ndarray:
        """A copy of the atom values (float32), the first ``upto`` of them (default: every model atom)."""
        self.check_open()
        return self._solver.values(self.atom_count if upto is None else upto)

    def set_atom_values(self, values: np.ndarray) -> None:
        """Overwrite the first ``len(values)`` atom values (a warm start, a restored checkpoint)."""
        self.check_open()
        array = np.ascontiguousarray(values, dtype=np.float32)
        if array.ndim != 1 or array.size > self.atom_count:
            raise ConfigurationError(f"expected at most {self.atom_count} atom values, got shape {array.shape}")
        with self.lock:
            self._grounded.atom_store.getAtomValues()[0 : array.size] = array
            self._dirty = True

    def write_neural(self, predictions: Mapping[str, Any]) -> None:
        """Validate every ``{predicate: (entities, classes) array}``, then write them all (or none).

        Raises:
            NeuralInputError: An unknown predicate or a bad array; nothing is written then.
        """
        self.check_open()
        checked = []
        for name, value in predictions.items():
            block = self._atoms.block(str(name))
            array = as_prediction_array(block.spec.name, value, block.shape, block.entities, block.classes)
            checked.append((block, array.ravel()))  # validated: float32, C-contiguous
        with self.lock:
            java_values = self._grounded.atom_store.getAtomValues()
            for block, flat in checked:
                block.write(java_values, flat)
            self._dirty = True

    def read_targets(self) -> dict[str, np.ndarray]:
        """Current values of every target predicate's rows (by declared name)."""
        if not self.targets:
            return {}
        values = self.atom_values(self.rv_count)
        return {self.spec.predicates[k].name: values[rows.index] for k, rows in self.targets.items()}

    def unfixed_mask(self) -> np.ndarray:
        """Boolean mask of the atoms the reasoner solves for now (labels fixed or not)."""
        return self.labels.unfixed_mask(self.atom_count, self._atoms.deep_mask)

    # -- solving -----------------------------------------------------------------------

    def sync_atoms(self) -> None:
        """Copy the value array into the atom objects (a reset starts from the atom objects)."""
        if self._dirty:
            with guard("synchronising atoms"):
                self._grounded.atom_store.sync()
            self._dirty = False

    def solve(self, reset: bool = False) -> SolveStats:
        """MAP inference from the current state (``reset``: from the current atom values).

        Raises:
            EngineError: The engine failed, or the objective came out non-finite.
        """
        self.check_open()
        with self.lock:
            if reset or self._solver.dual:
                # A reset starts from the atom objects; the dual-BCD reasoners always read fixed (neural,
                # observed) atoms from the objects rather than the value array, so they need them current.
                self.sync_atoms()
            stats = self._solver.solve(reset)
            self._dirty = False
        if not math.isfinite(stats.objective):
            raise EngineError(
                f"the solve produced a non-finite objective ({stats.objective}); rule weights: "
                f"{dict(zip(self.weighted_texts(), self.rule_weights.tolist()))}"
            )
        return stats

    def save_warm_start(self, into: WarmStart | None = None) -> WarmStart:
        """The reasoner's state now (term states, atom values), for :meth:`solve_from`."""
        self.check_open()
        with self.lock:
            return self._solver.save(into)

    def solve_from(self, state: WarmStart) -> SolveStats:
        """PSL's learners' warm start: load a saved state, then solve with a reset from it."""
        with self.lock:
            self._solver.load(state, self.unfixed_mask())
            self._dirty = False
            return self.solve(reset=True)

    def objective(self) -> tuple[float, int]:
        """Weighted objective (unregularised) and violated hard constraints at the current values."""
        self.check_open()
        with self.lock:
            return self._solver.objective(self.unfixed_mask() if self._solver.dual else np.zeros(0, dtype=bool))

    # -- rules -------------------------------------------------------------------------

    def weighted_texts(self) -> list[str]:
        """PSL's texts of the weighted rules, in :attr:`rule_weights` order."""
        return self._rules.texts()

    @property
    def rule_weights(self) -> np.ndarray:
        """Weights of the weighted rules in model order; setting them checks them (:class:`.rules.RuleSet`)."""
        self.check_open()
        return self._rules.weights

    @rule_weights.setter
    def rule_weights(self, weights: Any) -> None:
        self.check_open()
        with self.lock:
            self._rules.weights = weights

    def rule_potentials(self, rule_indexes: Sequence[int] | None = None, *, squared_hinge: bool = False) -> np.ndarray:
        """Φ: incompatibility summed per rule at the current values (float64), weighted rules by default.

        Args:
            rule_indexes: Rules (model order) to evaluate; default :attr:`weighted_rules`.
            squared_hinge: Sum ``max(0, inner)²`` instead (the bilevel learners' second statistic).
        """
        indexes = self.weighted_rules if rule_indexes is None else list(rule_indexes)
        with self.lock:
            return self._solver.potentials(self._terms, self.atom_values, indexes, squared_hinge)

    def rule_violations(self) -> np.ndarray:
        """Violated ground constraints per rule at the current values (0 for weighted rules)."""
        with self.lock:
            return self._solver.violations([not r.weighted for r in self.rules])

    def proximity(self, weight: float) -> Proximity:
        """The bilevel learners' proximity terms (added on first use; see :class:`.proximity.Proximity`).

        Raises:
            ConfigurationError: Not a dual-BCD reasoner, or another weight than the first.
        """
        self.check_open()
        with self.lock:
            if self._proximity is None:
                targets = np.flatnonzero(self._atoms.rv_mask & ~self._atoms.deep_mask)  # non-neural random variables
                self._proximity = Proximity.attach(self._grounded, self._solver, targets, weight)
            self._proximity.check_weight(weight)
            return self._proximity

    def energy_gradient(self) -> tuple[np.ndarray, np.ndarray]:
        """∂energy/∂atom at the current values: (neural-atom gradient, random-variable gradient)."""
        self.check_open()
        with self.lock:
            return self._solver.gradient(self.atom_count)

    def evaluate(self) -> list[dict[str, Any]]:
        """Run the model's declared evaluations (PSL's own evaluators) on the current values against the truth.

        Returns:
            One dict per evaluation: ``predicate``, ``evaluator``, ``primary``, ``rep_metric``, ``normalized``,
            ``higher_is_better``, ``stats``.
        """
        self.check_open()
        with self.lock:
            self.sync_atoms()
            return self._grounded.evaluate(self.spec, self._predicates)

    # -- state -------------------------------------------------------------------------

    def state(self) -> dict[str, np.ndarray]:
        """What a checkpoint keeps of the program: random-variable atom values and rule weights."""
        return {"atom_values": self.atom_values(self.rv_count), "rule_weights": self.rule_weights}

    def restore(self, state: Mapping[str, np.ndarray]) -> None:
        """Restore :meth:`state` (the next solve warm-starts from the saved values).

        Raises:
            ConfigurationError: The state was saved from another program.
        """
        values = np.asarray(state["atom_values"], dtype=np.float32)
        if values.shape != (self.rv_count,):
            raise ConfigurationError(f"saved atom values have shape {values.shape}; this program has {self.rv_count}")
        self.set_atom_values(values)
        self.rule_weights = state["rule_weights"]

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Free the Java objects (the JVM stays up). Safe to call twice."""
        if self._closed:
            return
        with self.lock:
            self._closed = True
            try:
                self._grounded.close()
            finally:
                self._registry.release()
                self._labels = self._proximity = None

    def __enter__(self) -> GroundProgram:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _option_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
