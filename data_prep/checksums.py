"""The data files' sha256 table, as data and in ``sha256sum`` format.

The table itself lives in :mod:`knn.data.mirror` because the library verifies
every file it reads and must not depend on this folder (it is not part of the
installed package). This module re-exports it for scripts and prints it::

    python -m data_prep.checksums > SHA256SUMS   # then, in a mirror: sha256sum -c SHA256SUMS
"""

from __future__ import annotations

from collections.abc import Mapping

from knn.data.mirror import CHECKSUMS, SOURCES

__all__ = ["CHECKSUMS", "SOURCES", "sha256sum_text"]


def sha256sum_text(checksums: Mapping[str, str] = CHECKSUMS) -> str:
    """The table as ``sha256sum`` would print it: ``<sha>  <relative path>`` per line."""
    return "".join(f"{sha}  {name}\n" for name, sha in checksums.items())


if __name__ == "__main__":
    print(sha256sum_text(), end="")
