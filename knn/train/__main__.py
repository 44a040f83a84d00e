"""Command line: ``python -m knn.train task=ptb model=knn_lm [overrides]``.

Configs come from :data:`knn.paths.CONF_DIR` (``train.yaml`` and its groups): the
repository's ``conf/`` in a checkout, the copy a wheel carries (``knn/conf/``) when
installed with pip, so ``knn-train`` runs from any directory; see the README for
experiments and sweeps. This module is Hydra's
application (``@hydra.main``): it composes the config, points ``run_dir`` at
Hydra's output directory and hands over to :func:`knn.train.train`. Other
modules use only Hydra's compose API (:func:`knn.train.config.reference_config`,
:mod:`knn.tools.throughput`, :mod:`knn.tools.report`). Expected failures (bad config,
missing data, unreadable checkpoint, diverged loss) print one line and exit 1.

In a sweep (``-m``) a failing job must not stop the others: it writes
``failed.json`` (the one-line error and the command; the traceback too when
the error was unexpected) into its run directory, which the results registry
and the report list, and the sweep goes on. The sweep's exit status is then 0.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import traceback
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, open_dict

from knn.data.mirror import DataError
from knn.errors import CheckpointError, ConfigError
from knn.io import write_json
from knn.paths import CONF_DIR
from knn.train.loop import NonFiniteLoss, command_line, train

# Failures the user can act on: printed as one line, exit status 1.
EXPECTED_ERRORS = (CheckpointError, ConfigError, DataError, NonFiniteLoss)


def _command_overrides(hc: Any) -> list[str]:
    """This job's overrides, as typed: task's, then the user's ``hydra.*`` ones."""
    user_hydra = [o for o in hc.overrides.hydra if not o.startswith("hydra.mode=")]
    return [*hc.overrides.task, *user_hydra]


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="train")
def _run(cfg: DictConfig) -> float | None:
    hc = HydraConfig.get()
    with open_dict(cfg):
        cfg.run_dir = cfg.get("run_dir") or hc.runtime.output_dir
    overrides = _command_overrides(hc)
    sweep = hc.mode == RunMode.MULTIRUN
    try:
        result = train(cfg, overrides=overrides)
    except EXPECTED_ERRORS as e:
        print(f"error: {e}", file=sys.stderr)
        if not sweep:
            sys.exit(1)
        _record_failure(cfg, overrides, str(e), trace=None)
        return None
    except Exception as e:  # a bug: fatal alone, recorded in a sweep
        if not sweep:
            raise
        line = " ".join(f"{type(e).__name__}: {e}".split())
        print(f"error: {line}", file=sys.stderr)
        _record_failure(cfg, overrides, line, trace=traceback.format_exc())
        return None
    # The selected metric on validation, so a Hydra sweeper can optimise it.
    return result["metrics"]["valid"][result["metric"]]


def _record_failure(cfg: DictConfig, overrides: list[str], error: str, trace: str | None) -> None:
    """Write ``failed.json`` for a sweep job that stopped with ``error``."""
    record = {"status": "failed", "error": error, "task": cfg.task.name,
              "model": cfg.model.name, "variant": cfg.variant, "seed": cfg.seed,
              "command": command_line(overrides),
              "traceback": trace}
    if int(os.environ.get("RANK", "0")) == 0:  # torchrun: one record per job
        write_json(record, Path(cfg.run_dir) / "failed.json")


# Hydra settings in the overrides: left to Hydra, not composed here.
_HYDRA_OVERRIDE = ("hydra.", "hydra/", "+hydra", "~hydra")


def parse_command(argv: list[str]) -> argparse.Namespace | None:
    """``argv`` parsed by Hydra's own argument parser, or ``None`` if it rejects it.

    Using Hydra's parser (not a copy of its flag list) keeps every flag with
    its value (``--cfg job``, ``-p task``, ``--info config``, ``-cn train``)
    out of the overrides. ``None`` (an unknown flag, a bad choice,
    ``--version``) leaves the whole command to Hydra, which reports it.
    """
    from hydra._internal.utils import get_args_parser

    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return get_args_parser().parse_args(argv)
    except SystemExit:
        return None


def runs_jobs(args: argparse.Namespace) -> bool:
    """Whether the command runs jobs (and so makes an output folder), rather than
    printing help, a config, information or a completion script."""
    shows = (args.help or args.hydra_help or args.cfg is not None or args.info is not None
             or args.shell_completion)
    return not shows and args.experimental_rerun is None


def primary_config_dir(args: argparse.Namespace) -> Path | None:
    """The folder Hydra will read the primary config from, or ``None`` when it
    is not a plain folder this check can compose from (``--config-dir`` adds
    one; ``--config-path pkg://...`` names a package).

    As in Hydra, a relative ``--config-path`` is relative to this file.
    """
    if args.config_dir is not None:
        return None
    if args.config_path is None:
        return CONF_DIR
    if "://" in args.config_path:
        return None
    return (Path(__file__).parent / args.config_path).resolve()


def rerun_error(argv: list[str]) -> str | None:
    """``--experimental-rerun FILE`` with no such file (Hydra would show a traceback), or ``None``."""
    args = parse_command(argv)
    if args is None or args.experimental_rerun is None or Path(args.experimental_rerun).is_file():
        return None
    return f"--experimental-rerun: no such file {args.experimental_rerun}"


def unwritable_output(argv: list[str]) -> str | None:
    """Why Hydra could not create this command's output folder, or ``None``.

    Hydra makes the folder before any of our code runs and reports a failure
    there with a traceback, so the entry point checks it first: the nearest
    existing ancestor of ``hydra.run.dir`` (``hydra.sweep.dir`` with ``-m``;
    default ``outputs/`` or ``multirun/``) must be a writable folder. Commands
    that run no job (``--cfg``, ``--help``, ``--info``, ...) make no folder.
    """
    args = parse_command(argv)
    if args is None or not runs_jobs(args):
        return None
    key, default = ("hydra.sweep.dir=", "multirun") if args.multirun else ("hydra.run.dir=", "outputs")
    target = next((a[len(key):] for a in reversed(args.overrides) if a.startswith(key)), default)
    folder = Path(target).absolute()
    while not folder.exists():
        folder = folder.parent
    if folder.is_dir() and os.access(folder, os.W_OK):
        return None
    return f"cannot create the output folder {target}: {folder} is not a writable folder"


def override_error(argv: list[str]) -> str | None:
    """Why the command's config overrides cannot compose, in one line, or ``None``.

    Hydra reports a misspelt key, an unknown group option or a malformed
    override over several lines; composing once here first gives the same
    verdict as one line. Sweep values (``-m seed=0,1``) and ``hydra.*``
    settings are left to Hydra, and so is the whole command when its
    arguments are not overrides (``--shell-completion``,
    ``--experimental-rerun``) or adds a config folder (``--config-dir``).
    ``--config-name`` and ``--config-path`` are honoured.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    args = parse_command(argv)
    if args is None or args.shell_completion or args.experimental_rerun is not None:
        return None
    config_dir = primary_config_dir(args)
    if config_dir is None:
        return None
    overrides = [a for a in args.overrides if not a.startswith(_HYDRA_OVERRIDE)]
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
        plain = [a for a, o in zip(overrides, parsed) if not (args.multirun and o.is_sweep_override())]
        with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
            compose(config_name=args.config_name or "train", overrides=plain)
    except HydraException as e:
        text = f"{e}\n{e.__cause__ or ''}".split("Config search path:")[0]
        lines = [" ".join(line.split()) for line in text.splitlines()]
        keep = [line for line in lines if line and not line.startswith(("full_key:", "object_type="))]
        return "config error: " + " ".join(keep)
    return None


def main() -> None:
    """Console-script entry point (``knn-train``).

    Checks the output folder and the overrides first (one-line errors), then
    hands the untouched command line to Hydra, every flag with its value.
    """
    argv = sys.argv[1:]
    if why := rerun_error(argv) or unwritable_output(argv) or override_error(argv):
        print(f"error: {why}", file=sys.stderr)
        sys.exit(1)
    _run()


if __name__ == "__main__":
    main()
