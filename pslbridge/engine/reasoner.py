"""Reasoner internals PSL does not expose publicly: objectives, the ADMM cache, proximity terms, observed values.

Examples:
    >>> clear_admm_cache()
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from .classes import PSL_PACKAGE, J
from .failures import guard
from .predicates import registry_map

log = logging.getLogger(__name__)

_METHODS: dict[tuple[str, str], Any] = {}
_ADMM_CACHE: list[Any] = []


def _protected_method(cls: Any, name: str, *param_classes: str) -> Any:
    key = (str(cls.class_.getName()), name)
    if key not in _METHODS:
        params = [J.Class.forName(p) for p in param_classes]
        method = cls.class_.getDeclaredMethod(name, *params)
        method.setAccessible(True)
        _METHODS[key] = method
    return _METHODS[key]


def compute_objective(reasoner: Any, term_store: Any) -> tuple[float, int]:
    """The reasoner's weighted objective and violated constraints at the current values.

    Uses the reasoner's own (protected) ``parallelComputeObjective`` by reflection. For the dual-BCD
    reasoners it includes their regularisation ``λ Σ x²`` over unfixed atoms.

    Examples:
        >>> objective, violated = compute_objective(program.solver.reasoner, program.solver.term_store)
        >>> objective >= 0, violated
        (True, 0)
    """
    method = _protected_method(J.Reasoner, "parallelComputeObjective", PSL_PACKAGE + "reasoner.term.TermStore")
    result = method.invoke(reasoner, term_store)
    cls = result.getClass()
    objective = cls.getDeclaredField("objective")
    violated = cls.getDeclaredField("violatedConstraints")
    objective.setAccessible(True)
    violated.setAccessible(True)
    return float(objective.getFloat(result)), int(violated.getLong(result))


def clear_admm_cache() -> None:
    """Empty ADMM's static cache of Cholesky factors.

    ``ADMMObjectiveTerm`` caches the factor of each squared term's system in a static map
    keyed by a 32-bit hash of (weight, step size, coefficients). Entries are never evicted,
    so in a long-lived process (several programs, changing rule weights while learning) the
    map grows without bound and a hash collision hands a term another term's factor: a wrong
    MAP state. Seen here: a second program's objective 0.9959 instead of 0.9418. Clearing the
    map before each solve makes every solve behave as in a fresh JVM.

    Examples:
        >>> clear_admm_cache()
    """
    if not _ADMM_CACHE:
        field = J.ADMMObjectiveTerm.class_.getDeclaredField("lowerTriangleCache")
        field.setAccessible(True)
        _ADMM_CACHE.append(field.get(None))
    _ADMM_CACHE[0].clear()


def regularization_parameter(reasoner: Any) -> float:
    """The dual-BCD reasoner's ``regularizationParameter`` (λ), 0 for other reasoners.

    Examples:
        >>> regularization_parameter(program.solver.reasoner)  # ADMM has none
        0.0
    """
    try:
        return float(reasoner.regularizationParameter)
    except AttributeError:
        return 0.0


def add_proximity_terms(database: Any, term_store: Any, atom_indexes: Sequence[int], weight: float) -> tuple[Any, list]:
    """Add the bilevel learners' proximity terms ``weight · (x_i − p_i)²`` for each atom index ``i``.

    Reproduces what PSL 2.4.0's ``Minimizer`` adds after grounding: per atom one observed
    ``augmented<Predicate>`` atom ``p_i`` appended to the atom store, and the two ground terms (``<=`` and
    ``>=``) of the squared arithmetic rule ``x_i − p_i = 0``, with constants left unmerged so that ``p_i``
    stays a variable read from the atom-value array. PSL makes one rule object per atom; here all terms
    share one (terms read only its weight and active flag), so switching them on and off is one call.

    Args:
        database: The program's target database.
        term_store: Its term store.
        atom_indexes: Atom-store indexes of the (unfixed) atoms.
        weight: The proximity weight (``minimizer.proxruleweight``).

    Returns:
        The shared proximity rule (inactive) and the observed proximity atoms, in ``atom_indexes`` order
        (they follow the existing atoms in the atom store, in the same order).

    Examples:
        >>> from pslbridge.model import ModelSpec
        >>> from pslbridge.program import GroundProgram
        >>> spec = ModelSpec.from_python(rules=["1: ApA(X) -> ApB(X) ^2"], predicates={"ApA": 1, "ApB": 1},
        ...     observations={"ApA": [("x", 1.0)]}, targets={"ApB": [("x",)]})
        >>> with GroundProgram(spec, reasoner="dualbcd") as small:  # GroundProgram.proximity calls it
        ...     small.proximity(0.01).atoms.tolist(), int(small.solver.term_store.size())
        ([2], 3)
    """
    atom_store = database.getAtomStore()
    generator = term_store.getTermGenerator()
    merge = bool(generator.getMergeConstants())
    one, minus_one, zero = J.ConstantNumber(1.0), J.ConstantNumber(-1.0), J.ConstantNumber(0.0)
    comparators = J.FunctionComparator
    floats = J.Arrays.asList(J.Float.valueOf(1.0), J.Float.valueOf(-1.0))
    rule, observed_atoms = None, []
    generator.setMergeConstants(False)
    try:
        with guard("adding proximity terms"):
            for index in atom_indexes:
                atom = atom_store.getAtom(int(index))
                source = atom.getPredicate()
                predicate = J.StandardPredicate.get("augmented" + str(source.getName()), source.getArgumentTypes())
                observed = J.UnmanagedObservedAtom(predicate, atom.getArguments(), atom.getValue())
                atom_store.addAtom(observed)
                pair = J.Arrays.asList(atom, observed)
                if rule is None:
                    expression = J.ArithmeticRuleExpression(J.Arrays.asList(one, minus_one), pair, comparators.EQ, zero)
                    rule = J.WeightedArithmeticRule(expression, float(weight), True)
                    rule.setActive(False)
                for comparator in (comparators.LTE, comparators.GTE):
                    term_store.add(J.WeightedGroundArithmeticRule(rule, floats, pair, comparator, 0.0))
                observed_atoms.append(observed)
    finally:
        generator.setMergeConstants(merge)
    return rule, observed_atoms


def set_observed_values(atoms: Sequence[Any], values: np.ndarray) -> None:
    """Give observed atoms new values (their objects: the dual reasoners read fixed atoms from them).

    Examples:
        >>> from pslbridge.model import ModelSpec
        >>> from pslbridge.program import GroundProgram
        >>> spec = ModelSpec.from_python(rules=["1: SoA(X) -> SoB(X) ^2"], predicates={"SoA": 1, "SoB": 1},
        ...     observations={"SoA": [("x", 1.0)]}, targets={"SoB": [("x",)]})
        >>> with GroundProgram(spec, reasoner="dualbcd") as small:  # Proximity.set calls it
        ...     proximity = small.proximity(0.01)
        ...     proximity.set(np.array([0.25]))
        ...     proximity.values().tolist()
        [0.25]
    """
    with guard("setting proximity values"):
        for atom, value in zip(atoms, values.tolist()):
            atom._assumeValue(value)


def proximity_predicates() -> list[str]:
    """Names of the ``augmented*`` predicates the proximity terms registered.

    Examples:
        >>> isinstance(proximity_predicates(), list)
        True
    """
    return [str(k) for k in registry_map().keySet() if str(k).startswith("AUGMENTED")]
