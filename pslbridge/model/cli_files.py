"""Reading a classic PSL CLI pair: a ``.psl`` rule file and its ``.data`` YAML file.

See :func:`read_cli_files`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import yaml

from ..errors import ModelFileError
from .parts import (
    PARTITIONS,
    DataTable,
    ModelParts,
    NeuralSpec,
    PredicateSpec,
    RuleSpec,
    add_predicate,
    check_name,
    check_phase,
    lookup,
    read_text,
    validate_neural,
)
from .runtime_config import option_text
from .tables import read_data_file, read_rules_file

log = logging.getLogger(__name__)

__all__ = ["read_cli_files"]


def read_cli_files(rules_path: str | Path, data_path: str | Path, phase: str = "infer") -> ModelParts:
    """Read a ``.psl`` + ``.data`` pair's parts (see :meth:`pslbridge.ModelSpec.from_cli_files`).

    Raises:
        ModelFileError: A rule, declaration or data file is malformed.

    Examples:
        >>> from pslbridge.examples import example_path
        >>> stem = example_path("simple-acquaintances") / "simple-acquaintances"
        >>> parts = read_cli_files(stem.with_suffix(".psl"), stem.with_suffix(".data"))
        >>> sorted(parts.predicates)
        ['KNOWS', 'LIKES', 'LIVED']
    """
    check_phase(phase)
    rules = read_rules_file(rules_path)
    return _DataFileReader(Path(data_path), rules, phase).read()


class _DataFileReader:
    """Translate a classic PSL CLI ``.data`` file."""

    _SECTIONS = {"predicates", "observations", "targets", "truth"}

    def __init__(self, path: Path, rules: list[RuleSpec], phase: str) -> None:
        self.path = path
        self.rules = rules
        self.phase = phase

    def read(self) -> ModelParts:
        text = read_text(self.path)
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            raise ModelFileError(
                f"invalid YAML: {exc}", path=self.path, line=None if mark is None else mark.line + 1
            ) from exc
        if not isinstance(raw, dict):
            raise ModelFileError("a .data file must be a YAML mapping with a 'predicates:' section", path=self.path)
        unknown = set(raw) - self._SECTIONS
        if unknown:
            raise ModelFileError(
                f"unknown section(s) {sorted(unknown)}; a .data file has {sorted(self._SECTIONS)}",
                path=self.path,
                line=_line_of(text, sorted(unknown)[0]),
            )
        preds: dict[str, PredicateSpec] = {}
        decls = raw.get("predicates")
        if not isinstance(decls, dict) or not decls:
            raise ModelFileError("'predicates:' must map Name/arity to open or closed", path=self.path)
        for key, value in decls.items():
            add_predicate(preds, self.declaration(str(key), value, text), str(self.path))
        data: list[DataTable] = []
        for partition in PARTITIONS:
            section = raw.get(partition) or {}
            if not isinstance(section, dict):
                raise ModelFileError(
                    f"'{partition}:' must map predicate names to paths", path=self.path, line=_line_of(text, partition)
                )
            if set(section) & {"learn", "infer", "validation", "all"}:
                merged: dict[str, Any] = {}
                for split in ("all", self.phase):
                    for name, paths in (section.get(split) or {}).items():
                        merged.setdefault(name, []).extend(_as_list(paths))
                section = merged
            for name, paths in section.items():
                spec = lookup(preds, str(name), str(self.path))
                for entry in _as_list(paths):
                    resolved = Path(entry) if Path(entry).is_absolute() else self.path.parent / entry
                    data.append(read_data_file(resolved, spec, partition, shown_path=str(entry)))
        return ModelParts(self.rules, preds, data, {}, self.phase, str(self.path))

    def declaration(self, key: str, value: Any, text: str) -> PredicateSpec:
        """One ``predicates:`` entry, in any form PSL 2.3's data loader accepted (plus neural predicates).

        ``Name/arity: open|closed``; a property list ``[open, block, {types: [...]}]``; ``Name:`` without an
        arity when ``types`` gives it; ``{implementation: ...}`` (or ``function:``) for an external functional
        predicate; ``{type: neural, class-size: K, ...}`` for a neural one.
        """
        where = {"path": self.path, "line": _line_of(text, key)}
        name, _, arity_text = key.partition("/")
        if arity_text and not arity_text.strip().isdigit():
            raise ModelFileError(f"predicate declaration {key!r} must look like Name or Name/arity", **where)
        name = check_name(name.strip(), str(self.path))
        if isinstance(value, dict) and str(value.get("type", "")).lower() == "neural":
            if not arity_text:
                raise ModelFileError(
                    f"neural predicate {name} must be declared as {name}/arity", predicate=name, **where
                )
            return self.neural_declaration(PredicateSpec(name, int(arity_text)), value, where)
        closed, types, function = self.properties(name, value, where)
        arity = int(arity_text) if arity_text else len(types) or None
        if types and arity != len(types):
            raise ModelFileError(
                f"size mismatch on predicate {name}: arity {arity} declared, {len(types)} types given",
                predicate=name,
                **where,
            )
        if arity is None:
            raise ModelFileError(
                f"could not find the arity of predicate {name}: write {name}/arity or give types",
                predicate=name,
                **where,
            )
        if function is None and closed is None:
            raise ModelFileError(f"predicate {name}: say whether it is open or closed", predicate=name, **where)
        return PredicateSpec(name, arity, types, closed=closed, function=function)

    def properties(self, name: str, value: Any, where: dict[str, Any]) -> tuple[bool | None, list[str], str | None]:
        """``(closed, types, function)`` from a predicate's property list (PSL 2.3's data format)."""
        closed, types, function = None, [], None
        for prop in value if isinstance(value, list) else [value]:
            if isinstance(prop, str) and prop.strip().lower() in ("open", "closed", "block"):
                word = prop.strip().lower()
                if word == "block":
                    log.info("%s: predicate %s: 'block' has no PSL 2.4 equivalent and is ignored", self.path, name)
                else:
                    closed = word == "closed"
            elif isinstance(prop, dict):
                for key, raw in prop.items():
                    if key == "types":
                        types = [str(t) for t in (raw if isinstance(raw, list) else [raw])]
                    elif key in ("implementation", "function"):
                        function = str(raw)
                    elif key in ("modeltype", "config"):
                        raise ModelFileError(
                            f"predicate {name}: PSL 2.3's model predicates ('{key}') have no PSL 2.4 equivalent; "
                            "declare a neural predicate instead ({type: neural, class-size: K})",
                            predicate=name,
                            **where,
                        )
                    else:
                        raise ModelFileError(
                            f"predicate {name} has an unknown property {key!r}", predicate=name, **where
                        )
            else:
                raise ModelFileError(
                    f"predicate {name} must be 'open', 'closed', a property list such as [open, {{types: [...]}}] "
                    f"or {{type: neural, class-size: K}}, got {prop!r}",
                    predicate=name,
                    **where,
                )
        return closed, types, function

    def neural_declaration(self, spec: PredicateSpec, value: dict[str, Any], where: dict[str, Any]) -> PredicateSpec:
        opts = {str(k): option_text(v) for k, v in value.items() if k != "type"}
        if "class-size" not in opts:
            raise ModelFileError(f"neural predicate {spec.name} needs 'class-size'", predicate=spec.name, **where)
        indexes = opts.get("entity-argument-indexes", ",".join(str(i) for i in range(spec.arity - 1)))
        mapping = opts.get("entity-data-map-path")
        spec.neural = NeuralSpec(
            int(opts["class-size"]),
            [int(i) for i in indexes.split(",")],
            str(self.path.parent / mapping) if mapping else None,
            opts,
        )
        validate_neural(spec, str(self.path))
        return spec


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(value)]


def _line_of(text: str, token: str) -> int | None:
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip().startswith(str(token)):
            return number
    return None
