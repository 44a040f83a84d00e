"""Where the configs, the checkout and the data cache are: the one place that derives them
from this file's location.

Two ways to be installed:

* in the checkout (``make setup``'s editable install, or ``python -m`` from the
  repository): the folder holding ``knn/`` is the repository, with ``conf/``,
  ``data/``, ``experiments/`` and ``constraints.txt`` beside it; :data:`CHECKOUT` is it;
* from a wheel (``pip install knn-*.whl``): the wheel carries the top-level ``conf/`` as
  ``knn/conf/`` (pyproject's ``package-dir``); there is no repository, so
  :data:`CHECKOUT` is ``None`` and the data cache defaults to ``~/.cache/knn``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_PACKAGE: Path = Path(__file__).resolve().parent
#: The folder holding the ``knn`` package (the repository in a checkout; site-packages
#: in a wheel install, where only :data:`CHECKOUT` says whether it is a repository).
REPO_ROOT: Path = _PACKAGE.parent
#: The repository, or ``None`` in a wheel install (the configs then come with the package).
CHECKOUT: Path | None = (
    REPO_ROOT if not (_PACKAGE / "conf").is_dir() and (REPO_ROOT / "conf" / "train.yaml").is_file()
    else None
)
#: The Hydra config tree: the repository's ``conf/``, or its copy inside an installed wheel.
CONF_DIR: Path = REPO_ROOT / "conf" if CHECKOUT is not None else _PACKAGE / "conf"
#: The exact versions the results were made with (``make setup`` installs with them).
CONSTRAINTS: Path | None = CHECKOUT / "constraints.txt" if CHECKOUT is not None else None


def default_data_cache() -> Path:
    """Where data files go when neither a cache argument nor ``$KNN_DATA_CACHE`` says:
    ``<repo>/data`` in a checkout, else ``$XDG_CACHE_HOME/knn`` (``~/.cache/knn``)."""
    if CHECKOUT is not None:
        return CHECKOUT / "data"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "knn"


def pinned_versions() -> dict[str, str]:
    """``{package: version}`` of ``constraints.txt`` (names lower-case, ``_`` as ``-``);
    ``{}`` in a wheel install or when the file is missing."""
    if CONSTRAINTS is None or not CONSTRAINTS.is_file():
        return {}
    pins = (re.match(r"\s*([A-Za-z0-9._-]+)\s*==\s*([^\s;#]+)", line)
            for line in CONSTRAINTS.read_text().splitlines())
    return {re.sub(r"[-_.]+", "-", m[1]).lower(): m[2] for m in pins if m}
