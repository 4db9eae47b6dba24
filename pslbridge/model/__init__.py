"""The model description (:class:`ModelSpec`) and one reader per source; nothing here touches Java.

- :mod:`~pslbridge.model.parts`: rules, predicates, neural and evaluation declarations, data tables.
- :mod:`~pslbridge.model.spec`: :class:`ModelSpec` (queries, :meth:`~ModelSpec.observe_labels`, validation) and
  :func:`load_model`.
- :mod:`~pslbridge.model.runtime_config`: PSL 2.3/2.4 runtime configs (``.json``/``.yaml``).
- :mod:`~pslbridge.model.cli_files`: ``.psl`` + ``.data`` pairs in every dialect of PSL 2.3's data loader.
- :mod:`~pslbridge.model.python_objects`: Python objects (:meth:`ModelSpec.from_python`).
- :mod:`~pslbridge.model.tables`: rule text and data rows.

Every problem is a :class:`~pslbridge.errors.ModelFileError` naming the file, line, rule or predicate.

Examples:
    >>> spec = ModelSpec.from_python(
    ...     rules=["1.0: Friend(A, B) & Smokes(A) -> Smokes(B) ^2"],
    ...     predicates={"Friend": 2, "Smokes": 1},
    ...     observations={"Friend": [("a", "b")], "Smokes": [("a", 1.0)]},
    ...     targets={"Smokes": [("b",)]},
    ... )
    >>> [p.name for p in spec.predicates.values()]
    ['Friend', 'Smokes']
"""

from .parts import PARTITIONS, PHASES, DataTable, EvaluationSpec, NeuralSpec, PredicateSpec, RuleSpec
from .spec import ModelSpec, load_model
from .tables import parse_rules_text, read_data_file, read_rules_file

__all__ = [
    "PARTITIONS",
    "PHASES",
    "DataTable",
    "EvaluationSpec",
    "ModelSpec",
    "NeuralSpec",
    "PredicateSpec",
    "RuleSpec",
    "load_model",
    "parse_rules_text",
    "read_data_file",
    "read_rules_file",
]
