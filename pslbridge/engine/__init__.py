"""The JVM layer: the only modules that name Java classes, split by job.

- :mod:`~pslbridge.engine.classes`: the one table of Java classes (``J``), the reasoner names.
- :mod:`~pslbridge.engine.failures`: Java failures become typed Python errors (heap exhaustion, rule syntax).
- :mod:`~pslbridge.engine.setup`: PSL's process-wide set-up and facts about the running JVM.
- :mod:`~pslbridge.engine.predicates`: PSL's predicate registry, Python external functions, evaluators.
- :mod:`~pslbridge.engine.datastore`: the in-memory data store, databases, option layers, Java arrays.
- :mod:`~pslbridge.engine.reasoner`: reasoner internals (objectives, the ADMM cache, proximity terms).
- :mod:`~pslbridge.engine.runtime`: PSL's own ``Runtime``, run from one place.
- :mod:`~pslbridge.engine.logs`: PSL's log4j output routed to Python, each solve's statistics.

Finding Java and starting the JVM is :mod:`pslbridge.jvm`; :mod:`pslbridge.program` holds the Java objects these
functions return.

Examples:
    >>> from pslbridge.engine.classes import REASONERS
    >>> sorted(REASONERS)
    ['admm', 'distributeddualbcd', 'dualbcd', 'sgd']
"""
