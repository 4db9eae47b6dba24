import csv
import importlib.util
import os
import subprocess
import sys

import pytest

from conftest import REPO, run_python

pytestmark = pytest.mark.subprocess


@pytest.mark.slow
def test_resident_benchmark_smoke(tmp_path):
    proc = run_python(f"""
        from benchmarks import resident
        resident.run([4], repeats=1, out=__import__("pathlib").Path({str(tmp_path)!r}), runtime_repeats=1)
    """)
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(open(tmp_path / "resident.csv")))
    assert rows[0]["additions"] == "4"
    assert float(rows[0]["runtime_run_s"]) > 0 and float(rows[0]["infer_solve_s"]) > 0
    assert float(rows[0]["latent_iterations"]) > 0
    text = (tmp_path / "resident.md").read_text()
    assert "runtime.run / infer" in text and "learn_step split" in text


@pytest.mark.slow
def test_official_step_benchmark_smoke(tmp_path):
    pytest.importorskip("pslpython", reason="the official NeuPSL comparison needs the bench extra (pslpython)")
    pytest.importorskip("tensorflow")
    backends = [b for b in ("tensorflow", "jax", "torch") if importlib.util.find_spec(b)]
    # As `make bench` runs it: from the repository root, nothing on PYTHONPATH (the official loop's deep-model
    # server, started by Java, must still find the benchmarks package).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    command = ["steps", "--problems", "add1-6", "--steps", "1", "--repeats", "1", "--compiled", "add1-6"]
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", *command, "--backends", *backends, "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = list(csv.DictReader(open(tmp_path / "steps.csv")))
    assert [r["official"] for r in rows] == ["official", "official-compiled"]
    for row in rows:
        assert float(row["official_step_s"]) > 0 and float(row["pslbridge_step_s"]) > 0
        # Both contenders load TensorFlow and a JVM: far above 100 MB each.
        assert float(row["official_peak_rss_mb"]) > 100 and float(row["pslbridge_peak_rss_mb"]) > 100
    runs = list(csv.DictReader(open(tmp_path / "steps-runs.csv")))
    ours = {"pslbridge" if b == "tensorflow" else f"pslbridge-{b}" for b in backends}
    assert {r["contender"] for r in runs} == {"official", "official-compiled", *ours}
    assert "official / pslbridge" in (tmp_path / "steps.md").read_text()
    per_backend = list(csv.DictReader(open(tmp_path / "steps-backends.csv")))
    assert [r["backend"] for r in per_backend] == backends
    for row in per_backend:  # each backend's own limit, measured in its own process
        assert 0 < float(row["network_alone_s"]) < float(row["limit_s"]) and float(row["step_over_limit"]) > 0


@pytest.mark.slow
def test_build_cost_and_accuracy_smoke(tmp_path):
    pytest.importorskip("pslpython", reason="the official NeuPSL comparison needs the bench extra (pslpython)")
    pytest.importorskip("tensorflow")
    proc = run_python(
        f"""
        from pathlib import Path
        from benchmarks import accuracy, build_cost, report
        out = Path({str(tmp_path)!r})
        build_cost.run("add1-5", repeats=1, out=out)
        accuracy.run("add1-6", steps=3, seeds=[0], out=out)
        report.write_report(out)
    """,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    build = list(csv.DictReader(open(tmp_path / "build.csv")))[0]
    assert int(build["atoms"]) > 0 and float(build["cli_build_s"]) > 0 and float(build["pslbridge_build_s"]) > 0
    acc = list(csv.DictReader(open(tmp_path / "accuracy.csv")))[0]
    for key in ("official_digit_acc", "pslbridge_digit_acc", "untrained_digit_acc", "same_digit_pct"):
        assert 0 <= float(acc[key]) <= 100
    text = (tmp_path / "report.md").read_text()
    assert "Build (load + ground)" in text and "Equal accuracy" in text


def test_run_tracked_measures_the_childs_peak_memory():
    from benchmarks.processes import run_tracked

    code = "import time; b = bytearray(300 * 2**20); b[::4096] = b'x' * len(b[::4096]); time.sleep(0.5)"
    run = run_tracked([sys.executable, "-c", code])
    assert run.returncode == 0
    assert 300 <= run.peak_rss_mb < 600


def test_report_states_each_goal_from_the_csvs(tmp_path):
    from benchmarks.report import goals

    (tmp_path / "steps.csv").write_text(
        "problem,official,ratio\nadd1-300,official,3.5\nadd1-3000,official,2.5\nadd1-300,official-TRACE,9\n"
    )
    (tmp_path / "build.csv").write_text("problem,ratio\nadd1-1000,0.9\n")
    verdicts = {goal.split(" ")[0]: (verdict, evidence) for goal, verdict, evidence in goals(tmp_path)}
    assert verdicts["pslbridge"] == ("missed", "3.50x on add1-300, 2.50x on add1-3000")
    assert verdicts["Build"][0] == "holds"


def test_report_states_the_abduced_places_goal(tmp_path):
    from benchmarks.report import goals

    def verdict(labelled_s: float, labelled_gap: float) -> tuple[str, str]:
        (tmp_path / "abduced.csv").write_text(
            "places,variant,step_s,energy_gap\n44,latent-capped,0.08,0.1\n"
            f"44,labelled,{labelled_s},{labelled_gap}\n44,latent-exact,0.5,0.0\n"
        )
        found = {goal.split(":")[0]: (v, evidence) for goal, v, evidence in goals(tmp_path)}
        return found["MNIST-Add-N labelled totals"]

    held, evidence = verdict(0.0125, 1e-6)
    assert held == "holds" and evidence.startswith("6.4x at 44 places; energy gap to the exact latent MAP 1.0e-06")
    assert verdict(0.04, 1e-6)[0] == "missed"  # only 2x faster
    assert verdict(0.0125, 0.01)[0] == "missed"  # fast, but not at the MAP state's energy


def test_report_states_the_abduction_round_goal(tmp_path):
    from benchmarks.report import goals

    def verdict(ratio: float) -> tuple[str, str]:
        (tmp_path / "abduced-round.csv").write_text(
            f"places,batches,grounded_s,relabelled_s,ratio\n2000,46,8,1,{ratio}\n"
        )
        found = {goal.split(":")[0]: (v, evidence) for goal, v, evidence in goals(tmp_path)}
        return found["MNIST-Add-N abduction round"]

    assert verdict(31.5) == ("holds", "31.5x at 2000 places")
    assert verdict(4.0)[0] == "missed"


def test_overhead_benchmark_smoke(jvm_started):
    from benchmarks.overhead import measure

    row = measure(5, repeats=1)
    assert row["atoms"] > 0 and row["solve_s"] > 0
    assert row["push_gbps"] > 0 and row["numpy_copy_gbps"] > 0 and row["overhead_pct"] > 0


@pytest.mark.slow
def test_accuracy_curve_smoke(tmp_path):
    """Both contenders train on the same split; every official snapshot and every pslbridge epoch is scored on the
    same test program; the summary and the plot are written and the report states the goal."""
    pytest.importorskip("pslpython", reason="the official NeuPSL comparison needs the bench extra (pslpython)")
    from benchmarks import report

    proc = run_python(
        f"""
        from benchmarks import accuracy_curve
        flags = ["--splits", "1", "--first-split", "1", "--steps", "40", "--every", "20"]
        accuracy_curve.main([*flags, "--out", {str(tmp_path)!r}])
    """,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    points = list(csv.DictReader(open(tmp_path / "accuracy-curve.csv")))
    official = [p for p in points if p["contender"] == "official"]
    ours = [p for p in points if p["contender"] == "pslbridge"]
    assert len(official) >= 3 and len(ours) == 2  # snapshots from 0 every 20 iterations + the final; 2 epochs
    assert all(0 <= float(p["test_sum_acc"]) <= 100 and float(p["seconds"]) >= 0 for p in points)
    assert {p["split"] for p in points} == {"1"}  # --first-split 1: the second split only
    times = [float(p["seconds"]) for p in official]
    assert times == sorted(times) and times[0] < 1.0  # the first snapshot is the untrained network
    assert (tmp_path / "accuracy-curves.png").stat().st_size > 1000
    text = report.write_report(tmp_path).read_text()
    assert "official loop's final MNIST-Add1-300 accuracy" in text
