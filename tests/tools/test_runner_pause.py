"""The runner's pause: the trainer is killed only once what the pause waits for is on disk
(the next checkpoint, or with ``--epoch`` the epoch's metrics line), so a pause loses no step."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

PAUSE = Path(__file__).resolve().parents[2] / "experiments/runner/pause.sh"


def _training(run_dir: Path) -> subprocess.Popen:
    """A stand-in trainer (a sleep) with its pid in ``.current``, a checkpoint and one epoch."""
    trainer = subprocess.Popen(["sleep", "120"])
    (run_dir / ".current").write_text(f"{trainer.pid}\n")
    (run_dir / "last.pt").write_bytes(b"step 200")
    (run_dir / "metrics.jsonl").write_text('{"epoch": 0}\n')
    return trainer


def _alive_after(trainer: subprocess.Popen, seconds: float) -> bool:
    time.sleep(seconds)
    return trainer.poll() is None


@pytest.mark.parametrize("epoch", [False, True])
def test_the_trainer_is_killed_only_after_what_the_pause_waits_for(tmp_path: Path,
                                                                   epoch: bool) -> None:
    trainer = _training(tmp_path)
    args = ["bash", str(PAUSE), *(["--epoch"] if epoch else []), str(tmp_path), "60"]
    pause = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert _alive_after(trainer, 3)  # nothing new on disk yet
        (tmp_path / "last.pt").write_bytes(b"step 400, a mid-epoch checkpoint")
        if epoch:
            assert _alive_after(trainer, 6)  # a checkpoint inside the epoch is not its end
            (tmp_path / "last.pt").write_bytes(b"step 415, the end of epoch 1")
            with open(tmp_path / "metrics.jsonl", "a") as f:
                f.write('{"epoch": 1}\n')
        out, err = pause.communicate(timeout=30)
        assert pause.returncode == 0, err
        assert trainer.wait(timeout=10) != 0 and "paused" in out
    finally:
        for proc in (pause, trainer):
            proc.kill()
            proc.wait()


def test_a_run_dir_that_is_not_training_is_refused(tmp_path: Path) -> None:
    proc = subprocess.run(["bash", str(PAUSE), "--epoch", str(tmp_path)], capture_output=True,
                          text=True)
    assert proc.returncode == 1 and "is not training" in proc.stderr
