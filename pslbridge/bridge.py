"""The public :class:`Bridge`: a resident PSL program that takes neural predictions and returns MAP states.

Push a network's predictions in, get MAP values (and, for learning, energies and gradients) out.

Example:
    >>> import pslbridge
    >>> bridge = pslbridge.Bridge.from_python(
    ...     rules=["5: Lived(A, L) & Lived(B, L) & (A != B) -> Knows(A, B) ^2", "1: !Knows(A, B) ^2"],
    ...     predicates={"Lived": 2, "Knows": 2},
    ...     observations={"Lived": [("alice", "paris"), ("bob", "paris")]},
    ...     targets={"Knows": [("alice", "bob"), ("bob", "alice")]},
    ... )  # doctest: +SKIP
    >>> result = bridge.infer()  # doctest: +SKIP
    >>> result.to_frame("Knows")  # doctest: +SKIP
        arg0   arg1     value
    0  alice    bob  0.833333
    1    bob  alice  0.833333
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ._java import J, guard
from .errors import ClosedError, ConfigurationError, NeuralInputError
from .learning import WeightOptimizer
from .model_files import ModelSpec, load_model
from .neural_inputs import as_prediction_array
from .program import GroundProgram, NeuralBlock

__all__ = ["Bridge", "InferenceResult", "LearnResult"]

LOSSES = ("energy", "structured_perceptron")
_NAMES = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")
log = logging.getLogger(__name__)


@dataclass
class InferenceResult:
    """What :meth:`Bridge.infer` returns.

    Attributes:
        values: Inferred values per target predicate (float32, in :meth:`Bridge.atoms` row order).
        objective: The weighted objective PSL reports at the MAP state.
        violated_constraints: Hard-constraint ground rules violated at the MAP state.
        iterations: Reasoner iterations (None if PSL did not report them).
        timings: Seconds spent in ``push``, ``solve`` and ``read``.

    Example:
        >>> r = InferenceResult({"Knows": np.array([0.5], dtype=np.float32)}, 1.0, 0, 10, {},
        ...                     {"Knows": pd.DataFrame({"arg0": ["a"]})})
        >>> r.to_frame("Knows")
          arg0  value
        0    a    0.5
    """

    values: dict[str, np.ndarray]
    objective: float
    violated_constraints: int
    iterations: int | None
    timings: dict[str, float]
    _frames: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)

    def __getitem__(self, predicate: str) -> np.ndarray:
        return self.values[_find(self.values, predicate)]

    def to_frame(self, predicate: str) -> pd.DataFrame:
        """Return a DataFrame of the atoms' arguments and their inferred ``value``."""
        key = _find(self.values, predicate)
        frame = self._frames[key].copy()
        frame["value"] = self.values[key]
        return frame


@dataclass
class LearnResult:
    """What :meth:`Bridge.learn_step` returns.

    Attributes:
        loss: The learning loss at the weights the step started from: the energy
            ``Σ_r w_r Φ_r`` at (labels, latent MAP) for ``"energy"``; that energy minus the
            energy of the full MAP state for ``"structured_perceptron"``.
        energy: ``Σ_r w_r Φ_r`` at (labels, latent MAP).
        rule_potentials: ``∂loss/∂w``: Φ per weighted rule, model order (float64); None when the
            step was asked not to compute it (``potentials=False``).
        neural_gradients: ``∂loss/∂prediction`` per neural predicate, shaped like the predictions.
        rule_weights: Weights after the step (unchanged when no optimizer was given).
        iterations: Reasoner iterations of the latent solve (and of the MAP solve, if any).
        timings: Seconds per phase: push, fix, solve, potentials, gradient, read, map, step.
        latent_atoms: Target atoms without a label (solved for); ``labelled_atoms`` are fixed.
        exact_gradient: False when a hard constraint contains a neural atom: the engine's
            gradient skips constraint terms, so the neural gradient then ignores them.

    Example:
        >>> result = bridge.learn_step({"Neural": probs})  # doctest: +SKIP
        >>> tape.gradient(preds, model.trainable_variables,
        ...               output_gradients=result.neural_gradients["Neural"])  # doctest: +SKIP
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


def _find(mapping: Mapping[str, Any], predicate: str) -> str:
    for key in mapping:
        if key.upper() == predicate.upper():
            return key
    raise KeyError(f"no predicate {predicate!r}; have {list(mapping)}")


class Bridge:
    """A PSL model grounded once and kept resident; push neural predictions, get MAP states.

    Args:
        model: A :class:`~pslbridge.model_files.ModelSpec`, or a path to a runtime config
            (``.json``/``.yaml``) or ``.psl`` file.
        data: With a ``.psl`` path: its ``.data`` file; with a config: a data folder.
        phase: ``"infer"`` (default) or ``"learn"`` data of a config that has both.
        options: PSL options for this program (``{"admmreasoner.maxiterations": 500}``).
        reasoner: ``"admm"`` (default), ``"dualbcd"`` or ``"sgd"``.

    Raises:
        ModelFileError: The model is malformed.
        EngineError: PSL failed while grounding.

    Example:
        >>> bridge = Bridge("models/simple-acquaintances/simple-acquaintances.json")  # doctest: +SKIP
        >>> bridge.infer().to_frame("Knows").head()  # doctest: +SKIP
    """

    def __init__(
        self,
        model: ModelSpec | str | Path,
        data: str | Path | None = None,
        *,
        phase: str = "infer",
        options: Mapping[str, Any] | None = None,
        reasoner: str = "admm",
    ) -> None:
        spec = model if isinstance(model, ModelSpec) else load_model(model, data, phase=phase)
        self._program: GroundProgram | None = GroundProgram(spec, dict(options or {}), reasoner)
        self._pushed: set[str] = set()
        self._solves = 0
        self._weighted = [i for i, r in enumerate(self._program.rules) if bool(r.isWeighted())]
        neural_names = {b.spec.key for b in self._program.neural.values()}
        self._neural_in_constraints = [
            spec.text
            for spec, rule in zip(self._program.spec.rules, self._program.rules)
            if not bool(rule.isWeighted()) and neural_names & {m.upper() for m in _NAMES.findall(spec.text)}
        ]
        self._warned_constraints = False

    # -- constructors ---------------------------------------------------------------

    @classmethod
    def from_python(cls, *, options: Mapping[str, Any] | None = None, reasoner: str = "admm", **model: Any) -> Bridge:
        """Build from Python objects; keyword arguments as :meth:`ModelSpec.from_python`.

        Example:
            >>> Bridge.from_python(rules=["1: A(X) -> B(X) ^2"], predicates={"A": 1, "B": 1},
            ...                    observations={"A": [("x",)]}, targets={"B": [("x",)]})  # doctest: +SKIP
        """
        return cls(ModelSpec.from_python(**model), options=options, reasoner=reasoner)

    # -- introspection ----------------------------------------------------------------

    @property
    def program(self) -> GroundProgram:
        """The resident ground program (raises after :meth:`close`)."""
        if self._program is None:
            raise ClosedError("this Bridge is closed; build a new one to continue")
        return self._program

    @property
    def spec(self) -> ModelSpec:
        """The model description this bridge grounded."""
        return self.program.spec

    @property
    def target_predicates(self) -> list[str]:
        """Names of the predicates whose values :meth:`infer` returns."""
        return [self.spec.predicates[k].name for k in self.program.targets]

    @property
    def neural_predicates(self) -> list[str]:
        """Names of the neural predicates, in declaration order."""
        return [b.spec.name for b in self.program.neural.values()]

    def _block(self, predicate: str) -> NeuralBlock:
        block = self.program.neural.get(predicate.upper())
        if block is None:
            raise NeuralInputError(
                f"not a neural predicate of this model; neural predicates: {self.neural_predicates or 'none'}",
                predicate=predicate,
            )
        return block

    def entities(self, predicate: str) -> pd.DataFrame:
        """The entity rows of a neural predicate, in the row order :meth:`infer` expects.

        Example:
            >>> bridge.entities("Neural").head(2)  # doctest: +SKIP
              arg0
            0  img0
            1  img1
        """
        return self._block(predicate).entities.copy()

    def classes(self, predicate: str) -> list[str]:
        """The class labels of a neural predicate, in column order."""
        return list(self._block(predicate).classes)

    def features(self, predicate: str) -> np.ndarray | None:
        """Features from the neural predicate's entity-data map, aligned with :meth:`entities`."""
        return self._block(predicate).features

    def neural_shape(self, predicate: str) -> tuple[int, int]:
        """``(n_entities, n_classes)`` expected for a neural predicate."""
        block = self._block(predicate)
        return (int(block.index.shape[0]), int(block.index.shape[1]))

    def atoms(self, predicate: str) -> pd.DataFrame:
        """The target atoms of a predicate (arguments), in result row order."""
        key = predicate.upper()
        if key not in self.program.targets:
            raise KeyError(f"{predicate!r} is not a target predicate; targets: {self.target_predicates}")
        return self.program.targets[key][0].copy()

    @property
    def rules(self) -> list[str]:
        """Rule texts in model order (as PSL prints them)."""
        return [str(r) for r in self.program.rules]

    @property
    def weighted_rules(self) -> list[str]:
        """Texts of the weighted (soft) rules, the order of :attr:`rule_weights`."""
        return [str(self.program.rules[i]) for i in self._weighted]

    @property
    def rule_weights(self) -> np.ndarray:
        """Weights of the weighted rules in model order (hard constraints have none).

        Example:
            >>> bridge.rule_weights = bridge.rule_weights * 2  # doctest: +SKIP
        """
        rules = self.program.rules
        return np.array([float(rules[i].getWeight()) for i in self._weighted], dtype=np.float64)

    @rule_weights.setter
    def rule_weights(self, weights: Any) -> None:
        values = np.asarray(weights, dtype=np.float64).ravel()
        if values.shape[0] != len(self._weighted):
            raise ConfigurationError(f"expected {len(self._weighted)} rule weights, got {values.shape[0]}")
        if not np.isfinite(values).all() or (values < 0).any():
            raise ConfigurationError(f"rule weights must be finite and non-negative, got {values.tolist()}")
        rules = self.program.rules
        with guard("setting rule weights"):
            for i, w in zip(self._weighted, values):
                rules[i].setWeight(J.Float(float(w)).floatValue())

    @property
    def atom_count(self) -> int:
        """Ground atoms in the program."""
        return self.program.atom_count

    @property
    def term_count(self) -> int:
        """Ground terms (potentials and constraints) in the program."""
        return self.program.term_count

    # -- pushing and solving ----------------------------------------------------------

    def push(self, neural: Mapping[str, Any]) -> None:
        """Validate and write neural predictions into the resident atoms.

        Args:
            neural: ``{predicate: array (n_entities, n_classes)}``.

        Raises:
            NeuralInputError: Unknown predicate or a bad array (nothing is written then).

        Example:
            >>> bridge.push({"Neural": probs})  # doctest: +SKIP
        """
        program = self.program
        program.check_open()
        if not isinstance(neural, Mapping):
            raise NeuralInputError(f"neural must be a mapping of predicate name to array, got {type(neural).__name__}")
        checked = []
        for name, value in neural.items():
            block = self._block(str(name))
            shape = (int(block.index.shape[0]), int(block.index.shape[1]))
            checked.append((block, as_prediction_array(block.spec.name, value, shape, block.entities, block.classes)))
        for block, array in checked:
            program.write_neural(block, array)
            self._pushed.add(block.spec.key)

    def infer(self, neural: Mapping[str, Any] | None = None, *, reset: bool = False) -> InferenceResult:
        """Push neural predictions (optional) and run MAP inference on the resident program.

        Args:
            neural: ``{predicate: array (n_entities, n_classes)}``; omitted predicates keep
                their last values.
            reset: Restart the reasoner from the current atom values instead of warm-starting
                from the previous solution (do this when predictions changed a lot).

        Returns:
            The MAP values, objective, violated constraints, iterations and timings.

        Raises:
            NeuralInputError: A bad array, or a neural predicate that never got values.
            EngineError: The engine failed.
            ClosedError: After :meth:`close`.

        Example:
            >>> result = bridge.infer({"Neural": probs})  # doctest: +SKIP
            >>> result["ImageSum"].shape  # doctest: +SKIP
        """
        program = self.program
        t0 = time.perf_counter()
        if neural:
            self.push(neural)
        self._check_pushed()
        t1 = time.perf_counter()
        stats = program.solve(reset=reset)
        self._solves += 1
        t2 = time.perf_counter()
        values = self._read_targets()
        t3 = time.perf_counter()
        frames = {self.spec.predicates[k].name: f for k, (f, _) in program.targets.items()}
        return InferenceResult(
            values,
            stats.objective,
            stats.violated_constraints,
            stats.iterations,
            {"push": t1 - t0, "solve": t2 - t1, "read": t3 - t2},
            frames,
        )

    def learn_step(
        self,
        neural: Mapping[str, Any] | None = None,
        *,
        loss: str = "energy",
        weights: WeightOptimizer | None = None,
        constraint_learning: bool = False,
        reset: bool = False,
        potentials: bool = True,
    ) -> LearnResult:
        """One NeuPSL learning step: energy loss with latent inference, Φ and neural gradients.

        Labelled target atoms (those with truth data) are fixed to their labels, the remaining
        (latent) targets are solved for with warm-started MAP inference, and at that state the
        per-rule potential sums Φ (``∂loss/∂w``) and ``∂energy/∂prediction`` (Danskin) are read
        from the engine. The labels are then released. This is what the jar's ``Energy`` learner
        computes per step (``OptimalValue.computeLatentInferenceIncompatibility``).

        Args:
            neural: Predictions per neural predicate (as in :meth:`infer`).
            loss: ``"energy"`` (NeuPSL's) or ``"structured_perceptron"`` (energy at the labels
                minus energy at the full MAP state; needs a second solve).
            weights: A :class:`~pslbridge.learning.WeightOptimizer` to take a symbolic step with
                Φ; None leaves the weights alone (set :attr:`rule_weights` yourself). On the
                optimizer's first step the weights are first scaled onto the simplex, as PSL does.
            constraint_learning: Skip latent inference and evaluate at the current atom values
                (the paper's special case without an inference subproblem).
            reset: Restart the latent solve from the current values instead of warm-starting.
            potentials: Compute Φ (one pass over the ground terms per weighted rule). With
                ``potentials=False`` (only for the energy loss without a weight step: rule weights
                frozen, as in the paper's MNIST-Addition runs) the energy comes from one objective
                pass instead and ``rule_potentials`` is None.

        Returns:
            Loss, Φ, neural gradients, new weights, iterations and timings.

        Raises:
            NeuralInputError: A bad array or a neural predicate without predictions.
            ConfigurationError: Unknown loss, or ``potentials=False`` with a weight step or a loss
                that needs Φ.

        Example:
            >>> step = bridge.learn_step({"Neural": probs}, weights=WeightOptimizer())  # doctest: +SKIP
            >>> step.neural_gradients["Neural"].shape == probs.shape  # doctest: +SKIP
            True
        """
        if loss not in LOSSES:
            raise ConfigurationError(f"loss must be one of {LOSSES}, got {loss!r}")
        if not potentials and (weights is not None or loss != "energy"):
            raise ConfigurationError(
                "potentials=False only works for the energy loss without a weight step: "
                "a weight step and the structured-perceptron loss need Φ"
            )
        program = self.program
        times: dict[str, float] = {}
        t = time.perf_counter()
        if neural:
            self.push(neural)
        self._check_pushed()
        if weights is not None and weights.steps_taken == 0:
            self.rule_weights = weights.start(self.rule_weights)
        state = program.learning
        times["push"] = _lap(t)
        t = time.perf_counter()
        iterations: dict[str, int | None] = {}
        state.fix()
        try:
            times["fix"] = _lap(t)
            t = time.perf_counter()
            if not constraint_learning and state.latent_count > 0:
                iterations["latent"] = program.solve(reset=reset).iterations
            else:
                iterations["latent"] = 0  # every target is labelled (or constraint learning): nothing to solve
            times["solve"] = _lap(t)
            t = time.perf_counter()
            phi = program.rule_potentials(self._weighted) if potentials else None
            objective = None if potentials else program.objective()[0]
            times["potentials"] = _lap(t)
            t = time.perf_counter()
            deep, _ = program.energy_gradient()
            times["gradient"] = _lap(t)
        finally:
            state.unfix()
        current = self.rule_weights
        energy = float(np.dot(current, phi)) if phi is not None else float(objective)
        value = energy
        dloss = phi
        t = time.perf_counter()
        if loss == "structured_perceptron":
            iterations["map"] = program.solve(reset=reset).iterations
            phi_map = program.rule_potentials(self._weighted)
            deep_map, _ = program.energy_gradient()
            value = energy - float(np.dot(current, phi_map))
            dloss = phi - phi_map
            deep = deep - deep_map
        times["map"] = _lap(t)
        t = time.perf_counter()
        gradients = {b.spec.name: deep[b.index] for b in program.neural.values()}
        times["read"] = _lap(t)
        t = time.perf_counter()
        if weights is not None:
            self.rule_weights = weights.step(current, dloss)
        times["step"] = _lap(t)
        exact = not self._neural_in_constraints
        if not exact and not self._warned_constraints:
            log.warning(
                "hard constraint(s) %s contain neural atoms; PSL's gradient skips constraint terms, "
                "so neural gradients ignore them (write them as heavily weighted soft rules for exact "
                "gradients)",
                self._neural_in_constraints,
            )
            self._warned_constraints = True
        return LearnResult(
            value,
            energy,
            dloss,
            gradients,
            self.rule_weights,
            iterations,
            times,
            state.latent_count,
            int(state.label_index.size),
            exact,
        )

    # -- diagnostics ------------------------------------------------------------------

    def rules_table(self) -> pd.DataFrame:
        """Each rule with its weight, ground-term count, Φ and violated constraints at the current state.

        Example:
            >>> bridge.infer(); bridge.rules_table()  # doctest: +SKIP
                                   rule  weighted  weight  ground_terms  potential  violated
        """
        program = self.program
        indexes = list(range(len(program.rules)))
        potentials, violated = program._per_rule(indexes)
        with guard("counting ground terms"):
            counts = [int(program._term_store.count(r)) for r in program.rules]
        rows = []
        for i, rule in enumerate(program.rules):
            weighted = bool(rule.isWeighted())
            rows.append(
                {
                    "rule": str(rule),
                    "weighted": weighted,
                    "weight": float(rule.getWeight()) if weighted else float("inf"),
                    "ground_terms": counts[i],
                    "potential": float(potentials[i]) if weighted else 0.0,
                    "violated": 0 if weighted else int(violated[i]),
                }
            )
        return pd.DataFrame(rows)

    def summary(self) -> dict[str, Any]:
        """Sizes after grounding: atoms per predicate, terms, build timings, Java heap in use.

        Example:
            >>> bridge.summary()["atoms_per_predicate"]  # doctest: +SKIP
            {'KNOWS': 56, 'LIKES': 17, 'LIVED': 11}
        """
        from . import _java

        program = self.program
        counts: dict[str, int] = {}
        for key in program._atom_lookup:
            name = key.split("(", 1)[0]
            counts[name] = counts.get(name, 0) + 1
        return {
            "atoms": program.atom_count,
            "random_variable_atoms": program.rv_count,
            "terms": program.term_count,
            "atoms_per_predicate": dict(sorted(counts.items())),
            "build_seconds": dict(program.timings),
            "java_heap_used_mb": _java.heap_used_bytes() / 2**20,
        }

    def explain(self, predicate: str, *args: Any) -> pd.DataFrame:
        """The ground terms touching one atom, their incompatibility and the pull they exert on it.

        ``pull`` is ``-∂(weighted potential)/∂atom`` at the current values: positive terms push the
        atom's value up, negative ones down; the MAP value balances them (within [0, 1] and the hard
        constraints). Uses ADMM's per-atom term index (other reasoners scan every term).

        Example:
            >>> bridge.explain("Knows", "alice", "bob")  # doctest: +SKIP
        """
        program = self.program
        index = program.atom_index(predicate, tuple(args))
        if index < 0:
            raise KeyError(f"{predicate}{tuple(map(str, args))} is not an atom of this program")
        names = {v: k for k, v in program._atom_lookup.items()}
        values = program._atom_store.getAtomValues()
        rows = []
        with guard("explaining an atom"):
            for term_index, position in program.terms_of_atom(index):
                term = program._term_store.get(term_index)
                inner = float(term.computeInnerPotential(values))
                coefficients = list(term.getCoefficients())
                atoms = [names.get(int(a), f"<atom {int(a)}>") for a in term.getAtomIndexes()]
                text = " + ".join(f"{c:g}*{a}" for c, a in zip(coefficients, atoms))
                constraint = bool(term.isConstraint())
                incompat = float(term.evaluateIncompatibility(values))
                pull = 0.0 if constraint else -float(term.computeVariablePartial(position, inner))
                rows.append(
                    {
                        "rule": str(term.getRule()),
                        "term": f"{text} - {float(term.getConstant()):g}",
                        "type": str(term.termType),
                        "weight": float(term.getWeight()),
                        "incompatibility": incompat,
                        "pull": pull,
                        "violated": bool(constraint and incompat > 0),
                    }
                )
        frame = pd.DataFrame(rows, columns=["rule", "term", "type", "weight", "incompatibility", "pull", "violated"])
        frame.attrs["atom"] = names[index]
        frame.attrs["value"] = float(values[index])
        return frame.sort_values("pull", key=abs, ascending=False, ignore_index=True)

    def _check_pushed(self) -> None:
        missing = [b.spec.name for k, b in self.program.neural.items() if k not in self._pushed]
        if missing:
            raise NeuralInputError(
                f"no predictions were given yet for neural predicate(s) {missing}; pass "
                f"neural={{{missing[0]!r}: array}}",
                predicate=missing[0],
            )

    def _read_targets(self) -> dict[str, np.ndarray]:
        program = self.program
        if not program.targets:
            return {}
        everything = program.atom_values(program.rv_count)
        return {self.spec.predicates[k].name: everything[idx] for k, (_, idx) in program.targets.items()}

    def objective(self) -> tuple[float, int]:
        """Weighted objective and violated constraints at the current atom values.

        Example:
            >>> bridge.objective()  # doctest: +SKIP
            (1.6, 0)
        """
        return self.program.objective()

    # -- lifecycle --------------------------------------------------------------------

    def close(self) -> None:
        """Free the program's Java objects; the JVM stays up. Safe to call twice.

        Example:
            >>> bridge.close()  # doctest: +SKIP
        """
        if self._program is not None:
            program, self._program = self._program, None
            program.close()

    def __enter__(self) -> Bridge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._program is None:
            return "<Bridge closed>"
        p = self._program
        return (
            f"<Bridge {p.spec.source}: {len(p.rules)} rules, {p.atom_count} atoms, {p.term_count} terms, "
            f"neural={self.neural_predicates}>"
        )


def _lap(start: float) -> float:
    return time.perf_counter() - start
