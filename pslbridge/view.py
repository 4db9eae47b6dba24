"""What a user reads off a grounded program: predicates, entities, classes, target atoms, rules, weights.

:class:`ProgramView` is the read-only half of :class:`pslbridge.Bridge` (the other half pushes predictions,
solves and learns); it speaks pandas and numpy only.

Example:
    >>> import pslbridge
    >>> with pslbridge.Bridge("models/simple-acquaintances/simple-acquaintances.json") as bridge:
    ...     bridge.target_predicates, bridge.neural_predicates, len(bridge.rules)
    (['Knows'], [], 6)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .errors import ClosedError
from .model_files import ModelSpec
from .program import GroundProgram

__all__ = ["ProgramView"]


class ProgramView:
    """Read-only facts of a grounded program (the base of :class:`pslbridge.Bridge`).

    Example:
        >>> from pslbridge.experiments.mnist_add import add1_spec
        >>> with Bridge(add1_spec([(0, 1)])) as bridge:
        ...     bridge.neural_shape("Neural"), bridge.classes("Neural")[:3]
        ((2, 10), ['0', '1', '2'])
    """

    _program: GroundProgram | None

    @property
    def program(self) -> GroundProgram:
        """The engine room (:class:`pslbridge.program.GroundProgram`): for diagnostics and extensions.

        Raises:
            ClosedError: After ``close()``.
        """
        if self._program is None:
            raise ClosedError("this Bridge is closed; build a new one to continue")
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

        Example:
            >>> from pslbridge.experiments.mnist_add import add1_spec
            >>> with Bridge(add1_spec([(0, 1)])) as b:
            ...     b.entities("Neural").arg0.tolist()
            ['0', '1']
        """
        return self.program.neural_block(predicate).entities.copy()

    def classes(self, predicate: str) -> list[str]:
        """The class labels of a neural predicate, in column order."""
        return list(self.program.neural_block(predicate).classes)

    def features(self, predicate: str) -> np.ndarray | None:
        """Features from the neural predicate's entity-data map, aligned with :meth:`entities`."""
        return self.program.neural_block(predicate).features

    def neural_shape(self, predicate: str) -> tuple[int, int]:
        """``(n_entities, n_classes)`` expected for a neural predicate."""
        return self.program.neural_block(predicate).shape

    def atoms(self, predicate: str) -> pd.DataFrame:
        """The target atoms of a predicate (arguments), in result row order."""
        rows = self.program.targets.get(predicate.upper())
        if rows is None:
            raise KeyError(f"{predicate!r} is not a target predicate; targets: {self.target_predicates}")
        return rows.frame.copy()

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

        Example:
            >>> with Bridge("models/simple-acquaintances/simple-acquaintances.json") as b:
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
