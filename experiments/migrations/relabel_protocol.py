"""One-off migration: derived protocol labels and provenance keys for committed JSONs.

    python experiments/migrations/relabel_protocol.py [PATH ...] [--dry-run]

Run once when protocol labels became derived from configs and every JSON the
project writes started to carry :func:`knn.train.provenance.provenance`.
Before that, ``knn.results`` (now knn.tools.results) labelled a run "full" unless its command line
used one of a fixed list of keys, so runs with e.g. ``task.eval_batch_size=10``
or ``task.phrases=false`` showed as the paper's protocol; and bench,
throughput and nightly files recorded no commit or machine.

For each JSON (default: the files under ``experiments/`` that git tracks;
given folders are searched for ``*.json``):

* ``result.json``: ``protocol`` is set to
  :func:`knn.train.protocol.protocol_label` of its stored ``config`` against
  the resolved config of its experiment alone (the ``experiment=`` of its
  stored ``command``, composed from today's ``conf/``), and ``experiment`` to
  that name. Keys the schema gained after the run are absent from its stored
  config: they are not differences (see :mod:`knn.train.protocol`).
* ``result.json``, a layer benchmark (``cases`` and ``linear``), a throughput
  measurement (``tokens_per_s``) or a nightly summary (``checks`` and
  ``expected_file``): each provenance key it lacks (``git_commit``,
  ``command``, ``machine``, ``torch_version``, ``ops``) is added as null, with a
  ``provenance_note`` naming them as not recorded at the time. Keys a file has
  stay as they are; nothing is inferred.

No other field changes (metrics, configs, timings stay byte-for-byte the same
values). Other JSONs (tables, bundles of several measurements) are left alone
and listed. Rerunning changes nothing more. It prints one line per file:
path, the protocol before and after (result.json), the provenance keys added.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

from knn.io import write_json
from knn.paths import REPO_ROOT
from knn.train.config import reference_config
from knn.train.protocol import experiment_of_command, group_choices, protocol_label
from knn.train.provenance import NOT_RECORDED

PROVENANCE_KEYS = ("git_commit", "command", "machine", "torch_version", "ops")
SCRIPT = "experiments/migrations/relabel_protocol.py"


def kind(path: Path, data: Any) -> str | None:
    """``result``, ``bench``, ``throughput``, ``nightly``, or None for any other JSON."""
    if not isinstance(data, dict):
        return None
    if path.name == "result.json" and "config" in data:
        return "result"
    if "cases" in data and "linear" in data:
        return "bench"
    if "tokens_per_s" in data:
        return "throughput"
    if "checks" in data and "expected_file" in data:
        return "nightly"
    return None


def add_provenance(data: dict[str, Any]) -> list[str]:
    """Add each missing provenance key as null, with a note; return the keys added."""
    missing = [k for k in PROVENANCE_KEYS if k not in data]
    for key in missing:
        data[key] = None
    if missing and "provenance_note" not in data:
        data["provenance_note"] = (f"{', '.join(missing)}: {NOT_RECORDED} (added as null by {SCRIPT})")
    return missing


def relabel(data: dict[str, Any],
            reference: Callable[[str | None, tuple[str, ...]], dict[str, Any]]) -> str:
    """Set ``experiment`` and ``protocol`` of a result from its stored config; return the label.

    A result that has both keys keeps them: its label was derived against the config schema
    of its time, and a later schema (renamed keys) would make every key look changed.
    """
    if "protocol" in data and "experiment" in data:
        return data["protocol"]
    experiment = experiment_of_command(data.get("command"))
    groups = tuple(group_choices(shlex.split(data.get("command") or "")))
    data["experiment"] = experiment
    data["protocol"] = protocol_label(data["config"], reference(experiment, groups),
                                      data.get("stop_reason"), experiment)
    return data["protocol"]


def committed_json(root: Path = REPO_ROOT) -> list[Path]:
    """The JSON files under ``experiments/`` that git tracks."""
    out = subprocess.run(["git", "ls-files", "-z", "--", "experiments/*.json"], cwd=root,
                         capture_output=True, text=True, check=True).stdout
    return [root / p for p in out.split("\0") if p]


def files(paths: list[str]) -> list[Path]:
    """The given files, and the ``*.json`` below the given folders."""
    found: list[Path] = []
    for p in map(Path, paths):
        found += sorted(p.rglob("*.json")) if p.is_dir() else [p]
    return found


def migrate(paths: list[Path], dry_run: bool = False) -> list[dict[str, Any]]:
    """Migrate ``paths``; one record per file: path, kind, protocol before and after, keys added."""
    cache: dict[tuple[str | None, tuple[str, ...]], dict[str, Any]] = {}

    def reference(experiment: str | None, groups: tuple[str, ...] = ()) -> dict[str, Any]:
        if (experiment, groups) not in cache:
            cache[experiment, groups] = reference_config(experiment, groups)
        return cache[experiment, groups]

    records = []
    for path in paths:
        data = json.loads(path.read_text())
        what = kind(path, data)
        record = {"path": os.path.relpath(path), "kind": what, "before": None, "after": None, "added": []}
        if what is not None:
            before = json.loads(json.dumps(data))
            if what == "result":
                record["before"] = data.get("protocol")
                record["after"] = relabel(data, reference)
            record["added"] = add_provenance(data)
            if data != before and not dry_run:
                write_json(data, path)
        records.append(record)
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", help="JSON files or folders (default: the committed "
                                                 "JSON files under experiments/)")
    parser.add_argument("--dry-run", action="store_true", help="print, write nothing")
    args = parser.parse_args(argv)
    paths = files(args.paths) if args.paths else committed_json()
    for r in migrate(paths, args.dry_run):
        if r["kind"] is None:
            print(f"{r['path']}: left alone (not a result, bench, throughput or nightly JSON)")
            continue
        label = f"protocol {r['before']!r} -> {r['after']!r}; " if r["kind"] == "result" else ""
        print(f"{r['path']}: {r['kind']}: {label}added {', '.join(r['added']) or 'nothing'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
