"""The one table of Java classes pslbridge uses, resolved on first use and refused before the JVM runs.

No module outside :mod:`pslbridge.engine` names a Java class. ``J.Config`` is PSL's ``Config`` class, and so on;
:data:`REASONERS` maps the reasoner names :class:`pslbridge.Bridge` accepts to PSL's inference applications.

Examples:
    >>> J.Config.getString("inference.initialvalue", None)
    'ATOM'
"""

from __future__ import annotations

import logging
from typing import Any

from ..errors import ConfigurationError

log = logging.getLogger(__name__)

#: The package prefix of PSL's classes.
PSL_PACKAGE = "org.linqs.psl."
_CLASSES = {
    "Config": PSL_PACKAGE + "config.Config",
    "StandardPredicate": PSL_PACKAGE + "model.predicate.StandardPredicate",
    "DeepPredicate": PSL_PACKAGE + "model.predicate.DeepPredicate",
    "Predicate": PSL_PACKAGE + "model.predicate.Predicate",
    "ConstantType": PSL_PACKAGE + "model.term.ConstantType",
    "ModelLoader": PSL_PACKAGE + "parser.ModelLoader",
    "RDBMSDataStore": PSL_PACKAGE + "database.rdbms.RDBMSDataStore",
    "SQLiteDriver": PSL_PACKAGE + "database.rdbms.driver.SQLiteDriver",
    "ADMMInference": PSL_PACKAGE + "application.inference.mpe.ADMMInference",
    "DualBCDInference": PSL_PACKAGE + "application.inference.mpe.DualBCDInference",
    "DistributedDualBCDInference": PSL_PACKAGE + "application.inference.mpe.DistributedDualBCDInference",
    "SGDInference": PSL_PACKAGE + "application.inference.mpe.SGDInference",
    "Reasoner": PSL_PACKAGE + "reasoner.Reasoner",
    "ADMMObjectiveTerm": PSL_PACKAGE + "reasoner.admm.term.ADMMObjectiveTerm",
    "SimpleTermStore": PSL_PACKAGE + "reasoner.term.SimpleTermStore",
    "UnmanagedObservedAtom": PSL_PACKAGE + "model.atom.UnmanagedObservedAtom",
    "WeightedArithmeticRule": PSL_PACKAGE + "model.rule.arithmetic.WeightedArithmeticRule",
    "WeightedGroundArithmeticRule": PSL_PACKAGE + "model.rule.arithmetic.WeightedGroundArithmeticRule",
    "ArithmeticRuleExpression": PSL_PACKAGE + "model.rule.arithmetic.expression.ArithmeticRuleExpression",
    "ConstantNumber": PSL_PACKAGE + "model.rule.arithmetic.expression.coefficient.ConstantNumber",
    "FunctionComparator": PSL_PACKAGE + "reasoner.function.FunctionComparator",
    "PslRuntime": PSL_PACKAGE + "runtime.Runtime",
    "ExternalFunctionalPredicate": PSL_PACKAGE + "model.predicate.ExternalFunctionalPredicate",
    "Reflection": PSL_PACKAGE + "util.Reflection",
    "Options": PSL_PACKAGE + "config.Options",
    "RuntimeOptions": PSL_PACKAGE + "config.RuntimeOptions",
    "Option": PSL_PACKAGE + "config.Option",
    "Modifier": "java.lang.reflect.Modifier",
    "PslStringUtils": PSL_PACKAGE + "util.StringUtils",
    "Parallel": PSL_PACKAGE + "util.Parallel",
    "PslLogger": PSL_PACKAGE + "util.Logger",
    "PslVersion": PSL_PACKAGE + "util.Version",
    "ObjectMapper": "com.fasterxml.jackson.databind.ObjectMapper",
    "ArrayList": "java.util.ArrayList",
    "HashSet": "java.util.HashSet",
    "List": "java.util.List",
    "Arrays": "java.util.Arrays",
    "System": "java.lang.System",
    "Runtime": "java.lang.Runtime",
    "Integer": "java.lang.Integer",
    "Float": "java.lang.Float",
    "Class": "java.lang.Class",
    "StringWriter": "java.io.StringWriter",
    "PrintWriter": "java.io.PrintWriter",
    "PrintStream": "java.io.PrintStream",
    "OutputStream": "java.io.OutputStream",
    "ByteArrayOutputStream": "java.io.ByteArrayOutputStream",
    "JulLogger": "java.util.logging.Logger",
    "JulLevel": "java.util.logging.Level",
    "LogManager": "org.apache.logging.log4j.LogManager",
    "Log4jLevel": "org.apache.logging.log4j.Level",
    "LoggerConfig": "org.apache.logging.log4j.core.config.LoggerConfig",
    "LoggerContext": "org.apache.logging.log4j.core.LoggerContext",
    "Appender": "org.apache.logging.log4j.core.Appender",
    "WriterAppender": "org.apache.logging.log4j.core.appender.WriterAppender",
    "PatternLayout": "org.apache.logging.log4j.core.layout.PatternLayout",
    "Thread": "java.lang.Thread",
    "ThreadState": "java.lang.Thread$State",
    "ManagementFactory": "java.lang.management.ManagementFactory",
    "MemoryType": "java.lang.management.MemoryType",
    "LifeCycleState": "org.apache.logging.log4j.core.LifeCycle$State",
    "TimeUnit": "java.util.concurrent.TimeUnit",
    "Executors": "java.util.concurrent.Executors",
    "JPypeReferenceQueue": "org.jpype.ref.JPypeReferenceQueue",
}

#: Reasoner names accepted by :class:`pslbridge.Bridge` and the inference application each one uses.
REASONERS = {
    "admm": "ADMMInference",
    "dualbcd": "DualBCDInference",
    "distributeddualbcd": "DistributedDualBCDInference",
    "sgd": "SGDInference",
}
#: The reasoners built on the regularised dual LCQP (their objective carries ``λ Σ x²``).
DUAL_REASONERS = ("dualbcd", "distributeddualbcd")


class _ClassTable:
    """Java classes by short name (``J.Config``), resolved on first use; refuses before the JVM runs."""

    def __init__(self) -> None:
        self._cache: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._cache[name]
        except KeyError:
            pass
        if name not in _CLASSES:
            raise AttributeError(f"no Java class {name!r} in pslbridge's class table")
        import jpype

        if not jpype.isJVMStarted():
            raise ConfigurationError(
                f"Java class {name} was used before the JVM started; call pslbridge.jvm.start() first "
                "(pslbridge starts it on the first Bridge)"
            )
        cls = jpype.JClass(_CLASSES[name])
        self._cache[name] = cls
        return cls


J = _ClassTable()
