"""Experiment tooling, above the library and the trainer (nothing in ``knn`` below imports it).

* :mod:`~knn.tools.results`: the registry of committed ``result.json`` files, grouped per
  experiment and seed, with the paper's numbers beside them;
* :mod:`~knn.tools.report`: Tables 1-3, curves and the README's results block from them;
* :mod:`~knn.tools.cep_table`: Table 3 over seeds, with the chemprop peer row;
* :mod:`~knn.tools.summary`: ``result.json`` files as rows of a Markdown table;
* :mod:`~knn.tools.nightly`: the nightly regression against ``experiments/expected.yaml``;
* :mod:`~knn.tools.bench` and :mod:`~knn.tools.throughput`: speed, as ratios against a
  baseline timed in the same process.

Each is a command, ``python -m knn.tools.<name> --help``.
"""
