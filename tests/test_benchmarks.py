import csv

import pytest

from conftest import run_python

pytestmark = pytest.mark.subprocess


def test_resident_benchmark_smoke(tmp_path):
    proc = run_python(f"""
        from pslbridge.benchmarks import resident
        resident.run([4], repeats=1, out=__import__("pathlib").Path({str(tmp_path)!r}), runtime_repeats=1)
    """)
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(open(tmp_path / "resident.csv")))
    assert rows[0]["additions"] == "4"
    assert float(rows[0]["runtime_run_s"]) > 0 and float(rows[0]["infer_solve_s"]) > 0
    assert float(rows[0]["latent_iterations"]) > 0
    text = (tmp_path / "resident.md").read_text()
    assert "runtime.run / infer" in text and "learn_step split" in text


def test_official_step_benchmark_smoke(tmp_path):
    pytest.importorskip("pslpython", reason="the official NeuPSL comparison needs the bench extra (pslpython)")
    pytest.importorskip("tensorflow")
    proc = run_python(
        f"""
        from pathlib import Path
        from pslbridge.benchmarks import step_time
        step_time.run(6, steps=1, repeats=1, out=Path({str(tmp_path)!r}))
    """,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = list(csv.DictReader(open(tmp_path / "steps.csv")))[0]
    assert float(row["official_step_s"]) > 0 and float(row["pslbridge_step_s"]) > 0
    assert "official / pslbridge" in (tmp_path / "steps.md").read_text()


def test_overhead_benchmark_smoke(jvm_started):
    from pslbridge.benchmarks.overhead import measure

    row = measure(5, repeats=1)
    assert row["atoms"] > 0 and row["solve_s"] > 0
    assert row["push_gbps"] > 0 and row["numpy_copy_gbps"] > 0 and row["overhead_pct"] > 0
