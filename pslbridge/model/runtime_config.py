"""Reading PSL 2.3/2.4 runtime configs (``.json`` or ``.yaml``) the way PSL's ``RuntimeConfig`` does.

See :func:`read_runtime_config`.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import yaml

from ..errors import ModelFileError
from .parts import (
    CONFIG_KEYS,
    PARTITIONS,
    PREDICATE_KEYS,
    SPLITS,
    DataTable,
    EvaluationSpec,
    ModelParts,
    NeuralSpec,
    PredicateSpec,
    RuleSpec,
    add_predicate,
    check_name,
    check_phase,
    predicate_type,
    read_text,
    validate_neural,
)
from .tables import read_data_file, read_rules_file, rows_to_table

log = logging.getLogger(__name__)

__all__ = ["read_runtime_config"]


def read_runtime_config(path: str | Path, phase: str = "infer", data_dir: str | Path | None = None) -> ModelParts:
    """Read a runtime config's parts (see :meth:`pslbridge.ModelSpec.from_runtime_config`).

    Raises:
        ModelFileError: The file is unreadable or not a valid config.

    Examples:
        >>> from pslbridge.examples import example_path
        >>> parts = read_runtime_config(example_path("simple-acquaintances") / "simple-acquaintances.json")
        >>> len(parts.rules), sorted(parts.predicates)
        (6, ['KNOWS', 'LIKES', 'LIVED'])
    """
    path = Path(path)
    check_phase(phase)
    text = read_text(path)
    try:
        raw = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise ModelFileError(f"invalid JSON: {exc.msg} (column {exc.colno})", path=path, line=exc.lineno) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ModelFileError(f"invalid YAML: {exc}", path=path, line=None if mark is None else mark.line + 1) from exc
    base = Path(data_dir) if data_dir is not None else path.parent
    if data_dir is not None and not base.is_dir():
        what = "a file" if base.exists() else "missing"
        raise ModelFileError(
            f"with a runtime config, data (--data) is the folder its data paths are resolved against; {base} is "
            f"{what} (a .data file goes with a .psl rule file)",
            path=path,
        )
    return _RuntimeConfigReader(raw, path, base, phase).read()


class _RuntimeConfigReader:
    """Parse the runtime config's JSON structure the way RuntimeConfig does."""

    def __init__(self, raw: Any, path: Path, base: Path, phase: str) -> None:
        self.raw = raw
        self.path = path
        self.base = base
        self.phase = phase

    def fail(self, message: str, predicate: str | None = None) -> ModelFileError:
        return ModelFileError(message, path=self.path, predicate=predicate)

    def read(self) -> ModelParts:
        raw = self.raw
        if not isinstance(raw, dict):
            raise self.fail(f"a runtime config must be an object at the top level, got {type(raw).__name__}")
        unknown = set(raw) - CONFIG_KEYS
        if unknown:
            raise self.fail(f"unknown top-level key(s) {sorted(unknown)}; expected some of {sorted(CONFIG_KEYS)}")
        options = self.options(raw.get("options"), "options")
        split = raw.get(self.phase) or {}
        if not isinstance(split, dict):
            raise self.fail(f"'{self.phase}' must be an object with 'rules'/'options'")
        bad = set(split) - {"rules", "options"}
        if bad:
            raise self.fail(f"unknown key(s) {sorted(bad)} in '{self.phase}'; expected 'rules' and 'options'")
        options.update(self.options(split.get("options"), f"{self.phase}.options"))
        rules = self.rules(raw.get("rules"), "rules") + self.rules(split.get("rules"), f"{self.phase}.rules")
        int_ids = options.get("runtime.db.intids", "false").lower() == "true"
        preds: dict[str, PredicateSpec] = {}
        data: list[DataTable] = []
        raw_preds = raw.get("predicates") or {}
        if not isinstance(raw_preds, dict):
            raise self.fail("'predicates' must be an object mapping names to definitions")
        for raw_name, definition in raw_preds.items():
            spec, tables = self.predicate(str(raw_name), definition, int_ids)
            add_predicate(preds, spec, str(self.path))
            data.extend(tables)
        return ModelParts(rules, preds, data, options, self.phase, str(self.path))

    def options(self, raw: Any, where: str) -> dict[str, str]:
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            raise self.fail(f"'{where}' must be an object of option -> value")
        out = {}
        for key, value in raw.items():
            if isinstance(value, (dict, list)):
                raise self.fail(f"option {key!r} in '{where}' must be a scalar, got {type(value).__name__}")
            out[str(key)] = option_text(value)
        return out

    def rules(self, raw: Any, where: str) -> list[RuleSpec]:
        if raw is None:
            return []
        if isinstance(raw, str):
            return read_rules_file(self.base / raw if not Path(raw).is_absolute() else Path(raw))
        if isinstance(raw, list):
            out = []
            for i, rule in enumerate(raw):
                if not isinstance(rule, str):
                    raise self.fail(f"'{where}' entry {i} must be a rule string, got {type(rule).__name__}")
                out.append(RuleSpec(rule.strip(), str(self.path), None))
            return out
        raise self.fail(f"'{where}' must be a list of rule strings or a path to a .psl file")

    def predicate(self, raw_name: str, definition: Any, int_ids: bool) -> tuple[PredicateSpec, list[DataTable]]:
        if definition is None:
            definition = {}
        if not isinstance(definition, dict):
            raise self.fail(f"predicate {raw_name!r} must map to an object", raw_name)
        unknown = set(definition) - PREDICATE_KEYS
        if unknown:
            raise self.fail(
                f"predicate {raw_name!r} has unknown key(s) {sorted(unknown)}; expected some of "
                f"{sorted(PREDICATE_KEYS)}",
                raw_name,
            )
        name, arity = raw_name, definition.get("arity")
        if "/" in raw_name:
            parts = raw_name.split("/")
            if len(parts) != 2 or not parts[1].strip().isdigit():
                raise self.fail(f"predicate key {raw_name!r} must look like Name/arity", raw_name)
            name, parsed = parts[0].strip(), int(parts[1])
            if arity is not None and int(arity) != parsed:
                raise self.fail(f"arity mismatch on predicate {name}: {arity} declared, {parsed} in its name", name)
            arity = parsed
        check_name(name, str(self.path))
        if "name" in definition and str(definition["name"]) != name:
            raise self.fail(f"predicate name mismatch: key {name!r} vs name {definition['name']!r}", name)
        types = definition.get("types") or []
        if not isinstance(types, list):
            raise self.fail(f"'types' of predicate {name} must be a list", name)
        if arity is None:
            arity = len(types)
        if not isinstance(arity, int) or isinstance(arity, bool) or arity < 1:
            raise self.fail(f"bad or missing arity on predicate {name}: give it as 'Name/arity' or 'arity'", name)
        if types and len(types) != arity:
            raise self.fail(f"arity mismatch on predicate {name}: arity {arity}, {len(types)} types", name)
        if not types:
            types = ["UniqueIntID" if int_ids else "UniqueStringID"] * arity
        ptype = definition.get("type")
        pred_options = self.options(definition.get("options"), f"predicates.{raw_name}.options")
        spec = PredicateSpec(name, arity, [str(t) for t in types], options=pred_options)
        if definition.get("force-open"):
            spec.closed = False
        if ptype is not None and predicate_type(ptype) is None:
            raise self.fail(f"predicate {name}: unknown type {ptype!r}; use DeepPredicate or StandardPredicate", name)
        if ptype is not None and predicate_type(ptype) == "DeepPredicate":
            spec.neural = self.neural(spec, pred_options)
        if definition.get("function") is not None:
            spec.function = str(definition["function"])
        spec.evaluations = _evaluations(definition.get("evaluations"), name, str(self.path))
        tables = []
        for partition in PARTITIONS:
            tables.extend(self.partition(spec, partition, definition.get(partition)))
        return spec, tables

    def neural(self, spec: PredicateSpec, opts: dict[str, str]) -> NeuralSpec:
        if "class-size" not in opts:
            raise self.fail(f"DeepPredicate {spec.name} needs the option 'class-size' (number of classes)", spec.name)
        if "entity-argument-indexes" not in opts:
            raise self.fail(
                f"DeepPredicate {spec.name} needs the option 'entity-argument-indexes' "
                '(e.g. "0" for one entity argument)',
                spec.name,
            )
        try:
            class_size = int(opts["class-size"])
            indexes = [int(x) for x in str(opts["entity-argument-indexes"]).split(",") if x.strip()]
        except ValueError:
            raise self.fail(
                f"DeepPredicate {spec.name}: class-size and entity-argument-indexes must be integers", spec.name
            ) from None
        mapping = opts.get("entity-data-map-path")
        neural = NeuralSpec(class_size, indexes, str(self.base / mapping) if mapping else None, dict(opts))
        spec.neural = neural
        validate_neural(spec, str(self.path))
        return neural

    def partition(self, spec: PredicateSpec, partition: str, raw: Any) -> list[DataTable]:
        if raw is None:
            return []
        entries: list[Any]
        if isinstance(raw, list):
            entries = list(raw)
        elif isinstance(raw, dict):
            bad = set(raw) - set(SPLITS)
            if bad:
                raise self.fail(
                    f"predicate {spec.name} {partition}: unknown split(s) {sorted(bad)}; expected "
                    f"some of {list(SPLITS)}",
                    spec.name,
                )
            entries = []
            for split in ("all", self.phase):
                part = raw.get(split) or []
                if not isinstance(part, list):
                    raise self.fail(f"predicate {spec.name} {partition}.{split} must be a list", spec.name)
                entries.extend(part)
            if spec.closed is None and partition == "targets" and not entries and any(raw.get(s) for s in SPLITS):
                pass
        else:
            raise self.fail(f"predicate {spec.name} {partition} must be a list or an object of splits", spec.name)
        tables = []
        literal: list[list[str]] = []
        for entry in entries:
            if isinstance(entry, str):
                resolved = Path(entry) if Path(entry).is_absolute() else self.base / entry
                tables.append(read_data_file(resolved, spec, partition, shown_path=entry))
            elif isinstance(entry, list):
                literal.append([option_text(v) for v in entry])
            else:
                raise self.fail(f"predicate {spec.name} {partition}: entries must be file paths or rows", spec.name)
        if literal:
            tables.append(rows_to_table(spec, partition, literal, f"{self.path} ({spec.name} {partition})", None))
        return tables


def _evaluations(raw: Any, predicate: str, origin: str) -> list[EvaluationSpec]:
    """A config's ``evaluations`` entries: class names, or ``{evaluator, options, primary}`` objects."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raw = [raw]
    out = []
    for entry in raw:
        if isinstance(entry, str):
            out.append(EvaluationSpec(entry))
        elif isinstance(entry, dict) and isinstance(entry.get("evaluator"), str):
            options = entry.get("options") or {}
            if not isinstance(options, dict):
                raise ModelFileError(
                    f"evaluation options of {predicate} must be an object", path=origin, predicate=predicate
                )
            pairs = tuple(sorted((str(k), option_text(v)) for k, v in options.items()))
            out.append(EvaluationSpec(entry["evaluator"], pairs, bool(entry.get("primary", False))))
        else:
            raise ModelFileError(
                f"evaluation of {predicate} must be an evaluator class name or an object with 'evaluator': {entry!r}",
                path=origin,
                predicate=predicate,
            )
    if sum(e.primary for e in out) > 1:
        raise ModelFileError(
            f"predicate {predicate} has more than one primary evaluation", path=origin, predicate=predicate
        )
    return out


def option_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
