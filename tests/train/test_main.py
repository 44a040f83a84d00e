"""The command line, end to end: a smoke run on the PTB-format fixture and a bad override."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from knn.train.__main__ import parse_command
from knn.train.config import CONF_DIR


def knn_train(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "knn.train", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_smoke_run_on_ptb_format_files(tmp_path, ptb_fixture) -> None:
    """Two whole epochs (87 batches each) of the smoke-sized model on tests/fixtures/ptb,
    read through ``task.data.dir``: the run learns context, so it beats the train unigram
    predictor's test perplexity (36.2; uniform: 47) by 15%. It reached 20.78 with
    ``python -m knn.train experiment=ptb/gated_5m debug=smoke task.limit_train_batches=null
    task.data.dir=tests/fixtures/ptb`` (torch 2.13 CPU)."""
    run_dir = tmp_path / "run"
    args = ["experiment=ptb/gated_5m", "debug=smoke", "task.limit_train_batches=null",
            f"task.data.dir={ptb_fixture.dir}", f"task.data.cache_dir={tmp_path / 'cache'}",
            f"hydra.run.dir={run_dir}"]  # hydra.* last
    proc = knn_train(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"PTB-format files from {ptb_fixture.dir}, not checksum-verified" in proc.stdout
    result = json.loads((run_dir / "result.json").read_text())
    assert result["command"] == "python -m knn.train " + " ".join(args)
    assert result["config"]["task"]["data"]["dir"] == str(ptb_fixture.dir)
    assert result["metrics"]["test"]["ppl"] < 0.85 * ptb_fixture.unigram_ppl() < ptb_fixture.vocab_size
    assert (run_dir / ".hydra" / "config.yaml").exists()


def test_bad_value_is_one_line(tmp_path) -> None:
    proc = knn_train("train.lr=fast", f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "error: config error: Value 'fast' of type 'str' could not be converted to Float (key: train.lr)"
    ]


# --------------------------------------------------------------------------- #
# Hydra's own flags pass through with their values
# --------------------------------------------------------------------------- #

EXP = "experiment=ptb/gated_5m"


@pytest.mark.parametrize(("args", "stdout_has"), [
    (["--cfg", "job", EXP], "name: ptb"),
    (["-c", "job", "-p", "task", EXP], "# @package task"),
    (["--cfg", "hydra", "--package", "hydra.run"], "# @package hydra.run"),
    (["--cfg", "all", "--resolve", EXP], "name: ptb"),
    (["--info", "config", EXP], "Config search path"),
    (["-i", "defaults"], "Defaults List"),
    (["--help"], "powered by Hydra"),
    (["-h", EXP], "powered by Hydra"),
    (["--hydra-help"], "Hydra's help"),
    # a relative config path is relative to knn/train/, as in Hydra
    (["--config-name", "train", "--config-path", "../../conf", "--config-dir", ".", "--cfg", "job"],
     "name: ptb"),
    (["-cn", "train", "-cp", str(CONF_DIR), "-cd", ".", "-c", "job"], "name: ptb"),
    (["--shell-completion", "install=bash"], "hydra_bash_completion"),
    (["-sc", "uninstall=bash"], "unset _HYDRA_OLD_COMP"),
])
def test_hydra_flags_keep_their_values(tmp_path, args: list[str], stdout_has: str) -> None:
    """Each flag form reaches Hydra with its value (``--cfg job`` once failed: 'job' was taken
    for an override); none of them runs a job or makes an output folder."""
    proc = knn_train(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert stdout_has in proc.stdout
    assert not (tmp_path / "outputs").exists() and not (tmp_path / "multirun").exists()


@pytest.mark.parametrize("args", [
    ["--cfg", "job", "train.lrr=1"],
    ["-r", "train.lrr=1"],
    ["--run", "train.lrr=1"],
    ["-m", "train.lrr=1", "seed=0,1"],
    ["--multirun", "train.lrr=1"],
])
def test_overrides_beside_flags_are_still_checked(tmp_path, args: list[str]) -> None:
    """A flag's value is not an override, the overrides after it still are: one-line error."""
    proc = knn_train(*args, f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "error: config error: Could not override 'train.lrr'. To append to your config use "
        "+train.lrr=1 Key 'lrr' is not in struct"]


def test_experimental_rerun_of_a_missing_file(tmp_path) -> None:
    proc = knn_train("--experimental-rerun", "gone.pickle", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == ["error: --experimental-rerun: no such file gone.pickle"]


@pytest.mark.parametrize(("argv", "overrides", "flags"), [
    (["--cfg", "job", "a=1"], ["a=1"], {"cfg": "job"}),
    (["-c", "hydra", "-p", "hydra.run"], [], {"cfg": "hydra", "package": "hydra.run"}),
    (["a=1", "--info"], ["a=1"], {"info": "all"}),  # a bare --info (a value after it is a topic)
    (["-i", "searchpath"], [], {"info": "searchpath"}),
    (["-m", "seed=0,1"], ["seed=0,1"], {"multirun": True}),
    (["-cp", "x", "-cn", "y", "-cd", "z", "a=1"], ["a=1"],
     {"config_path": "x", "config_name": "y", "config_dir": "z"}),
    (["--experimental-rerun", "f.pickle"], [], {"experimental_rerun": "f.pickle"}),
    (["-sc", "install=bash"], ["install=bash"], {"shell_completion": True}),
])
def test_parse_command_is_hydras_parser(argv, overrides, flags) -> None:
    args = parse_command(argv)
    assert args.overrides == overrides
    assert {k: getattr(args, k) for k in flags} == flags


@pytest.mark.parametrize("argv", [["--cfg", "jobs"], ["--no-such-flag"], ["--version"]])
def test_parse_command_leaves_what_it_rejects_to_hydra(argv) -> None:
    assert parse_command(argv) is None
