"""What a user gets from ``pip install`` of the built wheel, outside the checkout: the library alone, its example
models as package data, and the README's Python blocks running as written, in order, in one interpreter, with the
jar fetched into the user cache.

The fresh environment is a new virtual environment holding only the wheel; its third-party dependencies come from
the test environment's site-packages through a ``.pth`` line (nothing is downloaded at test time, and the test
environment's editable pslbridge stays out of reach: ``.pth`` files of an added folder are not run)."""

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built from a copy of the tracked sources (a stale ``build/`` folder would leak into it)."""
    out = tmp_path_factory.mktemp("wheel")
    source = out / "source"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (path,) = out.glob("pslbridge-*.whl")
    return path


@pytest.fixture(scope="module")
def user_env(wheel, tmp_path_factory) -> dict:
    """A fresh venv with the wheel installed, a home folder of its own and no pslbridge variables."""
    root = tmp_path_factory.mktemp("user")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True, timeout=120)
    python = root / "venv" / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", purelib, str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    Path(purelib, "test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PSLBRIDGE_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(HOME=str(root / "home"), XDG_CACHE_HOME=str(root / "home" / ".cache"))
    work = root / "work"
    work.mkdir()
    return {"python": str(python), "env": env, "cwd": work, "purelib": purelib, "home": root / "home"}


def _run(user_env, *args, timeout=600):
    return subprocess.run(
        [user_env["python"], *args],
        capture_output=True,
        text=True,
        env=user_env["env"],
        cwd=user_env["cwd"],
        timeout=timeout,
    )


def test_the_wheel_holds_the_library_and_its_example_models_only(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert top == {"pslbridge", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}
    assert "pslbridge/examples/rules/mnist-add1.psl" in names and "pslbridge/py.typed" in names
    assert not [n for n in names if "/experiments/" in n or "/benchmarks/" in n]


def test_the_installed_package_is_the_wheel_and_says_how_to_get_the_jar(user_env):
    proc = _run(user_env, "-c", "import pslbridge, pslbridge.jars as j; print(pslbridge.__file__); j.resolve_jar()")
    assert proc.stdout.startswith(user_env["purelib"]), proc.stdout
    assert proc.returncode != 0 and "python -m pslbridge.jars fetch" in proc.stderr, proc.stderr[-2000:]


def test_the_readme_runs_as_written_from_the_installed_wheel(user_env):
    fetched = _run(user_env, "-m", "pslbridge.jars", "fetch", "--jar", str(REPO / "jars" / "psl-runtime-2.4.0.jar"))
    assert fetched.returncode == 0, fetched.stderr[-2000:]
    assert (user_env["home"] / ".cache" / "pslbridge" / "jars" / "psl-runtime-2.4.0.jar").is_file()
    code = "\n".join(re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S))
    proc = _run(user_env, "-c", code)
    assert proc.returncode == 0, proc.stderr[-4000:]
    accuracy = float(re.search(r"held-out accuracy ([\d.]+)", proc.stdout).group(1))
    assert accuracy >= 0.8, proc.stdout  # untrained: ~1/3
    assert (user_env["cwd"] / "nodes.neupsl").is_file()
    assert "ImageSum" not in proc.stderr and "Traceback" not in proc.stderr
