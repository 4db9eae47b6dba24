"""Training checkpoints that cannot execute code: arrays and a JSON manifest in one verified ``.npz`` file.

A checkpoint is a zip of ``.npy`` arrays (read back with ``allow_pickle=False``) and one JSON manifest (format
name, version, the SHA-256 of every array, and the scalar state). Loading checks the zip's CRCs, the format and
version, and every array's checksum, and reports any problem as a :class:`~pslbridge.errors.CheckpointError`
naming the file and what is wrong: a truncated, empty or altered file is never loaded. Writing goes to a
temporary file that is fsynced and renamed into place; the previous checkpoint is kept as ``<name>.prev``
until then, so a crash at any point leaves a complete checkpoint behind. Checkpoints of pslbridge ≤ 0.1 were
pickles; they are refused with a message to re-create them (a pickle from an untrusted place can run code).

Examples:
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "run.ckpt")
    >>> _ = write(path, {"epoch": 3}, {"w": np.arange(3.0)})
    >>> manifest, arrays = read(path)
    >>> manifest["epoch"], arrays["w"].tolist()
    (3, [0.0, 1.0, 2.0])
    >>> _ = open(path, "r+b").truncate(100)
    >>> read(path)
    Traceback (most recent call last):
    ...
    pslbridge.errors.CheckpointError: ...run.ckpt: not a readable checkpoint (truncated or not a zip file: ...)
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .errors import CheckpointError

__all__ = ["FORMAT", "VERSION", "check_path", "previous", "read", "resume_source", "write"]

log = logging.getLogger(__name__)

FORMAT = "pslbridge-checkpoint"
VERSION = 3
_MANIFEST = "manifest.json"


def previous(path: str | Path) -> Path:
    """Where the checkpoint before the last one is kept (``<name>.prev``).

    Examples:
        >>> previous("out/run.ckpt").name
        'run.ckpt.prev'
    """
    path = Path(path)
    return path.with_name(path.name + ".prev")


def resume_source(path: str | Path) -> Path | None:
    """The checkpoint to resume from: ``path``, else ``<name>.prev`` (a crash between two renames), else None.

    Examples:
        >>> resume_source("no/such/run.ckpt") is None
        True
    """
    path = Path(path)
    if path.is_file():
        return path
    prev = previous(path)
    if prev.is_file():
        log.warning("%s is missing but %s exists (a crash while replacing it): resuming from that", path, prev)
        return prev
    return None


def check_path(path: str | Path) -> Path:
    """Check, before any training, that a checkpoint can be written at ``path``.

    Raises:
        CheckpointError: Empty path, a directory, or a folder that cannot be created or written.

    Examples:
        >>> check_path("")
        Traceback (most recent call last):
        ...
        pslbridge.errors.CheckpointError: the checkpoint path is empty; give a file name such as 'run.ckpt'
    """
    if str(path).strip() == "":
        raise CheckpointError("the checkpoint path is empty; give a file name such as 'run.ckpt'")
    path = Path(path)
    if path.is_dir():
        raise CheckpointError("is a directory; give a file name inside it, e.g. run.ckpt", path=path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=path.name + ".", suffix=".probe"):
            pass
    except OSError as exc:
        raise CheckpointError(f"cannot write a checkpoint in {path.parent}: {exc.strerror or exc}", path=path) from exc
    return path


def write(path: str | Path, manifest: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> Path:
    """Write a checkpoint atomically, keeping the previous one as ``<name>.prev``.

    Args:
        path: The checkpoint file.
        manifest: JSON-serialisable scalar state.
        arrays: Named numeric arrays (no object arrays).

    Raises:
        CheckpointError: The folder cannot be written, or an array is not numeric.

    Examples:
        >>> import tempfile
        >>> path = write(Path(tempfile.mkdtemp()) / "ckpt.npz", {"epoch": 3}, {"w": np.arange(3.0)})
        >>> manifest, arrays = read(path)
        >>> manifest["epoch"], arrays["w"].tolist()
        (3, [0.0, 1.0, 2.0])
    """
    path = check_path(path)
    buffers: dict[str, bytes] = {}
    sums: dict[str, str] = {}
    for name, array in arrays.items():
        array = np.asarray(array)
        if array.dtype == object:
            raise CheckpointError(f"array {name!r} has dtype object; checkpoints hold numeric arrays only", path=path)
        raw = io.BytesIO()
        np.save(raw, array, allow_pickle=False)
        buffers[name] = raw.getvalue()
        sums[name] = hashlib.sha256(buffers[name]).hexdigest()
    full = {"format": FORMAT, "version": VERSION, "arrays": sums, **manifest}
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            with zipfile.ZipFile(handle, "w", zipfile.ZIP_STORED) as archive:
                archive.writestr(_MANIFEST, json.dumps(full))
                for name, data in buffers.items():
                    archive.writestr(name + ".npy", data)
            handle.flush()
            os.fsync(handle.fileno())
        if path.exists():
            os.replace(path, previous(path))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    for stale in path.parent.glob(path.name + ".*.tmp"):  # left by a process killed while writing
        stale.unlink(missing_ok=True)
    return path


def read(path: str | Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Read and verify a checkpoint.

    Returns:
        The manifest and the arrays.

    Raises:
        CheckpointError: Missing, truncated, altered, another format or version, or an old pickle checkpoint.

    Examples:
        >>> read("no/such/checkpoint.npz")
        Traceback (most recent call last):
        ...
        pslbridge.errors.CheckpointError: no/such/checkpoint.npz: no checkpoint file here
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CheckpointError("no checkpoint file here", path=path) from None
    except OSError as exc:
        raise CheckpointError(f"cannot read the checkpoint: {exc.strerror or exc}", path=path) from exc
    if data[:1] == b"\x80":
        raise CheckpointError(
            "this is a pickle checkpoint written by pslbridge 0.1; pickles are no longer loaded (one from an "
            "untrusted place can run code): train again to re-create it",
            path=path,
        )
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            bad = archive.testzip()
            if bad is not None:
                raise CheckpointError(f"member {bad!r} fails its CRC check (the file was altered)", path=path)
            manifest = json.loads(archive.read(_MANIFEST))
            _check_manifest(manifest, path)
            arrays = {name: _array(archive, name, digest, path) for name, digest in manifest["arrays"].items()}
    except (zipfile.BadZipFile, EOFError, KeyError, ValueError, OSError) as exc:
        raise CheckpointError(f"not a readable checkpoint (truncated or not a zip file: {exc})", path=path) from exc
    return manifest, arrays


def _check_manifest(manifest: Any, path: Path) -> None:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise CheckpointError(f"not a pslbridge checkpoint (format {manifest.get('format')!r})", path=path)
    if manifest.get("version") != VERSION:
        raise CheckpointError(
            f"checkpoint version {manifest.get('version')} is not {VERSION}: it was written by another pslbridge "
            "version; train again to re-create it",
            path=path,
        )


def _array(archive: zipfile.ZipFile, name: str, digest: str, path: Path) -> np.ndarray:
    data = archive.read(name + ".npy")
    if hashlib.sha256(data).hexdigest() != digest:
        raise CheckpointError(f"checksum mismatch in array {name!r} (the file was altered)", path=path)
    return np.load(io.BytesIO(data), allow_pickle=False)
