"""Molecular property regression (paper Section 5.3, Table 3): ``task=cep`` and ``task=mol_csv``.

Data, splits, samplers, graphs and models come from :mod:`knn.data.molecules`,
:mod:`knn.data.splits`, :mod:`knn.data.sampling`, :mod:`knn.featurize` and the
``graph`` family of :data:`knn.models.MODELS`; this module wires them to the
shared trainer. One class serves both task names:

* ``cep``: the mirror's ``cep/cep-processed.csv`` (29,978 molecules, column
  ``PCE``) with its fixed 80/10/10 split file;
* ``mol_csv``: any CSV with a SMILES and a numeric column (``task.data.path``,
  ``task.data.smiles_column``, ``task.data.target_column``), split by a split
  file, by a split column (values train/valid/test) or at random
  (``task.data.split_seed``).

Protocol (the authors' ``graph_knn/wlkernel/nntrain.py``; their ELBP and NFP
scripts share it but never stop):

* batches of 20 drawn with re-sampling toward rare targets
  (:class:`~knn.data.sampling.ResamplingSampler`: buckets of
  ``resample_bin`` = 0.05, a uniformly chosen bucket per draw). Only
  training batches are re-sampled; validation and test are read once each,
  in file order. ``resample=false`` draws shuffled passes instead
  (:class:`~knn.data.sampling.ShuffledPasses`);
* an "epoch" is ``samples_per_epoch`` = 100,000 drawn molecules, 5,000
  batches: the authors multiply the learning rate by 0.9 every 100k samples,
  which is the trainer's ``exponential`` schedule with one such epoch per
  step (conf/train/molecules.yaml); their loop ends once the rate is below
  5e-6, i.e. after 51 epochs (5.1M samples). ``task=mol_csv`` (500-5,000
  molecules, say) instead has epochs of one pass over its training split,
  without re-sampling, and its own schedule in those epochs with early
  stopping (conf/train/mol_csv.yaml); every run logs its length at the start
  (:meth:`MoleculeRegression.run_length`);
* training batch i of epoch e is a pure function of (seed, e, i), so a run
  stopped mid-epoch resumes on the same molecules;
* data-parallel (``torchrun``): every process draws the same batch and trains
  on its contiguous part of it, its loss weighted so that the averaged
  gradient is the whole batch's (:func:`knn.dist.split_batch`); batch
  norm (``nfp``) then normalises with each process's part. Closed-form models
  are fitted by rank 0 alone, which also evaluates and writes the run files.

Targets are standardised with the training split's mean and standard
deviation: the network regresses (y - mean) / std, with the batch-mean squared
error as its loss (the authors' loss is the MSE in raw units; for Adam the
two differ only by the output scale the network must produce and by its
starting bias), and every reported metric (``rmse``, ``mae``) is in the
target's own units. The two numbers are saved in checkpoints (``meta``), so
:mod:`knn.predict` returns raw units too.

Closed-form models (``mean``, ``wl_kernel``: they have ``.fit``) take no
gradient steps: their epochs have zero batches, and :meth:`start_epoch` fits
them at epoch 0, inside the trainer's clock, on the plain (not re-sampled)
training set. Their experiments run one epoch, which validates, saves
``best.pt`` and lets the trainer write ``result.json`` as for any model.

Invalid rows (``task.data.on_invalid``): ``error`` stops at the first one with
a line naming the row and value; ``skip`` leaves them out, logs the count and
writes ``exclusions.csv`` to the run directory the trainer passes to
:meth:`MoleculeRegression.setup` (as it does ``split.json``, a split made here).
"""

from __future__ import annotations

import inspect
import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, ClassVar, cast

import numpy as np
import torch
from torch import Tensor, nn

from knn import dist
from knn.data.mirror import DataError, resolve
from knn.data.molecules import (
    ON_INVALID,
    MoleculeDataset,
    bondless_note,
    collate,
    count_bondless,
    featurize_table,
    load_molecule_csv,
    write_exclusions,
)
from knn.data.sampling import ResamplingSampler, ShuffledPasses
from knn.data.splits import SPLITS, check_split, column_split, load_split, random_split
from knn.errors import ConfigError
from knn.featurize import BatchMolGraph, MolFeaturizer
from knn.featurize.atom import PRESETS
from knn.io import atomic_write
from knn.models import ModelSpec, models_of
from knn.tasks.base import ConstantBaseline, StepResult

log = logging.getLogger(__name__)

CEP_CSV = "cep/cep-processed.csv"
CEP_SPLIT = "cep/split-random-80-10-10-seed0.json"
#: The override that skips invalid rows, as the trainer's command line spells it: an
#: invalid-row error ends with it.
ON_INVALID_KEY = "task.data.on_invalid"


# --------------------------------------------------------------------------- #
# Schemas
# --------------------------------------------------------------------------- #


@dataclass
class MolDataConfig:
    """Where the molecules come from: ``task.data.*``."""

    path: str | None = None  # CSV with a header; None: the mirror's cep/cep-processed.csv
    smiles_column: str = "smiles"
    target_column: str = "PCE"
    # Split, first that applies: a JSON file {"train": [rows], "valid": [...], "test": [...]}
    # of 0-based data rows; a column of train/valid/test; with path=None the mirror's
    # fixed CEP split; else a random split of the valid molecules by split_seed.
    split: str | None = None
    split_column: str | None = None
    split_seed: int = 0  # not the run's seed: other training seeds keep the same split
    split_fractions: list[float] = field(default_factory=lambda: [0.8, 0.1, 0.1])
    on_invalid: str = "error"  # error | skip (skip writes exclusions.csv to the run directory)
    mirror: str | None = None  # None: $KNN_DATA_MIRROR, then the default search
    cache_dir: str | None = None  # featurized graphs are cached here (None: the data cache)

    def __post_init__(self) -> None:
        if self.on_invalid not in ON_INVALID:
            raise ValueError(f"data.on_invalid must be one of {ON_INVALID}, got {self.on_invalid!r}")
        if len(self.split_fractions) != 3 or min(self.split_fractions) < 0 or not math.isclose(
            sum(self.split_fractions), 1.0
        ):
            raise ValueError(f"data.split_fractions must be 3 numbers >= 0 summing to 1, "
                             f"got {list(self.split_fractions)}")


@dataclass
class MolTaskConfig:
    name: str = "cep"  # cep | mol_csv (same task; the name says which data defaults apply)
    batch_size: int = 20  # authors' -b 20
    eval_batch_size: int = 200  # evaluation only: any size gives the same metrics
    samples_per_epoch: int | None = 100_000  # molecules per epoch; None: the training set size
    resample: bool = True  # re-sample training targets toward rare values (authors)
    resample_bin: float = 0.05  # bucket width in target units (authors: 0.05)
    resample_floor: float | None = 0.0  # targets below it share the lowest bucket; None: no floor
    standardize: bool = True  # regress (y - mean) / std of the training split
    featurizer: str = "authors"  # knn.featurize preset: authors (82/6) | duvenaud (62/6)
    # Cut runs short (smoke tests); None: everything.
    limit_train_items: int | None = None  # first N training molecules only
    limit_train_batches: int | None = None
    limit_eval_batches: int | None = None
    data: MolDataConfig = field(default_factory=MolDataConfig)

    def __post_init__(self) -> None:
        if self.featurizer not in PRESETS:
            raise ValueError(f"featurizer must be one of {sorted(PRESETS)}, got {self.featurizer!r}")
        for key in ("batch_size", "eval_batch_size", "samples_per_epoch", "limit_train_items"):
            value = getattr(self, key)
            if value is not None and value < 1:
                raise ValueError(f"{key} must be >= 1, got {value}")
        if not self.resample_bin > 0:
            raise ValueError(f"resample_bin must be > 0, got {self.resample_bin}")


def build_regressor(model_cfg: Any, atom_dim: int, bond_dim: int) -> nn.Module:
    """The graph model of ``model_cfg`` (its config dataclass, or a plain dict such as a
    checkpoint's) for these feature sizes, which fill in ``atom_dim``/``bond_dim``.

    Raises :class:`~knn.errors.ConfigError` (one line) for an unknown name or a bad setting.
    """
    values = asdict(model_cfg) if is_dataclass(model_cfg) and not isinstance(model_cfg, type) \
        else dict(model_cfg)
    name, graph_models = values.get("name"), models_of("graph")
    if name not in graph_models:
        raise ConfigError(f"model.name={name!r} is not a molecule model: {sorted(graph_models)}")
    spec = graph_models[name]
    known = {f.name for f in fields(spec.config)}
    if unknown := sorted(set(values) - known):
        raise ConfigError(f"config error: model: {name}: unknown settings {unknown}; "
                          f"known: {sorted(known)}")
    for key, dim in (("atom_dim", atom_dim), ("bond_dim", bond_dim)):
        if key in known:
            if values.get(key) not in (None, dim):
                raise ConfigError(f"model.{key}={values[key]} but the featurizer gives {dim}; "
                                  f"leave it null")
            values[key] = dim
    try:
        return spec.cls(spec.config(**values))
    except ValueError as e:
        raise ConfigError(f"config error: model: {e}") from None


def is_fitted_model(model: nn.Module) -> bool:
    """A closed-form model (``.fit``), trained by :meth:`MoleculeRegression.start_epoch`."""
    return callable(getattr(model, "fit", None))


# --------------------------------------------------------------------------- #
# The run's length
# --------------------------------------------------------------------------- #


def describe_run_length(n_train: int, samples_per_epoch: int, resample: bool, batch_size: int,
                        steps_per_epoch: int, max_epochs: int, max_steps: int | None,
                        patience: int | None, metric: str, lr_first: float, lr_last: float) -> str:
    """One log line: what an epoch is, and the most epochs and steps the run can take.

    ``steps_per_epoch`` is 0 for a closed-form model (fitted once, no steps).
    """
    if steps_per_epoch == 0:
        return f"run length: a closed-form fit on {n_train:,} training molecules, no gradient steps"
    if samples_per_epoch == n_train and not resample:
        epoch = f"1 pass over {n_train:,} training molecules"
    else:
        drawn = "re-sampled toward rare targets" if resample else "in shuffled passes"
        epoch = f"{samples_per_epoch:,} molecules drawn from {n_train:,} ({drawn})"
    steps = steps_per_epoch * max_epochs
    limit = f"at most {max_epochs:,} epochs = {steps:,} steps (train.max_epochs)"
    if max_steps is not None and max_steps < steps:
        limit = (f"at most {max_steps:,} steps = {max_steps / steps_per_epoch:,.1f} epochs "
                 f"(train.max_steps)")
    stop = ("no early stopping (train.patience: null)" if patience is None else
            f"stops early after {patience} epochs without a better valid {metric} (train.patience)")
    return (f"run length: an epoch is {epoch} = {steps_per_epoch:,} steps of {batch_size}; "
            f"{limit}; {stop}; lr {lr_first:.3g} at epoch 0, {lr_last:.3g} at the last")


# --------------------------------------------------------------------------- #
# The task
# --------------------------------------------------------------------------- #


@dataclass
class EvalBatch:
    graph: BatchMolGraph  # on the task's device
    targets: Tensor  # (G,) float64, raw units, CPU


class MoleculeRegression:
    """Graph -> number; model selection on validation RMSE (raw units), lower is better."""

    name: ClassVar[str] = "cep"
    metric: ClassVar[str] = "rmse"
    higher_is_better: ClassVar[bool] = False
    Config: ClassVar[type] = MolTaskConfig
    models: ClassVar[dict[str, ModelSpec]] = models_of("graph")  # see build_regressor

    def __init__(self, cfg: MolTaskConfig, device: torch.device, seed: int = 0) -> None:
        self.cfg, self.device, self.seed = cfg, device, seed
        self.featurizer = MolFeaturizer.preset(cfg.featurizer)
        self.splits: dict[str, MoleculeDataset] = {}
        self.eval_batches: dict[str, list[EvalBatch]] = {}
        self.mean, self.std = 0.0, 1.0
        self.sampler: Any = None
        self.model: nn.Module | None = None
        self.run_dir: Path | None = None  # where setup() writes exclusions.csv and split.json
        self.info: dict[str, Any] = {}
        # Training throughput: the time from fetching batch i to fetching batch i+1 of the
        # same epoch is one whole update (collate, forward, backward, step); the last
        # batch of each epoch is left out (validation follows it).
        self.timed = {"molecules": 0, "seconds": 0.0}
        self._prev: tuple[int, int, float, int] | None = None  # epoch, index, time, size
        self.fit_seconds: float | None = None

    # ---- data ------------------------------------------------------------- #

    def _files(self) -> tuple[Path, Path | None]:
        """The CSV and the split file (None: the split is made from a column or at random)."""
        d = self.cfg.data
        if d.path is None and self.cfg.name != "cep":
            raise ConfigError(f"task={self.cfg.name} needs task.data.path=<csv>, with "
                              "task.data.smiles_column and task.data.target_column naming its "
                              "columns")
        if d.path is None:
            csv_path = resolve(CEP_CSV, d.mirror, d.cache_dir)
        else:
            csv_path = Path(d.path).expanduser()
        if d.split:
            return csv_path, Path(d.split).expanduser()
        if d.path is None and not d.split_column:
            return csv_path, resolve(CEP_SPLIT, d.mirror, d.cache_dir)
        return csv_path, None

    def _split_rows(self, data: MoleculeDataset, csv_path: Path, split_file: Path | None
                    ) -> tuple[dict[str, np.ndarray], str]:
        """File rows of each split, and a description of where the split came from."""
        d = self.cfg.data
        if split_file is not None:
            return load_split(split_file), f"file {split_file}"
        if d.split_column:
            return column_split(csv_path, d.split_column), f"column {d.split_column!r}"
        fractions = cast("tuple[float, float, float]", tuple(d.split_fractions))  # 3: checked
        parts = random_split(len(data), fractions, seed=d.split_seed)
        rows = {s: np.sort(data.rows.numpy()[parts[s]]) for s in SPLITS}
        return rows, f"random {d.split_fractions} of the valid rows, split_seed {d.split_seed}"

    def setup(self, run_dir: Path | None = None) -> None:
        """Load, featurize and split the data; ``run_dir`` receives exclusions.csv and
        split.json (None: they are not written)."""
        d, cfg = self.cfg.data, self.cfg
        self.run_dir = None if run_dir is None else Path(run_dir)
        csv_path, split_file = self._files()
        self.info["csv"] = str(csv_path)
        table = load_molecule_csv(csv_path, d.smiles_column, d.target_column, d.on_invalid,
                                  ON_INVALID_KEY)
        data = featurize_table(table, self.featurizer, d.cache_dir, on_invalid_key=ON_INVALID_KEY)
        rows, where = self._split_rows(data, csv_path, split_file)
        check_split(rows, data.rows.tolist() + [x.row for x in data.exclusions], where, str(csv_path))
        for s in SPLITS:
            self.splits[s] = data.select_rows(rows[s])
            if len(self.splits[s]) == 0:
                raise DataError(f"split {where}: no valid molecules in {s} ({csv_path})")
        if cfg.limit_train_items is not None:
            self.splits["train"] = self.splits["train"].subset(
                np.arange(min(cfg.limit_train_items, len(self.splits["train"]))))
        if dist.is_main():
            self._write_run_files(data, rows, where if split_file is None else None)
        y = self.splits["train"].targets.double()
        if cfg.standardize:
            self.mean = float(y.mean())
            self.std = float(y.std(unbiased=False)) if len(y) > 1 else 1.0
            self.std = self.std if self.std > 0 else 1.0
        n_train = len(self.splits["train"])
        n_samples = cfg.samples_per_epoch or n_train
        if cfg.resample:
            self.sampler = ResamplingSampler(y.numpy(), cfg.resample_bin, cfg.resample_floor,
                                             num_samples=n_samples, seed=self.seed)
        else:
            self.sampler = ShuffledPasses(n_train, n_samples, self.seed)
        for s in ("valid", "test"):
            self.eval_batches[s] = self._eval_batches(self.splits[s])
        self.info.update({
            "split": where, "excluded": len(data.exclusions),
            "sizes": {s: len(self.splits[s]) for s in SPLITS},
            "target": {"column": d.target_column, "mean": self.mean, "std": self.std},
        })
        if cfg.resample:
            self.info["resample_buckets"] = self.sampler.num_buckets
        self.info["bondless"] = {s: count_bondless(self.splits[s].graphs) for s in SPLITS}
        for s, n in self.info["bondless"].items():
            if n:
                log.warning(bondless_note(n, len(self.splits[s]), f"{csv_path.name} {s}"))
        log.info("%s: %s molecules (train/valid/test), split %s, %d excluded",
                 csv_path.name, "/".join(str(len(self.splits[s])) for s in SPLITS), where,
                 len(data.exclusions))

    def _write_run_files(self, data: MoleculeDataset, rows: dict[str, np.ndarray],
                         made_here: str | None) -> None:
        """exclusions.csv (skip mode) and split.json (a split made here, described by
        ``made_here``) in the run directory, when there is one."""
        run_dir = self.run_dir
        if data.exclusions:
            listed = ""
            if run_dir is not None:
                path = write_exclusions(data.exclusions, run_dir / "exclusions.csv")
                self.info["exclusions_file"] = str(path)
                listed = f", listed in {path}"
            log.warning("on_invalid=skip: %d invalid rows left out%s", len(data.exclusions), listed)
        if made_here and run_dir is not None:
            payload = {"description": f"0-based data rows of {self.info['csv']}; split {made_here}",
                       **{s: rows[s].tolist() for s in SPLITS}}
            with atomic_write(run_dir / "split.json") as f:
                f.write(json.dumps(payload).encode())

    def _eval_batches(self, data: MoleculeDataset) -> list[EvalBatch]:
        size, out = self.cfg.eval_batch_size, []
        for start in range(0, len(data), size):
            graphs = data.graphs[start : start + size]
            out.append(EvalBatch(collate(graphs).to(self.device),
                                 data.targets[start : start + size].double()))
        return out

    # ---- model ------------------------------------------------------------ #

    def build_model(self, model_cfg: Any) -> nn.Module:
        self.model = build_regressor(model_cfg, self.featurizer.atom_dim, self.featurizer.bond_dim)
        return self.model

    def fit(self, model: nn.Module) -> None:
        """Fit a closed-form model on the plain training set (standardised targets)."""
        train = self.splits["train"]
        y = (train.targets.double() - self.mean) / self.std
        start = time.perf_counter()
        fit = cast("Callable[..., Any]", model.fit)  # a closed-form model's fit
        if "graphs" in inspect.signature(fit).parameters:  # wl_kernel; mean takes targets only
            fit(train.graphs, y)
        else:
            fit(y)
        self.fit_seconds = time.perf_counter() - start
        log.info("fitted %s on %d molecules in %.1f s", type(model).__name__, len(train),
                 self.fit_seconds)

    # ---- training --------------------------------------------------------- #

    def num_train_batches(self) -> int:
        if self.model is not None and is_fitted_model(self.model):
            return 0
        n = math.ceil(self.sampler.num_samples / self.cfg.batch_size)
        return n if self.cfg.limit_train_batches is None else min(n, self.cfg.limit_train_batches)

    def start_epoch(self, epoch: int) -> None:
        self._prev = None
        fitted = self.model is not None and is_fitted_model(self.model)
        # only rank 0 evaluates it
        if epoch == 0 and fitted and self.model is not None and dist.is_main():
            self.fit(self.model)

    def train_batch(self, epoch: int, index: int) -> tuple[BatchMolGraph, Tensor, float]:
        """This process's part of batch ``index``: graphs, standardised targets and the factor
        on its mean loss (the whole batch and 1 in one process; 0: a stand-in item)."""
        now = time.perf_counter()
        if self._prev is not None and self._prev[:2] == (epoch, index - 1):
            self.timed["seconds"] += now - self._prev[2]
            self.timed["molecules"] += self._prev[3]
        idx = self.sampler.batch(epoch, index, self.cfg.batch_size)
        self._prev = (epoch, index, now, len(idx))  # the whole batch: all processes' throughput
        part, scale = dist.split_batch(len(idx))
        idx = idx[part]
        train = self.splits["train"]
        graph = collate([train.graphs[i] for i in idx.tolist()]).to(self.device)
        y = ((train.targets[torch.from_numpy(idx)].double() - self.mean) / self.std).float()
        return graph, y.to(self.device), scale

    def training_step(self, model: nn.Module, batch: tuple[BatchMolGraph, Tensor, float]
                      ) -> StepResult:
        graph, y, scale = batch  # y: (G,) standardised
        err = model(graph) - y  # (G,)
        loss = (err**2).mean() * scale
        n = y.numel() if scale else 0  # a stand-in item is not counted
        return StepResult(loss=loss, total=(err.detach() ** 2).sum() if n else 0.0, count=n)

    def train_metrics(self, mean_loss: float) -> dict[str, float]:
        """Loss: MSE in standardised units; rmse: in target units, on re-sampled batches."""
        return {"loss": mean_loss, "rmse": math.sqrt(mean_loss) * self.std}

    # ---- evaluation ------------------------------------------------------- #

    @torch.no_grad()
    def predict_batches(self, model: nn.Module, batches: list[EvalBatch]) -> Tensor:
        """Predictions in target units, (N,) float64 on CPU."""
        model.eval()
        out = [model(b.graph).double().cpu() * self.std + self.mean for b in batches]
        return torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)

    def _evaluated(self, split: str) -> list[EvalBatch]:
        batches = self.eval_batches[split]
        if self.cfg.limit_eval_batches is not None:
            batches = batches[: self.cfg.limit_eval_batches]
        return batches

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        batches = self._evaluated(split)
        pred = self.predict_batches(model, batches)
        y = torch.cat([b.targets for b in batches])
        err = pred - y
        return {"rmse": float(err.pow(2).mean().sqrt()), "mae": float(err.abs().mean())}

    def constant_baseline(self) -> ConstantBaseline:
        """The train-mean predictor: its RMSE on the evaluated validation molecules (target
        units) and its training loss, the MSE of the (standardised) training targets about
        their mean (1 when standardised)."""
        y = self.splits["train"].targets.double()
        valid = torch.cat([b.targets for b in self._evaluated("valid")])
        rmse = float((valid - y.mean()).pow(2).mean().sqrt())
        loss = float(((y - y.mean()) / self.std).pow(2).mean())
        return ConstantBaseline("train-mean predictor", rmse, loss, log_loss=False)

    def run_length(self, train_cfg: Any, lr_of: Callable[[int], float]) -> str:
        """How long the run will be, for the log at its start (steps, epochs, samples).

        ``lr_of(epoch)`` is the learning rate of a 0-based epoch under the run's schedule
        (the trainer's :meth:`knn.train.optim.EpochSchedule.lr_of`).
        """
        return describe_run_length(
            n_train=len(self.splits["train"]), samples_per_epoch=self.sampler.num_samples,
            resample=self.cfg.resample, batch_size=self.cfg.batch_size,
            steps_per_epoch=self.num_train_batches(), max_epochs=train_cfg.max_epochs,
            max_steps=train_cfg.max_steps, patience=train_cfg.patience, metric=self.metric,
            lr_first=lr_of(0), lr_last=lr_of(max(train_cfg.max_epochs - 1, 0)))

    # ---- checkpoint and result data ----------------------------------------- #

    def meta(self) -> dict[str, Any]:
        d = self.cfg.data
        return {"featurizer": self.cfg.featurizer, "atom_dim": self.featurizer.atom_dim,
                "bond_dim": self.featurizer.bond_dim, "target_mean": self.mean,
                "target_std": self.std, "smiles_column": d.smiles_column,
                "target_column": d.target_column}

    def state_dict(self) -> dict[str, Any]:
        return {"timed": dict(self.timed), "fit_seconds": self.fit_seconds}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.timed = {"molecules": int(state["timed"]["molecules"]),
                      "seconds": float(state["timed"]["seconds"])}
        self.fit_seconds = state.get("fit_seconds")

    def result_extra(self) -> dict[str, Any]:
        """Fields for ``result.json`` beyond the trainer's (data, throughput, fitted size)."""
        n, s = self.timed["molecules"], self.timed["seconds"]
        extra: dict[str, Any] = {
            "data": dict(self.info),
            "throughput": {"molecules": n, "seconds": round(s, 3),
                           "molecules_per_second": round(n / s, 1) if s > 0 else None},
        }
        if self.model is not None and is_fitted_model(self.model):
            size = getattr(self.model, "num_features", 0)
            extra["fit_seconds"] = None if self.fit_seconds is None else round(self.fit_seconds, 3)
            extra["fitted_parameters"] = size + 1  # wl_kernel: weights + bias; mean: 1
        return extra
