import pytest

from pslbridge import errors


def test_every_error_derives_from_the_root():
    """Every exception derives from PslBridgeError; the one warning category is a UserWarning (and no error)."""
    for name in errors.__all__:
        cls = getattr(errors, name)
        if name == "PslBridgeWarning":
            assert issubclass(cls, UserWarning) and not issubclass(cls, errors.PslBridgeError)
        else:
            assert issubclass(cls, errors.PslBridgeError), name


def test_neural_input_error_is_also_value_error():
    err = errors.NeuralInputError("bad shape", predicate="Digit")
    assert isinstance(err, ValueError)
    assert "Digit" in str(err) and "bad shape" in str(err)


def test_model_file_error_prefixes_path_and_line():
    err = errors.ModelFileError("expected 2 columns", path="data/x.txt", line=4, predicate="Knows")
    assert str(err) == "data/x.txt:4: expected 2 columns"
    assert (err.path, err.line, err.predicate) == ("data/x.txt", 4, "Knows")


def test_engine_memory_error_is_memory_error():
    err = errors.EngineMemoryError("heap", java_class="java.lang.OutOfMemoryError")
    assert isinstance(err, MemoryError) and isinstance(err, errors.EngineError)
    with pytest.raises(errors.PslBridgeError):
        raise err
