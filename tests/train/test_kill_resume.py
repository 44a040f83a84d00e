"""Exact resume after SIGKILL: a killed and resumed run equals an uninterrupted one.

The run writes ``last.pt`` every step (``train.checkpoint_every=1``); the test
kills it with SIGKILL once a checkpoint mid-epoch exists, resumes it with
``train.resume=true`` and compares with a run that was never interrupted:
model weights (best and last), optimizer state, the metrics of every epoch
and the final valid/test metrics must be bit-identical on CPU. That needs
everything restored: the kernel layers' state carried across BPTT
segments, every RNG (variational dropout masks), the batch position, the
learning-rate schedule and the running epoch loss.

The runs read the PTB-format fixture (``tests/fixtures/ptb``, ``task.data.dir``):
2 columns x 4 steps fill the 300 batches of an epoch, and no data mirror is needed.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from knn.errors import CheckpointError
from knn.train import checkpoint

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "ptb"
BATCHES = 300  # per epoch; the kill lands well inside the first epoch


def command(tmp_path: Path, run_dir: Path, *extra: str) -> list[str]:
    # dropout on (and variational rnn dropout), so a lost RNG state would show
    return [sys.executable, "-m", "knn.train", "experiment=ptb/gated_vd_20m", "debug=smoke",
            "device=cpu", "threads=1", "task.batch_size=2", "task.bptt=4",
            f"task.limit_train_batches={BATCHES}", f"task.data.dir={FIXTURE}",
            f"task.data.cache_dir={tmp_path / 'cache'}", *extra, f"hydra.run.dir={run_dir}"]


def progress(run_dir: Path) -> dict | None:
    try:
        return checkpoint.load(run_dir / "last.pt")["progress"]
    except CheckpointError:  # not written yet
        return None


def kill_mid_epoch(cmd: list[str], run_dir: Path, cwd: Path) -> dict:
    """Start ``cmd``, SIGKILL it once a mid-epoch checkpoint exists; that checkpoint's progress."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            p = progress(run_dir)
            if p is not None and p["epoch"] == 0 and p["batch"] >= 20:
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.02)
        proc.wait(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
    return progress(run_dir)


def test_sigkill_mid_epoch_then_resume_is_bit_identical(tmp_path: Path) -> None:
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    done = subprocess.run(command(tmp_path, whole), cwd=tmp_path, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]

    at_kill = kill_mid_epoch(command(tmp_path, killed, "train.checkpoint_every=1"), killed, tmp_path)
    assert at_kill["epoch"] == 0 and 20 <= at_kill["batch"] < BATCHES  # really mid-epoch
    assert not (killed / "result.json").exists()
    resumed = subprocess.run(command(tmp_path, killed, "train.checkpoint_every=1", "train.resume=true"),
                             cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]

    for name in ("best.pt", "last.pt"):
        a, b = checkpoint.load(whole / name), checkpoint.load(killed / name)
        assert a["model"].keys() == b["model"].keys()
        for key in a["model"]:
            assert torch.equal(a["model"][key], b["model"][key]), (name, key)
    opt_a, opt_b = (checkpoint.load(d / "last.pt")["optimizer"] for d in (whole, killed))
    assert opt_a["param_groups"] == opt_b["param_groups"]

    def epochs(run_dir: Path) -> list[dict]:  # wall-clock times are the fields allowed to differ
        lines = (run_dir / "metrics.jsonl").read_text().splitlines()
        return [{k: v for k, v in json.loads(line).items() if k not in ("elapsed", "valid_seconds")}
                for line in lines]

    assert epochs(whole) == epochs(killed) and len(epochs(whole)) == 2
    res_a, res_b = (json.loads((d / "result.json").read_text()) for d in (whole, killed))
    assert res_a["metrics"] == res_b["metrics"] and res_a["steps"] == res_b["steps"] == 2 * BATCHES
