"""PSL's own ``Runtime``, run from one place: the tests' oracle and :func:`pslbridge.jvm.run_psl_runtime` use it.

Examples:
    >>> import json
    >>> config = {"rules": ["1: RdA(X) -> RdB(X) ^2"], "options": {"runtime.log.level": "WARN"},
    ...           "predicates": {"RdA/1": {"observations": [["x", "1"]]}, "RdB/1": {"targets": [["x"]]}}}
    >>> json.loads(run_runtime_config(json.dumps(config), ".")[0])["atoms"][0]["predicate"]
    'RDB'
    >>> from pslbridge.engine.predicates import unregister_predicate
    >>> unregister_predicate("RdA"); unregister_predicate("RdB")
"""

from __future__ import annotations

import logging

from . import logs
from .classes import J
from .failures import guard

log = logging.getLogger(__name__)


def run_runtime_config(config_json: str, base_path: str) -> tuple[str, list[dict[str, float]]]:
    """Run PSL's ``Runtime.serializedRun`` on a config; return its JSON answer and each solve's stats.

    Examples:
        >>> import json
        >>> config = {"rules": ["1: RcA(X) -> RcB(X) ^2"], "options": {"runtime.log.level": "WARN"},
        ...           "predicates": {"RcA/1": {"observations": [["x", "1"]]}, "RcB/1": {"targets": [["x"]]}}}
        >>> text, solves = run_runtime_config(json.dumps(config), ".")
        >>> json.loads(text)["atoms"][0]["predicate"], solves[0]["violated"]
        ('RCB', 0)
        >>> from pslbridge.engine.predicates import unregister_predicate
        >>> unregister_predicate("RcA"); unregister_predicate("RcB")
    """
    with logs.solve_events() as solves, guard("running PSL's Runtime"):
        result = str(J.PslRuntime.serializedRun(config_json, base_path))
    return result, [dict(s) for s in solves]
