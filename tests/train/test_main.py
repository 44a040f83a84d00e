"""The command line, end to end: a smoke run on the real PTB and a bad override."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# The real data: $KNN_DATA_MIRROR, else the shared mirror beside the checkout.
MIRROR = Path(os.environ.get("KNN_DATA_MIRROR") or Path(__file__).resolve().parents[3] / "shared" / "data")


def knn_train(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "knn.train", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(not (MIRROR / "ptb").is_dir(), reason="no local PTB mirror")
def test_smoke_run_on_real_ptb(tmp_path) -> None:
    run_dir = tmp_path / "run"
    args = ["experiment=ptb/gated_5m", "debug=smoke", f"task.data.mirror={MIRROR}",
            f"task.data.cache_dir={tmp_path / 'cache'}", f"hydra.run.dir={run_dir}"]  # hydra.* last
    proc = knn_train(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["command"] == "python -m knn.train " + " ".join(args)
    assert result["config"]["task"]["data"]["mirror"] == str(MIRROR)
    # 10,000 word types: an untrained model is near uniform (ppl ~ 1e4).
    assert 1000 < result["metrics"]["test"]["ppl"] < 20000
    assert (run_dir / ".hydra" / "config.yaml").exists()


def test_bad_value_is_one_line(tmp_path) -> None:
    proc = knn_train("train.lr=fast", f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "error: config error: Value 'fast' of type 'str' could not be converted to Float (key: train.lr)"
    ]
