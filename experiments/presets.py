"""Presets as data: one YAML file per paper setting, holding every field a runner takes and where it was chosen.

A preset file has ``name``, ``match`` (the keys it applies to: equal values, ``<key>_below`` / ``<key>_from``
bounds, or ``<key>_in`` a list), ``notes`` (on which seeds and data its values were chosen) and ``fields``. A
runner picks the most specific preset whose ``match`` holds (:func:`select`) or the one it is told to
(:func:`by_name`), then applies explicit overrides; no default is written as a branch in code.

Examples:
    >>> from pathlib import Path
    >>> presets = load_presets(Path(__file__).parent / "mnist_add" / "presets")
    >>> select(presets, digits=2, additions=150).name, select(presets, digits=1, additions=3000).name
    ('add2-150', 'add1-3000')
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pslbridge.errors import ConfigurationError

__all__ = ["Preset", "by_name", "load_presets", "select"]


@dataclass(frozen=True)
class Preset:
    """One setting's values, the keys it applies to and where it was chosen.

    Examples:
        >>> p = Preset("small", {"digits": 1, "additions_below": 1000}, {"epochs": 3}, "chosen on seed 100")
        >>> p.matches(digits=1, additions=300), p.matches(digits=1, additions=3000)
        (True, False)
    """

    name: str
    match: dict[str, Any]
    fields: dict[str, Any]
    notes: str
    path: Path = field(default=Path("<python>"))

    def matches(self, **keys: Any) -> bool:
        """Whether every condition of ``match`` holds for these keys (a key it does not name fails it)."""
        for condition, value in self.match.items():
            tests = (("_below", lambda k, v: k < v), ("_from", lambda k, v: k >= v), ("_in", lambda k, v: k in v))
            for suffix, holds in tests:
                if condition.endswith(suffix):
                    key = condition[: -len(suffix)]
                    if key not in keys or not holds(keys[key], value):
                        return False
                    break
            else:
                if keys.get(condition) != value:
                    return False
        return True


def load_presets(folder: Path, allowed: Iterable[str] | None = None) -> list[Preset]:
    """Read every ``*.yaml`` preset in a folder, in file-name order.

    Args:
        folder: The experiment's ``presets/`` folder.
        allowed: Field names a preset may set (None: any).

    Raises:
        ConfigurationError: A file that is not a preset, or a field the runner does not take, naming the file.
    """
    presets = []
    allowed_set = set(allowed) if allowed is not None else None
    for path in sorted(folder.glob("*.yaml")):
        try:
            raw = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise ConfigurationError(f"{path}: not valid YAML: {exc}") from exc
        if not isinstance(raw, dict) or set(raw) != {"name", "match", "notes", "fields"}:
            raise ConfigurationError(f"{path}: a preset has exactly the keys name, match, notes and fields")
        if not isinstance(raw["fields"], dict) or not isinstance(raw["match"], dict) or not str(raw["notes"]).strip():
            raise ConfigurationError(f"{path}: 'fields' and 'match' must be mappings and 'notes' must say something")
        unknown = sorted(set(raw["fields"]) - allowed_set) if allowed_set is not None else []
        if unknown:
            raise ConfigurationError(f"{path}: unknown field(s) {unknown}; the runner takes {sorted(allowed_set)}")
        presets.append(Preset(str(raw["name"]), dict(raw["match"]), dict(raw["fields"]), str(raw["notes"]), path))
    if not presets:
        raise ConfigurationError(f"no presets (*.yaml) in {folder}")
    return presets


def select(presets: Sequence[Preset], **keys: Any) -> Preset:
    """The preset whose ``match`` holds for these keys; of several, the one with the most conditions.

    Raises:
        ConfigurationError: None matches, or several with as many conditions.

    Examples:
        >>> general = Preset("lp+fp", {"method": "lp+fp"}, {}, "any data set")
        >>> cora = Preset("lp+fp-cora", {"method": "lp+fp", "dataset": "cora"}, {}, "Cora's own")
        >>> select([general, cora], method="lp+fp", dataset="cora").name, select([general, cora], method="lp+fp",
        ...     dataset="pubmed").name
        ('lp+fp-cora', 'lp+fp')
    """
    found = [p for p in presets if p.matches(**keys)]
    if not found:
        raise ConfigurationError(f"{keys}: no preset matches; the presets are {[p.name for p in presets]}")
    most = max(len(p.match) for p in found)
    best = [p for p in found if len(p.match) == most]
    if len(best) > 1:
        raise ConfigurationError(f"{keys}: presets {[p.name for p in best]} match equally; make one more specific")
    return best[0]


def by_name(presets: Sequence[Preset], name: str) -> Preset:
    """The preset of that name.

    Raises:
        ConfigurationError: No preset has it.
    """
    for preset in presets:
        if preset.name == name:
            return preset
    raise ConfigurationError(f"no preset {name!r}; choose one of {[p.name for p in presets]}")
