"""Nightly regression: short fixed runs whose numbers must stay inside their bands.

    python -m knn.nightly [--expected experiments/expected.yaml] [--out DIR] [--only NAME ...]
                          [--record]

``experiments/expected.yaml`` lists the checks. A *training* check is a
``python -m knn.train`` command (``args``) cut to a fixed number of steps or
epochs, so its metrics are a function of code, data and seed rather than of
the machine's speed; the number it reads is ``metric`` (``split.key`` of
``result.json``'s ``metrics``, e.g. ``test.ppl``). A *benchmark* check reads
one ratio of ``python -m knn.bench`` (``bench: {variant, shape, field}``),
which the benchmark measures against a baseline in the same process.

Each check has ``expected`` (with ``measured_on``: the date and command) and a
relative ``tolerance``; its band is ``expected · (1 ± tolerance)``. A value
outside the band fails whichever side it falls on: worse is a regression,
suspiciously better usually a broken evaluation. A run that crashes fails too.

Every run goes below ``--out`` (default ``outputs/nightly/<time>``), which
also receives ``nightly.json`` (with the provenance of
:func:`knn.train.provenance.provenance`; each run's own is in its
``result.json``) and ``nightly.md`` (the pass/fail table). The
exit status is 1 when any check failed. ``--record`` instead writes the
measured values into the expectations file as the new ``expected`` (with
today's date and this command), keeping each tolerance.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from knn.train.checkpoint import write_json
from knn.train.provenance import provenance

EXPECTED = Path(__file__).resolve().parents[1] / "experiments" / "expected.yaml"


@dataclass
class Check:
    """One line of the nightly table (see the module docstring)."""

    name: str
    expected: float | None
    tolerance: float
    args: list[str] = field(default_factory=list)  # training check: knn.train overrides
    metric: str | None = None  # training check: "split.key" of result.json's metrics
    bench: dict[str, str] | None = None  # benchmark check: variant, shape, field

    @property
    def band(self) -> tuple[float, float] | None:
        if self.expected is None:
            return None
        lo, hi = sorted((self.expected * (1 - self.tolerance), self.expected * (1 + self.tolerance)))
        return lo, hi


@dataclass
class Outcome:
    check: Check
    value: float | None
    status: str  # pass | FAIL | measured (--record)
    note: str
    seconds: float
    run_dir: str


def load_checks(path: Path) -> tuple[dict[str, Any], list[Check]]:
    """The expectations file as data, and its checks."""
    spec = yaml.safe_load(path.read_text())
    fields = Check.__dataclass_fields__
    checks = [Check(**{k: v for k, v in c.items() if k in fields}) for c in spec["checks"]]
    for c in checks:
        if (c.metric is None) == (c.bench is None):
            raise SystemExit(f"error: {path}: check {c.name!r} needs exactly one of metric, bench")
    return spec, checks


def run_training(check: Check, out: Path) -> tuple[float | None, str]:
    """Train ``check`` in a subprocess; its metric, or None and why not."""
    run_dir = out / check.name
    cmd = [sys.executable, "-m", "knn.train", *check.args, f"hydra.run.dir={run_dir}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    (out / f"{check.name}.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or ["(no message)"]
        return None, f"exit {proc.returncode}: {lines[-1][:200]}"
    metrics = json.loads((run_dir / "result.json").read_text())["metrics"]
    split, key = check.metric.split(".", 1)
    return float(metrics[split][key]), ""


def run_bench(out: Path) -> tuple[dict[tuple[str, str], dict[str, Any]], str]:
    """Run the layer benchmark once; its cases by (variant, shape), or {} and why not."""
    path = out / "bench" / "layers.json"
    proc = subprocess.run([sys.executable, "-m", "knn.bench", "--out", str(path)],
                          capture_output=True, text=True)
    (out / "bench.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        return {}, f"knn.bench exit {proc.returncode}"
    cases = json.loads(path.read_text())["cases"]
    return {(c["variant"], c["shape"]["name"]): c for c in cases}, ""


def judge(check: Check, value: float | None, why: str) -> tuple[str, str]:
    """pass / FAIL and a note."""
    if value is None:
        return "FAIL", why
    if check.band is None:
        return "FAIL", "no expected value recorded (run with --record)"
    lo, hi = check.band
    if value < lo or value > hi:
        return "FAIL", f"outside [{lo:.4g}, {hi:.4g}]"
    return "pass", ""


def run_checks(checks: list[Check], out: Path, recording: bool = False) -> list[Outcome]:
    """Run every check in order (the benchmark once, when first needed); when
    ``recording``, a value is "measured" rather than judged against its band."""
    outcomes, bench = [], None
    for check in checks:
        t0 = time.monotonic()
        if check.bench is not None:
            if bench is None:
                bench = run_bench(out)
            cases, why = bench
            case = cases.get((check.bench["variant"], check.bench["shape"]))
            value = None if case is None else float(case[check.bench["field"]])
            why = why or f"no benchmark case {check.bench}"
            run_dir = out / "bench"
        else:
            value, why = run_training(check, out)
            run_dir = out / check.name
        if recording and value is not None:
            status, note = "measured", ""
        else:
            status, note = judge(check, value, why)
        outcomes.append(Outcome(check, value, status, note, round(time.monotonic() - t0, 1),
                                str(run_dir)))
        print(f"{status:8}  {check.name}: {value}  {note}", flush=True)
    return outcomes


def markdown(outcomes: list[Outcome], command: str) -> str:
    failed = sum(o.status == "FAIL" for o in outcomes)
    passed = sum(o.status == "pass" for o in outcomes)
    lines = [f"# Nightly: {passed} passed, {failed} failed", "",
             f"`{command}`", "",
             "| check | measures | value | expected | band | status | seconds | note |",
             "|---|---|---|---|---|---|---|---|"]
    for o in outcomes:
        c = o.check
        what = c.metric or f"bench {c.bench['variant']} {c.bench['shape']} {c.bench['field']}"
        band = "-" if c.band is None else f"{c.band[0]:.4g} - {c.band[1]:.4g}"
        value = "-" if o.value is None else f"{o.value:.4g}"
        lines.append(f"| {c.name} | {what} | {value} | {c.expected} | {band} | {o.status} | "
                     f"{o.seconds} | {o.note.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def record(spec: dict[str, Any], outcomes: list[Outcome], path: Path, command: str) -> None:
    """Write the measured values into the expectations file as the new ones, each
    with the date and the command that measured it."""
    measured = {o.check.name: o.value for o in outcomes if o.value is not None}
    today = dt.date.today().isoformat()
    for c in spec["checks"]:
        if c["name"] in measured:
            c["expected"] = round(measured[c["name"]], 4)
            c["measured_on"] = {"date": today, "command": command}
    header = "".join(line + "\n" for line in path.read_text().splitlines() if line.startswith("#"))
    path.write_text(header + yaml.safe_dump(spec, sort_keys=False, width=110, default_flow_style=None))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expected", type=Path, default=EXPECTED)
    parser.add_argument("--out", type=Path, default=None, help="default: outputs/nightly/<time>")
    parser.add_argument("--only", nargs="*", default=None, help="names of the checks to run")
    parser.add_argument("--record", action="store_true", help="store the values as expected")
    args = parser.parse_args(argv)
    command = shlex.join(["python", "-m", "knn.nightly", *(sys.argv[1:] if argv is None else argv)])

    spec, checks = load_checks(args.expected)
    if args.only is not None:
        unknown = set(args.only) - {c.name for c in checks}
        if unknown:
            raise SystemExit(f"error: no check named {', '.join(sorted(unknown))} in {args.expected}")
        checks = [c for c in checks if c.name in args.only]
    out = args.out or Path("outputs/nightly") / dt.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    out.mkdir(parents=True, exist_ok=True)

    outcomes = run_checks(checks, out, recording=args.record)
    table = markdown(outcomes, command)
    (out / "nightly.md").write_text(table)
    write_json({**provenance(command), "expected_file": str(args.expected),
                "checks": [{"name": o.check.name, "value": o.value, "expected": o.check.expected,
                            "band": o.check.band, "status": o.status, "note": o.note,
                            "seconds": o.seconds, "run_dir": o.run_dir} for o in outcomes]},
               out / "nightly.json")
    print(table)
    if args.record:
        record(spec, outcomes, args.expected, command)
        print(f"recorded the measured values in {args.expected}")
        return 0
    return int(any(o.status == "FAIL" for o in outcomes))


if __name__ == "__main__":
    sys.exit(main())
