"""PSL's global predicate registry, external functions written in Python, evaluators and option names.

Examples:
    >>> find_predicate("NoSuchPredicateAnywhere") is None
    True
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .classes import PSL_PACKAGE, J
from .datastore import config_layer
from .failures import guard

log = logging.getLogger(__name__)

_REGISTRY: list[Any] = []


def find_predicate(name: str) -> Any | None:
    """PSL's registered predicate of that name (case-insensitive), or None.

    Examples:
        >>> find_predicate("NoSuchPredicateAnywhere") is None
        True
    """
    return J.Predicate.get(name)


def predicate_signature(predicate: Any) -> tuple[list[str], bool, bool]:
    """``(argument types, is a DeepPredicate, is a StandardPredicate)`` of a registered predicate.

    Examples:
        >>> p = declare_predicate("DocSig", ["UniqueStringID", "UniqueIntID"], deep=True)
        >>> predicate_signature(p)
        (['UniqueStringID', 'UniqueIntID'], True, True)
        >>> unregister_predicate("DocSig")
    """
    types = [str(predicate.getArgumentType(i)) for i in range(int(predicate.getArity()))]
    return types, bool(isinstance(predicate, J.DeepPredicate)), bool(isinstance(predicate, J.StandardPredicate))


def declare_predicate(name: str, types: Sequence[str], *, deep: bool) -> Any:
    """Declare (or fetch) a predicate in PSL's global registry.

    Examples:
        >>> declare_predicate("DocDecl", ["UniqueStringID"], deep=False).getArity()
        1
        >>> unregister_predicate("DocDecl")
    """
    java_types = [getattr(J.ConstantType, t) for t in types]
    with guard(f"declaring predicate {name}"):
        if deep:
            return J.DeepPredicate.get(name, *java_types)
        return J.StandardPredicate.get(name, *java_types)


def unregister_predicate(name: str) -> None:
    """Remove a predicate from PSL's global (static) predicate registry.

    PSL never forgets a predicate; pslbridge removes the ones it declared once no open program
    uses them, so a later program may declare the same name with another arity or kind.

    Examples:
        >>> _ = declare_predicate("DocGone", ["UniqueStringID"], deep=False)
        >>> unregister_predicate("DocGone"); find_predicate("DocGone") is None
        True
    """
    registry_map().remove(name.upper())


def registry_map() -> Any:
    """PSL's static name -> predicate map (``Predicate.predicates``)."""
    if not _REGISTRY:
        field = J.Predicate.class_.getDeclaredField("predicates")
        field.setAccessible(True)
        _REGISTRY.append(field.get(None))
    return _REGISTRY[0]


class FunctionErrors(list):
    """Failures of Python callables behind external functional predicates, recorded during grounding."""


def declare_function(name: str, types: Sequence[str], fn: Callable[..., float], errors: FunctionErrors) -> Any:
    """Declare an external functional predicate whose values come from the Python callable ``fn``.

    PSL calls ``fn(*arguments)`` (the arguments as the data write them, strings) while grounding; it must return a
    number in [0, 1]. A callable that raises or returns anything else makes the call count 0 and is recorded in
    ``errors`` (the program then refuses to build, naming the predicate, arguments and problem).

    Examples:
        >>> errors = FunctionErrors()
        >>> pred = declare_function("DocSim", ["UniqueStringID"] * 2, lambda a, b: float(a == b), errors)
        >>> str(pred.getName()), int(pred.getArity())
        ('DOCSIM', 2)
        >>> unregister_predicate("DocSim")
    """
    import jpype

    java_types = jpype.JArray(J.ConstantType)([getattr(J.ConstantType, t) for t in types])

    @jpype.JImplements(PSL_PACKAGE + "model.function.ExternalFunction")
    class PythonFunction:
        @jpype.JOverride
        def getValue(self, db: Any, args: Any) -> float:
            values = [_constant_text(a) for a in args]
            try:
                value = float(fn(*values))
            except Exception as exc:  # noqa: BLE001 - reported after grounding, with the arguments
                errors.append(f"{name}{tuple(values)} raised {type(exc).__name__}: {exc}")
                return 0.0
            if not 0.0 <= value <= 1.0:
                errors.append(f"{name}{tuple(values)} returned {value}, not a number in [0, 1]")
                return 0.0
            return value

        @jpype.JOverride
        def getArity(self) -> int:
            return len(types)

        @jpype.JOverride
        def getArgumentTypes(self) -> Any:
            return java_types

    with guard(f"declaring functional predicate {name}"):
        return J.ExternalFunctionalPredicate.get(name, PythonFunction())


def _constant_text(constant: Any) -> str:
    for getter in ("getID", "getValue"):
        method = getattr(constant, getter, None)
        if method is not None:
            return str(method())
    return str(constant.rawToString())


def evaluate(evaluator: str, options: Mapping[str, str], predicate: Any, database: Any, truth: Any) -> dict[str, Any]:
    """Run one of PSL's evaluators (built under its options) on a predicate's values against its truth.

    Returns:
        ``rep_metric``, ``normalized`` (PSL's normalised representative metric), ``higher_is_better`` and ``stats``
        (its ``getAllStats()`` text, as the jar prints it).

    Examples:
        >>> from pslbridge.model import EvaluationSpec, ModelSpec
        >>> from pslbridge.program import GroundProgram
        >>> spec = ModelSpec.from_python(rules=["1: EvA(X) -> EvB(X) ^2"], predicates={"EvA": 1, "EvB": 1},
        ...     observations={"EvA": [("x", 1.0)]}, targets={"EvB": [("x",)]}, truth={"EvB": [("x", 1.0)]})
        >>> spec.predicates["EVB"].evaluations = [EvaluationSpec("ContinuousEvaluator")]
        >>> with GroundProgram(spec) as small:  # GroundProgram.evaluate calls this
        ...     _ = small.solve(reset=True)
        ...     row = small.evaluate()[0]
        >>> row["evaluator"], row["stats"].startswith("MAE")
        ('ContinuousEvaluator', True)
    """
    with config_layer(options), guard(f"evaluating with {evaluator}"):
        instance = J.Reflection.newObject(evaluator)
        instance.compute(database, truth, predicate)
        return {
            "evaluator": str(instance.getClass().getSimpleName()),
            "rep_metric": float(instance.getRepMetric()),
            "normalized": float(instance.getNormalizedRepMetric()),
            "higher_is_better": bool(instance.isHigherRepBetter()),
            "stats": str(instance.getAllStats()),
        }


_KNOWN_OPTIONS: list[str] = []


def known_options() -> list[str]:
    """Every option name PSL 2.4.0 declares (``Options`` and ``RuntimeOptions``), read from the jar.

    Examples:
        >>> "admmreasoner.maxiterations" in known_options(), "duallcqp.primaldualthreshold" in known_options()
        (True, True)
    """
    if not _KNOWN_OPTIONS:
        for holder in (J.Options, J.RuntimeOptions):
            for field in holder.class_.getFields():
                if J.Modifier.isStatic(field.getModifiers()) and J.Option.class_.isAssignableFrom(field.getType()):
                    _KNOWN_OPTIONS.append(str(field.get(None).name()))
    return list(_KNOWN_OPTIONS)
