"""One-off migration: top-level provenance keys for the GPU evidence bundles.

    python experiments/migrations/provenance_gpu_bundles.py

``experiments/bench/gpu/h100_call*_{throughput,epoch_*}.json`` each bundle
several records of one device call (throughput measurements by model, or a
trainer's ``result.json`` with its ``metrics.jsonl``). Each gets the keys every
JSON of the project carries, taken from its records where they agree, else
null, and a ``provenance_note``; the call's command is in
``experiments/bench/gpu/README.md``. Records are not changed; rerunning changes
nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

KEYS = ("git_commit", "command", "machine", "torch_version", "ops")
GPU = Path(__file__).resolve().parents[1] / "bench" / "gpu"


def records(bundle: dict) -> list[dict]:
    """The bundle's measurement records: its dict values (an epoch bundle's is its result)."""
    return [v for v in bundle.values() if isinstance(v, dict)]


def agreed(values: list) -> object:
    """The common value, or None when the records disagree or have none."""
    return values[0] if values and all(v == values[0] for v in values) else None


def migrate(path: Path) -> bool:
    bundle = json.loads(path.read_text())
    if all(k in bundle for k in KEYS):
        return False
    recs = records(bundle)
    fused = [r["fused_scan"] for r in recs if "fused_scan" in r]
    found = {
        "git_commit": agreed([r["git_commit"] for r in recs if "git_commit" in r]),
        "command": agreed([r["command"] for r in recs if "command" in r]),
        "machine": None,
        "torch_version": agreed([r["torch_version"] for r in recs if "torch_version" in r]),
        "ops": {"fused_scan": agreed(fused) if fused else None, "onednn": None},
    }
    missing = [k for k in KEYS if k not in bundle and found[k] in (None, {"fused_scan": None,
                                                                            "onednn": None})]
    bundle.update({k: v for k, v in found.items() if k not in bundle})
    bundle["provenance_note"] = (
        "top-level keys added by experiments/migrations/provenance_gpu_bundles.py from the "
        f"records; not recorded at the time: {', '.join(missing) or 'none'}; the device call's "
        "command is in experiments/bench/gpu/README.md")
    path.write_text(json.dumps(bundle, indent=2, ensure_ascii=False) + "\n")
    return True


if __name__ == "__main__":
    for f in sorted(GPU.glob("h100_call*.json")):
        if migrate(f):
            print(f"added provenance keys: {f}")
