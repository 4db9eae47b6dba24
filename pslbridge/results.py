"""What :meth:`pslbridge.Bridge.infer` and :meth:`pslbridge.Bridge.learn_step` return.

Examples:
    >>> r = InferenceResult({"Label": np.array([0.2, 0.7, 0.6, 0.1])}, 0.5, 0, 10, {},
    ...     {"Label": pd.DataFrame({"arg0": ["a", "a", "b", "b"], "arg1": ["x", "y", "x", "y"]})})
    >>> r.to_frame("Label").value.round(1).tolist()
    [0.2, 0.7, 0.6, 0.1]
    >>> r.argmax("Label")
      arg0 arg1  value
    0    a    y    0.7
    1    b    x    0.6
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .errors import ConfigurationError

__all__ = ["InferenceResult", "LearnResult", "find_key", "java_float_text", "psl_tsv"]


def find_key(mapping: Mapping[str, Any], predicate: str) -> str:
    """The key of ``mapping`` that names ``predicate`` (PSL names are case-insensitive).

    Raises:
        KeyError: No such predicate.

    Examples:
        >>> find_key({"Knows": 1}, "KNOWS")
        'Knows'
    """
    for key in mapping:
        if key.upper() == predicate.upper():
            return key
    raise KeyError(f"no predicate {predicate!r}; have {list(mapping)}")


def java_float_text(value: float) -> str:
    """A float32 written as Java's ``Float.toString`` writes it (how PSL's CLI writes atom values).

    Examples:
        >>> [java_float_text(v) for v in (1.0, 1 / 3, 1e-4, 12345678.0)]
        ['1.0', '0.33333334', '1.0E-4', '1.2345678E7']
    """
    f = np.float32(value)
    if f == 0:
        return "-0.0" if np.signbit(f) else "0.0"
    if 1e-3 <= abs(float(f)) < 1e7:
        text = np.format_float_positional(f, unique=True, trim="-")
        return text if "." in text else text + ".0"
    mantissa, exponent = np.format_float_scientific(f, unique=True, trim="-", exp_digits=1).split("e")
    return f"{mantissa if '.' in mantissa else mantissa + '.0'}E{int(exponent)}"


def psl_tsv(frame: pd.DataFrame, values: np.ndarray, order: np.ndarray | None = None) -> str:
    r"""Rows as PSL's CLI writes a predicate's file: raw arguments (``\`` and ``'`` escaped), TAB, the value.

    Args:
        frame: Argument columns.
        values: The values, aligned with ``frame``.
        order: Row order (PSL writes atoms in its atom-store order); default: as given.

    Examples:
        >>> print(psl_tsv(pd.DataFrame({"arg0": ['"D"', "o'k"]}), np.array([0.5, 1.0])), end="")
        "D" 0.5
        o\'k 1.0
    """
    rows = range(len(frame)) if order is None else order
    args = frame.to_numpy(dtype=object)
    lines = []
    for i in rows:
        raw = [str(a).replace("\\", "\\\\").replace("'", "\\'") for a in args[i]]
        lines.append("\t".join([*raw, java_float_text(values[i])]) + "\n")
    return "".join(lines)


@dataclass
class InferenceResult:
    """The MAP state of the target predicates after :meth:`pslbridge.Bridge.infer`.

    Attributes:
        values: Inferred values per target predicate (float32, in :meth:`pslbridge.Bridge.atoms` row order).
        objective: The weighted objective at the MAP state.
        violated_constraints: Hard-constraint ground rules violated at the MAP state.
        iterations: Reasoner iterations (None if PSL did not report them).
        timings: Seconds spent in ``push``, ``solve`` and ``read``.

    Examples:
        >>> r = InferenceResult({"Knows": np.array([0.25, 0.75])}, 1.5, 0, 12, {"solve": 0.01})
        >>> r["knows"], r.objective
        (array([0.25, 0.75]), 1.5)
    """

    values: dict[str, np.ndarray]
    objective: float
    violated_constraints: int
    iterations: int | None
    timings: dict[str, float]
    frames: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)

    def __getitem__(self, predicate: str) -> np.ndarray:
        return self.values[find_key(self.values, predicate)]

    def to_frame(self, predicate: str) -> pd.DataFrame:
        """The atoms' arguments (``arg0 ..``) and their inferred ``value``.

        Examples:
            >>> frames = {"A": pd.DataFrame({"arg0": ["x"]})}
            >>> InferenceResult({"A": np.array([0.5])}, 0.0, 0, 1, {}, frames).to_frame("a")
              arg0  value
            0    x    0.5
        """
        key = find_key(self.values, predicate)
        frame = self.frames[key].copy()
        frame["value"] = self.values[key]
        return frame

    def argmax(self, predicate: str) -> pd.DataFrame:
        """For each setting of all arguments but the last, the row with the largest value (ties: first row).

        For a categorical predicate such as ``Sum(Img1, Img2, Z)`` this is the predicted class per entity,
        one row per entity in first-seen order.

        Examples:
            >>> InferenceResult({"S": np.array([0.1, 0.9])}, 0.0, 0, 1, {},
            ...                 {"S": pd.DataFrame({"arg0": ["a", "a"], "arg1": ["1", "2"]})}).argmax("S")
              arg0 arg1  value
            0    a    2    0.9
        """
        frame = self.to_frame(predicate)
        keys = list(frame.columns[:-2])
        if not keys:
            return frame.loc[[frame["value"].idxmax()]].reset_index(drop=True)
        best = frame.loc[frame.groupby(keys, sort=False)["value"].idxmax()]
        return best.reset_index(drop=True)

    def matrix(self, predicate: str) -> tuple[pd.DataFrame, list[str], np.ndarray]:
        """A categorical predicate's values as a dense (entities × classes) matrix.

        Returns:
            The entity rows (all arguments but the last, first-seen order), the class labels (last argument,
            first-seen order) and the float32 matrix (NaN where an atom is absent).

        Raises:
            ConfigurationError: The predicate has one argument (no entity and class to make a matrix of).

        Examples:
            >>> r = InferenceResult({"S": np.array([0.1, 0.9, 0.4])}, 0.0, 0, 1, {},
            ...     {"S": pd.DataFrame({"arg0": ["a", "a", "b"], "arg1": ["1", "2", "1"]})})
            >>> entities, classes, m = r.matrix("S")
            >>> classes, m.astype(float).round(2).tolist()
            (['1', '2'], [[0.1, 0.9], [0.4, nan]])
        """
        frame = self.to_frame(predicate)
        keys, last = list(frame.columns[:-2]), frame.columns[-2]
        if not keys:
            raise ConfigurationError(
                f"matrix({predicate!r}): a matrix needs an entity and a class argument, and {predicate} has one "
                f"argument; use to_frame({predicate!r})"
            )
        entities = frame[keys].drop_duplicates().reset_index(drop=True)
        classes = list(dict.fromkeys(frame[last].astype(str)))
        rows = pd.MultiIndex.from_frame(entities) if len(keys) > 1 else pd.Index(entities[keys[0]])
        row_of = {k: i for i, k in enumerate(rows)}
        col_of = {c: j for j, c in enumerate(classes)}
        out = np.full((len(entities), len(classes)), np.nan, dtype=np.float32)
        row_keys = list(frame[keys].itertuples(index=False, name=None)) if len(keys) > 1 else frame[keys[0]].tolist()
        out[[row_of[k] for k in row_keys], [col_of[c] for c in frame[last].astype(str)]] = frame["value"].to_numpy()
        return entities, classes, out


@dataclass
class LearnResult:
    """What :meth:`pslbridge.Bridge.learn_step` returns.

    Attributes:
        loss: The learning loss at the state the step started from (see :mod:`pslbridge.losses`).
        energy: ``Σ_r w_r Φ_r`` at (labels, latent MAP) for the energy-based losses; the energy difference
            between the augmented and the MAP problem for the bilevel ones.
        rule_potentials: ``∂loss/∂w`` per weighted rule, model order (float64); None when not computed
            (``potentials=False``).
        neural_gradients: ``∂loss/∂prediction`` per neural predicate, shaped like the predictions.
        rule_weights: Weights after the step (unchanged when no optimizer was given).
        iterations: Reasoner iterations per solve of the step (``latent``, ``map``, ``augmented``).
        timings: Seconds per phase.
        latent_atoms: Target atoms without a label (solved for); ``labelled_atoms`` are fixed.
        labelled_atoms: Target atoms with a label.
        exact_gradient: False when a hard constraint contains a neural atom: the engine's gradient skips
            constraint terms, so the neural gradient then ignores them.
        details: Loss-specific values (penalty coefficients, supervised loss, ...).

    Examples:
        >>> from pslbridge.examples.mnist_addition import add1_spec
        >>> with Bridge(add1_spec([(0, 1)], sums=[3], phase="learn")) as b:
        ...     step = b.learn_step({"Neural": np.full((2, 10), 0.1)})
        >>> step.neural_gradients["Neural"].shape, step.labelled_atoms, step.loss >= 0
        ((2, 10), 19, True)
    """

    loss: float
    energy: float
    rule_potentials: np.ndarray | None
    neural_gradients: dict[str, np.ndarray]
    rule_weights: np.ndarray
    iterations: dict[str, int | None]
    timings: dict[str, float]
    latent_atoms: int
    labelled_atoms: int
    exact_gradient: bool = True
    details: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_step(
        cls, program: Any, out: Any, weights: np.ndarray, timings: dict[str, float], exact: bool = True
    ) -> LearnResult:
        """The result of a loss step (a :class:`pslbridge.losses.LossOutput`) on a program.

        The neural gradients are ``out.atom_gradient`` at each neural block's atoms (timed as ``read``).

        Examples:
            >>> from pslbridge.losses import LossOutput
            >>> out = LossOutput(0.5, 0.5, None, np.zeros(program.atom_count))
            >>> LearnResult.from_step(program, out, program.rule_weights, {}).labelled_atoms
            40
        """
        t = time.perf_counter()
        gradients = {b.spec.name: out.atom_gradient[b.index] for b in program.neural.values()}
        timings["read"] = time.perf_counter() - t
        labels = program.labels
        return cls(
            out.loss,
            out.energy,
            out.weight_gradient,
            gradients,
            weights,
            out.iterations,
            timings,
            labels.latent_count,
            int(labels.label_index.size),
            exact,
            out.details,
        )
