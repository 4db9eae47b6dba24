"""``python -m experiments results-page``: copy each reproduction's ``results.md`` into ``docs/results.md``.

The ``reproduce-*`` targets end with it, so the results page shows what this checkout last measured below the
curated table. Everything after the page's marker line is rewritten; the text above it is left as it is.

Examples:
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> (root / "out" / "citation").mkdir(parents=True)
    >>> _ = (root / "out" / "citation" / "results.md").write_text(chr(10).join(["# Citation results", "", "| a |"]))
    >>> _ = (root / "results.md").write_text(chr(10).join(["# Results", "", MARKER, "old"]))
    >>> page = write_page(root / "out", root / "results.md").splitlines()
    >>> page[2] == MARKER, page[3:6]
    (True, ['## Latest reproduction in this checkout', '', '### Citation results (`out/citation/results.md`)'])
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["MARKER", "main", "write_page"]

MARKER = "<!-- reproduced: the section below is written by `python -m experiments results-page` -->"


def write_page(out: Path, page: Path) -> str:
    """Rewrite the part of ``page`` after :data:`MARKER` from every ``out/*/results.md``; return the new text.

    Raises:
        ValueError: The page has no marker line.
    """
    text = page.read_text()
    if MARKER not in text:
        raise ValueError(f"{page} has no line {MARKER!r}")
    head = text.split(MARKER, 1)[0]
    lines = [MARKER, "## Latest reproduction in this checkout", ""]
    found = sorted(out.glob("*/results.md"))
    for path in found:
        body = path.read_text().strip().splitlines()
        title = body[0].lstrip("# ").strip() if body and body[0].startswith("#") else path.parent.name
        lines += [f"### {title} (`{path.parent.parent.name}/{path.parent.name}/results.md`)", ""]
        lines += ["#" + line if line.startswith("#") else line for line in body[1:]] + [""]
    if not found:
        lines += ["Nothing reproduced yet in this checkout.", ""]
    new = head + "\n".join(lines)
    page.write_text(new)
    return new


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m experiments results-page [--out out] [--page docs/results.md]``."""
    parser = argparse.ArgumentParser(prog="python -m experiments results-page")
    parser.add_argument("--out", type=Path, default=Path("out"), help="folder holding <experiment>/results.md")
    parser.add_argument("--page", type=Path, default=Path("docs/results.md"), help="the results page to update")
    args = parser.parse_args(argv)
    try:
        write_page(args.out, args.page)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{args.page}: {len(list(args.out.glob('*/results.md')))} reproduction table(s)")
    return 0
