"""A program's compiled rules: which are weighted or squared, and their weights (checked, float32).

Examples:
    >>> RuleSet.check_weights(np.array([1.0, 2.5]), ["1: A", "2: B"])
    >>> RuleSet.check_weights(np.array([1e39]), ["1e39: A(X) -> B(X)"])
    Traceback (most recent call last):
    ...
    pslbridge.errors.ConfigurationError: rule weights must be finite, non-negative and at most 3.403e+38 ...
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..engine import datastore, failures
from ..engine.failures import guard
from ..errors import ConfigurationError
from ..model import RuleSpec

__all__ = ["RuleInfo", "RuleSet"]

_FLOAT32_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True)
class RuleInfo:
    """A compiled rule as PSL reads it.

    Attributes:
        text: PSL's rendering of the rule (weights as normalised at build).
        weighted: A soft rule (hard constraints are not).
        squared: A squared hinge (weighted rules only).

    Examples:
        >>> RuleInfo("1.0: A(X) -> B(X) ^2", True, True).weighted
        True
    """

    text: str
    weighted: bool
    squared: bool


class RuleSet:
    """The rules of one program, compiled by PSL's parser.

    Args:
        rules: The model's rules (text and source position for messages).

    Attributes:
        java: The compiled rules in model order.
        info: What each rule is.
        weighted: Indexes of the weighted rules (the order of :attr:`weights`).

    Examples:
        >>> len(program.rules), len(program.rule_weights)  # the hard constraint has no weight
        (6, 5)
    """

    def __init__(self, rules: Sequence[RuleSpec]) -> None:
        self.java = [failures.compile_rule(r.text, r.path, r.line) for r in rules]
        with guard("reading the rules"):
            self.info = [
                RuleInfo(str(r), bool(r.isWeighted()), bool(r.isWeighted()) and bool(r.isSquared())) for r in self.java
            ]
        self.weighted = [i for i, r in enumerate(self.info) if r.weighted]

    def texts(self) -> list[str]:
        """PSL's texts of the weighted rules, in :attr:`weights` order."""
        return [self.info[i].text for i in self.weighted]

    @property
    def weights(self) -> np.ndarray:
        """Weights of the weighted rules in model order (float64 holding PSL's float32 values)."""
        with guard("reading rule weights"):
            return np.array([float(self.java[i].getWeight()) for i in self.weighted], dtype=np.float64)

    @weights.setter
    def weights(self, weights: Any) -> None:
        values = _weight_array(weights, len(self.weighted))
        self.check_weights(values, self.texts())
        with guard("setting rule weights"):
            for i, w in zip(self.weighted, values):
                self.java[i].setWeight(datastore.float32(w))

    @staticmethod
    def check_weights(values: np.ndarray, texts: Sequence[str]) -> None:
        """Every weight finite, non-negative and within float32's range (PSL stores weights as float32).

        Raises:
            ConfigurationError: Naming the first rule at fault.
        """
        bad = [i for i, w in enumerate(values) if not (math.isfinite(w) and 0 <= w <= _FLOAT32_MAX)]
        if bad:
            rule = texts[bad[0]] if bad[0] < len(texts) else "?"
            raise ConfigurationError(
                f"rule weights must be finite, non-negative and at most {_FLOAT32_MAX:.4g} (PSL stores them as "
                f"float32); weight {values[bad[0]]} of rule {rule!r} is not"
            )


def _weight_array(weights: Any, expected: int) -> np.ndarray:
    try:
        values = np.asarray(weights)
    except Exception as exc:  # noqa: BLE001 - anything numpy cannot read
        raise ConfigurationError(f"rule weights must be numbers, got {weights!r}") from exc
    if values.dtype.kind not in "iuf" or values.ndim != 1:
        raise ConfigurationError(
            f"rule weights must be a flat sequence of {expected} numbers, got {values.dtype} with shape {values.shape}"
        )
    if values.shape[0] != expected:
        raise ConfigurationError(f"expected {expected} rule weights, got {values.shape[0]}")
    return values.astype(np.float64)
