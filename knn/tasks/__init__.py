"""Tasks: what the shared trainer trains on (data, model family, loss, metrics).

A task class has a ``Config`` dataclass (its config group's schema), a
``models`` table (model name -> :class:`knn.models.ModelSpec`, from
:func:`knn.models.models_of`) and the methods of
:class:`knn.tasks.base.Task`. Add a task by writing its module and listing it
in :data:`TASKS`; the trainer finds it by ``task.name``.
"""

from __future__ import annotations

from typing import Any

from knn.tasks.lm import LanguageModeling
from knn.tasks.molecules import MoleculeRegression
from knn.tasks.sst import SentimentClassification

#: task name (``task.name`` in the config) -> task class
TASKS: dict[str, Any] = {"ptb": LanguageModeling, "sst": SentimentClassification,
                         "cep": MoleculeRegression, "mol_csv": MoleculeRegression}

__all__ = ["TASKS", "LanguageModeling", "SentimentClassification", "MoleculeRegression"]
