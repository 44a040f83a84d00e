"""knn.train.provenance: the keys every JSON the project writes carries, and dirty checkouts."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from knn.tools import nightly
from knn.ops import recurrence
from knn.train import provenance as P

KEYS = {"git_commit", "command", "machine", "torch_version", "ops"}


def check_provenance(record: dict, command: str) -> None:
    """``record`` holds every provenance key, with this process's values."""
    assert KEYS <= set(record)
    assert record["command"] == command and record["torch_version"] == torch.__version__
    assert set(record["machine"]) == {"cpu_model", "logical_cores", "torch_threads"}
    assert record["machine"]["cpu_model"] and record["machine"]["logical_cores"] >= 1
    assert record["machine"]["torch_threads"] >= 1
    assert {"fused_scan", "onednn", "fused_bernoulli", "fused_build_errors"} <= set(record["ops"])


def test_smoke_run_result_carries_provenance(train_smoke, tmp_path) -> None:
    train_smoke(tmp_path, "experiment=ptb/gated_5m", "threads=1")
    result = json.loads((tmp_path / "result.json").read_text())
    check_provenance(result, f"python -m knn.train debug=smoke run_dir={tmp_path} "
                             "experiment=ptb/gated_5m threads=1")
    assert result["machine"]["torch_threads"] == 1
    assert result["ops"]["fused_scan"] in (True, False)  # the kernel LM ran its scan
    assert result["git_commit"] == P.git_commit()


def test_ops_report_a_failed_fused_build(monkeypatch) -> None:
    monkeypatch.setattr(recurrence, "_fused_errors", {"cuda": "OSError: no nvcc"})
    assert P.ops()["fused_build_errors"] == {"cuda": "OSError: no nvcc"}
    monkeypatch.setattr(recurrence, "_fused_errors", {})
    assert P.ops()["fused_build_errors"] == {}


def test_nightly_json_carries_provenance(tmp_path) -> None:
    expected = tmp_path / "expected.yaml"
    expected.write_text("checks: []\n")
    argv = ["--expected", str(expected), "--out", str(tmp_path / "out")]
    assert nightly.main(argv) == 0
    check_provenance(json.loads((tmp_path / "out" / "nightly.json").read_text()),
                     "python -m knn.tools.nightly " + " ".join(argv))


def test_cpu_model_falls_back_without_proc_cpuinfo(monkeypatch) -> None:
    class NoFile:
        def __init__(self, *_):
            pass

        def read_text(self):
            raise OSError("no /proc")

    monkeypatch.setattr(P, "Path", NoFile)
    monkeypatch.setattr(P.platform, "processor", lambda: "")
    monkeypatch.setattr(P.platform, "machine", lambda: "riscv64")
    assert P.cpu_model() == "riscv64"


@pytest.fixture
def repo(tmp_path) -> Path:
    """A git repository with one commit: knn/a.py, conf/c.yaml, a .gitignore of *.so."""
    if shutil.which("git") is None:
        pytest.skip("no git")

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path,
                       check=True, capture_output=True)

    (tmp_path / "knn").mkdir()
    (tmp_path / "conf").mkdir()
    (tmp_path / "knn" / "a.py").write_text("x = 1\n")
    (tmp_path / "conf" / "c.yaml").write_text("a: 1\n")
    (tmp_path / ".gitignore").write_text("*.so\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "one")
    return tmp_path


def test_untracked_source_files_make_the_checkout_dirty(repo) -> None:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True,
                          check=True).stdout.strip()
    assert P.git_commit(repo) == head
    (repo / "notes.txt").write_text("outside the source folders\n")
    (repo / "knn" / "build.so").write_text("ignored\n")
    assert P.git_commit(repo) == head
    for new in (repo / "knn" / "new.py", repo / "knn" / "sub" / "deep.py", repo / "conf" / "x.yaml",
                repo / "data_prep" / "fetch.py"):
        new.parent.mkdir(exist_ok=True)
        new.write_text("y = 2\n")
        assert P.git_commit(repo) == head + "-dirty", new
        new.unlink()
    assert P.git_commit(repo) == head
    (repo / "knn" / "a.py").write_text("x = 2\n")  # a modified tracked file, as before
    assert P.git_commit(repo) == head + "-dirty"


def test_no_git_checkout_has_no_commit(tmp_path) -> None:
    assert P.git_commit(tmp_path) is None


def test_commit_given_at_start_is_kept() -> None:
    """A run records the checkout as it was when it started, not when it finished."""
    from knn.train.provenance import provenance

    assert provenance("cmd", "abc123")["git_commit"] == "abc123"
