"""The learning problems the contenders are timed on, rebuilt identically in every process.

A problem is named (``add1-300``, ``add1-3000``, ``add1-10000``, ``citeseer``) and fully determined by
its name and seed, so the parent, pslbridge's worker and the official run build the same program,
features and network.

- ``add1-N``: MNIST-Add1 with N additions (2N training images, the paper's figure rules), LeNet,
  Adam 1e-3, ADMM capped at 500 iterations (the paper's learning setting).
- ``citeseer``: the citation program on Citeseer (split 0: 5 % labelled, the other nodes' labels
  latent), one dense softmax layer on the row-normalised bag of words, Adam 1e-2, ADMM capped at 200.

Example:
    >>> problem = load_problem("add1-30")
    >>> problem.features.shape
    (60, 784)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pslbridge.model import ModelSpec

__all__ = ["Problem", "build_network", "load_problem", "make_network", "network_inputs"]


@dataclass
class Problem:
    """One benchmark learning problem.

    Attributes:
        name: Its name (``add1-300``, ``citeseer``, ...).
        spec: The PSL program (learn phase).
        features: One row per entity of the neural predicate ``Neural``, in entity order.
        network: ``"lenet"`` or ``"dense"``.
        learning_rate: Adam learning rate of the network.
        options: PSL options for learning.
        classes: Output classes of the network.

    Example:
        >>> load_problem("add1-3").network
        'lenet'
    """

    name: str
    spec: ModelSpec
    features: np.ndarray
    network: str
    learning_rate: float
    options: dict[str, str] = field(default_factory=dict)
    classes: int = 10


def load_problem(name: str, seed: int = 0) -> Problem:
    """Build the named problem (deterministic in ``name`` and ``seed``).

    Raises:
        ValueError: Unknown name.
    """
    if name.startswith("add1-"):
        from pslbridge.datasets.mnist import load_mnist
        from pslbridge.examples.mnist_addition import addition_spec, make_additions

        additions = int(name.split("-", 1)[1])
        x_train, y_train, _, _ = load_mnist()
        train = make_additions(y_train, 1, 2 * additions, np.random.default_rng(seed))
        pixels = (x_train[train.image_ids].reshape(len(train.image_ids), -1) / 255.0).astype(np.float32)
        return Problem(name, addition_spec(train), pixels, "lenet", 1e-3, {"admmreasoner.maxiterations": "500"})
    if name in ("citeseer", "cora"):
        from experiments.citation.model import citation_spec, normalise_rows
        from pslbridge.datasets.planetoid import load_planetoid, make_split

        graph = load_planetoid(name)
        split = make_split(graph.labels, seed)
        spec = citation_spec(graph.labels, graph.edges, split, phase="learn")
        return Problem(
            name,
            spec,
            normalise_rows(graph.features),
            "dense",
            1e-2,
            {"admmreasoner.maxiterations": "200"},
            graph.n_classes,
        )
    raise ValueError(f"unknown benchmark problem {name!r}: expected add1-<additions>, citeseer or cora")


def build_network(problem: Problem, seed: int = 0) -> Any:
    """The problem's network, seeded (same initial weights in every process).

    Example:
        >>> build_network(load_problem("add1-3")).count_params()
        44426
    """
    return make_network(problem.network, problem.classes, problem.features.shape[1], problem.learning_rate, seed)


def make_network(kind: str, classes: int, features: int, learning_rate: float, seed: int = 0) -> Any:
    """A seeded ``lenet`` (28x28 images) or ``dense`` (softmax layer with L2 5e-6) network.

    The official run's deep-model server calls this too, so both contenders start from the same weights.

    Example:
        >>> make_network("dense", 3, 5, 0.1).count_params()
        18
    """
    from pslbridge.training import set_seed

    set_seed(seed)
    if kind == "lenet":
        from pslbridge.examples.mnist_addition import lenet

        return lenet(classes, learning_rate)
    from experiments.citation.model import dense_classifier

    return dense_classifier(features, classes, learning_rate, 5e-6)


def network_inputs(problem: Problem, rows: np.ndarray | None = None) -> np.ndarray:
    """The network's input array for ``rows`` of the features (all by default).

    Example:
        >>> network_inputs(load_problem("add1-3")).shape
        (6, 28, 28, 1)
    """
    data = problem.features if rows is None else rows
    if problem.network == "lenet":
        return np.asarray(data, dtype=np.float32).reshape(-1, 28, 28, 1)
    return np.asarray(data, dtype=np.float32)
