"""The shell commands of the READMEs, run or checked, so that the documentation keeps working.

Every fenced ``bash``, ``sh`` or ``shell`` block of ``README.md`` and
``experiments/**/README.md`` is read. An HTML comment on the line before the
fence (invisible once rendered) says what to do with it:

``<!-- test: run -->``
    run every command of the block for real;
``<!-- test: parse -->``
    check every command without running it;
``<!-- test: parse, run "TEXT" "TEXT2" -->``
    check every command, and run for real those that contain one of the
    quoted texts (a block that mixes a smoke run with long ones);
``<!-- test: skip (reason) -->``
    leave the block alone; the reason is required.

An unmarked block is parse-checked for its knn commands (``python -m knn.*``,
``knn-train``, ``torchrun ... -m knn.*``); its other commands are left alone.

Checking without running ("parse"):

* ``knn.train`` (also ``knn-train``, ``torchrun ... -m knn.train``): Hydra's
  own argument parser accepts the command line; its overrides, ``hydra.*``
  ones included, compose with ``conf/`` (what ``--cfg all`` shows) and the
  job config passes the schema check (:func:`knn.train.config.resolve_config`).
  With ``-m`` each value of each sweep is composed, one sweep at a time (the
  others at their first value). ``[optional]`` arguments are unwrapped and
  checked too.
* another ``python -m MODULE`` of this repository (``knn.*``, ``data_prep.*``):
  the module exists.
* ``make ...``: the dry run ``make -n ...`` succeeds, and the knn commands it
  prints are checked as above (``make reproduce-ptb`` checks its
  ``knn.train`` command line).
* a command with a ``<placeholder>``: only its module is checked.
* anything else (``export``, other programs): not checked.

Running ("run"): with bash, in the repository root, after the block's
``export`` lines, with ``OMP_NUM_THREADS=1`` and ``KNN_DATA_MIRROR`` set to the
data mirror when there is one. A ``knn.train`` command gets ``debug=smoke``
(unless it names a ``debug=``) and a temporary ``hydra.run.dir`` and
``hydra.sweep.dir`` (replacing its own), so runs are smoke-sized and nothing
lands in the checkout. A ``knn.train`` command that trains reads the data
mirror (``$KNN_DATA_MIRROR``, else ``../shared/data`` beside the checkout);
without one, a PTB run reads the test fixture ``tests/fixtures/ptb`` instead
(``task.data.dir``) and another task's run is skipped, saying so. The exit
status must be 0. Run only
commands that take seconds: the whole file should stay well under two minutes.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MIRROR = Path(os.environ.get("KNN_DATA_MIRROR") or REPO.parent / "shared" / "data")


def _readmes() -> list[Path]:
    """README.md and experiments/**/README.md, outside hidden folders (a peer's .venv)."""
    found = []
    for folder, subfolders, files in os.walk(REPO / "experiments"):
        subfolders[:] = [d for d in subfolders if not d.startswith(".")]
        found += [Path(folder) / "README.md"] if "README.md" in files else []
    return [REPO / "README.md", *sorted(found)]


READMES = _readmes()
FENCE = re.compile(r"^```(bash|sh|shell)\s*$")
MARKER = re.compile(r"^<!--\s*test:\s*(?P<spec>.*?)\s*-->\s*$")
PLACEHOLDER = re.compile(r"<[A-Za-z][^<>]*>")
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
PROJECT_MODULES = ("knn", "data_prep")


# --------------------------------------------------------------------------- #
# Reading the READMEs
# --------------------------------------------------------------------------- #

@dataclass(frozen=True)
class Block:
    """A fenced shell block: where it is, its marker's mode, and what it holds."""

    path: Path
    line: int  # 1-based line of the opening fence
    mode: str  # run | parse | skip | default
    run_if: tuple[str, ...]  # with mode "parse": commands containing one of these run
    reason: str  # with mode "skip"
    lines: tuple[str, ...]


@dataclass(frozen=True)
class Command:
    """One command of a block, continuation lines joined."""

    block: Block
    line: int  # 1-based line in the README where it starts
    text: str

    @property
    def where(self) -> str:
        return f"{self.block.path.relative_to(REPO)}:{self.line}"


def parse_marker(spec: str) -> tuple[str, tuple[str, ...], str]:
    """``run`` | ``parse`` | ``parse, run "X" ...`` | ``skip (reason)`` -> (mode, run_if, reason)."""
    if m := re.fullmatch(r"skip\s*\((?P<reason>.+)\)", spec):
        return "skip", (), m["reason"].strip()
    if spec == "run":
        return "run", (), ""
    if m := re.fullmatch(r"parse(\s*,\s*run\s+(?P<texts>.+))?", spec):
        texts = tuple(shlex.split(m["texts"])) if m["texts"] else ()
        return "parse", texts, ""
    raise ValueError(f"unknown test marker {spec!r}: use run, parse, 'parse, run \"TEXT\"' "
                     "or skip (reason)")


def read_blocks(path: Path) -> list[Block]:
    """The fenced shell blocks of one Markdown file, with their markers."""
    lines = path.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if FENCE.match(lines[i]):
            marker = MARKER.match(lines[i - 1].strip()) if i > 0 else None
            mode, run_if, reason = parse_marker(marker["spec"]) if marker else ("default", (), "")
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), len(lines))
            blocks.append(Block(path, i + 1, mode, run_if, reason, tuple(lines[i + 1 : end])))
            i = end
        i += 1
    return blocks


def commands(block: Block) -> list[Command]:
    """The block's commands: comment-only and blank lines dropped, ``\\`` continuations joined."""
    out, pending, start = [], "", 0
    for k, line in enumerate(block.lines):
        if not pending:
            start = block.line + 1 + k
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        text = (pending + line).strip()
        pending = ""
        if text and not text.startswith("#"):
            out.append(Command(block, start, text))
    return out


def split(text: str) -> list[str]:
    """Shell words of a command, comments dropped."""
    return shlex.split(text, comments=True)


def knn_invocation(words: list[str]) -> tuple[str, list[str]] | None:
    """(module, arguments) of ``python -m M ...``, ``torchrun ... -m M ...`` or ``knn-train ...``;
    ``None`` for anything else. Leading ``VAR=value`` words are skipped."""
    while words and ENV_ASSIGNMENT.match(words[0]):
        words = words[1:]
    if not words:
        return None
    if Path(words[0]).name == "knn-train":
        return "knn.train", words[1:]
    launcher = Path(words[0]).name
    if (launcher.startswith("python") or launcher == "torchrun") and "-m" in words[1:]:
        i = words.index("-m", 1)
        if i + 1 < len(words):
            return words[i + 1], words[i + 2 :]
    return None


def is_knn(module: str) -> bool:
    return module.split(".")[0] in PROJECT_MODULES


# --------------------------------------------------------------------------- #
# Checking without running
# --------------------------------------------------------------------------- #

def module_exists(module: str) -> bool:
    """A module of this repository, by its file."""
    base = REPO.joinpath(*module.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def sweep_variants(overrides: list[str], multirun: bool) -> list[list[str]]:
    """The override lists to compose: as given, or with ``-m`` each value of each sweep
    (one sweep at a time, the others at their first value)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(overrides)
    if not multirun or not any(o.is_sweep_override() for o in parsed):
        return [overrides]
    choices = [[f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()]
               if o.is_sweep_override() else [text] for text, o in zip(overrides, parsed)]
    variants: list[list[str]] = []
    for i, o in enumerate(parsed):
        for value in choices[i] if o.is_sweep_override() else []:
            variant = [value if j == i else options[0] for j, options in enumerate(choices)]
            if variant not in variants:
                variants.append(variant)
    return variants


def train_config_error(args: list[str]) -> str | None:
    """Why ``python -m knn.train ARGS`` would not compose or pass the schema check, or ``None``."""
    from hydra import compose, initialize_config_dir
    from omegaconf import open_dict

    from knn.train.__main__ import parse_command, primary_config_dir
    from knn.train.config import resolve_config

    args = [a[1:-1] if a.startswith("[") and a.endswith("]") else a for a in args]
    parsed = parse_command(args)
    if parsed is None:
        return f"Hydra's parser rejects the arguments {args}"
    if parsed.shell_completion or parsed.experimental_rerun is not None:
        return None
    config_dir = primary_config_dir(parsed)
    if config_dir is None:
        return None  # --config-dir: left to Hydra
    try:
        for overrides in sweep_variants(parsed.overrides, parsed.multirun):
            with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
                cfg = compose(config_name=parsed.config_name or "train", overrides=overrides,
                              return_hydra_config=True)
            with open_dict(cfg):
                del cfg["hydra"]
            resolve_config(cfg)
    except Exception as e:  # a composition or schema error: the verdict
        return f"{type(e).__name__}: {' '.join(str(e).split())}"
    return None


def make_dry_run(words: list[str]) -> tuple[int, list[str], str]:
    """``make -n`` of a make command: (status, printed commands, stderr)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    proc = subprocess.run(["make", "-n", *words[1:]], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)
    printed = proc.stdout.replace("\\\n", " ").splitlines()
    return proc.returncode, [line.strip() for line in printed if line.strip()], proc.stderr


def parse_problems(text: str, only_knn: bool = False) -> list[str]:
    """What is wrong with a command, checked without running it (see the module doc)."""
    words = split(text)
    if not words:
        return []
    if words[0] == "make" and not only_knn:
        if not shutil.which("make"):
            pytest.skip("make is not installed")
        status, printed, err = make_dry_run(words)
        if status != 0:
            return [f"`make -n` failed: {' '.join(err.split())}"]
        return [f"{line!r} (from make): {p}" for line in printed for p in parse_problems(line, True)]
    invocation = knn_invocation(words)
    if invocation is None or not is_knn(invocation[0]):
        return []
    module, args = invocation
    if not module_exists(module):
        return [f"no module {module} in the repository"]
    if module == "knn.train" and not PLACEHOLDER.search(text):
        if why := train_config_error(args):
            return [why]
    return []


# --------------------------------------------------------------------------- #
# Running
# --------------------------------------------------------------------------- #

def smoke_sized(words: list[str], tmp: Path) -> list[str]:
    """A knn.train command with ``debug=smoke`` and temporary run folders, the extra
    overrides placed beside its own (argparse takes one run of them)."""
    module, args = knn_invocation(words)
    head = words[: len(words) - len(args)]
    args = [a for a in args if not a.startswith(("hydra.run.dir=", "hydra.sweep.dir="))]
    extra = [] if any(a.startswith("debug=") for a in args) else ["debug=smoke"]
    extra += [f"hydra.run.dir={tmp / 'run'}", f"hydra.sweep.dir={tmp / 'sweep'}"]
    last = max((i for i, a in enumerate(args) if "=" in a and not a.startswith("-")), default=None)
    at = len(args) if last is None else last + 1
    return [*head, *args[:at], *extra, *args[at:]]


def trains(words: list[str]) -> bool:
    """Whether a knn.train command runs a job (it then reads the data)."""
    from knn.train.__main__ import parse_command, runs_jobs

    parsed = parse_command(knn_invocation(words)[1])
    return parsed is not None and runs_jobs(parsed)


def trains_ptb(words: list[str]) -> bool:
    """Whether a knn.train command, not a sweep, runs the PTB task (its composed ``task.name``)."""
    from hydra import compose, initialize_config_dir

    from knn.train.__main__ import parse_command, primary_config_dir

    parsed = parse_command(knn_invocation(words)[1])
    config_dir = None if parsed is None or parsed.multirun else primary_config_dir(parsed)
    if config_dir is None:
        return False
    with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
        cfg = compose(config_name=parsed.config_name or "train", overrides=parsed.overrides,
                      return_hydra_config=True)
    return cfg.task.name == "ptb"


def run_command(command: Command, tmp: Path, ptb_dir: Path) -> subprocess.CompletedProcess:
    """Run ``command`` for real (see the module doc), after its block's exports; ``ptb_dir``:
    PTB-format files for a PTB run when there is no data mirror."""
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    if MIRROR.is_dir():
        env["KNN_DATA_MIRROR"] = str(MIRROR)
    for other in commands(command.block):
        if other.line >= command.line:
            break
        words = split(other.text)
        if words[:1] == ["export"]:
            env.update(w.split("=", 1) for w in words[1:] if "=" in w)
    words = split(command.text)
    invocation = knn_invocation(words)
    if invocation and invocation[0] == "knn.train":
        if trains(words) and not MIRROR.is_dir():
            if not trains_ptb(words):
                pytest.skip(f"{command.where}: no data mirror at {MIRROR} (set KNN_DATA_MIRROR); "
                            "this README command trains on the real data")
            words = [*words, f"task.data.dir={ptb_dir}"]
        words = smoke_sized(words, tmp)
    return subprocess.run(shlex.join(words), shell=True, executable="/bin/bash", cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=300)


# --------------------------------------------------------------------------- #
# The tests
# --------------------------------------------------------------------------- #

def _cases() -> list:
    cases = []
    for path in READMES:
        for block in read_blocks(path):
            for command in commands(block):
                if block.mode == "skip":
                    action = "skip"
                elif block.mode == "run" or any(t in command.text for t in block.run_if):
                    action = "run"
                else:
                    action = block.mode  # parse | default
                cases.append(pytest.param(command, action, id=f"{command.where}-{action}"))
    return cases


CASES = _cases()


@pytest.mark.parametrize(("command", "action"), CASES)
def test_readme_command(command: Command, action: str, tmp_path: Path, ptb_fixture) -> None:
    if action == "skip":
        pytest.skip(f"{command.where}: marked skip ({command.block.reason})")
    if action == "run":
        proc = run_command(command, tmp_path, ptb_fixture.dir)
        assert proc.returncode == 0, (
            f"{command.where}: `{command.text}` exited {proc.returncode}:\n{proc.stderr[-3000:]}")
        return
    problems = parse_problems(command.text, only_knn=action == "default")
    assert not problems, f"{command.where}: `{command.text}`:\n" + "\n".join(problems)


def test_the_readme_has_commands_and_some_run() -> None:
    """The reader finds the README's blocks, and at least one command runs for real."""
    assert CASES, "no shell blocks found in the READMEs"
    assert any(p.values[1] == "run" for p in CASES), "no README command is marked to run"


@pytest.mark.parametrize(("spec", "parsed"), [
    ("run", ("run", (), "")),
    ("parse", ("parse", (), "")),
    ('parse, run "debug=smoke" "--cfg job"', ("parse", ("debug=smoke", "--cfg job"), "")),
    ("skip (needs 4 GPUs)", ("skip", (), "needs 4 GPUs")),
])
def test_markers(spec: str, parsed: tuple) -> None:
    assert parse_marker(spec) == parsed


def test_unknown_marker_and_skip_without_reason_are_errors() -> None:
    for spec in ("runn", "skip", "skip ()"):
        with pytest.raises(ValueError):
            parse_marker(spec)


def test_parse_check_catches_a_bad_override() -> None:
    """The check has teeth: a misspelt key, a bad value or a bad sweep value is reported."""
    assert parse_problems("python -m knn.train experiment=ptb/gated_5m train.lrr=1")
    assert parse_problems("python -m knn.train experiment=ptb/gated_5m train.lr=fast")
    assert parse_problems("python -m knn.train -m experiment=ptb/gated_5m model.kernel.decay=constant,nope")
    assert parse_problems("python -m knn.nope")
    assert not parse_problems("python -m knn.train -m experiment=sst/gated_fine seed=0,1")


def test_smoke_sized_keeps_overrides_together(tmp_path: Path) -> None:
    words = split("OMP_NUM_THREADS=1 python -m knn.train experiment=x --cfg job hydra.run.dir=/a")
    assert smoke_sized(words, tmp_path) == [
        "OMP_NUM_THREADS=1", "python", "-m", "knn.train", "experiment=x", "debug=smoke",
        f"hydra.run.dir={tmp_path / 'run'}", f"hydra.sweep.dir={tmp_path / 'sweep'}", "--cfg", "job"]


QUEUED = sorted((REPO / "experiments/runner/queues").glob("*.txt"))
#: What run_one.sh puts before a line's overrides (its own defaults, which the line may override).
RUN_ONE_DEFAULTS = ["device=cpu", "threads=1", "train.progress=false", "train.checkpoint_every=1000"]


@pytest.mark.parametrize("queue", QUEUED, ids=lambda p: p.name)
def test_queued_runs_compose(queue: Path) -> None:
    """Each run_one.sh line of a prepared queue trains a config that composes and passes
    the schema check, in a run folder of its own."""
    lines = [shlex.split(line) for line in queue.read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines and all(words[0] == "experiments/runner/run_one.sh" for words in lines)
    problems = {words[2]: train_config_error(RUN_ONE_DEFAULTS + words[3:]) for words in lines}
    assert {d: p for d, p in problems.items() if p} == {}
    assert len(problems) == len(lines), "two lines share a run folder"
