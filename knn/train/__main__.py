"""Command line: ``python -m knn.train task=ptb model=knn_lm [overrides]``.

Configs come from the repository's ``conf/`` (``conf/train.yaml`` and its
groups); see the README for experiments and sweeps. This is the only module
that imports Hydra: it composes the config, points ``run_dir`` at Hydra's
output directory and hands over to :func:`knn.train.train`. Expected failures
(bad config, missing data, unreadable checkpoint, diverged loss) print one line and exit 1.
"""

from __future__ import annotations

import sys
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, open_dict

from knn.data.mirror import DataError
from knn.train.checkpoint import CheckpointError
from knn.train.config import CONF_DIR, ConfigError
from knn.train.loop import NonFiniteLoss, train

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
    try:
        result = train(cfg, overrides=_command_overrides(hc))
    except EXPECTED_ERRORS as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    # The selected metric on validation, so a Hydra sweeper can optimise it.
    return result["metrics"]["valid"][result["metric"]]


def main() -> None:
    """Console-script entry point (``knn-train``)."""
    _run()


if __name__ == "__main__":
    main()
