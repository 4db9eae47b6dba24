"""The engine room: a model grounded once in the PSL engine and kept resident, behind numpy.

:class:`GroundProgram` is the only holder of Java objects in pslbridge; :class:`pslbridge.Bridge` and
everything above it speak numpy and pandas. Its parts, one job each:

========================  ===============================================================
:mod:`.registry`          predicates in PSL's global registry, released with the program
:mod:`.grounding`         data into the in-memory data store; grounding the rules
:mod:`.atoms`             user rows ↔ atom-store indexes; neural blocks
:mod:`.labels`            labelled targets, fixed to their truth values for learning
:mod:`.rules`             compiled rules, their kinds and (checked) weights
:mod:`.solver`            MAP inference, objective, Φ passes, gradients, warm starts
:mod:`.terms`             the ground terms as numpy arrays (Φ for the dual reasoners)
:mod:`.proximity`         the bilevel learners' proximity terms
========================  ===============================================================

Examples:
    >>> from pslbridge.model import ModelSpec
    >>> from pslbridge.program import GroundProgram
    >>> spec = ModelSpec.from_python(rules=["1: PgA(X) -> PgB(X) ^2"], predicates={"PgA": 1, "PgB": 1},
    ...                              observations={"PgA": [("x", 1.0)]}, targets={"PgB": [("x",)]})
    >>> with GroundProgram(spec) as program:
    ...     program.term_count
    1
"""

from .atoms import NeuralBlock, TargetRows
from .ground import GroundProgram
from .rules import RuleInfo
from .solver import SolveStats, WarmStart
from .terms import TermTable

__all__ = ["GroundProgram", "NeuralBlock", "RuleInfo", "SolveStats", "TargetRows", "TermTable", "WarmStart"]
