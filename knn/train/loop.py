"""The one training loop shared by every task.

``train(cfg)`` is a plain function: Hydra's entry point (``__main__``) and the
tests both call it with a composed config. Per epoch it trains over the
task's batches, validates, keeps the best model (``best.pt``) and writes a
resumable checkpoint (``last.pt``) and a line of ``metrics.jsonl``. At the
end it evaluates the best model on validation and test data and writes
``result.json``. A wall-clock budget, a step limit or early stopping end the
run early; a non-finite loss stops it with an error, keeping the last good
checkpoint.
"""

from __future__ import annotations

import gc
import inspect
import logging
import math
import os
import shlex
import sys
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from knn import dist
from knn.errors import ConfigError
from knn.io import write_json
from knn.models import count_params
from knn.tasks import TASKS
from knn.tasks.base import is_better
from knn.train import checkpoint as ckpt
from knn.train import segments
from knn.train.average import WeightAverage
from knn.train.config import reference_config, resolve_config, to_dataclass
from knn.train.health import check_run
from knn.train.memory import keep_freed_memory
from knn.train.optim import EpochSchedule, build_optimizer
from knn.train.protocol import experiment_of, group_choices, protocol_label
from knn.train.provenance import device_name, git_commit, machine, provenance
from knn.train.rng import get_rng_state, seed_everything, set_deterministic, set_rng_state

log = logging.getLogger(__name__)
_DDP_SYNCS_BUFFERS_ONCE = "forward_sync_buffers" in inspect.signature(DistributedDataParallel).parameters


class NonFiniteLoss(RuntimeError):
    """The training loss became NaN or infinite; the message is one line."""


@dataclass
class Progress:
    """Where training is; saved in every checkpoint."""

    epoch: int = 0  # current epoch (0-based)
    batch: int = 0  # next batch index within ``epoch``
    step: int = 0  # optimizer steps taken
    best: float | None = None  # best validation metric so far
    best_epoch: int = -1
    bad_epochs: int = 0  # epochs since the best (for patience)
    elapsed: float = 0.0  # seconds of training so far, over all resumed segments
    loss_total: float = 0.0  # running training-loss sums of the current epoch, so a
    loss_count: int = 0  # run resumed mid-epoch logs the same epoch loss


def pick_device(name: str) -> torch.device:
    """``auto`` is CUDA when available, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device={name}: CUDA is not available here (use device=cpu or auto)")
    return torch.device(name)


def train(cfg: Any, overrides: list[str] | None = None) -> dict[str, Any]:
    """Train, select on validation, test, and return the ``result.json`` dict.

    ``overrides`` are the command-line overrides that produced ``cfg``; they
    are recorded as the exact command that reproduces the run, and their
    ``experiment=`` names the protocol the run is labelled against
    (:mod:`knn.train.protocol`), composed now, as the run starts.
    """
    reference = reference_config(experiment_of(overrides or []), group_choices(overrides or []))
    trainer = Trainer(resolve_config(cfg))
    stop_reason = trainer.fit()
    result = trainer.finish(stop_reason, overrides or [], reference)
    # Free the DDP wrapper before shutdown(): its reducer holds the group, so the group's
    # gloo teardown would otherwise run after shutdown(), whenever the wrapper is freed
    # (this frame's exit, a garbage collection), where a rank can hang.
    trainer.train_model = trainer.model
    gc.collect()
    # Leave together: a gloo process that tears its group down while a peer still
    # writes the results can abort at exit ("terminate called without an active exception").
    # A rank that raised never gets here: tearing the group down while a peer waits in a
    # collective can deadlock both, whereas its exit lets torchrun stop the peers.
    dist.barrier()
    dist.shutdown()  # leave torchrun's process group, if the trainer joined one
    return result


class Trainer:
    """One run: the task, its model and optimizer, progress and run-dir files.

    Under ``torchrun`` every rank runs one Trainer (see :mod:`knn.dist`):
    training steps go through the DDP-wrapped ``train_model``; evaluation
    (rank 0's, broadcast) and checkpoints use the plain ``model``.
    """

    def __init__(self, cfg: DictConfig) -> None:
        # The train group as a dataclass: the loop reads its fields at every step, and a
        # DictConfig attribute read costs as much as a small tensor op.
        self.cfg, self.t = cfg, to_dataclass(cfg.train)
        self.device = dist.init(pick_device(cfg.device))  # joins torchrun's process group, if any
        # Rank 0's directory: Hydra's time-stamped run dir may differ by a second between ranks.
        self.run_dir = Path(dist.broadcast_object(cfg.run_dir) or ".")
        self.last_path = self.run_dir / ckpt.LAST
        self.best_path = self.run_dir / ckpt.BEST
        if self.last_path.exists() and not self.t.resume:
            raise ConfigError(f"{self.last_path} exists: pass train.resume=true to continue it, "
                              "or use a new run dir")
        if self.t.resume and not self.last_path.exists():
            raise ConfigError(f"train.resume=true but there is no checkpoint at {self.last_path}")

        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        if cfg.keep_freed_memory and self.device.type == "cpu":
            keep_freed_memory()
        set_deterministic(self.t.deterministic)
        seed_everything(cfg.seed)  # before the model is built: it fixes the init
        self.task = TASKS[cfg.task.name](to_dataclass(cfg.task), self.device, seed=cfg.seed)
        self.task.setup(self.run_dir)
        self.model = self.task.build_model(to_dataclass(cfg.model)).to(self.device)
        self.optimizer = build_optimizer(self.model, self.t)
        self.schedule = EpochSchedule(self.optimizer, self.t)
        # θ̄, the averaged weights that validation, best.pt and the test see (knn.train.average)
        self.average = (None if self.t.ema_decay is None
                        else WeightAverage(self.model, self.t.ema_decay))
        self.after_step = getattr(self.task, "after_step", None)  # optional task.after_step(model)
        self.plain_cfg = cast("dict[str, Any]", OmegaConf.to_container(cfg, resolve=True))
        self.p = Progress()
        self.segments: list[dict[str, Any]] = []  # where each stretch trained (knn.train.segments)
        if self.t.resume:
            self._resume()
        if dist.rank() > 0:  # same init everywhere (above), other dropout masks per rank
            seed_everything(dist.rank_seed(cfg.seed, self.p.step))
        self.train_model = self._data_parallel()
        self.n_params = count_params(self.model)
        log.info("%s / %s: %d trainable parameters on %s", cfg.task.name, cfg.model.name,
                 self.n_params, self.device)
        if (run_length := getattr(self.task, "run_length", None)) is not None:  # optional
            log.info("%s", run_length(self.t, self.schedule.lr_of))  # "run length: an epoch is ..."
        self.show = self.t.progress if self.t.progress is not None else sys.stderr.isatty()
        self.show = self.show and dist.is_main()
        # A detached run (no bar) logs its pace instead, at most every `log_minutes`.
        self.log_seconds = (None if self.show or self.t.log_minutes is None or not dist.is_main()
                            else 60 * self.t.log_minutes)
        self.clock = time.monotonic() - self.p.elapsed  # a resumed run's budget counts earlier time
        self.commit = git_commit()  # the code this process runs, recorded in result.json
        self.segment = segments.begin(self.p, device_name(self.device), str(torch.__version__),
                                      {**machine(), "processes": dist.world_size()}, self.commit)
        self.segments.append(self.segment)
        self.segment_clock = self.p.elapsed  # training seconds before this segment

    def _resume(self) -> None:
        state = ckpt.load(self.last_path, map_location=self.device)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.schedule.load_state_dict(state["schedule"])
        self.task.load_state_dict(state["task_state"])
        if (self.average is None) != ("average" not in state):  # one protocol per run
            how = "without" if self.average is not None else "with"
            raise ConfigError(f"{self.last_path} was trained {how} train.ema_decay: resume it "
                              f"{how} it")
        if self.average is not None:
            self.average.load_state_dict(state["average"])
        self.p = Progress(**state["progress"])
        # A checkpoint from before segments were kept: its past is one unrecorded segment.
        self.segments = state.get("segments") or [segments.unrecorded(self.p)]
        set_rng_state(state["rng"])
        log.info("resumed from %s at epoch %d batch %d", self.last_path, self.p.epoch, self.p.batch)

    def _data_parallel(self) -> nn.Module:
        """The model under DDP when several processes train (gradients averaged over ranks).

        Buffers are copied from rank 0 once, not at every step (at every step
        on torch < 2.13): they are fixed tables (SST's vectors) or batch-norm
        statistics, of which only rank 0's are used.
        """
        if dist.world_size() == 1 or not any(p.requires_grad for p in self.model.parameters()):
            return self.model  # one process, or a closed-form model (no gradient steps)
        ids = [self.device] if self.device.type == "cuda" else None
        # torch < 2.13 has no forward_sync_buffers; its default copies the buffers at
        # every forward instead, which gives the same values.
        once: dict[str, Any] = {"forward_sync_buffers": False} if _DDP_SYNCS_BUFFERS_ONCE else {}
        return DistributedDataParallel(self.model, device_ids=ids, **once)

    def _limit_reached(self) -> str | None:
        if self.t.max_steps is not None and self.p.step >= self.t.max_steps:
            return "max_steps"
        if self.t.max_minutes is not None and dist.any_rank(  # every rank stops at the same step
                time.monotonic() - self.clock > 60 * self.t.max_minutes):
            return "max_minutes"
        return None

    def fit(self) -> str:
        """Train epoch by epoch until a limit; return why training stopped."""
        if self.t.resume and (reason := self._limit_reached()):
            return reason  # resumed past its step or time limit: nothing to train
        while self.p.epoch < self.t.max_epochs:
            lr = self.schedule.set_epoch(self.p.epoch)
            if self.p.batch == 0:
                self.task.start_epoch(self.p.epoch)
            n_batches = self.task.num_train_batches()
            train_loss = self._train_epoch(n_batches, lr)
            # Validate also when stopped mid-epoch, so a budgeted run's last
            # stretch of training can still become the selected model.
            self._end_of_epoch(train_loss, lr, full=self.p.batch >= n_batches)
            if reason := self._limit_reached():
                return reason
            if self.t.patience is not None and self.p.bad_epochs >= self.t.patience:
                return "patience"
        return "max_epochs"

    def _train_epoch(self, n_batches: int, lr: float) -> float | None:
        """Train from batch ``p.batch`` to the end of the epoch or a limit; mean loss."""
        p = self.p
        total, count = (p.loss_total, p.loss_count) if p.batch else (0.0, 0)
        every = self.t.checkpoint_every
        self.train_model.train()
        logged = (time.monotonic(), p.step)  # the last progress line: when, at which step
        bar = tqdm(total=n_batches, initial=p.batch, desc=f"epoch {p.epoch}",
                   disable=not self.show, leave=False, dynamic_ncols=True)
        with bar:
            while p.batch < n_batches:
                batch = self.task.train_batch(p.epoch, p.batch)
                out = self.task.training_step(self.train_model, batch)
                # Sums over ranks (a no-op in one process): logs cover the whole batch,
                # and a non-finite loss on any rank stops every rank.
                loss, step_total, step_count = dist.sum_over_ranks(out.loss.detach(), out.total,
                                                                   out.count)
                if not math.isfinite(float(loss)):  # waits for the device, as any check must
                    raise NonFiniteLoss(
                        f"loss is {float(loss)} at step {p.step + 1} "
                        f"(epoch {p.epoch}, batch {p.batch}); stopped, last good checkpoint: "
                        f"{self.last_path if self.last_path.exists() else 'none'}")
                self.optimize(out.loss)
                p.step, p.batch = p.step + 1, p.batch + 1
                total, count = total + step_total, count + step_count
                bar.update(1)
                if self.show and p.step % 20 == 0:  # float() waits for the device: only when shown
                    bar.set_postfix(loss=f"{float(total) / count:.3f}", lr=f"{lr:.3g}")
                if self.log_seconds is not None and time.monotonic() - logged[0] >= self.log_seconds:
                    mean = float(total) / max(count, 1)
                    logged = self._log_pace(n_batches, lr, mean, logged)
                if self._limit_reached():
                    break
                if every and p.step % every == 0 and p.batch < n_batches:
                    p.loss_total, p.loss_count = float(total), count
                    self._save_last()  # a killed run loses at most `every` steps
        p.loss_total, p.loss_count = float(total), count
        return p.loss_total / count if count else None

    def _log_pace(self, n_batches: int, lr: float, mean_loss: float,
                  since: tuple[float, int]) -> tuple[float, int]:
        """Log where the epoch is, its running train metrics and the seconds per step since
        the last such line (``since``: its time and step); return this line's."""
        p, now = self.p, time.monotonic()
        log.info("epoch %d  batch %d of %d  step %d  lr %.4g  train %s  %.3g s/step", p.epoch,
                 p.batch, n_batches, p.step, lr, _fmt(self.task.train_metrics(mean_loss)),
                 (now - since[0]) / max(p.step - since[1], 1))
        return now, p.step

    def optimize(self, loss: torch.Tensor) -> None:
        """One update: back-propagate ``loss``, clip the gradient norm, step, constrain."""
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.t.clip:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.t.clip)
        self.optimizer.step()
        if self.after_step is not None:  # a task's weight constraint (e.g. max-norm)
            self.after_step(self.model)
        if self.average is not None:
            self.average.update()

    def _end_of_epoch(self, train_loss: float | None, lr: float, full: bool) -> None:
        """Validate, keep the best model, checkpoint, log a metrics line."""
        p, task = self.p, self.task
        started = time.monotonic()
        with self._evaluation_weights():
            valid = self._evaluate("valid")
            valid_seconds = time.monotonic() - started  # logged: evaluation's share of an epoch
            improved = is_better(valid[task.metric], p.best, task.higher_is_better)
            if improved:  # best.pt holds the weights just validated: θ̄ when averaging
                p.best, p.best_epoch, p.bad_epochs = valid[task.metric], p.epoch, 0
                self._save({"model": self.model.state_dict(), "epoch": p.epoch, "valid": valid},
                           self.best_path)
        if not improved and full:
            p.bad_epochs += 1
        record = {"epoch": p.epoch, "step": p.step, "lr": lr, "partial": not full,
                  "train": {} if train_loss is None else task.train_metrics(train_loss),
                  "valid": valid, "valid_seconds": round(valid_seconds, 2), "best": improved}
        if full:
            p.epoch, p.batch, p.loss_total, p.loss_count = p.epoch + 1, 0, 0.0, 0
        record["elapsed"] = self._save_last()
        if dist.is_main():
            ckpt.append_jsonl(record, self.run_dir / "metrics.jsonl")
        log.info("epoch %d%s  lr %.4g  train %s  valid %s%s", record["epoch"],
                 "" if full else " (partial)", lr, _fmt(record["train"]), _fmt(valid),
                 "  *" if improved else "")

    def _evaluation_weights(self) -> AbstractContextManager[None]:
        """θ̄ in the model's parameters for the block when averaging, else nothing changes."""
        return self.average.applied() if self.average is not None else nullcontext()

    def _evaluate(self, split: str) -> dict[str, float]:
        """The task's metrics on ``split``: rank 0 evaluates, every rank gets its numbers."""
        return dist.broadcast_object(self.task.evaluate(self.model, split) if dist.is_main()
                                     else None)

    def _save_last(self) -> float:
        """Write the resumable ``last.pt``; return the training seconds it records."""
        p = self.p
        # A finite loss can still be followed by an overflowing step; never let
        # such weights replace the last good checkpoint.
        if not all(bool(w.isfinite().all()) for w in self.model.parameters()):
            raise NonFiniteLoss(f"weights are not finite after step {p.step} (epoch {p.epoch}); "
                                f"stopped, last good checkpoint: "
                                f"{self.last_path if self.last_path.exists() else 'none'}")
        p.elapsed = time.monotonic() - self.clock
        segments.extend(self.segment, p, p.elapsed - self.segment_clock)
        average = {} if self.average is None else {"average": self.average.state_dict()}
        self._save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                    "schedule": self.schedule.state_dict(), "task_state": self.task.state_dict(),
                    "progress": vars(p).copy(), "rng": get_rng_state(),
                    "segments": self.segments, **average}, self.last_path)
        return p.elapsed

    def _save(self, state: dict[str, Any], path: Path) -> None:
        """Checkpoint ``state`` plus what rebuilds the model (rank 0 only)."""
        if dist.is_main():
            ckpt.save({**state, "config": self.plain_cfg, "meta": self.task.meta()}, path)

    def finish(self, stop_reason: str, overrides: list[str],
               reference: dict[str, Any]) -> dict[str, Any]:
        """Evaluate the best checkpoint on valid and test; write ``result.json``, labelled
        against ``reference`` (the resolved config of the run's experiment alone).

        The last epoch's weights are evaluated too (``metrics_last``): some papers' code
        tests those instead of selecting on validation (the authors' CEP scripts do). When
        averaging, those are the last average θ̄, as for every validation."""
        dist.barrier()  # rank 0 has finished writing best.pt
        with self._evaluation_weights():
            last = {split: self._evaluate(split) for split in ("valid", "test")}
        # best.pt holds the selected weights (θ̄ when averaging)
        selected: AbstractContextManager[None] = nullcontext()
        if self.best_path.exists():
            best = ckpt.load(self.best_path, map_location=self.device)
            self.model.load_state_dict(best["model"])
        else:
            selected = self._evaluation_weights()
        with selected:
            metrics = {split: self._evaluate(split) for split in ("valid", "test")}
        cfg, t = self.cfg, self.t
        wall = time.monotonic() - self.clock
        segments.extend(self.segment, self.p, wall - self.segment_clock)
        result = {
            "task": cfg.task.name,
            "model": cfg.model.name,
            "variant": cfg.variant,
            "params": self.n_params,
            "metrics": metrics,
            "metrics_last": last,
            "metric": self.task.metric,
            "best_epoch": self.p.best_epoch,
            "epochs": self.p.epoch,
            "steps": self.p.step,
            "stop_reason": stop_reason,
            "wall_seconds": round(wall, 2),
            "device": device_name(self.device),  # the last segment's; every one: "segments"
            "segments": self.segments,
            "processes": dist.world_size(),  # data-parallel ranks (torchrun), each on `device`
            "seed": cfg.seed,
            "budgeted": stop_reason == "max_minutes",
            "budget_minutes": t.max_minutes,
            "experiment": experiment_of(overrides),
            "protocol": protocol_label(self.plain_cfg, reference, stop_reason,
                                       experiment_of(overrides)),
            **provenance(command_line(overrides), self.commit),  # git_commit, command, machine, ...
            "paper": self.plain_cfg.get("paper"),
            "config": self.plain_cfg,
        }
        # Diverged? Better than a constant predictor? (knn.train.health; WARNING lines if not)
        result["health"] = check_run(self.task, metrics["valid"], self.run_dir / "metrics.jsonl")
        if (extra := getattr(self.task, "result_extra", None)) is not None:
            result["extra"] = extra()  # optional task-specific fields (e.g. molecules/s)
        if dist.is_main():
            write_json(result, self.run_dir / "result.json")
        log.info("done (%s): valid %s  test %s", stop_reason, _fmt(metrics["valid"]),
                 _fmt(metrics["test"]))
        return result


def command_line(overrides: list[str]) -> str:
    """The command that reruns this job: ``python -m knn.train ...``, or ``torchrun`` with
    its process count (read from torchrun's environment, so it holds after a failure too)."""
    n = int(os.environ.get("WORLD_SIZE", "1"))
    launcher = ["python"] if n == 1 else ["torchrun", "--standalone", f"--nproc_per_node={n}"]
    return shlex.join([*launcher, "-m", "knn.train", *overrides])


def _fmt(metrics: dict[str, float]) -> str:
    return " ".join(f"{k}={v:.4g}" if math.isfinite(v) else f"{k}={v}" for k, v in metrics.items())
