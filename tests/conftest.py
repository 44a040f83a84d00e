"""Shared fixtures: compose configs like the CLI does, a tiny PTB stand-in, the data files
made for the tests (``tests/fixtures/{ptb,sst,cep}``, so that no test needs the data mirror
unless it checks the real files), and the rule for tests that need the fused op."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import math
import random
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from knn.data.ptb import PTBCorpus, build_corpus
from knn.ops import recurrence
from knn.train.config import CONF_DIR


FIXTURES = Path(__file__).resolve().parent / "fixtures"
#: The files each ``tests/fixtures/<name>/make_fixture.py`` writes beside itself. They
#: are generated, not committed (data files stay out of git, and the scripts fix them
#: by their seeds), and made when this module is imported, before any test or a
#: subprocess it starts reads them.
FIXTURE_FILES: dict[str, tuple[str, ...]] = {
    "ptb": ("ptb.train.txt", "ptb.valid.txt", "ptb.test.txt"),
    "sst": ("trees/train.txt", "trees/dev.txt", "trees/test.txt", "vectors.txt"),
    "cep": ("cep.csv",),
}


def make_fixtures(root: Path = FIXTURES) -> None:
    """Run each fixture's generator whose files are not all there."""
    for name, files in FIXTURE_FILES.items():
        if not all((root / name / f).is_file() for f in files):
            spec = importlib.util.spec_from_file_location(f"make_{name}_fixture",
                                                          root / name / "make_fixture.py")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            module.main()


make_fixtures()


def compose_config(overrides: list[str]) -> DictConfig:
    """``conf/train.yaml`` composed with ``overrides``, as ``python -m knn.train`` would."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="train", overrides=overrides)


@pytest.fixture
def compose_cfg() -> Callable[[list[str]], DictConfig]:
    return compose_config


def tiny_corpus(seed: int = 0) -> PTBCorpus:
    """A PTB-shaped corpus of 40 word types: ~3k train tokens, ~700 valid/test."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(40)]

    def lines(n: int) -> list[str]:
        tokens: list[str] = []
        for _ in range(n):
            tokens += rng.choices(words, k=rng.randint(3, 12)) + ["<eos>"]
        return tokens

    train = words + ["<eos>"] + lines(400)  # every type occurs in train
    return build_corpus(train, lines(90), lines(90))


@dataclass(frozen=True)
class PTBFixture:
    """PTB-format files made for the tests (``tests/fixtures/ptb``, see its make_fixture.py).

    A model trained on them should beat two constant predictors: the uniform
    one (perplexity = ``vocab_size``) and the train unigram one
    (:meth:`unigram_ppl`, what word frequencies alone reach, no context).
    """

    dir: Path  # ``task.data.dir=<dir>`` runs the PTB task on them, without the data mirror
    vocab_size: int  # word types + <unk> + <eos>: the perplexity of a uniform predictor

    def tokens(self, split: str) -> list[str]:
        from knn.data.ptb import read_tokens

        return read_tokens(self.dir / f"ptb.{split}.txt")

    def unigram_ppl(self, split: str = "test") -> float:
        """Perplexity on ``split`` of the train split's word frequencies (36.2 on test)."""
        counts = Counter(self.tokens("train"))
        total = sum(counts.values())
        target = self.tokens(split)
        return math.exp(-sum(math.log(counts[t] / total) for t in target) / len(target))


PTB_FIXTURE = PTBFixture(Path(__file__).resolve().parent / "fixtures" / "ptb", vocab_size=47)


@pytest.fixture
def ptb_fixture() -> PTBFixture:
    return PTB_FIXTURE



@dataclass(frozen=True)
class SSTFixture:
    """SST-format files made for the tests (``tests/fixtures/sst``, see its make_fixture.py):
    ``trees/{train,dev,test}.txt`` (48 / 16 / 16 sentences, every node labelled 0-4) and
    ``vectors.txt`` (8-d, uncased, no vector for ``1/2`` and ``auteurish``).

    The SST task reads trees only from a data mirror, checksum-verified:
    :meth:`write_mirror` lays the files out as one and returns the checksums it needs.
    """

    dir: Path

    def write_mirror(self, root: Path) -> dict[str, str]:
        """Write a data mirror under ``root``: the trees at their mirror names, the vectors
        gzipped at the default vectors' name; return ``{name: sha256}`` of what it wrote
        (to add to :data:`knn.data.mirror.CHECKSUMS`, which pins the real files)."""
        from knn.data.sst import SST_FILES
        from knn.tasks.sst import DEFAULT_VECTORS

        files = {name: (self.dir / "trees" / f"{split}.txt").read_bytes()
                 for split, name in SST_FILES.items()}
        files[DEFAULT_VECTORS] = gzip.compress((self.dir / "vectors.txt").read_bytes(), mtime=0)
        for name, data in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(data)
        return {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}


SST_FIXTURE = SSTFixture(FIXTURES / "sst")
#: 90 CEP-like molecules with a computed ``PCE`` column (``tests/fixtures/cep``, see its
#: make_fixture.py): ``task=mol_csv task.data.path=... task.data.target_column=PCE``.
CEP_FIXTURE = FIXTURES / "cep" / "cep.csv"


@pytest.fixture
def sst_fixture() -> SSTFixture:
    return SST_FIXTURE


@pytest.fixture
def sst_fixture_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data mirror of the SST fixture, its checksums added to the table (in this process)."""
    from knn.data import mirror

    root = tmp_path / "sst_mirror"
    monkeypatch.setattr(mirror, "CHECKSUMS", {**mirror.CHECKSUMS, **SST_FIXTURE.write_mirror(root)})
    monkeypatch.delenv(mirror.ENV_MIRROR, raising=False)
    return root


@pytest.fixture
def cep_fixture() -> Path:
    return CEP_FIXTURE


#: A ``python -c`` program: ``python -m knn.train ARGS`` (its ``__main__``, run by runpy as
#: ``-m`` does) after adding the JSON table of argv[1] to ``knn.data.mirror.CHECKSUMS``.
#: For tests only: monkeypatch does not reach a subprocess, and knn has no switch that
#: accepts other checksums, so a CLI test on a fake mirror (:meth:`SSTFixture.write_mirror`)
#: runs this instead.
_CLI_WITH_CHECKSUMS = (
    "import json, runpy, sys\n"
    "import knn.data.mirror as m\n"
    "m.CHECKSUMS = {**m.CHECKSUMS, **json.loads(sys.argv.pop(1))}\n"
    "runpy.run_module('knn.train', run_name='__main__', alter_sys=True)\n"
)


def knn_train_command(checksums: Mapping[str, str] | None = None) -> list[str]:
    """The argv of ``python -m knn.train``; with ``checksums``, a CLI that also accepts
    those files (:data:`_CLI_WITH_CHECKSUMS`). Append the arguments."""
    if not checksums:
        return [sys.executable, "-m", "knn.train"]
    return [sys.executable, "-c", _CLI_WITH_CHECKSUMS, json.dumps(dict(checksums))]


@pytest.fixture(name="knn_train_command")
def knn_train_command_fixture() -> Callable[..., list[str]]:
    """:func:`knn_train_command`, for tests that run the CLI in a subprocess."""
    return knn_train_command


@pytest.fixture
def fake_ptb(monkeypatch: pytest.MonkeyPatch) -> PTBCorpus:
    """Make the PTB task load :func:`tiny_corpus` instead of the real files."""
    corpus = tiny_corpus()
    monkeypatch.setattr("knn.tasks.lm.load_corpus", lambda data: corpus)
    return corpus


@pytest.fixture
def train_smoke(fake_ptb: PTBCorpus) -> Callable[..., dict]:
    """``train_smoke(run_dir, *overrides)``: a ``debug=smoke`` run on the tiny corpus."""
    from knn.train import train

    def run(run_dir, *overrides: str) -> dict:
        args = ["debug=smoke", f"run_dir={run_dir}", *overrides]
        return train(compose_config(args), overrides=args)

    return run


def require_fused(device_type: str) -> None:
    """Return if the fused op of ``device_type`` is built; otherwise skip or fail the test.

    Fails (with the build's error and output) when the compilers the build
    needs are on PATH, ``KNN_FUSED`` is not ``0`` and the build failed anyway:
    a broken C++/CUDA source or toolchain must not pass CI as a page of skips.
    Skips, saying why, with ``KNN_FUSED=0``, without a compiler, or for CUDA
    without a GPU (see :func:`knn.ops.recurrence.fused_status`).
    """
    status = recurrence.fused_status(device_type)
    if status.state == "built":
        return
    if status.state == "failed":
        log = recurrence.fused_build_log(device_type)
        pytest.fail(f"the fused {device_type} op failed to build although its compilers are on PATH "
                    f"({status.detail}); fix the build, or set KNN_FUSED=0 to test without it. "
                    f"Build output (tail):\n{log}", pytrace=False)
    pytest.skip(f"fused {device_type} op not run here: {status}")


@pytest.fixture(name="require_fused")
def require_fused_fixture() -> Callable[[str], None]:
    """:func:`require_fused`, for tests to call with the device type they need."""
    return require_fused
