"""Predicates in PSL's one global registry, shared by the programs of a process and released with them.

PSL keeps every declared predicate in a static map and never forgets one. pslbridge counts which open
programs use each predicate it declared, and removes a predicate when the last of them closes, so a later
program may declare the same name with another arity or kind. A declaration that clashes with one still in
use is refused before anything is declared.

Examples:
    >>> from pslbridge.model import PredicateSpec
    >>> registry = PredicateRegistry([PredicateSpec("RegDocA", 1)], source="<doc>")
    >>> sorted(registry.declare())
    ['REGDOCA']
    >>> registry.release(); registry.release()
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..engine import predicates as java_predicates
from ..errors import ModelFileError
from ..model import PredicateSpec

__all__ = ["PredicateRegistry", "in_use"]

#: Predicates this process declared in PSL's registry: upper-cased name -> open programs using it.
_IN_USE: dict[str, int] = {}


def in_use() -> dict[str, int]:
    """Predicates pslbridge declared and the number of open programs using each.

    Examples:
        >>> isinstance(in_use(), dict)
        True
    """
    return dict(_IN_USE)


class PredicateRegistry:
    """The predicates of one program.

    Args:
        predicates: The model's declarations.
        source: The model's source, for messages.

    Examples:
        >>> from pslbridge.model import PredicateSpec
        >>> registry = PredicateRegistry([PredicateSpec("ExampleRegistered", 2)], "an example")
        >>> java = registry.declare()
        >>> sorted(java), in_use()["EXAMPLEREGISTERED"]
        (['EXAMPLEREGISTERED'], 1)
        >>> registry.release(); "EXAMPLEREGISTERED" in in_use()
        False
    """

    def __init__(self, predicates: Sequence[PredicateSpec], source: str) -> None:
        self.predicates = list(predicates)
        self.source = source
        self._held: list[str] = []

    def declare(
        self, functions: Mapping[str, Callable[..., float]] | None = None, errors: list | None = None
    ) -> dict[str, Any]:
        """Declare every predicate (checking all for clashes first); return the Java predicates by key.

        Args:
            functions: Python callables of the external functional predicates, by name (case-insensitive).
            errors: Where the callables' failures during grounding are recorded.

        Raises:
            ModelFileError: A predicate clashes with one declared elsewhere in this process, or a functional
                predicate has no callable.
        """
        callables = {str(k).upper(): v for k, v in (functions or {}).items()}
        for spec in self.predicates:
            existing = java_predicates.find_predicate(spec.name)
            if existing is not None:
                self._check_clash(spec, existing)
            if spec.function is not None and not callable(callables.get(spec.key)):
                raise ModelFileError(
                    f"predicate {spec.name} is an external functional predicate (implemented by {spec.function} in "
                    f"PSL); pslbridge computes it in Python: pass functions={{{spec.name!r}: fn}} with fn(*args) -> "
                    "a number in [0, 1]",
                    path=self.source,
                    predicate=spec.name,
                )
        unknown = sorted(set(callables) - {p.key for p in self.predicates if p.function is not None})
        if unknown:
            raise ModelFileError(f"functions given for {unknown}, which are not functional predicates of the model")
        declared = {}
        for spec in self.predicates:
            existed = java_predicates.find_predicate(spec.name) is not None
            if spec.function is not None:
                declared[spec.key] = java_predicates.declare_function(
                    spec.name, spec.types, callables[spec.key], errors
                )
            else:
                declared[spec.key] = java_predicates.declare_predicate(
                    spec.name, spec.types, deep=spec.neural is not None
                )
            if not existed or spec.key in _IN_USE:
                _IN_USE[spec.key] = _IN_USE.get(spec.key, 0) + 1
                self._held.append(spec.key)
        return declared

    def release(self) -> None:
        """Give the predicates back; the last program using one removes it from PSL. Safe to call twice."""
        for key in self._held:
            _IN_USE[key] -= 1
            if _IN_USE[key] == 0:
                del _IN_USE[key]
                java_predicates.unregister_predicate(key)
        self._held = []

    def _check_clash(self, spec: PredicateSpec, existing: Any) -> None:
        types, deep, standard = java_predicates.predicate_signature(existing)
        if types == spec.types and deep == (spec.neural is not None) and standard and spec.function is None:
            return
        kind = "neural" if deep else "standard"
        owner = (
            "by a pslbridge program that is still open (close it first, or call pslbridge.close_all())"
            if spec.key in _IN_USE
            else "outside pslbridge (e.g. by PSL's Runtime or pslpython, which never release predicates)"
        )
        raise ModelFileError(
            f"predicate {spec.name}({', '.join(spec.types)}) clashes with {kind} predicate "
            f"{existing.getName()}({', '.join(types)}) declared in this process {owner}; PSL keeps "
            "one global predicate registry, so programs open at the same time must agree on each predicate's "
            "arity, argument types and kind (or rename one of them)",
            path=self.source,
            predicate=spec.name,
        )
