"""Loading a model's data into an in-memory PSL data store and grounding its rules once.

The data go in one JSON call per table (per-row JPype calls are slow); PSL's inference application
then grounds the rules into its term store, under the program's PSL options. What comes back is a
:class:`Grounded` holding the data store, the target and truth databases and the inference application.

Examples:
    >>> from pslbridge.program import GroundProgram
    >>> from pslbridge.model import ModelSpec
    >>> spec = ModelSpec.from_python(rules=["1: GrA(X) -> GrB(X) ^2"], predicates={"GrA": 1, "GrB": 1},
    ...                              observations={"GrA": [("x", 1.0)]}, targets={"GrB": [("x",)]})
    >>> with GroundProgram(spec) as program:
    ...     program.term_count
    1
"""

from __future__ import annotations

import difflib
import itertools
import logging
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import jvm
from ..engine import classes, setup
from ..engine import datastore as java_data
from ..engine import predicates as java_predicates
from ..engine.failures import guard
from ..errors import ModelFileError
from ..model import DataTable, ModelSpec
from ..model_checks import check_duplicates, check_rules, neural_target_table, read_entity_map
from .atoms import AtomIndex
from .registry import PredicateRegistry
from .rules import RuleSet
from .solver import Solver
from .terms import Terms

__all__ = ["Built", "Grounded", "build", "ground", "warm_up"]

log = logging.getLogger(__name__)
_ids = itertools.count(1)
#: Reasoners whose grounding path this process has run on a tiny program (see :func:`warm_up`).
_WARMED: set[str] = set()
#: The tiny program of :func:`warm_up`: a weighted logical rule over a neural and an observed predicate, and an
#: arithmetic constraint with a summation, the shapes of the bundled examples.
_WARM_UP_RULES = (
    "1.0: PslbridgeWarmUpNeural(I, X) & PslbridgeWarmUpLink(I, J) -> PslbridgeWarmUpTarget(J, X) ^2",
    "PslbridgeWarmUpTarget(J, +X) = 1 .",
)


@dataclass
class Grounded:
    """The Java objects of a grounded program.

    Attributes:
        datastore: The in-memory data store.
        db: The target database (targets over observations).
        truth_db: The truth database (labels).
        app: The inference application: term store, reasoner, atom store.

    Examples:
        >>> built = build(bridge.spec, {}, "admm")
        >>> int(built.grounded.atom_store.size())
        89
        >>> built.grounded.close(); built.registry.release()
    """

    datastore: Any
    db: Any = None
    truth_db: Any = None
    app: Any = None

    @property
    def term_store(self) -> Any:
        """The ground terms."""
        return self.app.getTermStore()

    @property
    def reasoner(self) -> Any:
        """The MAP reasoner."""
        return self.app.getReasoner()

    @property
    def atom_store(self) -> Any:
        """The atoms of the target database and their value array."""
        return self.db.getAtomStore()

    def evaluate(self, spec: ModelSpec, predicates: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Run ``spec``'s declared evaluations (PSL's evaluators) on the target database against the truth.

        ``predicates`` are the Java predicates by :attr:`PredicateSpec.key`. Returns one dict per evaluation:
        ``predicate``, ``primary`` and the evaluator's results (see :func:`pslbridge.engine.predicates.evaluate`).
        """
        rows = []
        for pred in spec.predicates.values():
            for evaluation in pred.evaluations:
                result = java_predicates.evaluate(
                    evaluation.evaluator, dict(evaluation.options), predicates[pred.key], self.db, self.truth_db
                )
                rows.append({"predicate": pred.name, "primary": evaluation.primary, **result})
        return rows

    def close(self) -> None:
        """Close everything built (best effort for a partly built program)."""
        with guard("closing a program"):
            for obj in (self.app, self.db, self.truth_db, self.datastore):
                if obj is not None:
                    obj.close()
        self.app = self.db = self.truth_db = self.datastore = None


def ground(
    spec: ModelSpec,
    predicates: Mapping[str, Any],
    rules: Sequence[Any],
    *,
    options: Mapping[str, str],
    reasoner: str,
    neural_targets: Mapping[str, DataTable],
) -> Grounded:
    """Load the data and ground the rules.

    Args:
        spec: The model.
        predicates: Java predicates by upper-cased name.
        rules: The compiled Java rules in model order.
        options: PSL options applied while the reasoner is built.
        reasoner: A key of :data:`pslbridge.engine.classes.REASONERS`.
        neural_targets: Target tables generated for neural predicates (entities × classes).

    Returns:
        The grounded program's Java objects. On failure the partly built objects are closed.

    Examples:
        >>> built = build(bridge.spec, {}, "admm")  # build() calls ground() between compiling and indexing
        >>> bool(built.terms.per_rule().sum() == program.term_count)
        True
        >>> built.grounded.close(); built.registry.release()
    """
    url = f"jdbc:sqlite:file:pslbridge_{next(_ids)}?mode=memory&cache=shared&read_uncommitted=true"
    standard = [predicates[p.key] for p in spec.predicates.values() if p.function is None]
    datastore, partitions = java_data.open_memory_datastore(url, standard)
    grounded = Grounded(datastore)
    try:
        tables = [t for t in spec.data if not (t.partition == "targets" and t.predicate.upper() in neural_targets)]
        for table in [*tables, *neural_targets.values()]:
            if len(table) == 0:
                continue
            with guard(f"loading {table.partition} of {table.predicate} from {table.origin}"):
                values = None if table.values is None else table.values.tolist()
                pred = predicates[table.predicate.upper()]
                java_data.insert_rows(datastore, pred, partitions[table.partition], table.args.tolist(), values)
        closed = [predicates[p.key] for p in spec.predicates.values() if spec.is_closed(p.name) and p.function is None]
        with java_data.config_layer({**options, "inference.initialvalue": "ATOM"}):
            jvm.sync_log_level()
            with guard("grounding"), setup.watch_workers("grounding"):
                grounded.db, grounded.truth_db = java_data.open_databases(datastore, partitions, closed)
                grounded.app = java_data.new_inference(reasoner, rules, grounded.db)
    except BaseException:
        setup.release_workers()  # first: workers of a failed grounding may still be filling the heap
        try:
            grounded.close()
        except Exception:  # noqa: BLE001 - already failing; the first error matters
            pass
        raise
    return grounded


@dataclass
class Built:
    """Everything a :class:`~pslbridge.program.GroundProgram` is made of, as :func:`build` returns it.

    Examples:
        >>> built = build(bridge.spec, {}, "admm")
        >>> built.atoms.counts()["KNOWS"], len(built.rules.info)
        (56, 6)
        >>> built.grounded.close(); built.registry.release()
    """

    registry: PredicateRegistry
    predicates: dict[str, Any]
    rules: RuleSet
    grounded: Grounded
    atoms: AtomIndex
    terms: Terms
    solver: Solver
    timings: dict[str, float]


def build(
    spec: ModelSpec,
    options: Mapping[str, str],
    reasoner: str,
    functions: Mapping[str, Callable[..., float]] | None = None,
) -> Built:
    """Check a model in Python, then declare, compile, load, ground and index it.

    Nothing reaches the JVM before the Python checks pass; on any later failure everything built is
    closed and the predicates released, so the process stays usable. Option names PSL does not know are
    warned about (naming the closest known one): PSL itself ignores them silently.

    Raises:
        ModelFileError: The model is malformed, an unknown reasoner, or a functional predicate's callable failed.
        EngineError: PSL failed.

    Examples:
        >>> built = build(bridge.spec, {"admmreasoner.maxiterations": "100"}, "admm")
        >>> sorted(built.timings)[:2], built.solver.dual
        (['compile', 'ground'], False)
        >>> built.grounded.close(); built.registry.release()
    """
    if reasoner not in classes.REASONERS:
        raise ModelFileError(f"unknown reasoner {reasoner!r}; choose one of {sorted(classes.REASONERS)}")
    _warn_unknown_options(options)
    check_rules(spec)
    check_duplicates(spec)
    entity_maps = {p.key: m for p in spec.neural_predicates if (m := read_entity_map(p)) is not None}
    neural_targets = {
        p.key: t for p in spec.neural_predicates if (t := neural_target_table(spec, p, entity_maps.get(p.key)))
    }
    warm_up(reasoner)  # after the Python checks: a model they refuse never reaches the JVM
    registry = PredicateRegistry(list(spec.predicates.values()), spec.source)
    grounded = None
    t0 = time.perf_counter()
    try:
        errors = java_predicates.FunctionErrors()
        predicates = registry.declare(functions, errors)
        rules = RuleSet(spec.rules)
        t1 = time.perf_counter()
        grounded = ground(
            spec, predicates, rules.java, options=options, reasoner=reasoner, neural_targets=neural_targets
        )
        if errors:
            raise ModelFileError(
                f"{len(errors)} call(s) of functional predicates failed while grounding: " + "; ".join(errors[:3]),
                path=spec.source,
            )
        t2 = time.perf_counter()
        atoms = AtomIndex(spec, grounded.atom_store, entity_maps, neural_targets)
        terms = Terms(grounded.term_store, grounded.atom_store, rules, int(grounded.term_store.size()))
        solver = Solver(grounded.app, reasoner, rules.java, [r.weighted for r in rules.info])
        RuleSet.check_weights(rules.weights, rules.texts())
    except BaseException:
        if grounded is not None:  # a failed ground() has already released its workers and closed its objects
            setup.release_workers()
            try:
                grounded.close()
            except Exception:  # noqa: BLE001 - already failing; the first error matters
                pass
        registry.release()
        raise
    timings = {"compile": t1 - t0, "ground": t2 - t1, "index": time.perf_counter() - t2}
    return Built(registry, predicates, rules, grounded, atoms, terms, solver, timings)


def warm_up(reasoner: str) -> None:
    """Ground a tiny program with ``reasoner`` once per process, before the first real grounding with it.

    Java links a lambda's or a string concatenation's call site, and initialises a class, on its first use. When
    that first use falls in a grounding that exhausts the heap, the JVM records the failure and repeats it for
    the life of the process (JVMS §5.4.3), so that even a small model then fails (seen once in CI: a
    ``BootstrapMethodError`` in the small grounding after a large one ran out of heap). Grounding a tiny program
    first links the common grounding path while the heap has room. Paths only large or unusual models reach
    are not covered; a linkage error after an exhaustion says so (see the engine error's message).
    :func:`build` calls this; a failure here is left to the real grounding to report.

    Args:
        reasoner: A key of :data:`pslbridge.engine.classes.REASONERS`.

    Examples:
        >>> warm_up("admm")  # once per process and reasoner; later calls return at once
        >>> "admm" in _WARMED
        True
    """
    if reasoner in _WARMED:
        return
    _WARMED.add(reasoner)  # first: the build below must not warm up again
    spec = ModelSpec.from_python(
        rules=list(_WARM_UP_RULES),
        predicates={"PslbridgeWarmUpNeural": 2, "PslbridgeWarmUpLink": 2, "PslbridgeWarmUpTarget": 2},
        observations={"PslbridgeWarmUpLink": [(0, 1)]},
        targets={"PslbridgeWarmUpNeural": [(0, 0), (0, 1)], "PslbridgeWarmUpTarget": [(1, 0), (1, 1)]},
        neural={"PslbridgeWarmUpNeural": 2},
    )
    try:
        with jvm.psl_lines_as_debug("warm-up"):  # a user at INFO sees only their own programs' lines
            built = build(spec, {}, reasoner)
    except Exception as exc:  # noqa: BLE001 - the real grounding reports what is wrong
        log.debug("warming up the %s grounding path failed: %s", reasoner, exc)
        return
    built.grounded.close()
    built.registry.release()


def _warn_unknown_options(options: Mapping[str, str]) -> None:
    known = set(java_predicates.known_options())
    for key in options:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            warnings.warn(f"PSL option {key!r} is unknown to PSL 2.4.0 and is ignored{hint}", UserWarning, stacklevel=4)
