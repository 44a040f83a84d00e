"""Experiment tooling, above the library and the trainer (nothing in ``knn`` below imports it).

* :mod:`~knn.tools.results`: the registry of committed ``result.json`` files, grouped per
  experiment and seed, with the paper's numbers beside them;
* :mod:`~knn.tools.rows`: the paper tables' rows (experiment configs and their runs, with
  departures and where each ran);
* :mod:`~knn.tools.judge`: the orderings and targets the experiment files declare, judged
  on those rows for every table;
* :mod:`~knn.tools.report`: Tables 1-3, curves and the README's results block from them;
* :mod:`~knn.tools.cep_table`: Table 3 over seeds, with the chemprop peer row;
  :mod:`~knn.tools.sst_table`: Table 2 judged, with the authors' stopping rule;
* :mod:`~knn.tools.compare`: two sets of runs on one metric, with both sides' spread;
* :mod:`~knn.tools.summary`: ``result.json`` files as rows of a Markdown table;
* :mod:`~knn.tools.nightly`: the nightly regression against ``experiments/expected.yaml``;
* :mod:`~knn.tools.bench` and :mod:`~knn.tools.throughput`: speed, as ratios against a
  baseline timed in the same process.

Each but ``rows`` and ``judge`` is a command, ``python -m knn.tools.<name> --help``.
"""
