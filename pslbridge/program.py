"""The grounded program that stays resident in the JVM.

A :class:`GroundProgram` takes a :class:`~pslbridge.model_files.ModelSpec`, registers its
predicates, compiles its rules, loads its data into an in-memory database, grounds
it once, and keeps the term store, the reasoner and the atom store alive. It owns
the index maps between user rows and PSL atoms, so values move in and out as whole
numpy arrays.

Users work through :class:`pslbridge.Bridge`; this module is its engine room and is
the only place besides :mod:`pslbridge._java` that handles Java objects.

Example:
    >>> from pslbridge.model_files import ModelSpec
    >>> spec = ModelSpec.from_python(rules=["1: A(X) -> B(X) ^2"], predicates={"A": 1, "B": 1},
    ...                              observations={"A": [("x", 1.0)]}, targets={"B": [("x",)]})
    >>> program = GroundProgram(spec)  # doctest: +SKIP
    >>> program.term_count  # doctest: +SKIP
    1
"""

from __future__ import annotations

import itertools
import logging
import re
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from . import _java, jvm
from ._java import J, guard
from .errors import ClosedError, ModelFileError
from .model_files import DataTable, ModelSpec, PredicateSpec, RuleSpec

__all__ = ["GroundProgram", "NeuralBlock", "SolveStats"]

log = logging.getLogger(__name__)

_REASONERS = {
    "admm": "org.linqs.psl.application.inference.mpe.ADMMInference",
    "dualbcd": "org.linqs.psl.application.inference.mpe.DualBCDInference",
    "sgd": "org.linqs.psl.application.inference.mpe.SGDInference",
}
_DELIM = "\u001e"
_ids = itertools.count(1)
_ATOM_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")
#: Predicates this process declared in PSL's global registry: upper-cased name -> open programs using it.
_REGISTERED: dict[str, int] = {}


@dataclass
class SolveStats:
    """What one solve reported.

    Example:
        >>> SolveStats(1.5, 0, 12).iterations
        12
    """

    objective: float
    violated_constraints: int
    iterations: int | None


@dataclass
class NeuralBlock:
    """Where a neural predicate's atoms live in the atom-value array.

    Attributes:
        spec: The predicate.
        entities: DataFrame of entity arguments, one row per entity, in row order.
        classes: Class labels in column order.
        index: int64 array (n_entities, n_classes) of atom-store indexes.
        features: Feature matrix aligned with ``entities`` (from the entity-data map) or None.
        start, stop: The contiguous range covered (``index`` is a permutation of it) or None.
    """

    spec: PredicateSpec
    entities: pd.DataFrame
    classes: list[str]
    index: np.ndarray
    features: np.ndarray | None
    start: int | None
    stop: int | None
    perm: np.ndarray | None


def _render(value: str, ctype: str) -> str:
    if ctype in ("UniqueIntID", "Integer", "Long"):
        return "'" + str(int(value)) + "'"
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


class GroundProgram:
    """A model grounded once in the PSL engine and kept resident.

    Args:
        spec: The model description.
        options: PSL options for this program (override ``spec.options``), applied
            while the program's reasoner is built.
        reasoner: ``"admm"`` (default), ``"dualbcd"`` or ``"sgd"``.

    Raises:
        ModelFileError: A rule does not compile, data conflicts, a predicate clashes.
        EngineError: Grounding failed in the engine.

    Example:
        >>> program = GroundProgram(spec)  # doctest: +SKIP
    """

    @jvm.required
    def __init__(self, spec: ModelSpec, options: dict[str, Any] | None = None, reasoner: str = "admm") -> None:
        self.spec = spec
        self.id = next(_ids)
        self.options = {**spec.options, **{k: _opt(v) for k, v in (options or {}).items()}}
        self._closed = False
        self._dirty_atoms = False  # neural values written to the array but not yet to the atom objects
        self._learning: LearningState | None = None
        self._entity_maps: dict[str, tuple[pd.DataFrame | None, np.ndarray | None]] = {}
        self.timings: dict[str, float] = {}
        reasoner_key = reasoner.lower()
        if reasoner_key not in _REASONERS:
            raise ModelFileError(f"unknown reasoner {reasoner!r}; choose one of {sorted(_REASONERS)}")
        self.reasoner_name = reasoner_key
        t0 = time.perf_counter()
        self._predicates = self._register_predicates()
        try:
            self._rules = self._compile_rules()
            t1 = time.perf_counter()
            self._load_data()
            t2 = time.perf_counter()
            self._ground()
            t3 = time.perf_counter()
            self._index_atoms()
            t4 = time.perf_counter()
        except BaseException:
            self._abandon()
            raise
        self.timings = {"compile": t1 - t0, "load": t2 - t1, "ground": t3 - t2, "index": t4 - t3}
        log.info(
            "program %d: %d atoms, %d terms (load %.2fs, ground %.2fs, index %.2fs)",
            self.id,
            self.atom_count,
            self.term_count,
            t2 - t1,
            t3 - t2,
            t4 - t3,
        )

    # -- building ------------------------------------------------------------------

    def _register_predicates(self) -> dict[str, Any]:
        for spec in self.spec.predicates.values():
            existing = J.Predicate.get(spec.name)
            if existing is not None:
                self._check_clash(spec, existing)
        out = {}
        self._registered: list[str] = []
        for spec in self.spec.predicates.values():
            types = [getattr(J.ConstantType, t) for t in spec.types]
            existed = J.Predicate.get(spec.name) is not None
            with guard(f"declaring predicate {spec.name}"):
                if spec.neural is not None:
                    pred = J.DeepPredicate.get(spec.name, *types)
                else:
                    pred = J.StandardPredicate.get(spec.name, *types)
            out[spec.key] = pred
            if not existed or spec.key in _REGISTERED:
                _REGISTERED[spec.key] = _REGISTERED.get(spec.key, 0) + 1
                self._registered.append(spec.key)
        return out

    def _release_predicates(self) -> None:
        for key in getattr(self, "_registered", []):
            _REGISTERED[key] -= 1
            if _REGISTERED[key] == 0:
                del _REGISTERED[key]
                _java.unregister_predicate(key)
        self._registered = []

    def _check_clash(self, spec: PredicateSpec, existing: Any) -> None:
        existing_types = [str(existing.getArgumentType(i)) for i in range(int(existing.getArity()))]
        is_deep = bool(isinstance(existing, J.DeepPredicate))
        if (
            existing_types != spec.types
            or is_deep != (spec.neural is not None)
            or not isinstance(existing, J.StandardPredicate)
        ):
            kind = "neural" if is_deep else "standard"
            owner = (
                "by a pslbridge program that is still open (close it first)"
                if spec.key in _REGISTERED
                else "outside pslbridge (e.g. by PSL's Runtime or pslpython, which never release predicates)"
            )
            raise ModelFileError(
                f"predicate {spec.name}({', '.join(spec.types)}) clashes with {kind} predicate "
                f"{existing.getName()}({', '.join(existing_types)}) declared in this process {owner}; PSL keeps "
                "one global predicate registry, so programs open at the same time must agree on each predicate's "
                "arity, argument types and kind (or rename one of them)",
                path=self.spec.source,
                predicate=spec.name,
            )

    def _compile_rules(self) -> list[Any]:
        if not self.spec.rules:
            raise ModelFileError("the model has no rules", path=self.spec.source)
        rules = []
        for rule in self.spec.rules:
            self._precheck_rule(rule)
            rules.append(_java.compile_rule(rule.text, rule.path, rule.line))
        return rules

    def _precheck_rule(self, rule: RuleSpec) -> None:
        weight = re.match(r"\s*(-\s*[0-9.][0-9.eE+-]*)\s*:", rule.text)
        if weight:
            raise ModelFileError(
                f"negative weight {weight.group(1)} in rule {rule.text!r}: weights must be >= 0 "
                "(PSL would accept it and lose convexity)",
                path=rule.path,
                line=rule.line,
                rule=rule.text,
            )
        text = re.sub(r"'[^']*'|\"[^\"]*\"", "''", rule.text)
        for match in _ATOM_RE.finditer(text):
            name = match.group(1)
            if name.upper() in ("MAX", "MIN") or text[: match.start()].rstrip().endswith("@"):
                continue
            spec = self.spec.predicates.get(name.upper())
            if spec is None:
                known = ", ".join(p.name for p in self.spec.predicates.values())
                raise ModelFileError(
                    f"unknown predicate {name!r} in rule {rule.text!r} (the model declares: {known})",
                    path=rule.path,
                    line=rule.line,
                    rule=rule.text,
                    predicate=name,
                )
            depth, arity, i = 0, 1, match.end()
            empty = True
            while i < len(text):
                ch = text[i]
                if ch in "([{":
                    depth += 1
                elif ch in ")]}":
                    if depth == 0:
                        break
                    depth -= 1
                elif ch == "," and depth == 0:
                    arity += 1
                elif not ch.isspace():
                    empty = False
                i += 1
            if empty:
                arity = 0
            if arity != spec.arity:
                raise ModelFileError(
                    f"predicate {spec.name} takes {spec.arity} argument(s) but the rule gives {arity}: {rule.text!r}",
                    path=rule.path,
                    line=rule.line,
                    rule=rule.text,
                    predicate=spec.name,
                )

    def _load_data(self) -> None:
        url = f"jdbc:sqlite:file:pslbridge_{self.id}_{id(self)}?mode=memory&cache=shared&read_uncommitted=true"
        with guard("opening the in-memory database"):
            self._datastore = J.RDBMSDataStore(J.SQLiteDriver(url, True))
            for pred in self._predicates.values():
                self._datastore.registerPredicate(pred)
            self._partitions = {
                name: self._datastore.getPartition(name) for name in ("observations", "targets", "truth")
            }
        self._check_duplicates()
        self._neural_targets: dict[str, DataTable] = {}
        for spec in self.spec.neural_predicates:
            table = self._neural_target_table(spec)
            if table is not None:
                self._neural_targets[spec.key] = table
        tables = [
            t for t in self.spec.data if not (t.partition == "targets" and t.predicate.upper() in self._neural_targets)
        ]
        tables += list(self._neural_targets.values())
        for table in tables:
            if len(table) == 0:
                continue
            pred = self._predicates[table.predicate.upper()]
            with guard(f"loading {table.partition} of {table.predicate} from {table.origin}"):
                inserter = self._datastore.getInserter(pred, self._partitions[table.partition])
                rows = _java.to_java_object_list(table.args.tolist())
                if table.values is not None:
                    inserter.insertAllValues(_java.to_java_object_list([float(v) for v in table.values]), rows)
                else:
                    inserter.insertAll(rows)

    def _check_duplicates(self) -> None:
        seen: dict[tuple[str, tuple], tuple[str, str, int | None]] = {}
        for table in self.spec.data:
            if table.partition == "truth":
                continue
            key_pred = table.predicate.upper()
            for i, row in enumerate(map(tuple, table.args)):
                key = (key_pred, row)
                origin, line = table.where(i)
                if key in seen:
                    first = seen[key]
                    where = f"{first[1]}" + (f":{first[2]}" if first[2] else "")
                    raise ModelFileError(
                        f"atom {table.predicate}({', '.join(row)}) appears twice: in {table.partition} here and in "
                        f"{first[0]} at {where}; each atom may appear once across observations and targets",
                        path=origin,
                        line=line,
                        predicate=table.predicate,
                    )
                seen[key] = (table.partition, origin, line)

    def _neural_target_table(self, spec: PredicateSpec) -> DataTable | None:
        """Targets of a neural predicate: as given, or entity-data-map entities x classes."""
        given = self.spec.tables(spec.name, "targets")
        if given:
            return None
        assert spec.neural is not None
        entities = self._entity_map(spec)[0]
        if entities is None:
            raise ModelFileError(
                f"neural predicate {spec.name} has no target atoms and no entity-data-map-path; give its atoms "
                "as targets or name an entity-data map",
                path=self.spec.source,
                predicate=spec.name,
            )
        k = spec.neural.class_size
        ent = entities.to_numpy(dtype=object)
        args = np.empty((len(ent) * k, spec.arity), dtype=object)
        args[:, :-1] = np.repeat(ent, k, axis=0)
        args[:, -1] = np.tile(np.arange(k).astype(str).astype(object), len(ent))
        return DataTable(spec.name, "targets", args, None, f"<entities x classes of {spec.name}>")

    def _entity_map(self, spec: PredicateSpec) -> tuple[pd.DataFrame | None, np.ndarray | None]:
        cache = self._entity_maps
        if spec.key in cache:
            return cache[spec.key]
        assert spec.neural is not None
        path = spec.neural.entity_data_map_path
        if path is None:
            cache[spec.key] = (None, None)
            return cache[spec.key]
        n_ent = spec.arity - 1
        try:
            with open(path, encoding="utf-8") as handle:
                lines = [(i, ln.strip().split("\t")) for i, ln in enumerate(handle, start=1) if ln.strip()]
        except FileNotFoundError:
            raise ModelFileError(
                f"entity-data map of {spec.name} not found: {path}", path=path, predicate=spec.name
            ) from None
        if not lines:
            raise ModelFileError(f"entity-data map of {spec.name} is empty", path=path, predicate=spec.name)
        width = len(lines[0][1])
        for number, parts in lines:
            if len(parts) < n_ent:
                raise ModelFileError(
                    f"entity row needs {n_ent} entity argument(s) for {spec.name}",
                    path=path,
                    line=number,
                    predicate=spec.name,
                )
            if len(parts) != width:
                raise ModelFileError(
                    f"ragged entity-data map: {len(parts)} columns, the first row has {width}",
                    path=path,
                    line=number,
                    predicate=spec.name,
                )
        ents = pd.DataFrame([p[:n_ent] for _, p in lines], columns=[f"arg{i}" for i in range(n_ent)])
        features = None
        if width > n_ent:
            try:
                features = np.asarray([[float(x) for x in p[n_ent:]] for _, p in lines], dtype=np.float32)
            except ValueError as exc:
                raise ModelFileError(
                    f"non-numeric feature in entity-data map of {spec.name}: {exc}", path=path, predicate=spec.name
                ) from None
        cache[spec.key] = (ents, features)
        return cache[spec.key]

    def _ground(self) -> None:
        closed = J.HashSet()
        for spec in self.spec.predicates.values():
            if self.spec.is_closed(spec.name):
                closed.add(self._predicates[spec.key])
        rules = J.ArrayList()
        for rule in self._rules:
            rules.add(rule)
        J.Config.pushLayer()
        try:
            for key, value in self.options.items():
                J.Config.setProperty(key, value, False)
            J.Config.setProperty("inference.initialvalue", "ATOM", False)
            jvm.sync_log_level()
            with guard("grounding"):
                p = self._partitions
                self._db = self._datastore.getDatabase(p["targets"], closed, p["observations"])
                self._truth_db = self._datastore.getDatabase(p["truth"], self._datastore.getRegisteredPredicates())
                app_class = __import__("jpype").JClass(_REASONERS[self.reasoner_name])
                self._app = app_class(rules, self._db)
        finally:
            J.Config.popLayer()
        self._term_store = self._app.getTermStore()
        self._reasoner = self._app.getReasoner()
        self._atom_store = self._db.getAtomStore()
        self._rule_list = rules

    def _index_atoms(self) -> None:
        store = self._atom_store
        n = int(store.size())
        self.atom_count = n
        self.term_count = int(self._term_store.size())
        self.rv_count = int(store.getMaxRVAIndex()) + 1
        with guard("indexing atoms"):
            atoms = J.Arrays.copyOf(store.getAtoms(), n)
            text = str(J.PslStringUtils.join(_DELIM, atoms))
        keys = text.split(_DELIM) if n else []
        if len(keys) != n:
            raise ModelFileError("an argument contains the control character U+001E; remove it from the data")
        self._atom_lookup = {k: i for i, k in enumerate(keys)}
        # Open (target) predicates in the order and row order the user gave.
        self.targets: dict[str, tuple[pd.DataFrame, np.ndarray]] = {}
        for spec in self.spec.predicates.values():
            if self.spec.is_closed(spec.name) or spec.neural is not None:
                continue
            tables = self.spec.tables(spec.name, "targets")
            args = np.concatenate([t.args for t in tables]) if tables else np.empty((0, spec.arity), dtype=object)
            self.targets[spec.key] = (self._frame(spec, args), self._lookup_rows(spec, args))
        self.neural: dict[str, NeuralBlock] = {}
        for spec in self.spec.neural_predicates:
            self.neural[spec.key] = self._neural_block(spec)

    def _frame(self, spec: PredicateSpec, args: np.ndarray) -> pd.DataFrame:
        return pd.DataFrame(args, columns=[f"arg{i}" for i in range(spec.arity)])

    def _keys(self, spec: PredicateSpec, args: np.ndarray) -> list[str]:
        name = spec.name.upper()
        rendered = [[_render(v, t) for v in args[:, i]] for i, t in enumerate(spec.types)]
        return [f"{name}({', '.join(parts)})" for parts in zip(*rendered)] if len(args) else []

    def _lookup_rows(self, spec: PredicateSpec, args: np.ndarray) -> np.ndarray:
        keys = self._keys(spec, args)
        idx = np.fromiter((self._atom_lookup.get(k, -1) for k in keys), dtype=np.int64, count=len(keys))
        missing = np.flatnonzero(idx < 0)
        if missing.size:
            row = int(missing[0])
            raise ModelFileError(f"atom {keys[row]} was loaded but is not in PSL's atom store", predicate=spec.name)
        return idx

    def _neural_block(self, spec: PredicateSpec) -> NeuralBlock:
        assert spec.neural is not None
        k = spec.neural.class_size
        tables = self.spec.tables(spec.name, "targets")
        args = np.concatenate([t.args for t in tables]) if tables else self._neural_targets[spec.key].args
        ent_map, features = self._entity_map(spec)
        if ent_map is not None:
            entities = ent_map
        else:
            entities = pd.DataFrame(args[:, :-1], columns=[f"arg{i}" for i in range(spec.arity - 1)])
            entities = entities.drop_duplicates(ignore_index=True)
        classes = list(dict.fromkeys(args[:, -1].tolist()))
        if all(str(c).lstrip("-").isdigit() for c in classes):
            classes = sorted(classes, key=lambda c: int(c))
        if len(classes) != k:
            raise ModelFileError(
                f"neural predicate {spec.name} declares class-size {k} but its atoms use {len(classes)} class "
                f"value(s): {classes[:12]}",
                predicate=spec.name,
                path=self.spec.source,
            )
        ent = entities.to_numpy(dtype=object)
        full = np.empty((len(ent) * k, spec.arity), dtype=object)
        full[:, :-1] = np.repeat(ent, k, axis=0)
        full[:, -1] = np.tile(np.asarray(classes, dtype=object), len(ent))
        keys = self._keys(spec, full)
        index = np.fromiter((self._atom_lookup.get(key, -1) for key in keys), dtype=np.int64, count=len(keys))
        if ent_map is not None:
            # Like NeuPSL: entities of the map without any atom in this program (another split) are skipped.
            present = (index.reshape(len(ent), k) >= 0).any(axis=1)
            if not present.all():
                entities = entities[present].reset_index(drop=True)
                features = None if features is None else features[present]
                ent = ent[present]
                full = full.reshape(-1, k, spec.arity)[present].reshape(-1, spec.arity)
                index = index.reshape(-1, k)[present].ravel()
        if (index < 0).any():
            bad = int(np.flatnonzero(index < 0)[0])
            raise ModelFileError(
                f"neural predicate {spec.name}: entity {tuple(full[bad, :-1])} has no atom for class "
                f"{full[bad, -1]!r}; every entity needs all {k} class atoms",
                predicate=spec.name,
                path=spec.neural.entity_data_map_path or self.spec.source,
            )
        index = index.reshape(len(ent), k)
        extra = len(args) - index.size
        if extra > 0 and ent_map is not None:
            raise ModelFileError(
                f"neural predicate {spec.name} has {extra} target atom(s) for entities missing from its "
                "entity-data map",
                predicate=spec.name,
                path=spec.neural.entity_data_map_path,
            )
        flat = index.ravel()
        start, stop, perm = int(flat.min()), int(flat.max()) + 1, None
        if stop - start == flat.size:
            perm = flat - start
        else:
            start = stop = None  # type: ignore[assignment]
        return NeuralBlock(
            spec, entities.reset_index(drop=True), [str(c) for c in classes], index, features, start, stop, perm
        )

    # -- runtime -------------------------------------------------------------------

    def check_open(self) -> None:
        """Raise :class:`ClosedError` after :meth:`close`."""
        if self._closed:
            raise ClosedError(f"program {self.id} is closed; build a new Bridge to continue")

    def atom_values(self, upto: int | None = None) -> np.ndarray:
        """Copy the atom-value array (float32) out of the JVM."""
        size = self.atom_count if upto is None else upto
        arr = self._atom_store.getAtomValues()
        return np.array(arr[0:size], dtype=np.float32)

    def write_neural(self, block: NeuralBlock, values: np.ndarray) -> None:
        """Write an (entities, classes) float32 array into the neural atoms' values."""
        arr = self._atom_store.getAtomValues()
        flat = np.ascontiguousarray(values, dtype=np.float32).ravel()
        if block.start is not None and block.perm is not None:
            chunk = np.empty(flat.size, dtype=np.float32)
            chunk[block.perm] = flat
            arr[block.start : block.stop] = chunk
        else:
            everything = self.atom_values()
            everything[block.index.ravel()] = flat
            arr[0 : self.atom_count] = everything
        self._dirty_atoms = True

    def sync_atoms(self) -> None:
        """Copy the value array into the atom objects (needed before a reset)."""
        if self._dirty_atoms:
            with guard("synchronising atoms"):
                self._atom_store.sync()
            self._dirty_atoms = False

    def solve(self, reset: bool) -> SolveStats:
        """Run MAP inference on the resident terms (no commit to the database)."""
        self.check_open()
        jvm.sync_log_level()
        if reset:
            self.sync_atoms()
        _java.last_solve.clear()
        if self.reasoner_name == "admm":
            _java.clear_admm_cache()
        with guard("inference"):
            objective = float(self._app.inference(False, bool(reset)))
        self._dirty_atoms = False
        info = dict(_java.last_solve)
        violated = info.get("violated")
        if violated is None:
            violated = self.objective()[1]
        return SolveStats(objective, int(violated), info.get("iterations"))

    def objective(self) -> tuple[float, int]:
        """Evaluate (weighted objective, violated hard constraints) at the current values."""
        with guard("computing the objective"):
            result = _java.compute_objective(self._reasoner, self._term_store)
        return result

    @property
    def rules(self) -> list[Any]:
        """The compiled Java rules in model order."""
        return self._rules

    @property
    def learning(self) -> LearningState:
        """Labels and gradient buffers for learning (built on first use)."""
        state = self._learning
        if state is None:
            self.check_open()
            state = self._learning = LearningState(self)
        return state

    def rule_potentials(self, rule_indexes: list[int]) -> np.ndarray:
        """Per-rule sums of incompatibility (Φ) at the current atom values, float64.

        One pass of the reasoner's own parallel objective per rule, with only that rule active at
        weight 1 (the engine's ``evaluateIncompatibility``; no per-term Python loop).
        """
        return self._per_rule(rule_indexes)[0]

    def rule_violations(self, rule_indexes: list[int]) -> np.ndarray:
        """Violated ground constraints per (hard) rule at the current atom values."""
        return self._per_rule(rule_indexes)[1]

    def _per_rule(self, rule_indexes: list[int]) -> tuple[np.ndarray, np.ndarray]:
        rules = self._rules
        weights = [float(rules[i].getWeight()) if bool(rules[i].isWeighted()) else None for i in rule_indexes]
        active = [bool(r.isActive()) for r in rules]
        out = np.zeros(len(rule_indexes), dtype=np.float64)
        violated = np.zeros(len(rule_indexes), dtype=np.int64)
        one = 1.0
        try:
            with guard("computing rule potentials"):
                for rule in rules:
                    rule.setActive(False)
                for k, i in enumerate(rule_indexes):
                    rules[i].setActive(True)
                    weighted = bool(rules[i].isWeighted())
                    if weighted:
                        rules[i].setWeight(one)
                    out[k], violated[k] = _java.compute_objective(self._reasoner, self._term_store)
                    rules[i].setActive(False)
                    if weighted:
                        rules[i].setWeight(weights[k])
        finally:
            for rule, was in zip(rules, active):
                rule.setActive(was)
            for k, i in enumerate(rule_indexes):
                if bool(rules[i].isWeighted()):
                    rules[i].setWeight(weights[k])
        return out, violated

    def atom_index(self, predicate: str, args: tuple[Any, ...]) -> int:
        """The atom-store index of ``predicate(args)``, or -1 when the atom is not in the program."""
        spec = self.spec.predicate(predicate)
        if len(args) != spec.arity:
            raise KeyError(f"{spec.name} takes {spec.arity} arguments, got {len(args)}: {args}")
        key = self._keys(spec, np.asarray([list(map(str, args))], dtype=object))[0]
        return self._atom_lookup.get(key, -1)

    def terms_of_atom(self, atom_index: int) -> list[tuple[int, int]]:
        """``(term index, position in the term)`` of every ground term that contains the atom."""
        store = self._term_store
        if self.reasoner_name == "admm":
            with guard("looking up the terms of an atom"):
                records = store.getLocalRecords(int(atom_index))
                if records is None:
                    return []
                return [(int(r.termIndex), int(r.variableIndex)) for r in records]
        found = []
        with guard("scanning the terms of an atom"):
            for t in range(int(store.size())):
                indexes = list(store.get(t).getAtomIndexes())
                if atom_index in indexes:
                    found.append((t, indexes.index(atom_index)))
        return found

    def energy_gradient(self, full: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
        """∂energy/∂atom at the current values: (deep-atom gradient, random-variable gradient or None).

        Uses ``Reasoner.computeOptimalValueGradient`` (hard-constraint terms are skipped).
        """
        state = self.learning
        with guard("computing neural gradients"):
            self._reasoner.computeOptimalValueGradient(self._term_store, state.rv_gradient, state.deep_gradient)
        deep = np.array(state.deep_gradient[0 : self.atom_count], dtype=np.float32)
        rv = np.array(state.rv_gradient[0 : self.atom_count], dtype=np.float32) if full else None
        return deep, rv

    def _abandon(self) -> None:
        """Free whatever a failed construction built (best effort), then release predicates."""
        for name in ("_app", "_db", "_truth_db", "_datastore"):
            obj = getattr(self, name, None)
            if obj is not None:
                try:
                    obj.close()
                except Exception:  # noqa: BLE001 - already failing; the first error matters
                    log.debug("cleanup of %s failed", name, exc_info=True)
        self._release_predicates()
        self._closed = True

    def close(self) -> None:
        """Free the Java objects (the JVM stays up). Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        try:
            with guard("closing a program"):
                self._app.close()
                self._db.close()
                self._truth_db.close()
                self._datastore.close()
        finally:
            self._release_predicates()
            self._learning = None
            self._app = self._db = self._truth_db = self._datastore = None
            self._term_store = self._reasoner = self._atom_store = None
            self._atom_lookup = {}


def _opt(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class LearningState:
    """Labels and scratch arrays a program needs for learning (built on first use).

    Attributes:
        label_index: Atom-store indexes of labelled random-variable atoms (sorted).
        label_values: Their truth values (float32).
        runs: Contiguous runs ``(start, stop, rv_block, observed_block)`` of labelled atoms; fixing a
            run swaps the Java atom array slice for the truth atoms with one ``System.arraycopy``.
    """

    def __init__(self, program: GroundProgram) -> None:
        self.program = program
        spec = program.spec
        index_parts, value_parts = [], []
        for key in program.targets:
            pred = spec.predicates[key]
            for table in spec.tables(pred.name, "truth"):
                if len(table) == 0:
                    continue
                keys = program._keys(pred, table.args)
                idx = np.fromiter((program._atom_lookup.get(k, -1) for k in keys), dtype=np.int64, count=len(keys))
                keep = (idx >= 0) & (idx < program.rv_count)
                values = table.values if table.values is not None else np.ones(len(table))
                index_parts.append(idx[keep])
                value_parts.append(values[keep].astype(np.float32))
        if index_parts:
            index = np.concatenate(index_parts)
            values = np.concatenate(value_parts)
            order = np.argsort(index, kind="stable")
            index, values = index[order], values[order]
            unique, first = np.unique(index, return_index=True)
            index, values = unique, values[first]
        else:
            index, values = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        self.label_index = index
        self.label_values = values
        self.latent_count = int(sum(len(idx) for _, idx in program.targets.values())) - int(index.size)
        self.runs = self._build_runs()
        n = program.atom_count
        with guard("allocating gradient buffers"):
            import jpype

            self.rv_gradient = jpype.JArray(jpype.JFloat)(n)
            self.deep_gradient = jpype.JArray(jpype.JFloat)(n)
        self.fixed = False

    def _build_runs(self) -> list[tuple[int, int, Any, Any]]:
        index = self.label_index
        if index.size == 0:
            return []
        program = self.program
        with guard("preparing labelled atoms"):
            truth_store = program._truth_db.getAtomStore()
            n_truth = int(truth_store.size())
            truth_atoms = J.Arrays.copyOf(truth_store.getAtoms(), n_truth)
            text = str(J.PslStringUtils.join(_DELIM, truth_atoms)) if n_truth else ""
        truth_lookup = {k: i for i, k in enumerate(text.split(_DELIM))} if n_truth else {}
        keys_by_index = {v: k for k, v in program._atom_lookup.items()}
        breaks = np.flatnonzero(np.diff(index) != 1) + 1
        runs = []
        atoms = program._atom_store.getAtoms()
        with guard("preparing labelled atoms"):
            for chunk in np.split(index, breaks):
                start, stop = int(chunk[0]), int(chunk[-1]) + 1
                rv_block = J.Arrays.copyOfRange(atoms, start, stop)
                observed = J.Arrays.copyOfRange(atoms, start, stop)
                for offset, atom_index in enumerate(range(start, stop)):
                    observed[offset] = truth_atoms[truth_lookup[keys_by_index[atom_index]]]
                runs.append((start, stop, rv_block, observed))
        return runs

    def fix(self) -> None:
        """Swap labelled atoms for their truth atoms and write the truth values (PSL's fixLabeledRandomVariables)."""
        if self.fixed or not self.runs:
            self.fixed = True
            return
        program = self.program
        store = program._atom_store
        atoms = store.getAtoms()
        with guard("fixing labelled atoms"):
            for start, stop, _, observed in self.runs:
                J.System.arraycopy(observed, 0, atoms, start, stop - start)
        values = program.atom_values(program.rv_count)
        values[self.label_index] = self.label_values
        store.getAtomValues()[0 : program.rv_count] = values
        self.fixed = True

    def unfix(self) -> None:
        """Put the random-variable atoms back (PSL's unfixLabeledRandomVariables)."""
        if not self.fixed:
            return
        atoms = self.program._atom_store.getAtoms()
        with guard("unfixing labelled atoms"):
            for start, stop, rv_block, _ in self.runs:
                J.System.arraycopy(rv_block, 0, atoms, start, stop - start)
        self.fixed = False
