"""Predict a molecule property with a trained model (task=cep or task=mol_csv).

    python -m knn.predict ckpt=<checkpoint> input=<csv or SMILES list> [output=<csv>] [key=value ...]

Arguments are ``key=value`` pairs (split at the first ``=``, so SMILES with
``=`` in them are fine):

=================  ==========================================================
``ckpt``           ``best.pt`` (or ``last.pt``) of a training run, or the run
                   directory (then its ``best.pt``); several, comma-separated
                   (e.g. runs of other seeds): an ensemble, whose
                   ``prediction`` is the members' mean and whose ``std``
                   column is their sample standard deviation
``input``          a ``.csv`` file with a header row (SMILES in
                   ``smiles_column``); any other existing file: one SMILES a
                   line; otherwise SMILES separated by commas (SMILES never
                   contain commas), e.g. ``input=CCO,c1ccccc1``. A value
                   that looks like a path but names no file is an error,
                   not a SMILES: one ending in ``.csv``, ``.tsv``, ``.txt``
                   or ``.smi``, or one without commas that has a ``/`` or
                   ``\\`` and does not parse as a SMILES (``F/C=C/F`` does)
``output``         the predictions CSV; default: standard output
``smiles_column``  default: the training run's ``task.data.smiles_column``
``on_invalid``     ``error`` (default): an unparseable SMILES stops with one
                   line naming it; ``skip``: its prediction is left empty and
                   the reason goes in an ``invalid`` column
``batch_size``     molecules per forward pass (default 200)
``device``         ``cpu`` (default), ``cuda`` or ``auto``
=================  ==========================================================

Output columns: ``row`` (the CSV's 0-based data row, or the item's position
in the list), ``smiles``, the CSV's target column when it has the one the
model was trained on, ``prediction`` (in the target's units: the checkpoint
holds the training split's mean and standard deviation), ``std`` for an
ensemble, and ``invalid`` with ``on_invalid=skip``. When the target column is present, the RMSE and MAE
of the predictions are printed to standard error. Expected failures (missing
file or column, unreadable checkpoint, invalid SMILES) print one line and
exit with status 1; bad arguments exit with status 2.
"""

from __future__ import annotations

import csv
import logging
import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import torch

from knn.data.mirror import DataError
from knn.data.molecules import ON_INVALID, bondless_note, collate, count_bondless, featurize_smiles
from knn.errors import CheckpointError, ConfigError
from knn.featurize import InvalidMolecule, MolFeaturizer, parse_smiles
from knn.tasks.molecules import build_regressor
from knn.train import checkpoint as ckpt_io
from knn.train.loop import pick_device

log = logging.getLogger(__name__)

#: Endings that make a missing ``input=`` a mistyped file rather than SMILES.
FILE_SUFFIXES = (".csv", ".tsv", ".txt", ".smi")
KEYS = ("ckpt", "input", "output", "smiles_column", "on_invalid", "batch_size", "device")
USAGE = ("usage: python -m knn.predict ckpt=<checkpoint or run dir>[,<another>...] input=<csv, SMILES file or "
         "SMILES,SMILES,...> [output=<csv>] [smiles_column=..] [on_invalid=error|skip] "
         "[batch_size=200] [device=cpu]")


class UsageError(ValueError):
    """Bad command-line arguments; the message is one line."""


@dataclass
class Predictor:
    """A trained molecule model with its featurizer and target scale."""

    model: torch.nn.Module
    featurizer: MolFeaturizer
    mean: float
    std: float
    meta: dict[str, Any]
    config: dict[str, Any]
    device: torch.device

    @classmethod
    def load(cls, path: str | Path, device: str = "cpu") -> Predictor:
        path = Path(path)
        if path.is_dir():
            path = path / ckpt_io.BEST
        if not path.is_file():
            raise CheckpointError(f"no checkpoint at {path}")
        state = ckpt_io.load(path)
        config, meta = state.get("config") or {}, state.get("meta") or {}
        if "target_mean" not in meta or "model" not in state:
            task = (config.get("task") or {}).get("name")
            raise CheckpointError(f"{path} is not a molecule model checkpoint (task {task!r})")
        featurizer = MolFeaturizer.preset(meta["featurizer"])
        model = build_regressor(stored_model_config(config["model"]), featurizer.atom_dim,
                                featurizer.bond_dim)
        model.load_state_dict(state["model"])
        dev = pick_device(device)
        return cls(model.to(dev).eval(), featurizer, float(meta["target_mean"]),
                   float(meta["target_std"]), meta, config, dev)

    @torch.no_grad()
    def __call__(self, smiles: Sequence[str], on_invalid: str = "error",
                 labels: Sequence[str] | None = None, batch_size: int = 200,
                 report: bool = True) -> tuple[list[float | None], dict[int, str]]:
        """Predictions for ``smiles`` (None where invalid) and {position: reason} of the invalid
        ones; ``report``: warn when some molecules have no bond (:func:`count_bondless`)."""
        graphs, kept, bad = featurize_smiles(smiles, self.featurizer, on_invalid, labels,
                                             on_invalid_key="on_invalid")  # this command's key
        if report and (n := count_bondless(graphs)):
            log.warning(bondless_note(n, len(graphs), "input"))
        out: list[float | None] = [None] * len(smiles)
        for start in range(0, len(graphs), batch_size):
            batch = collate(graphs[start : start + batch_size]).to(self.device)
            pred = self.model(batch).double().cpu() * self.std + self.mean  # (G,) target units
            for i, p in zip(kept[start : start + batch_size], pred.tolist()):
                out[i] = p
        return out, dict(bad)


def stored_model_config(model: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's ``model`` config as today's schema (:data:`knn.models.MODELS`) reads it."""
    model = dict(model)
    # Checkpoints written before wl_kernel's WL iterations were named ``depth`` (as in every
    # other model) store them as ``iterations``.
    if model.get("name") == "wl_kernel" and "iterations" in model:
        model["depth"] = model.pop("iterations")
    return model


def parse_args(argv: Sequence[str]) -> dict[str, str]:
    args: dict[str, str] = {}
    for item in argv:
        key, sep, value = item.partition("=")
        if not sep or key not in KEYS:
            raise UsageError(f"unknown argument {item!r}; keys: {', '.join(KEYS)}")
        args[key] = value
    for key in ("ckpt", "input"):
        if not args.get(key):
            raise UsageError(f"{key}=... is required")
    if args.setdefault("on_invalid", "error") not in ON_INVALID:
        raise UsageError(f"on_invalid must be one of {ON_INVALID}, got {args['on_invalid']!r}")
    if not args.setdefault("batch_size", "200").isdigit() or int(args["batch_size"]) < 1:
        raise UsageError(f"batch_size must be a positive integer, got {args['batch_size']!r}")
    return args


@dataclass
class Inputs:
    rows: list[int]  # CSV data row or list position
    smiles: list[str]
    labels: list[str]  # how an error names each item
    targets: list[str] | None  # the target column's raw text, when the CSV has it
    target_column: str | None


def looks_like_path(spec: str) -> bool:
    """Whether ``input=spec`` was meant as a file: a data file ending, or a path
    separator in a single item that is no SMILES.

    No SMILES ends in ``.csv``, ``.txt`` and the like (``v``, ``x``, ``m`` are
    no atoms). ``/`` and ``\\`` are SMILES bond directions (``F/C=C/F``), so
    they mark a path only in a value that does not parse as one SMILES.
    """
    if spec.lower().endswith(FILE_SUFFIXES):
        return True
    if ("/" not in spec and "\\" not in spec) or "," in spec:
        return False
    try:
        parse_smiles(spec)
    except InvalidMolecule:
        return True
    return False


def check_input(spec: str) -> None:
    """Raise :class:`DataError` (one line) when ``input=spec`` is a path to no file."""
    path = Path(spec).expanduser()
    if looks_like_path(spec) and not path.is_file():
        raise DataError(f"input={spec}: " + ("not a file" if path.exists() else "no such file"))


def read_inputs(spec: str, smiles_column: str, target_column: str | None) -> Inputs:
    """A CSV, a file of SMILES lines, or a comma-separated SMILES list (see the module doc)."""
    path = Path(spec).expanduser()
    check_input(spec)
    if path.is_file() and path.suffix.lower() == ".csv":
        with open(path, newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None) or []
            if smiles_column not in header:
                raise DataError(f"{path}: no column {smiles_column!r}; columns present: "
                                f"{', '.join(header)} (set smiles_column=...)")
            i_s = header.index(smiles_column)
            i_t = header.index(target_column) if target_column in header else None
            rows, smiles, targets = [], [], []
            for row, record in enumerate(reader):  # rows numbered as knn.data.molecules does
                if not record:
                    continue
                rows.append(row)
                smiles.append(record[i_s] if len(record) > i_s else "")
                targets.append(record[i_t] if i_t is not None and len(record) > i_t else "")
        labels = [f"{path}: row {r} (column {smiles_column!r})" for r in rows]
        has_target = i_t is not None
        return Inputs(rows, smiles, labels, targets if has_target else None,
                      target_column if has_target else None)
    if path.is_file():
        smiles = [line.strip() for line in path.read_text().splitlines() if line.strip()]
        return Inputs(list(range(len(smiles))), smiles,
                      [f"{path}: SMILES {i}" for i in range(len(smiles))], None, None)
    smiles = [s.strip() for s in spec.split(",")]
    return Inputs(list(range(len(smiles))), smiles, [f"input item {i}" for i in range(len(smiles))],
                  None, None)


def load_ensemble(spec: str, device: str = "cpu") -> list[Predictor]:
    """The predictors of ``ckpt=`` (comma-separated checkpoints or run dirs); members must
    share the featurizer and the target, or their mean would mix two tasks."""
    paths = [p for p in spec.split(",") if p]
    members = [Predictor.load(p, device) for p in paths]
    for path, m in zip(paths[1:], members[1:]):
        for key in ("featurizer", "target_column"):
            if m.meta.get(key) != members[0].meta.get(key):
                raise ConfigError(f"ckpt={path}: its {key} ({m.meta.get(key)!r}) differs from "
                                  f"{paths[0]}'s ({members[0].meta.get(key)!r}); an ensemble "
                                  "needs models of one task")
    return members


def ensemble_predict(members: Sequence[Predictor], smiles: Sequence[str], on_invalid: str,
                     labels: Sequence[str] | None, batch_size: int
                     ) -> tuple[list[float | None], list[float | None] | None, dict[int, str]]:
    """Mean prediction over ``members``, their sample std (None for one member), invalid items.

    The members share a featurizer, so they reject the same SMILES.
    """
    runs = [m(smiles, on_invalid, labels, batch_size, report=i == 0) for i, m in enumerate(members)]
    invalid = runs[0][1]
    columns = list(zip(*(preds for preds, _ in runs)))  # per item: each member's prediction
    means = [None if p[0] is None else statistics.fmean(p) for p in columns]
    if len(members) == 1:
        return means, None, invalid
    return means, [None if p[0] is None else statistics.stdev(p) for p in columns], invalid


def write_predictions(inputs: Inputs, preds: list[float | None], invalid: dict[int, str] | None,
                      out: TextIO, spread: list[float | None] | None = None) -> None:
    writer = csv.writer(out, lineterminator="\n")
    header = ["row", "smiles"] + ([inputs.target_column] if inputs.targets is not None else [])
    writer.writerow(header + ["prediction"] + (["std"] if spread is not None else [])
                    + (["invalid"] if invalid is not None else []))
    for i, (row, s, p) in enumerate(zip(inputs.rows, inputs.smiles, preds)):
        cells = [row, s] + ([inputs.targets[i]] if inputs.targets is not None else [])
        cells.append("" if p is None else repr(p))
        if spread is not None:
            cells.append("" if spread[i] is None else repr(spread[i]))
        if invalid is not None:
            cells.append(invalid.get(i, ""))
        writer.writerow(cells)


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _errors(preds: list[float | None], targets: list[str]) -> tuple[float, float, int] | None:
    """RMSE, MAE and count over items with a prediction and a finite numeric target."""
    pairs = [(p, v) for p, t in zip(preds, targets)
             if p is not None and (v := _number(t)) is not None]
    if not pairs:
        return None
    se = sum((p - v) ** 2 for p, v in pairs)
    ae = sum(abs(p - v) for p, v in pairs)
    return math.sqrt(se / len(pairs)), ae / len(pairs), len(pairs)


def run(args: dict[str, str]) -> None:
    check_input(args["input"])  # before the checkpoint is loaded: a typo fails at once
    members = load_ensemble(args["ckpt"], args.get("device", "cpu"))
    meta = members[0].meta
    smiles_column = args.get("smiles_column") or meta.get("smiles_column", "smiles")
    inputs = read_inputs(args["input"], smiles_column, meta.get("target_column"))
    preds, spread, invalid = ensemble_predict(members, inputs.smiles, args["on_invalid"],
                                              inputs.labels, int(args["batch_size"]))
    skip = args["on_invalid"] == "skip"
    if args.get("output"):
        out_path = Path(args["output"])
        out_path.parent.mkdir(parents=True, exist_ok=True)
        with open(out_path, "w", newline="") as f:
            write_predictions(inputs, preds, invalid if skip else None, f, spread)
        print(f"wrote {len(preds) - len(invalid)} predictions to {out_path}"
              + (f" ({len(invalid)} invalid SMILES left empty)" if invalid else ""), file=sys.stderr)
    else:
        write_predictions(inputs, preds, invalid if skip else None, sys.stdout, spread)
    if inputs.targets is not None and (errs := _errors(preds, inputs.targets)):
        print(f"{inputs.target_column}: rmse {errs[0]:.4f}  mae {errs[1]:.4f}  "
              f"over {errs[2]} molecules", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m knn.predict`` and the ``knn-predict`` command: the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help"):
        print((__doc__ or USAGE).strip())  # knn-predict is python -m knn.predict
        return 0
    try:
        args = parse_args(argv)
    except UsageError as e:
        print(f"error: {e}\n{USAGE}", file=sys.stderr)
        return 2
    try:
        run(args)
    except (CheckpointError, ConfigError, DataError, OSError) as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
