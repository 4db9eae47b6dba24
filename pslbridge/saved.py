"""The saved NeuPSL model: one zip holding the PSL program's description and the networks, and its predictor.

:meth:`pslbridge.keras.NeuPSLModel.save_neupsl` writes it: ``neupsl.json`` (format, version, rules, learned rule
weights, predicate declarations, options) and each network in Keras' own ``.keras`` format; no pickle.
:func:`load_neupsl` reads it back (networks through Keras' safe loader) into a :class:`NeuPSLPredictor`, which
grounds the rules for new entities and observations and returns the MAP state.

Examples:
    >>> FORMAT, VERSION
    ('pslbridge-neupsl', 1)
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import keras
import numpy as np

from .bridge import Bridge
from .errors import CheckpointError, NeuralInputError, PslBridgeWarning
from .model import ModelSpec, NeuralSpec, PredicateSpec
from .neural_inputs import align_rows
from .results import InferenceResult

__all__ = [
    "FORMAT",
    "MANIFEST_KEYS",
    "VERSION",
    "NeuPSLPredictor",
    "check_manifest",
    "load_neupsl",
    "manifest_of",
    "write_archive",
]

FORMAT = "pslbridge-neupsl"
VERSION = 1


def manifest_of(bridge: Bridge, weights: np.ndarray) -> dict[str, Any]:
    """The JSON manifest of a saved model: ``bridge``'s rules, declarations and options, with these rule weights.

    Examples:
        >>> from pslbridge.examples.mnist_addition import add1_spec
        >>> with Bridge(add1_spec([(0, 1)])) as b:
        ...     manifest = manifest_of(b, b.rule_weights)
        >>> manifest["format"], manifest["predicates"]["Neural"]["class_size"]
        ('pslbridge-neupsl', 10)
    """
    spec = bridge.spec
    predicates = {}
    for pred in spec.predicates.values():
        entry: dict[str, Any] = {"arity": pred.arity, "types": pred.types, "closed": spec.is_closed(pred.name)}
        if pred.neural is not None:
            entry["class_size"] = pred.neural.class_size
        if pred.function is not None:
            entry["function"] = pred.function
        predicates[pred.name] = entry
    return {
        "format": FORMAT,
        "version": VERSION,
        "rules": [r.text for r in spec.rules],
        "predicates": predicates,
        "options": dict(bridge.program.options),
        "reasoner": bridge.reasoner,
        "rule_weights": [float(w) for w in weights],
    }


#: What ``neupsl.json`` holds: each key's JSON type (checked on load, before anything is built from it).
MANIFEST_KEYS = {
    "format": str,
    "version": int,
    "rules": list,
    "predicates": dict,
    "options": dict,
    "reasoner": str,
    "rule_weights": list,
    "networks": dict,
}


def check_manifest(manifest: Any, path: str | Path) -> None:
    """Refuse a manifest that is not one :meth:`NeuPSLModel.save_neupsl` writes (edited, truncated, another tool's).

    Raises:
        CheckpointError: Naming the file and the first key, entry or value at fault.

    Examples:
        >>> check_manifest({"format": FORMAT, "version": VERSION}, "m.neupsl")
        Traceback (most recent call last):
        ...
        pslbridge.errors.CheckpointError: m.neupsl: its neupsl.json lacks 'rules' (not a complete saved model)
    """

    def fail(message: str) -> None:
        raise CheckpointError(message, path=path)

    if not isinstance(manifest, dict):
        fail(f"its neupsl.json holds a {type(manifest).__name__}, not an object")
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        fail(f"not a pslbridge NeuPSL model of version {VERSION}")
    for key, kind in MANIFEST_KEYS.items():
        if key not in manifest:
            fail(f"its neupsl.json lacks {key!r} (not a complete saved model)")
        if not isinstance(manifest[key], kind):
            fail(f"its neupsl.json has {key!r} as a {type(manifest[key]).__name__}, not a {kind.__name__}")
    if not all(isinstance(rule, str) for rule in manifest["rules"]):
        fail("its neupsl.json has a rule that is not text")
    weights = manifest["rule_weights"]
    if not all(isinstance(w, (int, float)) and not isinstance(w, bool) and 0 <= w < float("inf") for w in weights):
        fail("its neupsl.json has a rule weight that is not a finite number >= 0")
    for name, entry in manifest["predicates"].items():
        arity = entry.get("arity") if isinstance(entry, dict) else None
        if not isinstance(arity, int) or arity < 1 or not isinstance(entry.get("types"), list):
            fail(f"its neupsl.json declares predicate {name!r} without an arity >= 1 and a list of types")
        classes = entry.get("class_size")
        if classes is not None and (not isinstance(classes, int) or classes < 1):
            fail(f"its neupsl.json gives neural predicate {name!r} class size {classes!r}")
    neural = {name for name, entry in manifest["predicates"].items() if "class_size" in entry}
    if set(manifest["networks"]) != neural:
        fail(f"its networks {sorted(manifest['networks'])} are not its neural predicates {sorted(neural)}")
    for name, member in manifest["networks"].items():
        if not isinstance(member, str) or not member.startswith("networks/") or ".." in member:
            fail(f"its neupsl.json names network {name!r} as {member!r}, not a file under networks/")


class NeuPSLPredictor:
    """A saved NeuPSL model, loaded: it grounds its rules for new entities and observations and predicts.

    Build with :func:`load_neupsl`.

    Attributes:
        rules: The rules.
        predicates: The predicate declarations (arity, types, closed, class size of neural ones).
        rule_weights: The learned weights of the weighted rules.
        networks: The Keras networks by neural predicate.

    Examples:
        >>> import tempfile, keras
        >>> from pslbridge.examples.mnist_addition import add1_spec, digit_sum_rows, possible_digit_rows
        >>> from pslbridge.keras import NeuPSLModel
        >>> net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(10, activation="softmax")])
        >>> with Bridge(add1_spec([(0, 1)], sums=[3], phase="learn")) as b:
        ...     path = NeuPSLModel({"Neural": net}).save_neupsl(Path(tempfile.mkdtemp()) / "add1.neupsl", b)
        >>> predictor = load_neupsl(path)
        >>> result = predictor.predict(
        ...     {"Neural": np.eye(2, 3, dtype="float32")}, entities={"Neural": [7, 9]},
        ...     observations={"ImageSumBlock": [(7, 9)], "DigitSum": digit_sum_rows(),
        ...                   "PossibleDigits": possible_digit_rows()},
        ...     targets={"ImageSum": [(7, 9, z) for z in range(19)]})
        >>> len(result.argmax("ImageSum")), sorted(predictor.networks)
        (1, ['Neural'])
    """

    def __init__(self, manifest: Mapping[str, Any], networks: Mapping[str, Any]) -> None:
        self.manifest = dict(manifest)
        self.rules = list(manifest["rules"])
        self.predicates = dict(manifest["predicates"])
        self.rule_weights = np.asarray(manifest["rule_weights"], dtype=np.float64)
        self.networks = dict(networks)

    def spec(
        self,
        entities: Mapping[str, Sequence[Any]],
        observations: Mapping[str, Any] | None = None,
        targets: Mapping[str, Any] | None = None,
    ) -> ModelSpec:
        """The model for new data: ``entities`` of each neural predicate (one per input row), the other data."""
        preds = {
            name: PredicateSpec(
                name, d["arity"], list(d["types"]), neural=NeuralSpec(d["class_size"]) if "class_size" in d else None
            )
            for name, d in self.predicates.items()
        }
        neural_targets = {
            name: [
                (*(e if isinstance(e, (list, tuple)) else (e,)), str(c))
                for e in rows
                for c in range(preds[name].neural.class_size)
            ]  # type: ignore[union-attr]
            for name, rows in entities.items()
        }
        return ModelSpec.from_python(
            rules=self.rules,
            predicates=preds,
            observations=observations or {},
            targets={**(targets or {}), **neural_targets},
            closed=[n for n, d in self.predicates.items() if d.get("closed") and "class_size" not in d],
            options=self.manifest.get("options") or {},
        )

    def predict(
        self,
        inputs: Mapping[str, Any],
        entities: Mapping[str, Sequence[Any]],
        observations: Mapping[str, Any] | None = None,
        targets: Mapping[str, Any] | None = None,
        **bridge_kwargs: Any,
    ) -> InferenceResult:
        """Ground the rules for new data, run the networks on ``inputs`` and return the MAP state.

        Args:
            inputs: ``{neural predicate: network inputs}``, one row per entity.
            entities: ``{neural predicate: entity ids}`` in input-row order.
            observations: Observed rows per predicate (as :meth:`ModelSpec.from_python`).
            targets: Target rows per predicate.
            **bridge_kwargs: For :class:`pslbridge.Bridge` (e.g. ``functions=``).
        """
        if not targets:
            warnings.warn(
                "predict without targets=: no atom of the model's other predicates is inferred, so the result holds "
                "only the networks' own predictions; give targets={predicate: rows} for what to predict",
                PslBridgeWarning,
                stacklevel=2,
            )
        spec = self.spec(entities, observations, targets)
        with Bridge(spec, reasoner=self.manifest.get("reasoner", "admm"), **bridge_kwargs) as bridge:
            bridge.rule_weights = self.rule_weights
            predictions = {}
            for name, network in self.networks.items():
                ids = list(entities[name])
                if len(ids) != len(inputs[name]):
                    raise NeuralInputError(
                        f"{len(inputs[name])} input rows for {len(ids)} entities: give one row per entity, in the "
                        "order of entities=",
                        predicate=name,
                    )
                probs = keras.ops.convert_to_numpy(network(np.asarray(inputs[name]), training=False))
                predictions[name] = align_rows(name, ids, probs, bridge.entities(name))
            return bridge.infer(predictions, reset=True)


def write_archive(path: Path, manifest: Mapping[str, Any], networks: Mapping[str, Any]) -> None:
    """Write the zip of a saved model atomically: a temporary file beside ``path``, renamed onto it when complete.

    Raises:
        CheckpointError: ``path`` is a folder or cannot be written (an existing file is left as it was).

    Examples:
        >>> write_archive(Path(tempfile.mkdtemp()), {}, {})
        Traceback (most recent call last):
        ...
        pslbridge.errors.CheckpointError: ...: is a folder; give a file name such as 'model.neupsl'
    """
    if path.is_dir():
        raise CheckpointError("is a folder; give a file name such as 'model.neupsl'", path=path)
    partial = path.with_name(f".{path.name}.partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="pslbridge-save-") as tmp:
            with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
                archive.writestr("neupsl.json", json.dumps(manifest, indent=1))
                for name, network in networks.items():
                    local = os.path.join(tmp, f"{name}.keras")
                    network.save(local)
                    archive.write(local, manifest["networks"][name])
        os.replace(partial, path)
    except OSError as exc:
        raise CheckpointError(f"cannot write the saved model: {exc.strerror or exc}", path=path) from exc
    finally:
        if partial.exists():
            partial.unlink()


def load_neupsl(path: str | Path) -> NeuPSLPredictor:
    """Load an artefact written by :meth:`NeuPSLModel.save_neupsl` (networks through Keras' safe loader).

    Raises:
        CheckpointError: Not such an artefact, or another version.

    Examples:
        >>> load_neupsl("no/such/file.neupsl")
        Traceback (most recent call last):
        ...
        pslbridge.errors.CheckpointError: no/such/file.neupsl: cannot read the saved model: ...
    """
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as archive, tempfile.TemporaryDirectory(prefix="pslbridge-load-") as tmp:
            manifest = json.loads(archive.read("neupsl.json"))
            check_manifest(manifest, path)
            networks = {}
            for name, member in manifest["networks"].items():
                target = archive.extract(member, tmp)
                try:
                    networks[name] = keras.models.load_model(target, safe_mode=True, compile=False)
                except Exception as exc:  # noqa: BLE001 - Keras raises many kinds for a file it cannot read
                    hint = (
                        " (a custom layer must be registered with keras.saving.register_keras_serializable "
                        "and imported before loading)"
                        if "locate" in str(exc) or isinstance(exc, TypeError)
                        else ""
                    )
                    raise CheckpointError(f"cannot load the network of {name!r}: {exc}{hint}", path=path) from exc
    except CheckpointError:
        raise
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise CheckpointError(f"cannot read the saved model: {exc}", path=path) from exc
    return NeuPSLPredictor(manifest, networks)
