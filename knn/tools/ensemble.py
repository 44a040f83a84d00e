"""An ensemble of trained molecule models, evaluated on its task's splits like one run.

    python -m knn.tools.ensemble RUN_DIR RUN_DIR [...] --out DIR [--device cpu]

Each ``RUN_DIR`` is a finished training run of ``task=cep`` or ``task=mol_csv``
(its ``result.json`` and ``best.pt``), and the members differ only in what cannot
change the protocol, typically the seed (:func:`knn.train.protocol.differences`).
The ensemble predicts the mean of its members' predictions in target units (the
rule of ``python -m knn.predict ckpt=a,b,c``):

    ŷ(G) = (1/M) Σ_m ŷ_m(G)

and is scored on the validation and test molecules of the members' split with
the task's own metrics (RMSE, MAE). ``DIR/result.json`` has the fields of a
training run's, so ``knn.tools.results`` and ``knn.tools.study`` read it as one
row (its protocol label is the members' prefixed ``ensemble of M;``, so it is never
averaged with them), plus ``ensemble``: the member folders, seeds and scores. Costs add up:
``params`` and ``wall_seconds`` are the members' sums, and the training
throughput is the rate at which training molecules pass through all members
trained one after another, 1 / Σ_m (1 / rate_m).
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import torch

from knn.data.mirror import DataError
from knn.errors import CheckpointError, ConfigError
from knn.io import write_json
from knn.predict import Predictor
from knn.tasks import TASKS
from knn.tasks.molecules import MoleculeRegression
from knn.tools.results import RESULT
from knn.train.config import resolve_config, to_dataclass
from knn.train.protocol import differences, format_value
from knn.train.provenance import provenance


def read_members(run_dirs: Sequence[str | Path]) -> list[dict[str, Any]]:
    """Each run's ``result.json`` with ``run_dir`` added; ConfigError (one line) unless there
    are at least two, all molecule runs, whose configs differ only in ignored keys."""
    if len(run_dirs) < 2:
        raise ConfigError("an ensemble needs at least two run folders")
    runs = []
    for d in map(Path, run_dirs):
        try:
            run = {**json.loads((d / RESULT).read_text()), "run_dir": str(d)}
        except (OSError, ValueError):
            raise ConfigError(f"{d}: no readable {RESULT} (not a finished training run)") from None
        missing = [k for k in MEMBER_KEYS if k not in run]
        task_cls = TASKS.get(run.get("task", ""))
        if missing or task_cls is None or not issubclass(task_cls, MoleculeRegression):
            raise ConfigError(f"{d}: not a molecule regression training run ("
                              + (f"no {', '.join(missing)}" if missing else f"task {run['task']!r}")
                              + ")")
        runs.append(run)
    first = runs[0]
    for run in runs[1:]:
        # Both ways: a key only one of the two configs has is a difference too.
        changed = dict(differences(run["config"], first["config"]))
        changed.update((k, v) for k, v in differences(first["config"], run["config"])
                       if k not in changed)
        if changed or run.get("protocol") != first.get("protocol"):
            listed = ", ".join(f"{k}={format_value(v)}" for k, v in changed.items()) or \
                f"protocol {run.get('protocol')!r} vs {first.get('protocol')!r}"
            raise ConfigError(f"{run['run_dir']}: its config differs from {first['run_dir']}'s "
                              f"({listed}); an ensemble's members differ only by seed")
    return runs


#: What a member's ``result.json`` must hold (a training run's, not a peer's or a table's).
MEMBER_KEYS = ("task", "model", "config", "metric", "metrics", "params", "wall_seconds")


def member_predictions(task: MoleculeRegression, predictor: Predictor, split: str,
                       name: str) -> torch.Tensor:
    """One member's (``name``'s) predictions, target units, float64, on ``split``'s molecules."""
    if not (math.isclose(predictor.mean, task.mean, rel_tol=1e-9, abs_tol=1e-12)
            and math.isclose(predictor.std, task.std, rel_tol=1e-9, abs_tol=1e-12)):
        raise CheckpointError(f"{name}: its target scale "
                              f"({predictor.mean}, {predictor.std}) is not its split's "
                              f"({task.mean}, {task.std})")
    return task.predict_batches(predictor.model, task.eval_batches[split])


def scores(pred: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    err = pred - y
    return {"rmse": float(err.pow(2).mean().sqrt()), "mae": float(err.abs().mean())}


def evaluate(runs: list[dict[str, Any]], device: str = "cpu") -> dict[str, Any]:
    """The ensemble's and each member's valid/test scores on the members' split."""
    cfg = resolve_config(runs[0]["config"])
    task = TASKS[cfg.task.name](to_dataclass(cfg.task), torch.device(device), seed=cfg.seed)
    task.setup(run_dir=None)
    predictors = [Predictor.load(r["run_dir"], device) for r in runs]
    metrics: dict[str, dict[str, float]] = {}
    per_member: list[dict[str, dict[str, float]]] = [{} for _ in runs]
    for split in ("valid", "test"):
        y = torch.cat([b.targets for b in task.eval_batches[split]])
        preds = [member_predictions(task, p, split, r["run_dir"]) for p, r in zip(predictors, runs)]
        for i, pred in enumerate(preds):
            per_member[i][split] = scores(pred, y)
        metrics[split] = scores(torch.stack(preds).mean(0), y)
    return {"metrics": metrics, "per_member": per_member}


def result(runs: list[dict[str, Any]], evaluated: dict[str, Any], command: str) -> dict[str, Any]:
    """The ensemble's ``result.json``: a training run's fields, costs summed over members."""
    first = runs[0]
    rates = [((r.get("extra") or {}).get("throughput") or {}).get("molecules_per_second")
             for r in runs]
    throughput = None if not all(rates) else {
        "molecules_per_second": 1.0 / sum(1.0 / cast(float, rate) for rate in rates),
        "rule": "1 / sum over members of 1 / (member's training molecules/s)"}
    seeds = [r.get("seed") for r in runs]
    return {
        "task": first["task"], "model": first["model"], "variant": first.get("variant"),
        "params": sum(r["params"] for r in runs),
        "metrics": evaluated["metrics"], "metric": first["metric"],
        "epochs": [r.get("epochs") for r in runs], "seed": seeds,
        "wall_seconds": sum(r["wall_seconds"] for r in runs),
        "device": first.get("device"), "experiment": first.get("experiment"),
        # Its own label: tables never average an ensemble with its members.
        "protocol": f"ensemble of {len(runs)}; {first.get('protocol')}",
        "config": first["config"],
        "ensemble": {"members": [
            {"run_dir": r["run_dir"], "seed": r.get("seed"), "git_commit": r.get("git_commit"),
             "metrics": m} for r, m in zip(runs, evaluated["per_member"])],
            "rule": "mean of the members' predictions in target units"},
        "extra": {"throughput": throughput},
        **provenance(command),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m knn.tools.ensemble",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("run_dirs", nargs="+", help="finished training runs (two or more)")
    parser.add_argument("--out", required=True, help="folder for the ensemble's result.json")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    command = shlex.join(["python", "-m", "knn.tools.ensemble",
                          *(sys.argv[1:] if argv is None else argv)])
    try:
        runs = read_members(args.run_dirs)
        payload = result(runs, evaluate(runs, args.device), command)
    except (ConfigError, CheckpointError, DataError, OSError) as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        return 1
    out = Path(args.out) / RESULT
    write_json(payload, out)
    m = payload["metrics"]
    print(f"ensemble of {len(runs)} (seeds {payload['seed']}): valid rmse {m['valid']['rmse']:.4f}"
          f" mae {m['valid']['mae']:.4f}, test rmse {m['test']['rmse']:.4f} mae "
          f"{m['test']['mae']:.4f}; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
