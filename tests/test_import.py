"""``import pslbridge`` changes nothing in the user's process: environment, stderr, import hooks, logging."""

import json

import pytest

from conftest import run_python

pytestmark = pytest.mark.subprocess


def test_importing_pslbridge_changes_nothing_in_the_process():
    proc = run_python(
        """
        import json, logging, os, sys
        env, hooks, fd = dict(os.environ), list(sys.meta_path), os.fstat(2)
        root = list(logging.getLogger().handlers)
        import pslbridge, pslbridge.bridge, pslbridge.training
        after = os.fstat(2)
        print(json.dumps({
            "env": sorted(set(os.environ.items()) ^ set(env.items())),
            "hooks": [type(h).__name__ for h in sys.meta_path if h not in hooks],
            "stderr": (fd.st_ino, fd.st_dev) == (after.st_ino, after.st_dev),
            "root_handlers": len(logging.getLogger().handlers) - len(root),
            "own_handlers": [type(h).__name__ for h in logging.getLogger("pslbridge").handlers],
        }))
        """,
        env={"TF_CPP_MIN_LOG_LEVEL": ""},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found == {"env": [], "hooks": [], "stderr": True, "root_handlers": 0, "own_handlers": ["NullHandler"]}


def test_quiet_tensorflow_is_opt_in_and_respects_the_users_level():
    code = "import os, pslbridge; pslbridge.quiet_tensorflow(); print(os.environ.get('TF_CPP_MIN_LOG_LEVEL'))"
    user = {"TF_CPP_MIN_LOG_LEVEL": "1", "PSLBRIDGE_QUIET_TF": ""}  # the user's level, not one pslbridge set
    assert run_python(code, env=user).stdout.strip() == "1"
    unset = {"TF_CPP_MIN_LOG_LEVEL": "", "PSLBRIDGE_QUIET_TF": ""}
    without = "import os, pslbridge; print(repr(os.environ.get('TF_CPP_MIN_LOG_LEVEL')))"
    assert run_python(without, env=unset).stdout.strip() == "''"  # import alone sets nothing
