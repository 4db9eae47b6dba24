"""Citation networks (Cora, Citeseer): NeuPSL-LP and NeuPSL-LP+FP, and the paper's baselines.

The symbolic model is ``citation.psl`` beside this module; node ids are integers, labels ``0..K-1``.

Example:
    >>> import numpy as np
    >>> from pslbridge.datasets.planetoid import Split
    >>> labels = np.array([0, 1, 0, 1]); edges = np.array([[0, 1], [1, 0], [2, 3], [3, 2]])
    >>> split = Split(np.array([0, 1]), np.array([2]), np.array([3]), np.array([], dtype=int))
    >>> spec = citation_spec(labels, edges, split, phase="infer")
    >>> len(spec.tables("HasCat", "observations")[0]), len(spec.tables("HasCat", "targets")[0])
    (4, 4)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pslbridge.datasets.planetoid import Split
from pslbridge.model import ModelSpec, NeuralSpec, PredicateSpec, RuleSpec, read_rules_file

__all__ = ["CITATION_RULES", "citation_spec", "dense_classifier", "normalise_rows"]

CITATION_RULES = Path(__file__).resolve().parent / "citation.psl"


def normalise_rows(features: np.ndarray) -> np.ndarray:
    """Row-normalise bag-of-words features (rows summing to 1; empty rows stay 0).

    Example:
        >>> normalise_rows(np.array([[1.0, 3.0], [0.0, 0.0]])).tolist()
        [[0.25, 0.75], [0.0, 0.0]]
    """
    total = features.sum(axis=1, keepdims=True)
    return np.divide(features, total, out=np.zeros_like(features), where=total > 0).astype(np.float32)


def citation_spec(
    labels: np.ndarray,
    edges: np.ndarray,
    split: Split,
    *,
    phase: str = "learn",
    neural: bool = True,
    options: dict[str, str] | None = None,
) -> ModelSpec:
    """The citation program for one split.

    Args:
        labels: Class per node.
        edges: Directed edges.
        split: Train/validation/test node ids.
        phase: ``"learn"``: every node's labels are targets and the training labels are truth (the
            rest latent). ``"infer"``: training labels are observations, the other nodes targets.
        neural: Include the neural rule (False gives LP_PSL, the rules alone).
        options: PSL options.
    """
    n_nodes, classes = len(labels), int(labels.max()) + 1
    ints = ["UniqueIntID"]
    rules = read_rules_file(CITATION_RULES)
    if not neural:
        rules = [r for r in rules if "Neural" not in r.text]
    preds = {"HasCat": PredicateSpec("HasCat", 2, ints * 2), "Link": PredicateSpec("Link", 2, ints * 2)}
    targets: dict[str, Any] = {}
    if neural:
        preds["Neural"] = PredicateSpec("Neural", 2, ints * 2, neural=NeuralSpec(classes, [0]))
        targets["Neural"] = np.array([(i, c) for i in range(n_nodes) for c in range(classes)], dtype=np.int64)
    train = set(split.train.tolist())
    onehot = [(i, c, 1.0 if labels[i] == c else 0.0) for i in sorted(train) for c in range(classes)]
    observations: dict[str, Any] = {"Link": edges}
    truth = None
    if phase == "learn":
        targets["HasCat"] = np.array([(i, c) for i in range(n_nodes) for c in range(classes)], dtype=np.int64)
        truth = {"HasCat": onehot}
    else:
        observations["HasCat"] = onehot
        targets["HasCat"] = np.array(
            [(i, c) for i in range(n_nodes) if i not in train for c in range(classes)], dtype=np.int64
        )
    spec = ModelSpec.from_python(
        rules="\n".join(r.text for r in rules),
        predicates=preds,
        observations=observations,
        targets=targets,
        truth=truth,
        options=options,
    )
    spec.rules = [RuleSpec(r.text, r.path, r.line) for r in rules]
    spec.phase = phase
    spec.source = str(CITATION_RULES)
    return spec


def dense_classifier(n_features: int, classes: int, learning_rate: float, l2: float, hidden: int = 0) -> Any:
    """The paper's citation network: a dense softmax layer, optionally after one ReLU hidden layer.

    Every layer's kernel and bias carry the L2 penalty ``l2`` (the paper's "weight regularization"); ``hidden`` is
    the paper's "hidden layer size" (0: none, the paper's final value for every setting).

    Example:
        >>> dense_classifier(10, 3, 0.1, 1e-5).count_params()
        33
        >>> dense_classifier(10, 3, 0.1, 1e-5, hidden=4).count_params()  # 10*4 + 4, then 4*3 + 3
        59
    """
    import keras

    reg = keras.regularizers.L2(l2)
    layers: list[Any] = [keras.Input(shape=(n_features,))]
    if hidden:
        layers.append(keras.layers.Dense(hidden, activation="relu", kernel_regularizer=reg, bias_regularizer=reg))
    layers.append(keras.layers.Dense(classes, activation="softmax", kernel_regularizer=reg, bias_regularizer=reg))
    model = keras.Sequential(layers)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate), loss="sparse_categorical_crossentropy", metrics=["accuracy"]
    )
    return model
