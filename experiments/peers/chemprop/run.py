#!/usr/bin/env python3
"""Chemprop peer run on the CEP split (or a molecule CSV of your own): one command, one result.json.

Trains chemprop 2.3.1's default D-MPNN (regression on PCE, default
hyper-parameters, CPU, ``--pytorch-seed N --data-seed N`` for ``--seed N``) on the mirror's
``cep/cep-processed.csv`` with the mirror's random 80/10/10 split, predicts the
test molecules with ``chemprop predict``, and computes the test RMSE and MAE
here, from the prediction file against the CSV's targets (no log line is
trusted). See README.md beside this file.

This script needs only the standard library: it makes its own virtual
environment (chemprop and torch pinned below, installed once, kept apart from
the ``knn`` package's) and drives the ``chemprop`` CLI in it by subprocess.

    python3 experiments/peers/chemprop/run.py                # 50 epochs -> result.json here
    python3 experiments/peers/chemprop/run.py --seed 1       # another seed -> seed1/result.json here
    python3 experiments/peers/chemprop/run.py --epochs 3     # check -> outputs/peers/chemprop/...
    python3 experiments/peers/chemprop/run.py --data-path my.csv --target-column y \
        --split <run dir>/split.json --out outputs/peers/chemprop/mine   # your own CSV and split

Every failure ends with a one-line message and exit status 1.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import hashlib
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path
from typing import Any, Optional, Sequence

CHEMPROP_VERSION = "2.3.1"
TORCH_VERSION = "2.13.0"
#: Chemprop's own default; a run with fewer epochs is a check, not the measurement.
FULL_EPOCHS = 50
#: The seed of the committed result.json; another seed's full run goes to seed<N>/result.json.
SEED = 0
#: chemprop's default --warmup-epochs; its train refuses --epochs not above it.
WARMUP_EPOCHS = 2

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
#: The committed measurement; written only by a full (FULL_EPOCHS) run.
COMMITTED_RESULT = HERE / "result.json"
DEFAULT_VENV = HERE / ".venv"  # git-ignored (.venv/ in the repository's .gitignore)
CHECK_ROOT = REPO / "outputs" / "peers" / "chemprop"

CEP_CSV = "cep/cep-processed.csv"
CEP_SPLIT = "cep/split-random-80-10-10-seed0.json"
#: sha256 of the two mirror files, as in knn/data/mirror.py's CHECKSUMS.
CHECKSUMS = {
    CEP_CSV: "99c3def57a412e0ac3922194d0605b6a8a9056938706a44bc4ba1d35fe8bc8c0",
    CEP_SPLIT: "8f9efe03329db0d49dbdd64d03aeb0e631e886a71ea72220ac4201f7cb66657e",
}
SMILES_COL = "smiles"  # the defaults: the CEP CSV's columns
TARGET_COL = "PCE"
#: The split JSON's keys: the mirror's split and the trainer's ``<run dir>/split.json``
#: (``task=mol_csv``) both hold 0-based data rows under them.
SPLIT_KEYS = ("train", "valid", "test")
ROW_COL = "row"  # the CSV's 0-based data-row index, carried through chemprop predict


class PeerError(Exception):
    """A failure reported as one line."""


# ----------------------------------------------------------------------------- helpers


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def run_logged(cmd: Sequence[str], *, cwd: Path, env: Optional[dict[str, str]] = None) -> float:
    """Run ``cmd`` (output to this terminal) and return its wall time in seconds."""
    print("+ " + shlex.join(str(c) for c in cmd), flush=True)
    start = time.perf_counter()
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise PeerError(f"command failed (exit {proc.returncode}): {shlex.join(str(c) for c in cmd)}")
    return seconds


def capture(cmd: Sequence[str], *, cwd: Path = REPO) -> str:
    """Run ``cmd`` and return its stdout, stripped; a failure is a PeerError."""
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise PeerError(f"{shlex.join(str(c) for c in cmd)} failed: {last}")
    return proc.stdout.strip()


def rel(path: Path) -> str:
    """``path`` relative to the repository where it lies inside it, else absolute (links kept)."""
    absolute = Path(os.path.abspath(path))
    try:
        return str(absolute.relative_to(REPO))
    except ValueError:
        return str(absolute)


# ----------------------------------------------------------------------------- data


def find_mirror(mirror: Optional[str]) -> Path:
    """The data mirror: ``--mirror``, else ``$KNN_DATA_MIRROR``, else ``<repo>/../shared/data``.

    The same order as ``knn.data.mirror`` (without its cache and download
    fallbacks: this peer reads the mirror only).
    """
    root = Path(mirror or os.environ.get("KNN_DATA_MIRROR") or REPO.parent / "shared" / "data")
    for name in (CEP_CSV, CEP_SPLIT):
        path = root / name
        if not path.is_file():
            raise PeerError(
                f"missing {path}: set KNN_DATA_MIRROR (or --mirror) to the data mirror holding {name}"
            )
        got = sha256_of(path)
        if got != CHECKSUMS[name]:
            raise PeerError(f"{path}: sha256 {got} is not the expected {CHECKSUMS[name]}")
    return root


def read_targets(
    csv_path: Path, smiles_col: str = SMILES_COL, target_col: str = TARGET_COL
) -> tuple[list[str], list[float]]:
    """The CSV's SMILES and target columns, one entry per data row (row i: the i-th line after
    the header; a blank line before the last row is refused, since chemprop would not count
    it while the trainer's split files do)."""
    if not csv_path.is_file():
        raise PeerError(f"missing {csv_path}")
    smiles: list[str] = []
    targets: list[float] = []
    with open(csv_path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or not {smiles_col, target_col} <= set(header):
            raise PeerError(f"{csv_path}: expected columns {smiles_col},{target_col}, got {header}")
        i_smiles, i_target = header.index(smiles_col), header.index(target_col)
        blank_line = 0
        for record in reader:
            if not record:
                blank_line = blank_line or reader.line_num
                continue
            row = len(smiles)
            # chemprop (pandas) skips a blank line without counting it; the trainer counts it:
            # past one, the split's row numbers would name other molecules for chemprop.
            if blank_line:
                raise PeerError(f"{csv_path}: blank line {blank_line} before row {row}; remove it")
            value = record[i_target] if len(record) > i_target else ""
            try:
                target = float(value)
            except ValueError:
                target = math.nan
            # a missing target would make chemprop mask the row and the test metrics undefined
            if not math.isfinite(target):
                raise PeerError(
                    f"{csv_path}: row {row} (line {reader.line_num}): target {value!r} in column "
                    f"{target_col!r} is not a finite number"
                )
            smiles.append(record[i_smiles] if len(record) > i_smiles else "")
            targets.append(target)
    return smiles, targets


def read_split(split_path: Path, n_rows: int) -> dict[str, list[int]]:
    """A split JSON (the mirror's, or the trainer's ``split.json``) as chemprop's keys (train,
    val, test), checked to name distinct rows of the CSV; rows it leaves out go unused."""
    expected = f"expected a JSON object with lists {', '.join(SPLIT_KEYS)} of 0-based data rows"
    if not split_path.is_file():
        raise PeerError(f"missing {split_path}")
    try:
        raw = json.loads(split_path.read_text())
    except (OSError, ValueError) as err:
        raise PeerError(f"{split_path}: {expected} ({' '.join(str(err).split())})") from None
    if not isinstance(raw, dict) or not all(isinstance(raw.get(k), list) and raw[k] for k in SPLIT_KEYS):
        raise PeerError(f"{split_path}: {expected}, each non-empty")
    split = {"train": raw["train"], "val": raw["valid"], "test": raw["test"]}
    seen: set[int] = set()
    for key, idx in split.items():
        if not all(isinstance(i, int) and 0 <= i < n_rows for i in idx):
            raise PeerError(f"{split_path}: {key} has an index outside 0..{n_rows - 1}")
        if seen & set(idx) or len(set(idx)) != len(idx):
            raise PeerError(f"{split_path}: {key} repeats or overlaps indices")
        seen |= set(idx)
    return split


def write_chemprop_inputs(
    work: Path, split: dict[str, list[int]], smiles: list[str], smiles_col: str = SMILES_COL
) -> tuple[Path, Path]:
    """Write chemprop's splits file and the test-set input for ``chemprop predict``.

    The splits file is chemprop 2.3.1's ``--splits-file`` format: a JSON list
    with one ``{"train": [...], "val": [...], "test": [...]}`` dict per
    replicate, 0-based data-row indices (chemprop/cli/train.py, build_splits).
    """
    splits_path = work / "splits.json"
    write_atomic(splits_path, json.dumps([split]) + "\n")
    test_path = work / "test_input.csv"
    with open(test_path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([ROW_COL, smiles_col])
        for i in split["test"]:
            writer.writerow([i, smiles[i]])
    return splits_path, test_path


# ----------------------------------------------------------------------------- environment


def venv_python(venv_dir: Path) -> Path:
    """The virtual environment's interpreter."""
    return venv_dir / "bin" / "python"


def install_commands(venv_dir: Path) -> list[list[Any]]:
    """The two pip commands that set up ``venv_dir`` (after ``python3 -m venv``)."""
    pip = [venv_python(venv_dir), "-m", "pip", "install", "--disable-pip-version-check"]
    return [[*pip, f"torch=={TORCH_VERSION}"], [*pip, f"chemprop=={CHEMPROP_VERSION}", f"torch=={TORCH_VERSION}"]]


def ensure_venv(venv_dir: Path) -> dict[str, Any]:
    """Create ``venv_dir`` with chemprop and torch pinned, once; return the stamp's record.

    A stamp file names the pinned versions, so a change of pin reinstalls; it
    records how long the install took and when. torch goes in first on its
    own, so that chemprop's ``torch>=2.1`` is met by the pinned CPU build
    rather than by whatever build the index offers.
    """
    stamp = venv_dir / f".installed-chemprop-{CHEMPROP_VERSION}-torch-{TORCH_VERSION}"
    if stamp.is_file():
        return {**json.loads(stamp.read_text()), "installed_now": False}
    start = time.perf_counter()
    print(f"setting up {venv_dir} (chemprop=={CHEMPROP_VERSION}, torch=={TORCH_VERSION}), once", flush=True)
    if not venv_python(venv_dir).exists():
        venv.EnvBuilder(with_pip=True).create(venv_dir)
    for cmd in install_commands(venv_dir):
        run_logged(cmd, cwd=REPO)
    versions = installed_versions(venv_dir)
    if versions["chemprop"] != CHEMPROP_VERSION or versions["torch"].split("+")[0] != TORCH_VERSION:
        raise PeerError(f"{venv_dir}: installed {versions}, expected chemprop {CHEMPROP_VERSION}, torch {TORCH_VERSION}")
    record = {
        "install_seconds": round(time.perf_counter() - start, 1),
        "installed_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        **versions,
    }
    stamp.write_text(json.dumps(record) + "\n")
    return {**record, "installed_now": True}


def installed_versions(venv_dir: Path) -> dict[str, str]:
    """chemprop's and torch's versions as the virtual environment imports them."""
    code = "import json, chemprop, torch; print(json.dumps({'chemprop': chemprop.__version__, 'torch': torch.__version__}))"
    return json.loads(capture([venv_python(venv_dir), "-c", code]).splitlines()[-1])


def count_parameters(venv_dir: Path, model_path: Path) -> dict[str, int]:
    """Parameters of the saved model (chemprop's best.pt), counted from its modules."""
    code = (
        "import json, sys; from chemprop.models.utils import load_model; "
        "m = load_model(sys.argv[1]); "
        "print(json.dumps({'params': sum(p.numel() for p in m.parameters()), "
        "'trainable_params': sum(p.numel() for p in m.parameters() if p.requires_grad)}))"
    )
    return json.loads(capture([venv_python(venv_dir), "-c", code, model_path]).splitlines()[-1])


def machine() -> dict[str, Any]:
    """CPU model and logical core count of this machine."""
    cpu_model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu_model": cpu_model, "logical_cores": os.cpu_count()}


def git_state() -> dict[str, Any]:
    """This repository's HEAD commit and whether the work tree differs from it (read-only git)."""
    try:
        commit = capture(["git", "rev-parse", "HEAD"])
        dirty = bool(capture(["git", "status", "--porcelain", "--untracked-files=no"]))
    except (PeerError, OSError):
        return {"git_commit": None, "git_dirty": None}
    return {"git_commit": commit, "git_dirty": dirty}


# ----------------------------------------------------------------------------- metrics


def score(
    pred_path: Path, targets: list[float], test_idx: list[int], target_col: str = TARGET_COL
) -> dict[str, float]:
    """Test RMSE and MAE from chemprop's prediction CSV (one column named as the training
    target) against the data CSV's targets."""
    preds: dict[int, float] = {}
    with open(pred_path, newline="") as f:
        for row in csv.DictReader(f):
            preds[int(row[ROW_COL])] = float(row[target_col])
    if sorted(preds) != sorted(test_idx):
        raise PeerError(f"{pred_path}: predictions for {len(preds)} rows, expected the {len(test_idx)} test rows")
    errors = [preds[i] - targets[i] for i in test_idx]
    if not all(math.isfinite(e) for e in errors):
        raise PeerError(f"{pred_path}: non-finite predictions")
    return {
        "test_rmse": math.sqrt(sum(e * e for e in errors) / len(errors)),
        "test_mae": sum(abs(e) for e in errors) / len(errors),
        "test_molecules": len(errors),
    }


# ----------------------------------------------------------------------------- main


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=FULL_EPOCHS, help=f"training epochs, at least {WARMUP_EPOCHS + 1} (default {FULL_EPOCHS})")
    parser.add_argument(
        "--out",
        type=Path,
        help=f"folder for result.json and the run's files; default: {rel(HERE)} for the result of a "
        f"{FULL_EPOCHS}-epoch run (files under {rel(CHECK_ROOT)}/<time>), {rel(CHECK_ROOT)}/<time>-e<N> for a check",
    )
    parser.add_argument("--mirror", help="data mirror root (default: $KNN_DATA_MIRROR, else <repo>/../shared/data)")
    parser.add_argument("--data-path", type=Path, metavar="CSV", help=f"molecule CSV (default: the mirror's {CEP_CSV}, checksum-verified); needs --split and --out")
    parser.add_argument("--smiles-column", default=SMILES_COL, help=f"the CSV's SMILES column (default {SMILES_COL})")
    parser.add_argument("--target-column", default=TARGET_COL, help=f"the CSV's regression target (default {TARGET_COL})")
    parser.add_argument(
        "--split",
        type=Path,
        metavar="JSON",
        help=f"split JSON with lists {', '.join(SPLIT_KEYS)} of 0-based data rows, as the mirror's and a "
        f"task=mol_csv run's <run dir>/split.json (default: the mirror's {CEP_SPLIT}); needs --out",
    )
    parser.add_argument("--seed", type=int, default=SEED, help=f"chemprop's --pytorch-seed and --data-seed (default {SEED})")
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV, help=f"virtual environment (default {rel(DEFAULT_VENV)})")
    parser.add_argument("--threads", type=int, help="OMP/MKL threads for chemprop (default: torch's own, all cores)")
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> dict[str, Any]:
    """Set up, train, predict, score, and write result.json; return the result."""
    args = parse_args(argv)
    if args.epochs <= WARMUP_EPOCHS:
        raise PeerError(
            f"--epochs must exceed chemprop's default {WARMUP_EPOCHS} warmup epochs (at least {WARMUP_EPOCHS + 1}), got {args.epochs}"
        )
    # Any other data is another measurement than the committed CEP one.
    columns = (args.smiles_column, args.target_column)
    custom = args.data_path is not None or args.split is not None or columns != (SMILES_COL, TARGET_COL)
    if custom and args.out is None:
        raise PeerError(
            f"--data-path, --split and the column options need --out DIR: {rel(COMMITTED_RESULT)} holds the CEP measurement"
        )
    if args.data_path is not None and args.split is None:
        raise PeerError("--data-path needs --split JSON: the CEP split does not index another CSV")
    if len({ROW_COL, *columns}) < 3:
        # chemprop predict writes its output column, named after the target, over an input column of that name
        raise PeerError(f"--smiles-column and --target-column must differ from each other and from {ROW_COL!r}")
    started = dt.datetime.now(dt.timezone.utc)
    stamp = started.strftime("%Y-%m-%d_%H-%M-%S")
    if args.out is not None:
        work = result_dir = args.out.resolve()
    elif args.epochs == FULL_EPOCHS:
        result_dir = HERE if args.seed == SEED else HERE / f"seed{args.seed}"
        work = CHECK_ROOT / f"{stamp}-seed{args.seed}"
    else:
        work = result_dir = CHECK_ROOT / f"{stamp}-e{args.epochs}"
    result_path = result_dir / "result.json"
    if result_path.resolve() == COMMITTED_RESULT and args.epochs != FULL_EPOCHS:
        raise PeerError(f"{rel(COMMITTED_RESULT)} holds the {FULL_EPOCHS}-epoch measurement; a {args.epochs}-epoch run may not overwrite it")
    if result_path.resolve() == COMMITTED_RESULT and custom:
        raise PeerError(f"{rel(COMMITTED_RESULT)} holds the CEP measurement; choose another --out for other data")
    if work.resolve() == HERE:
        work = CHECK_ROOT / f"{stamp}-seed{args.seed}"  # never litter the committed folder with run files

    csv_path, split_json = args.data_path, args.split
    if csv_path is None or split_json is None:
        mirror = find_mirror(args.mirror)
        csv_path, split_json = csv_path or mirror / CEP_CSV, split_json or mirror / CEP_SPLIT
    csv_path, split_json = Path(os.path.abspath(csv_path)), Path(os.path.abspath(split_json))
    smiles, targets = read_targets(csv_path, args.smiles_column, args.target_column)
    split = read_split(split_json, len(smiles))

    install = ensure_venv(args.venv.resolve())
    versions = installed_versions(args.venv.resolve())
    chemprop_bin = args.venv.resolve() / "bin" / "chemprop"

    train_dir, preds_path = work / "train", work / "test_preds.csv"
    if train_dir.exists():
        raise PeerError(f"{rel(train_dir)} holds an earlier run: choose another --out (OUT=)")
    work.mkdir(parents=True, exist_ok=True)
    splits_path, test_input = write_chemprop_inputs(work, split, smiles, args.smiles_column)
    env = dict(os.environ)
    if args.threads is not None:
        env.update(OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))

    train_cmd = [
        chemprop_bin, "train",
        "--data-path", csv_path,
        "--smiles-columns", args.smiles_column,
        "--target-columns", args.target_column,
        "--task-type", "regression",
        "--splits-file", splits_path,
        "--epochs", str(args.epochs),
        "--pytorch-seed", str(args.seed),
        "--data-seed", str(args.seed),
        "--accelerator", "cpu",
        "--devices", "1",
        "--output-dir", train_dir,
        "--logfile", work / "train.log",
    ]  # fmt: skip
    train_seconds = run_logged(train_cmd, cwd=REPO, env=env)
    model_path = train_dir / "model_0" / "best.pt"
    if not model_path.is_file():
        raise PeerError(f"chemprop train left no model at {model_path}")

    predict_cmd = [
        chemprop_bin, "predict",
        "--test-path", test_input,
        "--smiles-columns", args.smiles_column,
        "--model-paths", model_path,
        "--preds-path", preds_path,
        "--accelerator", "cpu",
        "--devices", "1",
        "--logfile", work / "predict.log",
    ]  # fmt: skip
    predict_seconds = run_logged(predict_cmd, cwd=REPO, env=env)

    metrics = score(preds_path, targets, split["test"], args.target_column)
    params = count_parameters(args.venv.resolve(), model_path)
    n_train = len(split["train"])
    freeze = capture([venv_python(args.venv.resolve()), "-m", "pip", "freeze", "--disable-pip-version-check"])

    result: dict[str, Any] = {
        "model": f"chemprop D-MPNN (defaults), regression on {args.target_column}"
        + ("" if args.data_path is None else f" of {rel(csv_path)}"),
        "test_rmse": round(metrics["test_rmse"], 6),
        "test_mae": round(metrics["test_mae"], 6),
        "params": params["params"],
        "trainable_params": params["trainable_params"],
        "wall_seconds": round(train_seconds, 1),
        "wall_seconds_note": "the whole `chemprop train` command: featurization, training, validation each epoch, test pass",
        "molecules_per_second": round(n_train * args.epochs / train_seconds, 1),
        "seed": args.seed,
        "epochs": args.epochs,
        "full_run": args.epochs == FULL_EPOCHS,
        "train_molecules": n_train,
        "val_molecules": len(split["val"]),
        "test_molecules": metrics["test_molecules"],
        "predict_seconds": round(predict_seconds, 1),
        "install": {
            "seconds": install.get("install_seconds"),
            "installed_now": install["installed_now"],
            "installed_at": install.get("installed_at"),
            "commands": [f"{sys.executable} -m venv {rel(args.venv)}"]
            + [shlex.join(rel(c) if isinstance(c, Path) else c for c in cmd) for cmd in install_commands(args.venv.resolve())],
        },
        "threads": args.threads,
        "chemprop_version": versions["chemprop"],
        "torch_version": versions["torch"],
        "python_version": capture([venv_python(args.venv.resolve()), "-c", "import platform; print(platform.python_version())"]),
        "commands": [shlex.join(rel(c) if isinstance(c, Path) else c for c in cmd) for cmd in (train_cmd, predict_cmd)],
        "env": {k: env[k] for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS") if k in env},
        "data_csv": CEP_CSV if args.data_path is None else rel(csv_path),
        "data_csv_sha256": sha256_of(csv_path),
        "split_file": CEP_SPLIT if args.split is None else rel(split_json),
        "split_sha256": sha256_of(split_json),
        "chemprop_splits_sha256": sha256_of(splits_path),
        "run_dir": rel(work),
        "date": started.isoformat(timespec="seconds"),
        **git_state(),
        # The keys every JSON of the project carries (knn.train.provenance): this script's
        # command line, the machine with the threads given to chemprop, and `ops`, which
        # names knn's fused ops and so does not apply to a chemprop run.
        "command": shlex.join(["python3", "experiments/peers/chemprop/run.py", *sys.argv[1:]]),
        "machine": {**machine(), "torch_threads": args.threads},
        "ops": None,
        "pip_freeze": freeze.splitlines(),
    }
    write_atomic(result_path, json.dumps(result, indent=2) + "\n")
    print(
        f"chemprop {versions['chemprop']}, {args.epochs} epochs: test RMSE {result['test_rmse']:.4f}, "
        f"MAE {result['test_mae']:.4f}, {result['params']:,} params, {result['wall_seconds']:.0f} s, "
        f"{result['molecules_per_second']:.0f} molecules/s -> {rel(result_path)}",
        flush=True,
    )
    return result


if __name__ == "__main__":
    try:
        main()
    except PeerError as err:
        sys.exit(f"peer-chemprop: {err}")
    except KeyboardInterrupt:
        sys.exit("peer-chemprop: interrupted")
