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
