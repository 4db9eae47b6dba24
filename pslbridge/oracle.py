"""The jar's own answer: run PSL's ``Runtime`` on a model in a fresh process.

Used by the parity tests and benchmarks as an oracle, and by users who want to
check pslbridge against the reference engine. A :class:`~pslbridge.model.ModelSpec`
is written out as a self-contained PSL runtime config (rules and data inline); neural
predicates become ordinary observed predicates whose values are the predictions
given. The config runs in a new interpreter (PSL keeps static state, and a JVM that
declared a ``DeepPredicate`` refuses such configs), through
PSL's ``Runtime.serializedRun`` (see :func:`pslbridge.jvm.run_psl_runtime`).

Examples:
    >>> import pslbridge
    >>> tight = {"admmreasoner.maxiterations": "20000", "admmreasoner.epsilonabs": "1e-7",
    ...          "admmreasoner.epsilonrel": "1e-7"}
    >>> config = "pslbridge/examples/simple-acquaintances/simple-acquaintances.json"
    >>> with pslbridge.Bridge(config, options=tight) as bridge:
    ...     ours = bridge.infer()["Knows"]
    ...     jar = run_runtime(bridge.spec, options=tight)
    ...     float(np.abs(jar.values("Knows", bridge.atoms("Knows")) - ours).max()) < 1e-3
    True
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .errors import EngineError
from .model import ModelSpec

__all__ = ["RuntimeOutput", "run_runtime", "spec_to_runtime_config"]


def spec_to_runtime_config(
    spec: ModelSpec,
    neural: Mapping[str, np.ndarray] | None = None,
    entities: Mapping[str, pd.DataFrame] | None = None,
    classes: Mapping[str, list[str]] | None = None,
    rule_weights: Mapping[int, float] | None = None,
    options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write a model as one self-contained PSL runtime config (data inline).

    Args:
        spec: The model.
        neural: Predictions per neural predicate; they become observations.
        entities: Entity rows per neural predicate (row order of ``neural``).
        classes: Class labels per neural predicate (column order of ``neural``).
        rule_weights: Replacement weights by rule index.
        options: Extra PSL options.

    Returns:
        A dict ready for ``json.dumps``, with the data under the ``infer`` or ``learn`` split.

    Examples:
        >>> from pslbridge.model import ModelSpec
        >>> spec = ModelSpec.from_python(rules=["1: A(X) -> B(X) ^2"], predicates={"A": 1, "B": 1},
        ...                              observations={"A": [("x", 1.0)]}, targets={"B": [("x",)]})
        >>> spec_to_runtime_config(spec)["predicates"]["A/1"]["observations"]
        {'infer': [['x', '1.0']]}
    """
    rules = []
    for i, rule in enumerate(spec.rules):
        text = rule.text
        if rule_weights and i in rule_weights:
            text = text.split(":", 1)[1].strip()
            text = f"{rule_weights[i]!r}: {text}"
        rules.append(text)
    predicates: dict[str, Any] = {}
    neural = neural or {}
    for pred in spec.predicates.values():
        if pred.function is not None:
            raise EngineError(
                f"the oracle cannot run functional predicate {pred.name}: the jar needs a Java class for it, and "
                "pslbridge computes it with a Python callable"
            )
        entry: dict[str, Any] = {"types": list(pred.types)}
        if pred.evaluations:
            entry["evaluations"] = [
                {"evaluator": e.evaluator, "options": dict(e.options), "primary": e.primary} for e in pred.evaluations
            ]
        for partition in ("observations", "targets", "truth"):
            rows = []
            for table in spec.tables(pred.name, partition):
                for i, args in enumerate(table.args.tolist()):
                    row = [str(a) for a in args]
                    if table.values is not None and not np.isnan(table.values[i]):
                        row.append(repr(float(table.values[i])))
                    rows.append(row)
            if rows:
                entry[partition] = rows
        if pred.neural is not None:
            entry = {"types": list(pred.types), "observations": _neural_rows(pred, neural, entities, classes)}
        elif spec.is_closed(pred.name) is False and "targets" not in entry:
            entry["force-open"] = True
        predicates[f"{pred.name}/{pred.arity}"] = entry
    opts = {**spec.options, **{k: str(v) for k, v in (options or {}).items()}}
    opts.setdefault("runtime.log.level", "INFO")
    split = "learn" if spec.phase == "learn" else "infer"
    config: dict[str, Any] = {"rules": rules, "predicates": {}, "options": opts}
    for name, entry in predicates.items():
        config["predicates"][name] = {
            k: ({split: v} if k in ("observations", "targets", "truth") else v) for k, v in entry.items()
        }
    return config


def _neural_rows(
    pred: Any,
    neural: Mapping[str, np.ndarray],
    entities: Mapping[str, pd.DataFrame] | None,
    classes: Mapping[str, list[str]] | None,
) -> list[list[str]]:
    """A neural predicate's predictions as observation rows ``[*entity, class, value]``."""
    key = next((k for k in neural if k.upper() == pred.key), None)
    if key is None:
        raise EngineError(f"the oracle needs predictions for neural predicate {pred.name}")
    values = np.asarray(neural[key], dtype=np.float64)
    ents = entities[key] if entities is not None else None
    labels = classes[key] if classes is not None else [str(c) for c in range(values.shape[1])]
    if ents is None:
        raise EngineError(f"the oracle needs the entity rows of neural predicate {pred.name}")
    rows = []
    for r, ent in enumerate(ents.itertuples(index=False)):
        for c, label in enumerate(labels):
            rows.append([*map(str, ent), str(label), repr(float(values[r, c]))])
    return rows


@dataclass
class RuntimeOutput:
    """What PSL's Runtime returned.

    Attributes:
        atoms: DataFrame with ``predicate``, ``arguments`` (tuple), ``value``, ``observed``.
        rules: The rules (learned weights after learning) as PSL reports them.
        objective: The final objective of the last inference, from PSL's log.
        log: PSL's log output.
        evaluations: What the Runtime reported of each declared evaluation (``"<predicate> ... <stats>"``).

    Examples:
        >>> out = RuntimeOutput(pd.DataFrame({"predicate": ["KNOWS"], "arguments": [("a", "b")], "value": [0.5],
        ...                                   "observed": [False]}), [], None, "")
        >>> out.values("Knows", pd.DataFrame({"arg0": ["a"], "arg1": ["b"]}))
        array([0.5])
    """

    atoms: pd.DataFrame
    rules: list[dict[str, Any]]
    objective: float | None
    log: str
    evaluations: list[str] = field(default_factory=list)

    def values(self, predicate: str, order: pd.DataFrame) -> np.ndarray:
        """Inferred values of ``predicate`` in the row order of ``order`` (argument columns)."""
        sub = self.atoms[self.atoms["predicate"].str.upper() == predicate.upper()]
        lookup = dict(zip(sub["arguments"], sub["value"]))
        keys = [tuple(str(v) for v in row) for row in order.itertuples(index=False)]
        missing = [k for k in keys if k not in lookup]
        if missing:
            raise KeyError(f"Runtime returned no value for {predicate}{missing[0]}")
        return np.array([lookup[k] for k in keys], dtype=np.float64)

    def weights(self) -> list[float | None]:
        """Rule weights as the Runtime reports them (None for hard constraints)."""
        return [r.get("weight") for r in sorted(self.rules, key=lambda r: r.get("ruleIndex", 0))]


_CHILD = r"""
import json, sys
from pslbridge import jvm
text, solves = jvm.run_psl_runtime(open(sys.argv[1]).read(), sys.argv[2], psl_defaults=True)
out = json.loads(text)
out["objective"] = solves[-1]["objective"] if solves else None
json.dump(out, open(sys.argv[3], "w"))
"""


def run_runtime(
    spec: ModelSpec,
    neural: Mapping[str, np.ndarray] | None = None,
    *,
    entities: Mapping[str, pd.DataFrame] | None = None,
    classes: Mapping[str, list[str]] | None = None,
    options: Mapping[str, Any] | None = None,
    rule_weights: Mapping[int, float] | None = None,
    timeout: float = 600.0,
) -> RuntimeOutput:
    """Run PSL's own ``Runtime`` on a model in a new Python process and return its answer.

    Args:
        spec: The model (its phase decides inference or learning).
        neural: Predictions per neural predicate (become observations).
        entities: Entity rows per neural predicate (see :meth:`pslbridge.Bridge.entities`).
        classes: Class labels per neural predicate.
        options: Extra PSL options (e.g. ``runtime.learn.method``).
        rule_weights: Replacement weights by rule index.
        timeout: Seconds before the child is killed.

    Returns:
        The Runtime's atoms, rules and final objective.

    Raises:
        EngineError: The child process failed.

    Examples:
        >>> from pslbridge.model import load_model
        >>> out = run_runtime(load_model("pslbridge/examples/simple-acquaintances/simple-acquaintances.json"))
        >>> out.atoms.predicate.unique().tolist(), out.objective > 0
        (['KNOWS'], True)
    """
    config = spec_to_runtime_config(spec, neural, entities, classes, rule_weights, options)
    with tempfile.TemporaryDirectory(prefix="pslbridge-oracle-") as tmp:
        cfg_path = Path(tmp) / "config.json"
        out_path = Path(tmp) / "out.json"
        cfg_path.write_text(json.dumps(config))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parent.parent), env.get("PYTHONPATH", "")])
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, str(cfg_path), tmp, str(out_path)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=tmp,
        )
        if proc.returncode != 0 or not out_path.is_file():
            raise EngineError(f"PSL Runtime oracle failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
        raw = json.loads(out_path.read_text())
    atoms = pd.DataFrame(
        [
            (a["predicate"], tuple(str(x) for x in a["arguments"]), float(a["value"]), bool(a.get("observed")))
            for a in raw.get("atoms") or []
        ],
        columns=["predicate", "arguments", "value", "observed"],
    )
    evaluations = [str(e) for e in raw.get("evaluations") or []]
    return RuntimeOutput(
        atoms, list(raw.get("rules") or []), raw.get("objective"), proc.stdout + proc.stderr, evaluations
    )
