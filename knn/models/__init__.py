"""Models: each takes a vocabulary size and one typed config dataclass."""

from knn.models.lm import KernelLM, KernelLMConfig, LSTMLM, LSTMLMConfig

__all__ = ["KernelLM", "KernelLMConfig", "LSTMLM", "LSTMLMConfig"]
