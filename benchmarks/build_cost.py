"""Build cost: data load + grounding in pslbridge against the jar's own CLI (``java -jar``) on one config.

The CLI gets the program as a PSL runtime config (data inline, neural values as observations) and
its own log gives the time from its first line (JVM up, log4j ready) to ``Beginning inference``
(data loaded, rules grounded, term store built). pslbridge builds the same program with
``Bridge(spec)`` as the first program of a fresh process (class loading included, as for the CLI),
through :mod:`~benchmarks.worker`. Both use the same JVM heap and GC flags; interleaved,
medians over ``repeats``.

Run: ``python -m benchmarks build --problems add1-1000 add1-10000 citeseer --repeats 3``.
Writes ``build.csv`` and ``build.md``.

Example:
    >>> build_problem("add1-3").phase
    'infer'
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from experiments.arguments import positive_int
from experiments.reporting import append_csv
from pslbridge.model import ModelSpec

__all__ = ["build_problem", "main", "run", "run_cli"]


def build_problem(name: str) -> ModelSpec:
    """The inference program of a named problem (``add1-N`` or ``citeseer``/``cora``).

    Raises:
        ValueError: Unknown name.
    """
    if name.startswith("add1-"):
        from .resident import add1_problem

        additions = int(name.split("-", 1)[1])
        spec = add1_problem(additions, seed=additions)[0]
    elif name in ("citeseer", "cora"):
        from experiments.citation.model import citation_spec
        from pslbridge.datasets.planetoid import load_planetoid, make_split

        graph = load_planetoid(name)
        spec = citation_spec(graph.labels, graph.edges, make_split(graph.labels, 0), phase="infer")
    else:
        raise ValueError(f"unknown build problem {name!r}: expected add1-<additions>, citeseer or cora")
    spec.phase = "infer"
    return spec


def _cli_config(spec: ModelSpec) -> dict[str, Any]:
    """The runtime config of ``spec`` with uniform neural values as observations."""
    from pslbridge.oracle import spec_to_runtime_config

    neural, entities, classes = {}, {}, {}
    for pred in spec.predicates.values():
        if pred.neural is None:
            continue
        args = spec.tables(pred.name, "targets")[0].args
        ents = list(dict.fromkeys(args[:, 0].tolist()))
        labels = list(dict.fromkeys(args[:, -1].tolist()))
        entities[pred.name] = pd.DataFrame({"arg0": ents})
        classes[pred.name] = labels
        neural[pred.name] = np.full((len(ents), len(labels)), 1.0 / len(labels))
    return spec_to_runtime_config(
        spec,
        neural,
        entities,
        classes,
        # The build is timed; one ADMM iteration keeps the inference that follows it short.
        options={
            "runtime.log.level": "INFO",
            "runtime.inference.output.results": "false",
            "admmreasoner.maxiterations": "1",
        },
    )


def run_cli(spec: ModelSpec, timeout: float = 3600.0) -> dict[str, float]:
    """Run the jar's CLI on ``spec``; return its load, ground and build seconds from its log."""
    from .official import run_jar

    marks = {"first": "PSL Runtime Version", "ground": "Grounding out model", "done": "Beginning inference"}
    with tempfile.TemporaryDirectory(prefix="pslbridge-cli-") as tmp:
        config = Path(tmp) / "config.json"
        config.write_text(json.dumps(_cli_config(spec)))
        _, stamps = run_jar(config, marks, what="the jar's CLI", timeout=timeout)
    return {
        "cli_load_s": stamps["ground"] - stamps["first"],
        "cli_ground_s": stamps["done"] - stamps["ground"],
        "cli_build_s": stamps["done"] - stamps["first"],
        "cli_to_first_log_s": stamps["first"],
    }


def run(problem: str, repeats: int, out: Path) -> dict[str, Any]:
    """Interleave the CLI and pslbridge ``repeats`` times; append the medians to ``build.csv``."""
    from .step_time import run_worker

    spec = build_problem(problem)
    cli, ours = [], []
    for _ in range(repeats):
        cli.append(run_cli(spec))
        ours.append(run_worker({"task": "build", "problem": problem}))
    row: dict[str, Any] = {"problem": problem, "repeats": repeats, "atoms": ours[0]["atoms"], "terms": ours[0]["terms"]}
    for key in cli[0]:
        row[key] = statistics.median(r[key] for r in cli)
    for key in ("jvm_s", "build_s", "build_load_s", "build_ground_s"):
        if key in ours[0]:
            row[f"pslbridge_{key}"] = statistics.median(r[key] for r in ours)
    row["ratio"] = row["pslbridge_build_s"] / row["cli_build_s"]
    append_csv(out / "build.csv", row, list(row))
    print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
    write_table(out)
    return row


def write_table(out: Path) -> str:
    """Summarise ``build.csv`` into ``build.md``."""
    import csv

    with open(out / "build.csv") as handle:
        rows = list(csv.DictReader(handle))
    lines = [
        "| problem | atoms | terms | CLI load s | CLI ground s | CLI build s | pslbridge build s | pslbridge / CLI |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['problem']} | {r['atoms']} | {r['terms']} | {float(r['cli_load_s']):.2f} | "
            f"{float(r['cli_ground_s']):.2f} | {float(r['cli_build_s']):.2f} | {float(r['pslbridge_build_s']):.2f} | "
            f"{float(r['ratio']):.2f}x |"
        )
    text = "\n".join(lines) + "\n"
    (out / "build.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks build")
    parser.add_argument("--problems", nargs="+", default=["add1-1000", "add1-10000", "citeseer"])
    parser.add_argument("--repeats", type=positive_int, default=3)
    parser.add_argument("--out", type=Path, default=Path("out/bench"))
    args = parser.parse_args(argv)
    for problem in args.problems:
        run(problem, args.repeats, args.out)
    print((args.out / "build.md").read_text())
    return 0
