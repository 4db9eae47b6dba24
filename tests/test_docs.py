"""The guide's code blocks run as written, in order, each page in a fresh interpreter (a newcomer pasting them
into one session); the README's blocks run from an installed wheel in ``test_wheel.py``."""

import re
import subprocess
import sys

import pytest

from conftest import REPO

GUIDE = sorted((REPO / "docs").rglob("*.md"))
#: Pages whose blocks train a network (the slow tier runs them).
TRAINING = {"keras.md", "backends.md"}
#: Pages whose blocks need optional packages (skipped, with the reason, without them).
NEEDS = {"backends.md": ["jax", "torch"]}


def python_blocks(path) -> list[str]:
    """The ```python blocks of a Markdown file, in order."""
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.S)


def test_the_guide_has_runnable_pages():
    with_code = [p.name for p in GUIDE if python_blocks(p)]
    assert {"models.md", "neural.md", "learning.md", "keras.md", "diagnostics.md"} <= set(with_code)


@pytest.mark.subprocess
@pytest.mark.parametrize(
    "page",
    [
        pytest.param(p, id=p.name, marks=[pytest.mark.slow] if p.name in TRAINING else [])
        for p in GUIDE
        if python_blocks(p)
    ],
)
def test_a_guide_page_runs_in_order_in_one_interpreter(page, tmp_path):
    for package in NEEDS.get(page.name, []):
        pytest.importorskip(package, reason=f"{page.name} needs {package}")
    code = "\n".join(python_blocks(page))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, f"{page.relative_to(REPO)} failed:\n{proc.stderr[-4000:]}"
    assert proc.stdout.strip(), "the page's examples print what they compute"


def test_readme_is_short_and_its_links_resolve():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    links = re.findall(r"\]\(((?:docs|experiments|benchmarks)/[^)#]+)\)", readme)
    assert links and all((REPO / link).is_file() for link in links), [k for k in links if not (REPO / k).is_file()]
