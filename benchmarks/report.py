"""One report from the benchmark CSVs: ``report.md`` with every table, the goals and PNG plots.

Reads whatever of ``resident.csv``, ``steps.csv``, ``build.csv``, ``overhead.csv`` and
``accuracy.csv`` exists under the output folder, states for each goal of the benchmark issue whether it
holds (with the measured numbers), and draws ``steps.png``, ``inference.png``, ``overhead.png`` and
``memory.png`` (matplotlib, if installed).

Example:
    >>> import tempfile
    >>> write_report(Path(tempfile.mkdtemp())).read_text().startswith("# ")
    True
"""

from __future__ import annotations

import csv
import os
import platform
import statistics
from pathlib import Path

__all__ = ["goals", "write_report"]


def _rows(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with open(path) as handle:
        return list(csv.DictReader(handle))


def _f(row: dict[str, str], key: str) -> float:
    try:
        return float(row[key])
    except (KeyError, TypeError, ValueError):
        return float("nan")


def goals(out: Path) -> list[tuple[str, str, str]]:
    """``(goal, verdict, evidence)`` for each goal whose measurements exist under ``out``.

    Example:
        >>> goals(Path("/nonexistent"))
        []
    """
    found: list[tuple[str, str, str]] = []
    overhead = _rows(out / "overhead.csv")
    if overhead:
        found += _overhead_goals(overhead)
    steps = [r for r in _rows(out / "steps.csv") if r["official"] == "official"]
    if steps:
        ratios = [(_f(r, "ratio"), r["problem"]) for r in steps]
        found.append(
            (
                "pslbridge ≥ 3x faster per gradient step than official NeuPSL",
                "holds" if min(ratios)[0] >= 3.0 else "missed",
                ", ".join(f"{ratio:.2f}x on {problem}" for ratio, problem in ratios),
            )
        )
    found += _backend_goals(_rows(out / "steps-backends.csv"))
    found += _learning_goals(out)
    found += _abduced_goals(_rows(out / "abduced.csv"))
    found += _round_goals(_rows(out / "abduced-round.csv"))
    resident = _rows(out / "resident.csv")
    if resident:
        ratios = [(_f(r, "ratio_runtime_over_infer"), r["additions"]) for r in resident]
        holds = min(ratio for ratio, _ in ratios) >= 5.0
        found.append(
            _ratio_goal("Repeated inference ≥ 5x faster than runtime.run", holds, ratios, "{:.1f}x at {} additions")
        )
    build = _rows(out / "build.csv")
    if build:
        ratios = [(_f(r, "ratio"), r["problem"]) for r in build]
        holds = max(ratio for ratio, _ in ratios) <= 1.2
        found.append(_ratio_goal("Build (load + ground) ≤ 1.2x the jar's CLI", holds, ratios, "{:.2f}x on {}"))
    accuracy = _rows(out / "accuracy.csv")
    if accuracy:
        diffs = [_f(r, "pslbridge_digit_acc") - _f(r, "official_digit_acc") for r in accuracy]
        spread = max(
            statistics.stdev([_f(r, f"{side}_digit_acc") for r in accuracy]) if len(accuracy) > 1 else 0.0
            for side in ("official", "pslbridge")
        )
        mean_diff = statistics.mean(diffs)
        found.append(
            (
                "Equal accuracy within noise (mean digit-accuracy difference ≤ the seed-to-seed std)",
                "holds" if abs(mean_diff) <= spread else "missed",
                f"pslbridge − official = {mean_diff:+.2f} points over {len(accuracy)} seeds; seed-to-seed std "
                f"{spread:.2f}; same predicted digit on "
                f"{statistics.mean(_f(r, 'same_digit_pct') for r in accuracy):.1f} % of test images",
            )
        )
    return found


def _backend_goals(rows: list[dict[str, str]]) -> list[tuple[str, str, str]]:
    """Each Keras backend's step within 1.05x its limit, and at least 3x faster than the official loop."""
    if not rows:
        return []
    limit = [(_f(r, "step_over_limit"), f"{r['backend']} on {r['problem']}") for r in rows]
    official = [(_f(r, "official_over_step"), f"{r['backend']} on {r['problem']}") for r in rows]
    return [
        _ratio_goal(
            "Each Keras backend's step ≤ 1.05x its limit (its network step alone + learn_step alone)",
            max(ratio for ratio, _ in limit) <= 1.05,
            limit,
            "{:.2f}x ({})",
        ),
        _ratio_goal(
            "Each Keras backend's step ≥ 3x faster than official NeuPSL's",
            min(ratio for ratio, _ in official) >= 3.0,
            official,
            "{:.2f}x ({})",
        ),
    ]


def _abduced_goals(rows: list[dict[str, str]]) -> list[tuple[str, str, str]]:
    """Labelled totals: faster than the capped latent step, at the exact latent MAP state's energy."""
    by = {(r["places"], r["variant"]): r for r in rows}
    sizes = [places for places, variant in by if variant == "labelled" and (places, "latent-capped") in by]
    if not sizes:
        return []
    ratios = [(_f(by[p, "latent-capped"], "step_s") / _f(by[p, "labelled"], "step_s"), p) for p in sizes]
    gaps = [_f(by[p, "labelled"], "energy_gap") for p in sizes]
    holds = min(ratio for ratio, _ in ratios) >= 3.0 and max(gaps) <= 1e-3
    evidence = ", ".join(f"{ratio:.1f}x at {places} places" for ratio, places in ratios) + (
        "; energy gap to the exact latent MAP "
        + ", ".join(
            f"{_f(by[p, 'labelled'], 'energy_gap'):.1e} labelled, {_f(by[p, 'latent-capped'], 'energy_gap'):.1e} capped"
            for p in sizes
        )
    )
    goal = (
        "MNIST-Add-N labelled totals: an abduced step ≥ 3x faster than the 50-iteration latent step, "
        "energy ≤ 1e-3 from the exact MAP"
    )
    return [(goal, "holds" if holds else "missed", evidence)]


def _round_goals(rows: list[dict[str, str]]) -> list[tuple[str, str, str]]:
    """An abduction round's batches: relabelled resident programs against a program grounded per batch."""
    if not rows:
        return []
    ratios = [(_f(r, "ratio"), f"{r['places']} places") for r in rows]
    goal = "MNIST-Add-N abduction round: its batches built relabelled ≥ 10x faster than grounded per batch"
    return [_ratio_goal(goal, min(ratio for ratio, _ in ratios) >= 10.0, ratios, "{:.1f}x at {}")]


def _ratio_goal(goal: str, holds: bool, ratios: list[tuple[float, str]], each: str) -> tuple[str, str, str]:
    """One goal row: its text, "holds"/"missed", and every (ratio, where) pair written with ``each``."""
    return goal, "holds" if holds else "missed", ", ".join(each.format(ratio, where) for ratio, where in ratios)


def _learning_goals(out: Path) -> list[tuple[str, str, str]]:
    """The Keras step against its limit, and time to accuracy against the official loop."""
    found: list[tuple[str, str, str]] = []
    step_limits = [r for r in _rows(out / "steps.csv") if r["official"] == "official" and r.get("step_over_limit")]
    if step_limits:
        ratios = [(_f(r, "step_over_limit"), r["problem"]) for r in step_limits]
        holds = max(ratio for ratio, _ in ratios) <= 1.05
        goal = "Step ≤ 1.05x its limit (network forward+backward alone + PSL learn_step alone)"
        found.append(_ratio_goal(goal, holds, ratios, "{:.2f}x on {}"))
    curve = _rows(out / "accuracy-curve-summary.csv")
    if curve:
        reach = [_f(r, "reach_ratio") for r in curve]
        reached = [r for r in reach if r == r]
        found.append(
            (
                "pslbridge reaches the official loop's final MNIST-Add1-300 accuracy in ≤ 1/3 of its time",
                "holds" if len(reached) == len(reach) and max(reached) <= 1 / 3 else "missed",
                f"reached on {len(reached)} of {len(reach)} splits"
                + (f", at {', '.join(f'{r:.2f}' for r in reached)} of the official time" if reached else "")
                # pslbridge's data augmentation (the official loop has none): 0 is the paper's recipe on both sides
                + f"; pslbridge image shift {', '.join(sorted({r.get('shift') or '0' for r in curve}))}",
            )
        )
    return found


def _overhead_goals(overhead: list[dict[str, str]]) -> list[tuple[str, str, str]]:
    """The two overhead goals from ``overhead.csv``'s rows."""
    found: list[tuple[str, str, str]] = []
    bridge = max(_f(r, "push_read_pct") for r in overhead)
    full = [(_f(r, "overhead_pct"), r["atoms"]) for r in overhead]
    found.append(
        (
            "Bridge overhead (push + read) ≤ 1 % of an ADMM solve at every size",
            "holds" if bridge <= 1.0 else "missed",
            f"worst {bridge:.3f} % over {len(overhead)} sizes "
            f"({overhead[0]['atoms']} to {overhead[-1]['atoms']} atoms)",
        )
    )
    worst = max(full)
    found.append(
        (
            "Overhead including Φ and neural gradients ≤ 1 % of an ADMM solve",
            "holds" if worst[0] <= 1.0 else "missed",
            ", ".join(f"{pct:.2f} % at {atoms} atoms" for pct, atoms in full)
            + (
                "; with frozen rule weights (one objective pass instead of Φ): "
                + ", ".join(f"{_f(r, 'frozen_pct'):.2f} %" for r in overhead)
                if "frozen_pct" in overhead[0]
                else ""
            )
            + " (Φ and gradients are the engine's own passes over the ground terms, which the official loop "
            "runs too; see overhead.md)",
        )
    )
    return found


def _plots(out: Path) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    made = []
    steps = _rows(out / "steps.csv")
    if steps:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        variant = {"official": "paper model", "official-compiled": "compiled", "official-TRACE": "TRACE"}
        labels = [f"{r['problem']}\n{variant.get(r['official'], r['official'])}" for r in steps]
        x = range(len(steps))
        ax.bar([i - 0.2 for i in x], [_f(r, "official_step_s") for r in steps], 0.4, label="official NeuPSL")
        ax.bar([i + 0.2 for i in x], [_f(r, "pslbridge_step_s") for r in steps], 0.4, label="pslbridge")
        ax.set_xticks(list(x), labels, fontsize=7)
        ax.set_yscale("log")
        ax.set_ylabel("seconds per gradient step")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "steps.png", dpi=120)
        plt.close(fig)
        made.append("steps.png")
        fig, ax = plt.subplots(figsize=(8, 3.8))
        official_rss = [_f(r, "official_peak_rss_mb") for r in steps]
        ax.bar([i - 0.2 for i in x], official_rss, 0.4, label="official (java + server)")
        ax.bar([i + 0.2 for i in x], [_f(r, "pslbridge_peak_rss_mb") for r in steps], 0.4, label="pslbridge")
        ax.set_xticks(list(x), labels, fontsize=7)
        ax.set_ylabel("peak RSS (MiB)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "memory.png", dpi=120)
        plt.close(fig)
        made.append("memory.png")
    resident = _rows(out / "resident.csv")
    if resident:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        x = range(len(resident))
        ax.bar([i - 0.2 for i in x], [_f(r, "runtime_run_s") for r in resident], 0.4, label="runtime.run")
        ax.bar([i + 0.2 for i in x], [_f(r, "infer_total_s") for r in resident], 0.4, label="pslbridge infer()")
        ax.set_xticks(list(x), [f"{r['additions']} additions" for r in resident])
        ax.set_yscale("log")
        ax.set_ylabel("seconds per inference")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "inference.png", dpi=120)
        plt.close(fig)
        made.append("inference.png")
    overhead = _rows(out / "overhead.csv")
    if overhead:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        atoms = [_f(r, "atoms") for r in overhead]
        solve = [_f(r, "solve_s") for r in overhead]
        for key, label in (("push_s", "push"), ("read_s", "read"), ("phi_s", "Φ"), ("gradient_s", "gradient")):
            ax.plot(atoms, [100 * _f(r, key) / s for r, s in zip(overhead, solve)], marker="o", label=label)
        ax.axhline(1.0, color="grey", linestyle="--", label="1 % goal")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("ground atoms")
        ax.set_ylabel("% of one ADMM solve")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "overhead.png", dpi=120)
        plt.close(fig)
        made.append("overhead.png")
    return made


def write_report(out: Path, notes: str = "") -> Path:
    """Write ``report.md`` (and the plots) under ``out`` from the CSVs found there.

    ``stages.md`` (what ``all`` ran, with wall times) and ``notes`` go at the top.

    Returns:
        The report's path.
    """
    plots = _plots(out)
    lines = [
        "# pslbridge benchmark report",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}. All contenders ran on it in the same invocation, interleaved.",
        "",
    ]
    if (out / "stages.md").is_file():
        lines += [(out / "stages.md").read_text().strip(), ""]
    if notes:
        lines += [notes, ""]
    found = goals(out)
    if found:
        lines += ["## Goals", "", "| goal | verdict | measured |", "|---|---|---|"]
        lines += [f"| {goal} | **{verdict}** | {evidence} |" for goal, verdict, evidence in found]
        lines.append("")
    sections = [
        ("steps.md", "Per gradient step and per epoch: official NeuPSL vs pslbridge", "steps.png"),
        ("steps-backends.md", "pslbridge's step on each Keras backend, against its limit and the official loop", None),
        ("accuracy.md", "Accuracy after the same steps from the same seeds", None),
        (
            "accuracy-curve.md",
            "Time to accuracy: MNIST-Add1-300 test accuracy against learning time",
            "accuracy-curves.png",
        ),
        ("resident.md", "Repeated inference: resident program vs runtime.run", "inference.png"),
        ("build.md", "Build cost: load + ground, pslbridge vs the jar's CLI", None),
        ("overhead.md", "Bridge overhead against one ADMM solve", "overhead.png"),
        ("abduced.md", "MNIST-Add-N abduced places: labelled totals against the capped latent solve", None),
    ]
    for name, title, plot in sections:
        path = out / name
        if not path.is_file():
            continue
        text = path.read_text().strip()
        if text.startswith("# "):
            text = text.split("\n", 1)[1].strip()
        lines += [f"## {title}", "", text, ""]
        if plot is not None and (plot in plots or (out / plot).is_file()):
            lines += [f"![{title}]({plot})", ""]
        if name == "steps.md" and "memory.png" in plots:
            lines += ["![peak RSS](memory.png)", ""]
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
