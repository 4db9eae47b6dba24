import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from pslbridge import Bridge

from conftest import MODELS, REPO, run_python

pytestmark = pytest.mark.subprocess
SA = MODELS / "simple-acquaintances"


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "pslbridge", *args], capture_output=True, text=True, cwd=REPO, timeout=300
    )


def test_infer_writes_one_tsv_per_target_like_psl_cli(tmp_path, jvm_started):
    proc = _cli(
        "infer",
        str(SA / "simple-acquaintances.psl"),
        "--data",
        str(SA / "simple-acquaintances.data"),
        "--output",
        str(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["KNOWS.txt"]
    written = pd.read_csv(tmp_path / "KNOWS.txt", sep="\t", header=None, names=["arg0", "arg1", "value"])
    with Bridge(SA / "simple-acquaintances.json") as bridge:
        expected = bridge.infer().to_frame("Knows")
    assert written[["arg0", "arg1"]].values.tolist() == expected[["arg0", "arg1"]].values.tolist()
    np.testing.assert_allclose(written["value"], expected["value"], atol=1e-5)
    assert "objective" in proc.stderr


def test_infer_reports_bad_model_without_traceback(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"rules": ["1: A(X) -> B(X) ^2"], "predicates": {"A/1": {"observations": ["nope.txt"]}}}')
    proc = _cli("infer", str(bad))
    assert proc.returncode == 1  # model, engine and IO errors exit 1; usage errors 2 (argparse)
    assert "error:" in proc.stderr and "nope.txt" in proc.stderr and "Traceback" not in proc.stderr


def test_info_reports_verified_jar_and_java():
    proc = _cli("info")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "checksum OK" in proc.stdout and "psl" in proc.stdout and "2.4.0" in proc.stdout


def test_demo_runs():
    proc = _cli("demo")
    assert proc.returncode == 0, proc.stderr
    assert "most likely acquaintances" in proc.stdout


def test_import_is_light():
    proc = run_python("""
        import sys, pslbridge
        print("jpype" in sys.modules, "pslbridge.bridge" in sys.modules)
    """)
    assert proc.stdout.split() == ["False", "False"], proc.stderr
