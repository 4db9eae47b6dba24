"""Saving and loading a NeuPSL model: bad paths and bad files are CheckpointErrors naming the file."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

keras = pytest.importorskip("keras")

from pslbridge import Bridge, CheckpointError  # noqa: E402
from pslbridge.examples.mnist_addition import add1_spec  # noqa: E402
from pslbridge.keras import NeuPSLModel, load_neupsl  # noqa: E402


@pytest.fixture
def model():
    net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(10, activation="softmax")])
    return NeuPSLModel({"Neural": net})


@pytest.fixture
def saved(model, tmp_path, jvm_started):
    with Bridge(add1_spec([(0, 1)], sums=[3], phase="learn")) as bridge:
        return model.save_neupsl(tmp_path / "add1.neupsl", bridge)


def _rewrite(path, change_manifest=None, change_member=None):
    """Rewrite the zip with the manifest and/or the network members changed."""
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    manifest = json.loads(members.pop("neupsl.json"))
    if change_manifest:
        change_manifest(manifest)
    if change_member:
        members = {name: change_member(name, data) for name, data in members.items()}
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("neupsl.json", json.dumps(manifest))
        for name, data in members.items():
            archive.writestr(name, data)


def test_saving_to_a_folder_or_under_a_file_is_a_checkpoint_error(model, tmp_path, jvm_started):
    (tmp_path / "file").write_text("x")
    with Bridge(add1_spec([(0, 1)], sums=[3], phase="learn")) as bridge:
        with pytest.raises(CheckpointError, match="is a folder"):
            model.save_neupsl(tmp_path, bridge)
        with pytest.raises(CheckpointError, match=r"file/m\.neupsl: cannot write the saved model"):
            model.save_neupsl(tmp_path / "file" / "m.neupsl", bridge)


def test_a_failed_save_leaves_the_earlier_file_as_it_was(model, saved, monkeypatch, jvm_started):
    before = saved.read_bytes()

    def broken(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(type(model.networks["Neural"]), "save", broken)
    with Bridge(add1_spec([(0, 1)], sums=[3], phase="learn")) as bridge:
        with pytest.raises(CheckpointError, match="No space left on device"):
            model.save_neupsl(saved, bridge)
    assert saved.read_bytes() == before
    assert [p.name for p in saved.parent.iterdir()] == [saved.name]  # no partial file left behind
    assert len(load_neupsl(saved).rules) > 0


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda m: m.pop("rules"), "lacks 'rules'"),
        (lambda m: m.update(rule_weights="heavy"), "'rule_weights' as a str"),
        (lambda m: m.update(rule_weights=[-1.0] * len(m["rule_weights"])), "finite number >= 0"),
        (lambda m: m["predicates"]["Neural"].update(class_size=0), "class size 0"),
        (lambda m: m["predicates"]["Neural"].update(arity="two"), "arity >= 1"),
        (lambda m: m.update(networks={"Neural": "../../evil.keras"}), "not a file under networks/"),
        (lambda m: m.update(networks={}), r"networks \[\] are not its neural predicates \['Neural'\]"),
        (lambda m: m.update(version=99), "not a pslbridge NeuPSL model of version 1"),
    ],
)
def test_a_tampered_manifest_is_refused_before_anything_is_built(saved, edit, message):
    _rewrite(saved, change_manifest=edit)
    with pytest.raises(CheckpointError, match=message) as caught:
        load_neupsl(saved)
    assert str(saved) in str(caught.value)


def test_a_garbage_network_file_is_a_checkpoint_error_naming_the_network(saved):
    _rewrite(saved, change_member=lambda name, data: b"not a keras file")
    with pytest.raises(CheckpointError, match="cannot load the network of 'Neural'"):
        load_neupsl(saved)


def test_a_network_with_an_unregistered_layer_says_how_to_register_it(saved):
    def unknown_layer(name, data):
        with zipfile.ZipFile(io.BytesIO(data)) as inner:
            files = {n: inner.read(n) for n in inner.namelist()}
        config = json.loads(files["config.json"])
        config["config"]["layers"][-1]["class_name"] = "NoSuchLayer"
        config["config"]["layers"][-1]["module"] = "nowhere"
        files["config.json"] = json.dumps(config).encode()
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as rebuilt:
            for n, d in files.items():
                rebuilt.writestr(n, d)
        return out.getvalue()

    _rewrite(saved, change_member=unknown_layer)
    with pytest.raises(CheckpointError, match="register_keras_serializable"):
        load_neupsl(saved)


def test_predict_without_targets_says_that_only_the_networks_predictions_come_back(saved):
    from pslbridge import PslBridgeWarning
    from pslbridge.examples.mnist_addition import digit_sum_rows, possible_digit_rows

    with pytest.warns(PslBridgeWarning, match="predict without targets="):
        result = load_neupsl(saved).predict(
            {"Neural": np.eye(2, 3, dtype="float32")},
            entities={"Neural": [7, 9]},
            observations={
                "ImageSumBlock": [(7, 9)],
                "DigitSum": digit_sum_rows(),
                "PossibleDigits": possible_digit_rows(),
            },
        )
    assert "ImageSum" not in result.values
