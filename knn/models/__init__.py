"""Models, built from one typed config dataclass each, by task family:

* :mod:`knn.models.lm`: language models, ``cls(vocab_size, cfg)`` (PTB, Table 1);
* :mod:`knn.models.classifier`: sentence classifiers, ``cls(cfg, vectors)`` with a
  fixed word-vector table, or :func:`~knn.models.classifier.build_classifier` (SST, Table 2);
* :mod:`knn.models.graph` and :mod:`knn.models.graph_baselines`: molecule regressors,
  ``cls(cfg)``, or :func:`~knn.models.graph.build_graph_model` (CEP, Table 3), sharing
  :class:`~knn.models.heads.RegressionHead`.

:func:`count_params` is the one parameter count: the trainer's ``params`` in
``result.json``, the throughput tool and the tests' size checks.
"""

from torch import nn

from knn.models.lm import KernelLM, KernelLMConfig, LSTMLM, LSTMLMConfig


def count_params(model: nn.Module) -> int:
    """Trainable parameters (``requires_grad``); tied weights count once, buffers (a fixed
    embedding table, a fitted kernel model's weights) not at all."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


__all__ = ["KernelLM", "KernelLMConfig", "LSTMLM", "LSTMLMConfig", "count_params"]
