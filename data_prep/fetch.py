"""Verify, and fetch if needed, the data files of one data set or all of them.

Usage::

    python -m data_prep.fetch ptb|sst|cep|all [--mirror DIR] [--cache DIR] [--no-download]

Prints one status line per file and exits 1 if any file is unavailable.
Search order and error messages are those of :func:`knn.data.mirror.resolve`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from knn.data.mirror import CHECKSUMS, DataError, find_mirror, resolve

#: Files each data set needs; SST's experiments also need the word vectors
#: (the superseded spaCy stand-in is only in ``all``).
GROUPS: dict[str, tuple[str, ...]] = {
    "ptb": ("ptb/ptb.train.txt", "ptb/ptb.valid.txt", "ptb/ptb.test.txt"),
    "sst": (
        "sst/trees/train.txt",
        "sst/trees/dev.txt",
        "sst/trees/test.txt",
        "vectors/glove.6B.50d.sst-vocab.txt.gz",
    ),
    "cep": ("cep/cep-processed.csv", "cep/split-random-80-10-10-seed0.json"),
}
GROUPS["all"] = tuple(CHECKSUMS)


def status_line(
    name: str, mirror: str | Path | None, cache: str | Path | None, download: bool
) -> tuple[bool, str]:
    """Resolve one file; return whether it is available and a one-line status."""
    try:
        path = resolve(name, mirror, cache, download)
    except DataError as err:
        return False, f"MISSING  {err}"
    mirror_dir = find_mirror(mirror)
    origin = "mirror" if mirror_dir is not None and path.is_relative_to(mirror_dir) else "cache"
    return True, f"ok       {name}  ({origin}: {path})"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(prog="python -m data_prep.fetch", description=__doc__)
    parser.add_argument("dataset", choices=sorted(GROUPS), help="which data set's files")
    parser.add_argument("--mirror", default=None, help="local mirror root (else $KNN_DATA_MIRROR)")
    parser.add_argument("--cache", default=None, help="download cache (else $KNN_DATA_CACHE)")
    parser.add_argument("--no-download", action="store_true", help="verify only, never fetch")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Check every file of the chosen data set; 0 if all are available, else 1."""
    args = parse_args(argv)
    try:
        find_mirror(args.mirror)  # a bad --mirror is one error, not one per file
    except DataError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    all_ok = True
    for name in GROUPS[args.dataset]:
        ok, line = status_line(name, args.mirror, args.cache, not args.no_download)
        print(line, flush=True)
        all_ok &= ok
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
