"""``python -m benchmarks [all|resident|steps|build|overhead|accuracy|learning|abduced|accuracy-curve|report]``.

``all`` (what ``make bench`` runs) runs every benchmark, each stage in its own process (its own JVM
and heap), then writes ``report.md`` with the goals, tables and plots under ``--out``
(default ``out/bench``, emptied first). ``--quick`` runs smaller versions of every stage in a few
minutes.

Example:
    >>> main(["no-such-stage"])
    2
    >>> main(["--help"])  # doctest: +ELLIPSIS
    usage: python -m benchmarks {all,resident,steps,...
    0
"""

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from . import abduced, accuracy, accuracy_curve, build_cost, learning, overhead, report, resident, step_time


def _BOTH(problem: str) -> list[str]:  # noqa: N802 - reads as a constant in the tables below
    return ["--trace", problem, "--compiled", problem]


def _COMPILED(problem: str) -> list[str]:  # noqa: N802
    return ["--compiled", problem]


#: pslbridge's step on every Keras backend (each against its own limit, beside the official loop).
_BACKENDS = ["--backends", "tensorflow", "jax", "torch"]

#: The stages of ``all``: (name, arguments, extra environment); full and ``--quick`` versions.
FULL = [
    ("resident", ["--sizes", "1000", "10000", "--repeats", "5", "--runtime-repeats", "2"], {}),
    ("steps", ["--problems", "add1-300", "--steps", "20", "--repeats", "5", *_BOTH("add1-300"), *_BACKENDS], {}),
    ("steps", ["--problems", "add1-3000", "--steps", "20", "--repeats", "3", *_COMPILED("add1-3000"), *_BACKENDS], {}),
    ("steps", ["--problems", "add1-10000", "citeseer", "--steps", "10", "--repeats", "2", *_COMPILED("citeseer")], {}),
    ("accuracy", ["--problem", "add1-300", "--steps", "100", "--seeds", "0", "1", "2"], {}),
    ("build", ["--problems", "add1-1000", "add1-10000", "citeseer", "--repeats", "3"], {}),
    ("overhead", ["--additions", "25", "250", "2500", "25000"], {"PSLBRIDGE_HEAP": "12g"}),
    (
        "learning",
        ["--additions", "1000", "10000", "--steps", "3", "--warm-steps", "100", "--warm-additions", "300"],
        {},
    ),
    ("abduced", ["--places", "44", "--steps", "10"], {}),
    ("accuracy-curve", ["--seed", "7", "--splits", "5"], {}),
]
QUICK = [
    ("resident", ["--sizes", "300", "1000", "--repeats", "3", "--runtime-repeats", "1"], {}),
    ("steps", ["--problems", "add1-300", "--steps", "10", "--repeats", "2", *_BOTH("add1-300"), *_BACKENDS], {}),
    ("steps", ["--problems", "citeseer", "--steps", "5", "--repeats", "1"], {}),
    ("accuracy", ["--problem", "add1-300", "--steps", "30", "--seeds", "0", "1"], {}),
    ("build", ["--problems", "add1-1000", "citeseer", "--repeats", "1"], {}),
    ("overhead", ["--additions", "25", "250", "2500", "--repeats", "3"], {}),
    ("learning", ["--additions", "300", "--steps", "2", "--warm-steps", "20", "--warm-additions", "300"], {}),
    ("abduced", ["--places", "44", "--steps", "3"], {}),
    ("accuracy-curve", ["--quick"], {}),
]
COMMANDS = {
    "resident": resident.main,
    "steps": step_time.main,
    "build": build_cost.main,
    "overhead": overhead.main,
    "accuracy": accuracy.main,
    "learning": learning.main,
    "abduced": abduced.main,
    "accuracy-curve": accuracy_curve.main,
}


def run_all(out: Path, quick: bool, skip: list[str]) -> int:
    """Run every stage in a fresh process, then write the report; returns the number of failed stages."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    failed, timings = [], []
    for name, args, env in QUICK if quick else FULL:
        if name in skip:
            continue
        print(f"== {name} {' '.join(args)}", flush=True)
        start = time.perf_counter()
        code = subprocess.call(
            [sys.executable, "-m", "benchmarks", name, *args, "--out", str(out)],
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **env},
        )
        timings.append(f"{name} {' '.join(args)}: {time.perf_counter() - start:.0f} s")
        if code != 0:
            failed.append(name)
    notes = "Stages and their wall time in this run:\n\n" + "\n".join(f"- `{t}`" for t in timings)
    if failed:
        notes += f"\n\n**Failed stages:** {', '.join(failed)} (their tables are missing)."
    (out / "stages.md").write_text(notes + "\n")
    path = report.write_report(out)
    print(path.read_text())
    return len(failed)


def main(argv: list[str] | None = None) -> int:
    """Dispatch to a benchmark stage; ``--help`` (or nothing) lists the stages and runs none."""
    argv = list(sys.argv[1:] if argv is None else argv)
    usage = f"usage: python -m benchmarks {{{','.join(['all', *COMMANDS, 'report'])}}} [options]"
    if not argv or argv[0] in ("-h", "--help"):
        print(usage)
        print("\nall: every stage, each in its own process, then report.md (what make bench runs; --quick for a")
        print("smaller run); a stage's own options: python -m benchmarks <stage> --help")
        return 0 if argv else 2
    if argv[0] in COMMANDS:
        return COMMANDS[argv[0]](argv[1:])
    if argv and argv[0] == "report":
        parser = argparse.ArgumentParser(prog="python -m benchmarks report")
        parser.add_argument("--out", type=Path, default=Path("out/bench"))
        print(report.write_report(parser.parse_args(argv[1:]).out).read_text())
        return 0
    if argv and argv[0] == "all":
        parser = argparse.ArgumentParser(prog="python -m benchmarks all")
        parser.add_argument("--quick", action="store_true", help="smaller versions of every stage (a few minutes)")
        parser.add_argument("--skip", nargs="*", default=[], choices=sorted(COMMANDS), help="stages to leave out")
        parser.add_argument("--out", type=Path, default=Path("out/bench"))
        args = parser.parse_args(argv[1:])
        return 1 if run_all(args.out, args.quick, args.skip) else 0
    print(usage, file=sys.stderr)
    print(f"error: no benchmark stage {argv[0]!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
