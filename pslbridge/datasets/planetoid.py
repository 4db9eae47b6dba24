"""Planetoid citation graphs (Cora, Citeseer) from local files, checksum-verified.

Reads the sixteen ``ind.{cora,citeseer}.*`` files (Python 2 pickles of scipy matrices) from
``../shared/data/planetoid`` (relative to the repository root), ``PSLBRIDGE_PLANETOID`` or a folder
you name; never downloads. Splits follow the NeuPSL paper: 5 % of the nodes for training, 5 % for
validation, 1,000 for testing, the rest unlabelled; every class present in the training split.

Example:
    >>> graph = load_planetoid("cora")
    >>> graph.features.shape, graph.n_classes
    ((2708, 1433), 7)
"""

from __future__ import annotations

import hashlib
import os
import pickle
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import DataError

__all__ = ["Graph", "Split", "default_dir", "load_planetoid", "make_split", "propagate_features"]

_REPO = Path(__file__).resolve().parent.parent.parent
_PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")


def default_dir() -> Path:
    """``PSLBRIDGE_PLANETOID`` or ``../shared/data/planetoid`` next to the repository.

    Example:
        >>> default_dir().name
        'planetoid'
    """
    return Path(os.environ.get("PSLBRIDGE_PLANETOID", _REPO.parent / "shared" / "data" / "planetoid"))


@dataclass
class Graph:
    """A citation graph.

    Attributes:
        name: ``cora`` or ``citeseer``.
        features: Dense float32 bag-of-words features, one row per node.
        labels: Class per node (-1 for Citeseer's 15 isolated test rows without a label).
        edges: ``(m, 2)`` directed edges, both directions present, no self-loops.
        test_index: Planetoid's 1,000 test node ids (not used by the random splits).

    Example:
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
    sums = folder / "SHA256SUMS"
    if not sums.is_file():
        raise DataError(f"{sums} is missing; cannot verify the Planetoid files")
    expected = dict(line.split()[::-1] for line in sums.read_text().splitlines() if line.strip())
    for part in _PARTS:
        path = folder / f"ind.{name}.{part}"
        if not path.is_file():
            raise DataError(f"{path} is missing (Planetoid data are read from {folder}; pass --data-dir)")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if expected.get(path.name) != digest:
            raise DataError(f"{path} has SHA-256 {digest}, expected {expected.get(path.name)}")


def load_planetoid(name: str, data_dir: str | Path | None = None) -> Graph:
    """Load Cora or Citeseer (the standard Planetoid assembly, Citeseer's missing test rows padded).

    Raises:
        DataError: Unknown name, missing files or a checksum mismatch.

    Example:
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

    Example:
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

    Example:
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

    Example:
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
