"""Where the repository is: the one place that derives it from this file's location.

An editable install keeps the package inside the checkout, so the folder holding
``knn/`` is the repository, with ``conf/``, ``data/`` and ``experiments/`` beside it.
"""

from __future__ import annotations

from pathlib import Path

#: The folder holding the ``knn`` package (the repository in a checkout).
REPO_ROOT: Path = Path(__file__).resolve().parent.parent
#: The repository's Hydra config tree.
CONF_DIR: Path = REPO_ROOT / "conf"
