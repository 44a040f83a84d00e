"""The GPU script's way back: a run's checkpoints leave the device machine in parts over
several calls (a call returns at most 64 MiB), and ``gpu_unpack.sh`` makes the same files
here, or refuses when a part is missing. The device is stood in for by stubs of
``python3`` (the trainer writes random checkpoints and keeps running) and ``nvidia-smi``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

FULL = Path(__file__).resolve().parents[2] / "experiments/results/ptb/full"

PYTHON_STUB = """#!/bin/bash
case "$*" in
  *"-m knn.train"*)
    dir=${@: -1}; dir=${dir#hydra.run.dir=}
    head -c 3000000 /dev/urandom > "$dir/last.pt"; head -c 2000000 /dev/urandom > "$dir/best.pt"
    echo '{"epoch": 0}' > "$dir/metrics.jsonl"; echo "[..][INFO] - epoch 0" > "$dir/train.log"
    exec sleep 60;;
esac
"""


def _device(tmp_path: Path) -> dict[str, str]:
    """A stand-in device machine: the stubs first on PATH, the working copy in ``tmp_path/copy``."""
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    (stubs / "python3").write_text(PYTHON_STUB)
    (stubs / "nvidia-smi").write_text("#!/bin/bash\necho 'Stand-in GPU'\n")
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    (tmp_path / "copy").mkdir()
    return {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "PART_BYTES": "1M"}


def _call(tmp_path: Path, env: dict[str, str], n: int, **extra: str) -> Path:
    """One device call of gpu_runs.sh; returns its $OUT (what the call brings back)."""
    out = tmp_path / f"call{n}"
    proc = subprocess.run(["bash", str(FULL / "gpu_runs.sh"), "row"], cwd=tmp_path / "copy",
                          env={**env, "OUT": str(out), **extra}, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    return out


def _unpack(run_dir: Path, *calls: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(FULL / "gpu_unpack.sh"), "row", str(run_dir), *map(str, calls)],
                          capture_output=True, text=True, timeout=60)


def test_checkpoints_come_back_in_parts_over_calls_and_unpack_to_the_same_files(
        tmp_path: Path) -> None:
    env = _device(tmp_path)
    first = _call(tmp_path, env, 0, BUDGET_S="2", PACK="row")
    # about 5 MB of checkpoints in 1 MiB parts: 4 in the training call, the 5th in FETCH=1
    assert len(list(first.glob("row.pt.tar.part-*"))) == 4
    assert "FETCH=1" in (first / "log.txt").read_text()
    run_dir = tmp_path / "here"
    missing = _unpack(run_dir, first)
    assert missing.returncode == 1 and "FETCH" in missing.stderr
    second = _call(tmp_path, env, 1, FETCH="1")
    assert len(list(second.glob("row.pt.tar.part-*"))) == 1
    done = _unpack(run_dir, first, second)
    assert done.returncode == 0, done.stderr
    trained = tmp_path / "copy/outputs/gpu/ptb/row/seed0"
    for name in ("last.pt", "best.pt", "metrics.jsonl", "PAUSED_AT.txt"):
        assert (run_dir / name).read_bytes() == (trained / name).read_bytes(), name
    assert "end of the device call's budget" in (run_dir / "PAUSED_AT.txt").read_text()
