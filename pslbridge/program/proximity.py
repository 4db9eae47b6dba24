"""The bilevel learners' proximity terms: ``w_p · (x_i − p_i)²`` for every atom the reasoner solves for.

PSL 2.4.0's ``Minimizer`` (the ``BinaryCrossEntropy`` and ``SquaredError`` learners) adds them once after
grounding and switches them on only for its *augmented* inference, pulling each target atom ``x_i`` towards
a proximity target ``p_i`` that learning moves. The targets ``p_i`` are observed atoms appended to the atom
store, read by the reasoner from their objects and from the value array, so :meth:`Proximity.set` writes
both.

Examples:
    >>> from pslbridge.model import ModelSpec
    >>> from pslbridge.program import GroundProgram
    >>> spec = ModelSpec.from_python(rules=["1: PxA(X) -> PxB(X) ^2"], predicates={"PxA": 1, "PxB": 1},
    ...     observations={"PxA": [("x", 1.0)]}, targets={"PxB": [("x",), ("y",)]})
    >>> with GroundProgram(spec, reasoner="dualbcd") as program:
    ...     proximity = program.proximity(weight=0.01)
    ...     (proximity.targets.tolist(), program.term_count, proximity.terms)
    ([0, 1], 1, 4)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..engine import reasoner
from ..engine.failures import guard
from ..errors import ConfigurationError

__all__ = ["Proximity"]


class Proximity:
    """Proximity terms of one program (inactive until :meth:`activate`).

    Args:
        database: The program's target database.
        term_store: Its term store.
        targets: Atom-store indexes of the atoms to pull (the unfixed atoms, in index order).
        weight: ``minimizer.proxruleweight``.

    Attributes:
        targets: The pulled atoms' indexes.
        atoms: Atom-store indexes of the proximity atoms ``p_i`` (``targets`` order).
        weight: The proximity weight.
        terms: Ground terms added (two per target).

    Examples:
        >>> from pslbridge.examples.mnist_addition import add1_spec
        >>> with Bridge(add1_spec([(0, 1)], sums=[3], phase="learn"), reasoner="dualbcd") as b:
        ...     result = b.learn_step({"Neural": np.full((2, 10), 0.1)}, loss="bce")
        ...     prox = b.program.proximity(0.01)
        ...     prox.terms == 2 * prox.targets.size, prox.weight
        (True, 0.01)
    """

    def __init__(self, database: Any, term_store: Any, targets: np.ndarray, weight: float) -> None:
        atom_store = database.getAtomStore()
        first = int(atom_store.size())
        self.targets = np.asarray(targets, dtype=np.int64)
        self.weight = float(weight)
        self._atom_store = atom_store
        self._rule, self._observed = reasoner.add_proximity_terms(database, term_store, self.targets.tolist(), weight)
        self.atoms = np.arange(first, first + self.targets.size, dtype=np.int64)
        self.terms = 2 * int(self.targets.size)

    @classmethod
    def attach(cls, grounded: Any, solver: Any, targets: np.ndarray, weight: float) -> Proximity:
        """Add proximity terms to a grounded program whose reasoner is a dual-BCD one.

        Raises:
            ConfigurationError: Another reasoner: PSL 2.4.0's ADMM term store cannot hold the proximity atoms
                (the jar's own learners fail there).
        """
        if not solver.dual:
            raise ConfigurationError(
                f"the bilevel losses need reasoner='dualbcd' (this program uses {solver.name!r}): PSL 2.4.0's "
                "ADMM term store cannot hold their proximity terms (the jar's own BinaryCrossEntropy and "
                "SquaredError learners fail with ArrayIndexOutOfBoundsException under ADMMInference)"
            )
        return cls(grounded.db, grounded.term_store, targets, weight)

    def check_weight(self, weight: float) -> None:
        """A program holds one set of proximity terms; refuse another weight.

        Raises:
            ConfigurationError: ``weight`` differs from the one the terms were made with.
        """
        if float(weight) != self.weight:
            raise ConfigurationError(
                f"this program's proximity terms have weight {self.weight}; a program holds one set (asked for "
                f"{weight}): build a new Bridge to change minimizer.proxruleweight"
            )

    def activate(self, active: bool) -> None:
        """Switch every proximity term on (augmented inference) or off."""
        if self._rule is not None:
            with guard("switching proximity terms"):
                self._rule.setActive(bool(active))

    def values(self) -> np.ndarray:
        """The proximity targets ``p`` (float32, ``targets`` order)."""
        if self.targets.size == 0:
            return np.zeros(0, dtype=np.float32)
        return np.array(
            self._atom_store.getAtomValues()[int(self.atoms[0]) : int(self.atoms[-1]) + 1], dtype=np.float32
        )

    def set(self, values: np.ndarray) -> None:
        """Set the proximity targets ``p`` (array and atom objects)."""
        array = np.ascontiguousarray(values, dtype=np.float32)
        if self.targets.size == 0:
            return
        self._atom_store.getAtomValues()[int(self.atoms[0]) : int(self.atoms[-1]) + 1] = array
        reasoner.set_observed_values(self._observed, array)
