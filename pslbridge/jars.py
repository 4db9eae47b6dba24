"""Locating, fetching and verifying the PSL 2.4.0 jar.

Resolution order for the jar that :mod:`pslbridge.jvm` loads:

1. an explicit path (``pslbridge.jvm.configure(jar=...)``),
2. the environment variable ``PSLBRIDGE_JAR``,
3. ``psl-runtime-2.4.0.jar`` in the jar folder: ``PSLBRIDGE_JAR_DIR`` if set, else
   ``jars/`` in pslbridge's user cache (:func:`pslbridge.cache.cache_root`). The repository's
   Makefile points ``PSLBRIDGE_JAR_DIR`` at its own ``jars/`` folder.

Every jar is checked against the SHA-256 pinned in this module (the repository's
``jars/SHA256SUMS`` holds the same value; a test checks they agree) unless the caller opts
out explicitly (``verify=False`` / ``--no-verify``).

Command line (what ``make fetch-jars`` runs)::

    python -m pslbridge.jars fetch [--force] [--jar PATH] [--url URL] [--no-verify]

Examples:
    >>> from pslbridge import jars
    >>> jars.JAR_NAME
    'psl-runtime-2.4.0.jar'
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from .cache import cache_root
from .errors import JarError

__all__ = [
    "JAR_NAME",
    "PINNED_SHA256",
    "PSL_VERSION",
    "PSLPYTHON_WHEEL",
    "default_jar_dir",
    "expected_sha256",
    "fetch",
    "resolve_jar",
    "sha256_of",
    "verify_jar",
]

log = logging.getLogger(__name__)

PSL_VERSION = "2.4.0"
JAR_NAME = f"psl-runtime-{PSL_VERSION}.jar"
#: The PyPI wheel that carries the jar (PSL 2.4.0, all dependencies shaded).
PSLPYTHON_WHEEL = "pslpython==2.4.1"
_JAR_IN_WHEEL = "pslpython/psl-runtime.jar"
#: SHA-256 of every jar pslbridge accepts; a test checks it equals the repository's jars/SHA256SUMS.
PINNED_SHA256 = {JAR_NAME: "ae03cacacda5ea050d6abb014dbfbcd3691229c26260d1e120e81376cf67fc73"}
_FETCH_HINT = "run `python -m pslbridge.jars fetch` (in a checkout: `make fetch-jars`)"


def default_jar_dir() -> Path:
    """Return the folder where the jar is kept.

    Returns:
        ``PSLBRIDGE_JAR_DIR`` if set; else ``<cache_root()>/jars``.

    Examples:
        >>> default_jar_dir().name
        'jars'
    """
    env = os.environ.get("PSLBRIDGE_JAR_DIR")
    if env:
        return Path(env).expanduser()
    return cache_root() / "jars"


def expected_sha256(name: str = JAR_NAME) -> str:
    """Return the pinned SHA-256 for a jar file name.

    The values are pinned in this module (:data:`PINNED_SHA256`).

    Args:
        name: The jar's file name.

    Returns:
        The lower-case hex digest.

    Raises:
        JarError: No checksum is pinned for ``name``.

    Examples:
        >>> len(expected_sha256())
        64
    """
    if name in PINNED_SHA256:
        return PINNED_SHA256[name]
    raise JarError(f"no SHA-256 is pinned for {name!r}; pslbridge accepts {sorted(PINNED_SHA256)}")


def sha256_of(path: Path) -> str:
    """Return the SHA-256 hex digest of a file.

    Args:
        path: The file.

    Returns:
        The lower-case hex digest.

    Examples:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "x"
        >>> _ = p.write_bytes(b"")
        >>> sha256_of(p)[:8]
        'e3b0c442'
    """
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_jar(path: Path, sha256: str | None = None) -> None:
    """Check that ``path`` is the pinned PSL jar.

    Args:
        path: The jar to check.
        sha256: Expected digest; defaults to the pinned one.

    Raises:
        JarError: The file is missing, unreadable or its digest differs.

    Examples:
        >>> verify_jar(Path("/nonexistent.jar"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        pslbridge.errors.JarError: PSL jar not found at /nonexistent.jar: run `python -m pslbridge.jars fetch` ...
    """
    path = Path(path)
    if not path.is_file():
        raise JarError(f"PSL jar not found at {path}: {_FETCH_HINT}")
    expected = (sha256 or expected_sha256()).lower()
    try:
        actual = sha256_of(path)
    except OSError as exc:
        raise JarError(f"cannot read PSL jar {path}: {exc}") from exc
    if actual != expected:
        raise JarError(
            f"PSL jar {path} has SHA-256 {actual}, expected {expected} (PSL {PSL_VERSION}); "
            f"the file is corrupt or another version: delete it and {_FETCH_HINT} with --force"
        )


def resolve_jar(explicit: str | Path | None = None, *, verify: bool = True) -> Path:
    """Find the PSL jar to load.

    Args:
        explicit: A path given by the caller; wins over everything else.
        verify: Check the pinned SHA-256 (opt out only for a jar you trust).

    Returns:
        The jar's absolute path.

    Raises:
        JarError: No jar was found, or it does not match the pinned checksum.

    Examples:
        >>> resolve_jar().name
        'psl-runtime-2.4.0.jar'
    """
    if explicit is not None:
        source, path = "the explicit jar argument", Path(explicit).expanduser()
    elif os.environ.get("PSLBRIDGE_JAR"):
        source, path = "PSLBRIDGE_JAR", Path(os.environ["PSLBRIDGE_JAR"]).expanduser()
    else:
        source, path = "the jar folder", default_jar_dir() / JAR_NAME
    if not path.is_file():
        raise JarError(f"PSL jar not found at {path} (from {source}): {_FETCH_HINT}")
    if verify:
        verify_jar(path)
    return path.resolve()


def _atomic_install(source_stream, target: Path, sha256: str | None) -> Path:
    """Copy a byte stream to ``target`` through a temporary file, verify, rename."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(source_stream, out, 1 << 20)
        if sha256 is not None:
            verify_jar(tmp, sha256)
        os.replace(tmp, target)
    except (Exception, KeyboardInterrupt):
        tmp.unlink(missing_ok=True)
        raise
    return target


def _fetch_from_wheel(target: Path, sha256: str | None) -> Path:
    with tempfile.TemporaryDirectory(prefix="pslbridge-wheel-") as tmpdir:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            PSLPYTHON_WHEEL,
            "-d",
            tmpdir,
        ]
        log.info("downloading %s with pip", PSLPYTHON_WHEEL)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wheels = sorted(Path(tmpdir).glob("pslpython-*.whl"))
        if proc.returncode != 0 or not wheels:
            raise JarError(
                f"`{' '.join(cmd)}` failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}\n"
                "Without PyPI access, put the jar at jars/psl-runtime-2.4.0.jar or pass --jar PATH."
            )
        try:
            with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(_JAR_IN_WHEEL) as stream:
                return _atomic_install(stream, target, sha256)
        except (zipfile.BadZipFile, KeyError) as exc:
            raise JarError(f"{wheels[0].name} does not contain {_JAR_IN_WHEEL}: {exc}") from exc


def _fetch_from_url(url: str, target: Path, sha256: str | None) -> Path:
    import requests

    log.info("downloading %s", url)
    try:
        with requests.get(url, stream=True, timeout=60) as response:
            response.raise_for_status()
            response.raw.decode_content = True
            return _atomic_install(response.raw, target, sha256)
    except requests.RequestException as exc:
        raise JarError(f"download of {url} failed: {exc}") from exc


def fetch(
    *,
    force: bool = False,
    jar: str | Path | None = None,
    url: str | None = None,
    verify: bool = True,
    jar_dir: str | Path | None = None,
) -> Path:
    """Obtain the PSL 2.4.0 jar into the jar folder (idempotent).

    Sources, in order: ``jar`` (a file you already have), ``url`` (for example
    your Maven mirror's ``psl-runtime`` 2.4.0 jar, fetched with ``requests``),
    ``PSLBRIDGE_JAR_URL``, else the PyPI wheel ``pslpython==2.4.1`` through pip.
    The file is written to a temporary name, verified, then renamed into place; a
    partial file is removed on any failure or Ctrl-C.

    Args:
        force: Re-fetch even if a verified jar is already present.
        jar: Copy this existing jar instead of downloading.
        url: Download from this URL instead of PyPI.
        verify: Check the pinned SHA-256 (opting out logs a warning).
        jar_dir: Destination folder (default :func:`default_jar_dir`).

    Returns:
        The installed jar's path.

    Raises:
        JarError: The download failed or the checksum does not match.

    Examples:
        >>> fetch()  # already present and verified: nothing is downloaded
        PosixPath('.../jars/psl-runtime-2.4.0.jar')
    """
    target = Path(jar_dir).expanduser() if jar_dir else default_jar_dir()
    target = target / JAR_NAME
    sha256 = expected_sha256() if verify else None
    if not verify:
        log.warning("checksum verification disabled for %s", target)
    if target.is_file() and not force:
        if sha256 is None or sha256_of(target) == sha256:
            log.info("PSL jar already present: %s", target)
            return target
        raise JarError(f"{target} exists but does not match the pinned SHA-256; rerun with --force to replace it")
    url = url or os.environ.get("PSLBRIDGE_JAR_URL")
    if jar is not None:
        source = Path(jar).expanduser()
        if not source.is_file():
            raise JarError(f"--jar {jar}: no such file")
        with open(source, "rb") as stream:
            return _atomic_install(stream, target, sha256)
    if url:
        return _fetch_from_url(url, target, sha256)
    return _fetch_from_wheel(target, sha256)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: ``python -m pslbridge.jars fetch|verify|path``.

    Examples:
        >>> main(["path"])
        /.../psl-runtime-2.4.0.jar
        0
    """
    parser = argparse.ArgumentParser(prog="python -m pslbridge.jars", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    fetch_p = sub.add_parser("fetch", help="obtain and verify the PSL jar")
    fetch_p.add_argument("--force", action="store_true", help="re-fetch even if present")
    fetch_p.add_argument("--jar", help="use this existing jar file")
    fetch_p.add_argument("--url", help="download the jar from this URL (e.g. a Maven mirror)")
    fetch_p.add_argument("--no-verify", action="store_true", help="skip the SHA-256 check (not advised)")
    fetch_p.add_argument("--dir", help="destination folder")
    sub.add_parser("verify", help="check the installed jar against its pinned checksum")
    sub.add_parser("path", help="print the jar path that would be loaded")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if args.command == "fetch":
            path = fetch(force=args.force, jar=args.jar, url=args.url, verify=not args.no_verify, jar_dir=args.dir)
            print(f"PSL jar ready: {path}")
        elif args.command == "verify":
            path = resolve_jar()
            print(f"OK {path} sha256={sha256_of(path)}")
        else:
            print(resolve_jar(verify=False))
    except JarError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
