"""Planetoid citation graphs (Cora, Citeseer), fetched once and checksum-verified.

Reads the sixteen ``ind.{cora,citeseer}.*`` files (Python 2 pickles of scipy matrices; Yang, Cohen and
Salakhutdinov, ICML 2016, built from the LINQS data of Sen et al. 2008) from a folder you name,
``PSLBRIDGE_PLANETOID``, or ``planetoid/`` in the data cache (:func:`pslbridge.cache.data_dir`).
``python -m pslbridge.datasets.planetoid fetch`` fills the cache from the public Planetoid repository
(:data:`SOURCE_URL`) or from a local copy (``--source DIR``); loading never downloads. Every file is checked
against the SHA-256 pinned here. Splits follow the NeuPSL paper: 5 % of the nodes for training, 5 % for
validation, 1,000 for testing, the rest unlabelled; every class present in the training split.

Examples:
    >>> graph = load_planetoid("cora")
    >>> graph.features.shape, graph.n_classes
    ((2708, 1433), 7)
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pickle
import shutil
import sys
import tempfile
import urllib.request
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..cache import data_dir
from ..errors import DataError

__all__ = [
    "SHA256",
    "SOURCE_URL",
    "Graph",
    "Split",
    "default_dir",
    "fetch",
    "load_planetoid",
    "make_split",
    "propagate_features",
]

_PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")
#: Where ``fetch`` downloads from (the Planetoid authors' repository; tkipf/gcn holds identical copies).
SOURCE_URL = "https://raw.githubusercontent.com/kimiyoung/planetoid/master/data/"
#: SHA-256 of each of the sixteen files.
SHA256 = {
    "ind.citeseer.allx": "2ac30345d95c9ec933a817ee0bdd6a5f077f8c184a20e696910192d534414668",
    "ind.citeseer.ally": "f704b2d986dde6c2669934de1f3ae5696a6cf9455c0f6b2646a2d135ea0a1c95",
    "ind.citeseer.graph": "d79a4ef9d3e7169aee8946145f6b7306e35bc79bffad26346cfb94e10e9912a7",
    "ind.citeseer.test.index": "2af990671580b6b2df5d158d1038f8292e30c9cd821b5453f399659b25b723d4",
    "ind.citeseer.tx": "539a8906a2da97628d212f2fdd668c109a8b3f0d36574b59e5d3fd5b5303da21",
    "ind.citeseer.ty": "55e5bd1ba1e733a04598753ad1a8d57957f4b8f89e74519f41f4f4938767e4ce",
    "ind.citeseer.x": "d20de19150741e555de0ed037195630fc194114ebc7fd72ced62810148aa22f6",
    "ind.citeseer.y": "8ba87e515d8e3ee3cf52f6d2c5b86aa73f11ecad825a808455209ec26cd54924",
    "ind.cora.allx": "9419ba2f26f5c35243db64aba110e0f35a04851609e0dc5433450676ca6b8543",
    "ind.cora.ally": "2b998f5cc7fedc86e7f97ca2498f47a1ffc1462c29e2d578b23bf3f62b6e7d71",
    "ind.cora.graph": "58f13302f39dde8852dad6fe6d15b89b077b6d7f837626bce671ef80344b383d",
    "ind.cora.test.index": "297ce89af2b51a6a194181c7dbe1796c6a1cf9cd9349a88383b1b1e227867875",
    "ind.cora.tx": "b9afbaa4a400df991f6f02ef677e1e44da55ffc04801fd02f9e673987829226a",
    "ind.cora.ty": "41f5ac76596a1699cc33f53084a2419e92961c42bb75f36fc38e616d348532ad",
    "ind.cora.x": "23cfa55d91c6f624233f5eb7b6e3f141f1bd2b2ae39608a63cf5d084bb27baab",
    "ind.cora.y": "94465c14eb53e04ca262198dcbb2521ee8af60fb3f3d546cd6ca24a511b0e7d1",
}


def default_dir() -> Path:
    """Return ``PSLBRIDGE_PLANETOID`` if set, else ``planetoid/`` in the data cache.

    Examples:
        >>> default_dir().name
        'planetoid'
    """
    explicit = os.environ.get("PSLBRIDGE_PLANETOID")
    return Path(explicit).expanduser() if explicit else data_dir() / "planetoid"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch(folder: str | Path | None = None, source: str | Path | None = None) -> Path:
    """Fill ``folder`` with the sixteen Planetoid files, verified (files already there and valid are kept).

    Each file is written to a temporary name and renamed into place once its checksum matches, so an
    interrupted fetch leaves no partial file.

    Args:
        folder: Destination (default :func:`default_dir`).
        source: A local folder holding the files, or a base URL (default :data:`SOURCE_URL`).

    Returns:
        The folder.

    Raises:
        DataError: A download failed or a file's checksum differs (the bad file is not kept).

    Examples:
        >>> import tempfile
        >>> out = fetch(tempfile.mkdtemp(), source=default_dir())  # from a local copy
        >>> sorted(p.name for p in out.iterdir()) == sorted(SHA256)
        True
    """
    target = Path(folder).expanduser() if folder is not None else default_dir()
    target.mkdir(parents=True, exist_ok=True)
    base = str(source if source is not None else SOURCE_URL)
    local = source is not None and Path(source).is_dir()
    for name, expected in SHA256.items():
        path = target / name
        if path.is_file() and _digest(path) == expected:
            continue
        handle, partial_name = tempfile.mkstemp(prefix=f".{name}.", dir=target)
        os.close(handle)
        partial = Path(partial_name)
        try:
            if local:
                shutil.copyfile(Path(base) / name, partial)
            else:
                with urllib.request.urlopen(base.rstrip("/") + "/" + name, timeout=60) as response:
                    partial.write_bytes(response.read())
            digest = _digest(partial)
            if digest != expected:
                raise DataError(f"{name} from {base} has SHA-256 {digest}, expected {expected}")
            os.replace(partial, path)
        except OSError as exc:
            raise DataError(f"could not fetch {name} from {base}: {exc}") from exc
        finally:
            partial.unlink(missing_ok=True)
    return target


@dataclass
class Graph:
    """A citation graph.

    Attributes:
        name: ``cora`` or ``citeseer``.
        features: Dense float32 bag-of-words features, one row per node.
        labels: Class per node (-1 for Citeseer's 15 isolated test rows without a label).
        edges: ``(m, 2)`` directed edges, both directions present, no self-loops.
        test_index: Planetoid's 1,000 test node ids (not used by the random splits).

    Examples:
        >>> g = load_planetoid("cora")
        >>> g.n_nodes, g.n_classes, g.features.shape[1]
        (2708, 7, 1433)
    """

    name: str
    features: np.ndarray
    labels: np.ndarray
    edges: np.ndarray
    test_index: np.ndarray

    @property
    def n_nodes(self) -> int:
        """Number of nodes."""
        return int(self.labels.shape[0])

    @property
    def n_classes(self) -> int:
        """Number of classes."""
        return int(self.labels.max()) + 1


def _verify(folder: Path, name: str) -> None:
    for part in _PARTS:
        path = folder / f"ind.{name}.{part}"
        if not path.is_file():
            raise DataError(
                f"{path} is missing: run `python -m pslbridge.datasets.planetoid fetch` (or set "
                "PSLBRIDGE_PLANETOID to a folder holding the Planetoid files)"
            )
        digest = _digest(path)
        if SHA256[path.name] != digest:
            raise DataError(f"{path} has SHA-256 {digest}, expected {SHA256[path.name]}")


def load_planetoid(name: str, data_dir: str | Path | None = None) -> Graph:
    """Load Cora or Citeseer (the standard Planetoid assembly, Citeseer's missing test rows padded).

    Raises:
        DataError: Unknown name, missing files or a checksum mismatch.

    Examples:
        >>> load_planetoid("citeseer").n_nodes
        3327
        >>> load_planetoid("pubmed")
        Traceback (most recent call last):
        ...
        pslbridge.errors.DataError: unknown data set 'pubmed'; choose cora or citeseer
    """
    name = name.lower()
    if name not in ("cora", "citeseer"):
        raise DataError(f"unknown data set {name!r}; choose cora or citeseer")
    folder = Path(data_dir) if data_dir is not None else default_dir()
    _verify(folder, name)
    objects = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for part in ("x", "y", "tx", "ty", "allx", "ally", "graph"):
            with open(folder / f"ind.{name}.{part}", "rb") as handle:
                objects[part] = pickle.load(handle, encoding="latin1")
    test_index = np.array([int(v) for v in (folder / f"ind.{name}.test.index").read_text().split()])
    order = np.sort(test_index)
    tx, ty = objects["tx"].toarray(), np.asarray(objects["ty"])
    n_nodes = len(objects["graph"])
    if name == "citeseer":  # isolated test nodes are absent from tx/ty: pad them with zeros
        full = np.arange(order.min(), order.max() + 1)
        tx_full = np.zeros((len(full), tx.shape[1]), dtype=tx.dtype)
        ty_full = np.zeros((len(full), ty.shape[1]), dtype=ty.dtype)
        tx_full[order - order.min()] = tx
        ty_full[order - order.min()] = ty
        tx, ty = tx_full, ty_full
    features = np.vstack([objects["allx"].toarray(), tx]).astype(np.float32)
    onehot = np.vstack([np.asarray(objects["ally"]), ty])
    features[test_index] = features[order]
    onehot[test_index] = onehot[order]
    labels = np.where(onehot.sum(axis=1) > 0, onehot.argmax(axis=1), -1).astype(np.int64)
    edges = {(int(a), int(b)) for a, nbrs in objects["graph"].items() for b in nbrs if int(a) != int(b)}
    edges |= {(b, a) for a, b in edges}
    edge_array = np.array(sorted(edges), dtype=np.int64)
    assert features.shape[0] == n_nodes == labels.shape[0]
    return Graph(name, features, labels, edge_array, test_index)


@dataclass
class Split:
    """Node ids of one split.

    Examples:
        >>> s = make_split(np.arange(2000) % 5, seed=0)
        >>> len(s.train), len(s.val), len(s.test)
        (100, 100, 1000)
    """

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    unlabelled: np.ndarray


def make_split(
    labels: np.ndarray,
    seed: int,
    train_fraction: float = 0.05,
    val_fraction: float = 0.05,
    n_test: int = 1000,
    max_tries: int = 1000,
) -> Split:
    """Random split (paper): 5 % train, 5 % validation, 1,000 test, the rest unlabelled.

    Nodes without a label are never drawn; the draw repeats until every class is in the training split.

    Examples:
        >>> s = make_split(np.arange(3000) % 7, seed=1)
        >>> len(s.train), len(s.test), set(s.train) & set(s.test)
        (150, 1000, set())
    """
    rng = np.random.default_rng(seed)
    n = len(labels)
    pool = np.flatnonzero(labels >= 0)
    n_train, n_val = int(round(train_fraction * n)), int(round(val_fraction * n))
    classes = np.unique(labels[pool])
    for _ in range(max_tries):
        perm = rng.permutation(pool)
        train = np.sort(perm[:n_train])
        if np.array_equal(np.unique(labels[train]), classes):
            val = np.sort(perm[n_train : n_train + n_val])
            test = np.sort(perm[n_train + n_val : n_train + n_val + n_test])
            rest = np.setdiff1d(np.arange(n), np.concatenate([train, val, test]))
            return Split(train, val, test, rest)
    raise DataError("could not draw a training split containing every class")


def propagate_features(features: np.ndarray, edges: np.ndarray, hops: int = 2) -> np.ndarray:
    """Simplified-graph-convolution features: ``S^hops X`` with ``S = D^-1/2 (A + I) D^-1/2``.

    Examples:
        >>> propagate_features(np.eye(2, dtype=np.float32), np.array([[0, 1], [1, 0]]), 1).round(2).tolist()
        [[0.5, 0.5], [0.5, 0.5]]
    """
    import scipy.sparse as sp

    n = features.shape[0]
    adjacency = sp.coo_matrix((np.ones(len(edges), dtype=np.float64), (edges[:, 0], edges[:, 1])), shape=(n, n))
    adjacency = ((adjacency + adjacency.T) > 0).astype(np.float64) + sp.eye(n)
    degree = np.asarray(adjacency.sum(axis=1)).ravel()
    scale = sp.diags(1.0 / np.sqrt(degree))
    s = (scale @ adjacency @ scale).tocsr()
    out = np.asarray(features, dtype=np.float64)
    for _ in range(hops):
        out = s @ out
    return out.astype(np.float32)


def main(argv: list[str] | None = None) -> int:
    """``python -m pslbridge.datasets.planetoid fetch [--source DIR_OR_URL] [--out DIR]``.

    Examples:
        >>> import tempfile
        >>> main(["fetch", "--source", str(default_dir()), "--out", tempfile.mkdtemp()])
        Planetoid ready: ...
        0
    """
    parser = argparse.ArgumentParser(prog="python -m pslbridge.datasets.planetoid")
    sub = parser.add_subparsers(dest="command", required=True)
    fetch_p = sub.add_parser("fetch", help="fetch and verify the sixteen Cora/Citeseer files")
    fetch_p.add_argument("--source", help=f"a local folder or a base URL (default {SOURCE_URL})")
    fetch_p.add_argument("--out", type=Path, help="destination folder (default: PSLBRIDGE_PLANETOID or the cache)")
    args = parser.parse_args(argv)
    try:
        print(f"Planetoid ready: {fetch(args.out, args.source)}")
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
