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
    >>> from pslbridge.examples import example_path
    >>> stem = example_path("simple-acquaintances") / "simple-acquaintances"
    >>> by_config, by_files = load_model(stem.with_suffix(".json")), load_model(stem.with_suffix(".psl"))
    >>> [r.text for r in by_config.rules] == [r.text for r in by_files.rules], sorted(by_files.predicates)
    (True, ['KNOWS', 'LIKES', 'LIVED'])
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
