import io
from pathlib import Path

import pytest

from pslbridge import jars
from pslbridge.errors import JarError

from conftest import REPO


@pytest.fixture(scope="module")
def real_jar() -> Path:
    return jars.resolve_jar()


def test_committed_checksum_matches_module_constant():
    text = (REPO / "jars" / "SHA256SUMS").read_text().split()
    assert text[1] == jars.JAR_NAME
    assert text[0] == jars.PINNED_SHA256[jars.JAR_NAME] == jars.expected_sha256()


def test_resolved_jar_is_verified(real_jar):
    assert jars.sha256_of(real_jar) == jars.expected_sha256()


def test_missing_jar_says_what_to_run(tmp_path, monkeypatch):
    monkeypatch.delenv("PSLBRIDGE_JAR", raising=False)
    monkeypatch.setenv("PSLBRIDGE_JAR_DIR", str(tmp_path))
    with pytest.raises(JarError, match="python -m pslbridge.jars fetch"):
        jars.resolve_jar()


def test_env_var_jar_with_wrong_checksum_is_refused(tmp_path, monkeypatch):
    bad = tmp_path / "psl.jar"
    bad.write_bytes(b"not a jar")
    monkeypatch.setenv("PSLBRIDGE_JAR", str(bad))
    with pytest.raises(JarError, match="SHA-256"):
        jars.resolve_jar()
    assert jars.resolve_jar(verify=False) == bad.resolve()


def test_fetch_from_local_jar_is_idempotent(tmp_path, real_jar):
    first = jars.fetch(jar=real_jar, jar_dir=tmp_path)
    stamp = first.stat().st_mtime_ns
    second = jars.fetch(jar=real_jar, jar_dir=tmp_path)
    assert first == second and second.stat().st_mtime_ns == stamp
    assert jars.sha256_of(second) == jars.expected_sha256()
    assert sorted(p.name for p in tmp_path.iterdir()) == [jars.JAR_NAME]


def test_fetch_refuses_corrupt_source_and_leaves_nothing(tmp_path):
    bad = tmp_path / "src" / "bad.jar"
    bad.parent.mkdir()
    bad.write_bytes(b"corrupt")
    dest = tmp_path / "dest"
    with pytest.raises(JarError, match="SHA-256"):
        jars.fetch(jar=bad, jar_dir=dest)
    assert list(dest.iterdir()) == []


def test_interrupted_copy_removes_partial_file(tmp_path):
    class Exploding(io.RawIOBase):
        def __init__(self):
            self.calls = 0

        def readable(self):
            return True

        def readinto(self, buffer):
            self.calls += 1
            if self.calls > 2:
                raise KeyboardInterrupt
            buffer[:4] = b"abcd"
            return 4

    with pytest.raises(KeyboardInterrupt):
        jars._atomic_install(io.BufferedReader(Exploding()), tmp_path / jars.JAR_NAME, None)
    assert list(tmp_path.iterdir()) == []


def test_existing_corrupt_jar_needs_force(tmp_path, real_jar):
    (tmp_path / jars.JAR_NAME).write_bytes(b"old")
    with pytest.raises(JarError, match="--force"):
        jars.fetch(jar=real_jar, jar_dir=tmp_path)
    path = jars.fetch(jar=real_jar, jar_dir=tmp_path, force=True)
    assert jars.sha256_of(path) == jars.expected_sha256()


def test_cli_verify_and_path(capsys):
    assert jars.main(["verify"]) == 0
    assert "OK" in capsys.readouterr().out
    assert jars.main(["path"]) == 0
