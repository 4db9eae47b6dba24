"""What a user reads off a grounded program: predicates, entities, classes, target atoms, rules, weights.

:class:`ProgramView` is the read-only half of :class:`pslbridge.Bridge` (the other half pushes predictions,
solves and learns): the program's facts, its objective at the current values and PSL's evaluators; it speaks
pandas and numpy only.

Examples:
    >>> import pslbridge
    >>> with pslbridge.Bridge("pslbridge/examples/simple-acquaintances/simple-acquaintances.json") as bridge:
    ...     bridge.target_predicates, bridge.neural_predicates, len(bridge.rules)
    (['Knows'], [], 6)
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd

from . import diagnostics, jvm
from .errors import ClosedError, NeuralInputError, PslBridgeWarning
from .model import ModelSpec
from .program import GroundProgram
from .program.labels import truth_rows

__all__ = ["ProgramView"]


class ProgramView:
    """Read-only facts of a grounded program (the base of :class:`pslbridge.Bridge`).

    Examples:
        >>> from pslbridge.examples.mnist_addition import add1_spec
        >>> with Bridge(add1_spec([(0, 1)])) as bridge:
        ...     bridge.neural_shape("Neural"), bridge.classes("Neural")[:3]
        ((2, 10), ['0', '1', '2'])
    """

    _program: GroundProgram | None
    _pushed: set[str]  # the neural predicates given predictions so far
    _solved: bool = True  # a bridge starts False: evaluate() before any solve scores the initial values

    @property
    def program(self) -> GroundProgram:
        """The engine room (:class:`pslbridge.program.GroundProgram`): for diagnostics and extensions.

        Raises:
            ClosedError: After ``close()``.
        """
        if self._program is None:
            raise ClosedError("this Bridge is closed; build a new one to continue")
        jvm.check_process()
        return self._program

    @property
    def spec(self) -> ModelSpec:
        """The model description this bridge grounded."""
        return self.program.spec

    @property
    def reasoner(self) -> str:
        """The reasoner's name."""
        return self.program.reasoner_name

    @property
    def target_predicates(self) -> list[str]:
        """Names of the predicates whose values :meth:`infer` returns."""
        return [self.spec.predicates[k].name for k in self.program.targets]

    @property
    def neural_predicates(self) -> list[str]:
        """Names of the neural predicates, in declaration order."""
        return [b.spec.name for b in self.program.neural.values()]

    def entities(self, predicate: str) -> pd.DataFrame:
        """The entity rows of a neural predicate, in the row order :meth:`infer` expects.

        Examples:
            >>> from pslbridge.examples.mnist_addition import add1_spec
            >>> with Bridge(add1_spec([(0, 1)])) as b:
            ...     b.entities("Neural").arg0.tolist()
            ['0', '1']
        """
        return self.program.atoms.block(predicate).entities.copy()

    def classes(self, predicate: str) -> list[str]:
        """The class labels of a neural predicate, in column order."""
        return list(self.program.atoms.block(predicate).classes)

    def features(self, predicate: str) -> np.ndarray | None:
        """Features from the neural predicate's entity-data map, aligned with :meth:`entities`."""
        return self.program.atoms.block(predicate).features

    def neural_shape(self, predicate: str) -> tuple[int, int]:
        """``(n_entities, n_classes)`` expected for a neural predicate."""
        return self.program.atoms.block(predicate).shape

    def atoms(self, predicate: str) -> pd.DataFrame:
        """The target atoms of a predicate (arguments), in result row order."""
        rows = self.program.targets.get(predicate.upper())
        if rows is None:
            raise KeyError(f"{predicate!r} is not a target predicate; targets: {self.target_predicates}")
        return rows.frame.copy()

    def truth_rows(self, predicate: str) -> list[tuple[Any, ...]]:
        """The arguments of a target predicate's truth rows, in the order ``set_labels`` takes their values.

        Examples:
            >>> from pslbridge.examples.mnist_addition import add1_spec
            >>> with Bridge(add1_spec([(0, 1)], sums=[3], phase="learn")) as b:
            ...     len(b.truth_rows("ImageSum")), b.truth_rows("ImageSum")[3]
            (19, ('0', '1', '3'))
        """
        return truth_rows(self.spec, predicate)

    @property
    def rules(self) -> list[str]:
        """Rule texts in model order (as PSL prints them)."""
        return [r.text for r in self.program.rules]

    @property
    def weighted_rules(self) -> list[str]:
        """Texts of the weighted (soft) rules, the order of :attr:`rule_weights`."""
        return self.program.weighted_texts()

    @property
    def rule_weights(self) -> np.ndarray:
        """Weights of the weighted rules in model order (hard constraints have none).

        Setting them checks the count, and that each is a finite, non-negative number within float32's range
        (PSL stores weights as float32); anything else raises :class:`~pslbridge.errors.ConfigurationError`.

        Examples:
            >>> with Bridge("pslbridge/examples/simple-acquaintances/simple-acquaintances.json") as b:
            ...     b.rule_weights = b.rule_weights * 2
            ...     b.rule_weights.round(2).tolist()
            [2.0, 0.5, 1.0, 0.5, 0.5]
        """
        return self.program.rule_weights

    @rule_weights.setter
    def rule_weights(self, weights: Any) -> None:
        self.program.rule_weights = weights

    @property
    def atom_count(self) -> int:
        """Ground atoms in the program."""
        return self.program.atom_count

    @property
    def term_count(self) -> int:
        """Ground terms (potentials and constraints) in the program."""
        return self.program.term_count

    # -- diagnostics (pslbridge.diagnostics) -----------------------------------------

    def rules_table(self) -> pd.DataFrame:
        """Each rule's weight, terms, Φ and violated constraints (:func:`pslbridge.diagnostics.rules_table`)."""
        return diagnostics.rules_table(self.program)

    def summary(self) -> dict[str, Any]:
        """Atoms per predicate, terms, build timings, Java heap in use (:func:`pslbridge.diagnostics.summary`)."""
        return diagnostics.summary(self.program)

    def explain(self, predicate: str, *args: Any) -> pd.DataFrame:
        """The terms touching one atom and their pull on it (:func:`pslbridge.diagnostics.explain`)."""
        return diagnostics.explain(self.program, predicate, *args)

    def evaluate(self) -> pd.DataFrame:
        """The model's declared evaluations, by PSL's own evaluators, on the current values against the truth.

        Run :meth:`infer` first. One row per evaluation: ``predicate``, ``evaluator``, ``primary``, ``rep_metric``
        (the evaluator's representative metric), ``normalized``, ``higher_is_better``, ``stats`` (what the jar
        prints).

        Warns:
            PslBridgeWarning: Nothing was solved yet, so the initial values are scored.

        Examples:
            >>> from pslbridge.model import EvaluationSpec
            >>> spec = ModelSpec.from_python(rules=["1: A(X) -> B(X) ^2", "1: !B(X) ^2"],
            ...     predicates={"A": 1, "B": 1}, observations={"A": [("x", 1.0), ("y", 0.0)]},
            ...     targets={"B": [("x",), ("y",)]}, truth={"B": [("x", 1.0), ("y", 0.0)]})
            >>> spec.predicates["B"].evaluations = [EvaluationSpec("DiscreteEvaluator")]
            >>> with Bridge(spec) as bridge:
            ...     _ = bridge.infer()
            ...     bridge.evaluate()[["predicate", "evaluator", "rep_metric"]]
              predicate          evaluator  rep_metric
            0         B  DiscreteEvaluator         1.0
        """
        if not self._solved:
            warnings.warn(
                "evaluate() before any infer() or learn_step() scores the atoms' initial values; run infer() first",
                PslBridgeWarning,
                stacklevel=2,
            )
        return pd.DataFrame(
            self.program.evaluate(),
            columns=["predicate", "primary", "evaluator", "rep_metric", "normalized", "higher_is_better", "stats"],
        )

    def _check_pushed(self) -> None:
        missing = [b.spec.name for k, b in self.program.neural.items() if k not in self._pushed]
        if missing:
            raise NeuralInputError(
                f"no predictions were given yet for neural predicate(s) {missing}; pass "
                f"neural={{{missing[0]!r}: array}}",
                predicate=missing[0],
            )

    def objective(self) -> tuple[float, int]:
        """Weighted objective and violated constraints at the current atom values.

        Raises:
            NeuralInputError: A neural predicate has no predictions yet (as :meth:`infer`).

        Examples:
            >>> with Bridge("pslbridge/examples/simple-acquaintances/simple-acquaintances.json") as b:
            ...     before = b.objective()[1]   # the initial values violate the symmetry constraint
            ...     _ = b.infer()
            ...     before > 0, b.objective()[1]
            (True, 0)
        """
        with self.program.lock:
            self._check_pushed()
            return self.program.objective()

    def __repr__(self) -> str:
        if self._program is None:
            return "<Bridge closed>"
        p = self._program
        return (
            f"<Bridge {p.spec.source}: {len(p.rules)} rules, {p.atom_count} atoms, {p.term_count} terms, "
            f"neural={self.neural_predicates}>"
        )
