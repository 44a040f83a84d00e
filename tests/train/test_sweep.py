"""Hydra multiruns: the submitit local launcher runs every job; a failed job is recorded, not fatal.

The jobs read the PTB-format fixture (``tests/fixtures/ptb``), so no data mirror is needed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "ptb"


def multirun(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "knn.train", "-m", "experiment=ptb/gated_5m", "debug=smoke",
           "device=cpu", "threads=1", f"task.data.dir={FIXTURE}",
           f"task.data.cache_dir={tmp_path / 'cache'}", *args, f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)


def test_submitit_local_runs_both_jobs(tmp_path: Path) -> None:
    proc = multirun(tmp_path, "hydra/launcher=local", "seed=0,1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = {d.name: json.loads((d / "result.json").read_text())
               for d in (tmp_path / "sweep").iterdir() if (d / "result.json").exists()}
    assert sorted(results) == ["0-seed=0", "1-seed=1"]  # hydra.sweep.subdir: <num>-<overrides>
    assert [results[k]["seed"] for k in sorted(results)] == [0, 1]
    assert results["0-seed=0"]["metrics"] != results["1-seed=1"]["metrics"]  # different seeds, different runs
    assert (tmp_path / "sweep" / ".submitit").is_dir()  # really went through submitit


def test_failed_job_is_recorded_and_the_sweep_goes_on(tmp_path: Path) -> None:
    # lr=nan turns the weights into NaN after one step: the second step's loss is NaN.
    proc = multirun(tmp_path, "train.lr=nan,1.0")
    assert proc.returncode == 0, proc.stderr[-3000:]
    failed = json.loads((tmp_path / "sweep" / "0-train.lr=nan" / "failed.json").read_text())
    assert failed["status"] == "failed" and failed["seed"] == 0
    assert failed["error"].startswith("loss is nan at step 2 (epoch 0, batch 1)")
    assert "train.lr=nan" in failed["command"] and failed["traceback"] is None
    assert not (tmp_path / "sweep" / "0-train.lr=nan" / "result.json").exists()
    assert (tmp_path / "sweep" / "1-train.lr=1.0" / "result.json").exists()  # the next job still ran
    assert "error: loss is nan at step 2" in proc.stderr
