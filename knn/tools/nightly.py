"""Nightly regression: short fixed runs whose numbers must stay inside measured bands.

    python -m knn.tools.nightly [--expected experiments/expected.yaml] [--out DIR] [--only NAME ...]
                          [--record --why TEXT]

``experiments/expected.yaml`` lists the checks. A *training* check is a
``python -m knn.train`` command (``args``) cut to a fixed number of steps or
epochs, so its number is a function of code, data and seed, not of the
machine's speed; it reads ``metric`` (``split.key`` of ``result.json``'s
``metrics``, e.g. ``valid.ppl``). A *benchmark* check reads one ratio of
``python -m knn.tools.bench`` (``bench: {variant, shape, field}``), measured against
a baseline in the same process.

**Bands come from measured spread.** ``--record`` runs every training check
once per seed of its ``seeds`` (at least 3) and every benchmark
``len(seeds)`` times, and stores the values, their mean (``expected``) and
the band ``mean ± max(K · s, FLOOR · |mean|)`` with s the sample standard
deviation (:data:`K` = 3; :data:`FLOOR` = 2% for training, 10% for timing).
Seed-to-seed spread stands for what any harmless change (an op that sums in
another order) can do to a number; the floor keeps a band from collapsing
when three seeds happen to agree. A nightly run uses the first seed.

**Judging.** A training value outside its band fails on either side (worse is
a regression, much better usually a broken evaluation). A benchmark is
one-sided: slower than its band fails; anything else passes, and is flagged
"suspicious" when it is more than :data:`SUSPICIOUS` times faster or slower than
expected (a second threshold, for bands recorded wide). A crash fails.

**Apart from a constant predictor.** Each training run records its task's
constant baseline (``result["health"]``, :mod:`knn.train.health`, on the
validation data: the train-mean RMSE, the majority class, the unigram
perplexity). Recording refuses a band whose worse edge is not better than
that baseline by ``margin`` (default :data:`MARGIN`), and a nightly run fails
a model that does not beat it: a check must tell a trained model from none.

``--record`` needs ``--why``: the reason lands in the check's ``history``
(date, commit, old and new expected value), so every change of an expected
value is explained in the file. Every run goes below ``--out`` (default
``outputs/nightly/<time>``), which also receives ``nightly.json`` (with the
provenance of :func:`knn.train.provenance.provenance`) and ``nightly.md``.
The exit status is 1 when any check failed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import yaml

from knn.io import write_json
from knn.paths import REPO_ROOT
from knn.train.provenance import provenance

EXPECTED = REPO_ROOT / "experiments" / "expected.yaml"


#: Half-width of a band in sample standard deviations of the recorded values.
K = 3.0
#: Smallest half-width, relative to the mean: training values, timing ratios.
FLOOR = {"training": 0.02, "bench": 0.10}
#: A benchmark this many times faster or slower than its expected value is flagged, even
#: inside its band (a band recorded on a busy machine can be wide enough to pass 2x).
SUSPICIOUS = 1.5
#: Default: the band's worse edge must beat the constant baseline by this fraction.
MARGIN = 0.10
#: Metrics where a larger value is better; every other metric: smaller is better.
HIGHER_IS_BETTER = ("acc", "ratio_vs_lstm", "ratio_vs_gru")


@dataclass
class Check:
    """One line of the nightly table (see the module docstring)."""

    name: str
    expected: float | None = None  # mean of the recorded values
    band: list[float] | None = None  # [lo, hi] from the recorded spread
    args: list[str] = field(default_factory=list)  # training check: knn.train overrides
    metric: str | None = None  # training check: "split.key" of result.json's metrics
    bench: dict[str, str] | None = None  # benchmark check: variant, shape, field
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])  # recording seeds / repetitions
    margin: float = MARGIN  # training: required distance from the constant baseline

    @property
    def kind(self) -> str:
        return "bench" if self.bench is not None else "training"

    @property
    def higher_is_better(self) -> bool:
        key = self.bench["field"] if self.bench is not None else str(self.metric).split(".")[-1]
        return key in HIGHER_IS_BETTER


@dataclass
class Outcome:
    check: Check
    value: float | None
    status: str  # pass | FAIL | measured (--record)
    note: str
    seconds: float
    run_dir: str
    baseline: float | None = None  # the task's constant predictor on the same data


def load_checks(path: Path) -> tuple[dict[str, Any], list[Check]]:
    """The expectations file as data, and its checks."""
    spec = yaml.safe_load(path.read_text())
    fields = Check.__dataclass_fields__
    checks = [Check(**{k: v for k, v in c.items() if k in fields}) for c in spec["checks"]]
    for c in checks:
        if (c.metric is None) == (c.bench is None):
            raise SystemExit(f"error: {path}: check {c.name!r} needs exactly one of metric, bench")
        if len(c.seeds) < 3:
            raise SystemExit(f"error: {path}: check {c.name!r} needs at least 3 seeds for its band")
    return spec, checks


def band_from(values: list[float], kind: str) -> tuple[float, list[float]]:
    """(mean, [lo, hi]) with half-width max(K · sample std, FLOOR[kind] · |mean|)."""
    mean = statistics.fmean(values)
    half = max(K * statistics.stdev(values), FLOOR[kind] * abs(mean))
    return mean, [mean - half, mean + half]


def run_training(check: Check, out: Path, seed: int) -> tuple[float | None, float | None, str]:
    """Train ``check`` with ``seed`` in a subprocess: (its metric, the constant baseline on
    the same validation data, why not) ."""
    run_dir = out / f"{check.name}_seed{seed}"
    cmd = [sys.executable, "-m", "knn.train", *check.args, f"seed={seed}",
           f"hydra.run.dir={run_dir}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    (out / f"{check.name}_seed{seed}.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or ["(no message)"]
        return None, None, f"exit {proc.returncode}: {lines[-1][:200]}"
    result = json.loads((run_dir / "result.json").read_text())
    assert check.metric is not None  # a training check (load_checks)
    split, key = check.metric.split(".", 1)
    baseline = (result.get("health") or {}).get("constant_baseline")
    return float(result["metrics"][split][key]), baseline, ""


def run_bench(out: Path, rep: int) -> tuple[dict[tuple[str, str], dict[str, Any]], str]:
    """Run the layer benchmark once; its cases by (variant, shape), or {} and why not."""
    path = out / f"bench{rep}" / "layers.json"
    proc = subprocess.run([sys.executable, "-m", "knn.tools.bench", "--out", str(path)],
                          capture_output=True, text=True)
    (out / f"bench{rep}.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        return {}, f"knn.tools.bench exit {proc.returncode}"
    cases = json.loads(path.read_text())["cases"]
    return {(c["variant"], c["shape"]["name"]): c for c in cases}, ""


def _better(check: Check, a: float, b: float) -> bool:
    return a > b if check.higher_is_better else a < b


def judge(check: Check, value: float | None, why: str, baseline: float | None = None) -> tuple[str, str]:
    """pass / FAIL and a note (see the module docstring)."""
    if value is None:
        return "FAIL", why
    if check.band is None:
        return "FAIL", "no band recorded (run with --record)"
    lo, hi = check.band
    if check.kind == "bench":  # one-sided: only slower fails
        worse_edge = lo if check.higher_is_better else hi
        if _better(check, worse_edge, value):
            return "FAIL", f"slower than the band's edge {worse_edge:.4g}"
        expected = cast(float, check.expected)  # recorded with the band
        ratio = value / expected if check.higher_is_better else expected / value
        large = ratio > SUSPICIOUS or ratio < 1 / SUSPICIOUS  # a change either way
        return "pass", f"suspicious: {ratio:.2f}x the expected speed" if large else ""
    if value < lo or value > hi:
        return "FAIL", f"outside [{lo:.4g}, {hi:.4g}]"
    if baseline is not None and not _better(check, value, baseline):
        return "FAIL", f"no better than the constant predictor ({baseline:.4g})"
    return "pass", ""


def _measure(check: Check, out: Path, seed: int, rep: int,
             bench_cache: dict[int, Any]) -> tuple[float | None, float | None, str, str]:
    """One value of ``check``: (value, constant baseline, why not, run dir)."""
    if check.bench is None:
        value, baseline, why = run_training(check, out, seed)
        return value, baseline, why, str(out / f"{check.name}_seed{seed}")
    if rep not in bench_cache:  # one benchmark run serves every bench check
        bench_cache[rep] = run_bench(out, rep)
    cases, why = bench_cache[rep]
    case = cases.get((check.bench["variant"], check.bench["shape"]))
    value = None if case is None else float(case[check.bench["field"]])
    return value, None, why or f"no benchmark case {check.bench}", str(out / f"bench{rep}")


def run_checks(checks: list[Check], out: Path) -> list[Outcome]:
    """Run every check once, with its first seed, and judge it against its band."""
    outcomes: list[Outcome] = []
    bench_cache: dict[int, Any] = {}
    for check in checks:
        t0 = time.monotonic()
        value, baseline, why, run_dir = _measure(check, out, check.seeds[0], 0, bench_cache)
        status, note = judge(check, value, why, baseline)
        outcomes.append(Outcome(check, value, status, note, round(time.monotonic() - t0, 1),
                                run_dir, baseline))
        print(f"{status:8}  {check.name}: {value}  {note}", flush=True)
    return outcomes


def record_checks(checks: list[Check], out: Path) -> dict[str, dict[str, Any]]:
    """Measure every check with each of its seeds; per check its values, mean, band,
    baseline, and a problem (a failed run, or a band too close to the baseline) or ''."""
    measured: dict[str, dict[str, Any]] = {}
    bench_cache: dict[int, Any] = {}
    for check in checks:
        values, baselines, problem = [], [], ""
        for rep, seed in enumerate(check.seeds):
            value, baseline, why, _ = _measure(check, out, seed, rep, bench_cache)
            if value is None:
                problem = f"seed {seed}: {why}"
                break
            values.append(value)
            if baseline is not None:
                baselines.append(baseline)
        entry: dict[str, Any] = {"values": values, "problem": problem}
        if not problem:
            mean, band = band_from(values, check.kind)
            entry.update(expected=mean, band=band)
            if baselines:
                base = statistics.fmean(baselines)
                worse = band[0] if check.higher_is_better else band[1]
                needed = base * (1 + check.margin) if check.higher_is_better else base * (1 - check.margin)
                entry["baseline"] = base
                if not (worse >= needed if check.higher_is_better else worse <= needed):
                    entry["problem"] = (f"band edge {worse:.4g} is within {check.margin:.0%} of the "
                                        f"constant predictor ({base:.4g}): train longer")
        measured[check.name] = entry
        print(f"recorded  {check.name}: {values} {entry['problem']}", flush=True)
    return measured


def markdown(outcomes: list[Outcome], command: str) -> str:
    failed = sum(o.status == "FAIL" for o in outcomes)
    passed = sum(o.status == "pass" for o in outcomes)
    lines = [f"# Nightly: {passed} passed, {failed} failed", "",
             f"`{command}`", "",
             "| check | measures | value | expected | band | constant predictor | status | seconds | note |",
             "|---|---|---|---|---|---|---|---|---|"]
    for o in outcomes:
        c = o.check
        what = c.metric if c.bench is None else \
            f"bench {c.bench['variant']} {c.bench['shape']} {c.bench['field']}"
        band = "-" if c.band is None else f"{c.band[0]:.4g} - {c.band[1]:.4g}"
        value = "-" if o.value is None else f"{o.value:.4g}"
        expected = "-" if c.expected is None else f"{c.expected:.4g}"
        base = "-" if o.baseline is None else f"{o.baseline:.4g}"
        lines.append(f"| {c.name} | {what} | {value} | {expected} | {band} | {base} | {o.status} | "
                     f"{o.seconds} | {o.note.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def record(spec: dict[str, Any], measured: dict[str, dict[str, Any]], path: Path, command: str,
           why: str, commit: str | None) -> None:
    """Write each measured check's mean, band and values into the expectations file, with
    the date, commit, command and ``why`` appended to its ``history``."""
    today = dt.date.today().isoformat()
    for c in spec["checks"]:
        m = measured.get(c["name"])
        if m is None or m["problem"]:
            continue
        c["history"] = [*c.get("history", []), {"date": today, "commit": commit,
                                                "expected_before": c.get("expected"),
                                                "expected": round(m["expected"], 4), "why": why}]
        c["expected"] = round(m["expected"], 4)
        c["band"] = [round(x, 4) for x in m["band"]]
        c["values"] = [round(v, 4) for v in m["values"]]
        c["constant_baseline"] = None if "baseline" not in m else round(m["baseline"], 4)
        c["measured_on"] = {"date": today, "commit": commit, "command": command}
    header = "".join(line + "\n" for line in path.read_text().splitlines() if line.startswith("#"))
    path.write_text(header + yaml.safe_dump(spec, sort_keys=False, width=110,
                                            default_flow_style=None, allow_unicode=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expected", type=Path, default=EXPECTED)
    parser.add_argument("--out", type=Path, default=None, help="default: outputs/nightly/<time>")
    parser.add_argument("--only", nargs="*", default=None, help="names of the checks to run")
    parser.add_argument("--record", action="store_true",
                        help="measure each check with all its seeds and store the bands")
    parser.add_argument("--why", default=None, help="--record: why the expected values change")
    args = parser.parse_args(argv)
    if args.record and not args.why:
        raise SystemExit("error: --record needs --why TEXT (it goes into each check's history)")
    command = shlex.join(["python", "-m", "knn.tools.nightly", *(sys.argv[1:] if argv is None else argv)])

    spec, checks = load_checks(args.expected)
    if args.only is not None:
        unknown = set(args.only) - {c.name for c in checks}
        if unknown:
            raise SystemExit(f"error: no check named {', '.join(sorted(unknown))} in {args.expected}")
        checks = [c for c in checks if c.name in args.only]
    out = args.out or Path("outputs/nightly") / dt.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    out.mkdir(parents=True, exist_ok=True)
    info = provenance(command)

    if args.record:
        measured = record_checks(checks, out)
        write_json({**info, "expected_file": str(args.expected), "recorded": measured},
                   out / "nightly.json")
        record(spec, measured, args.expected, command, args.why, info["git_commit"])
        problems = {n: m["problem"] for n, m in measured.items() if m["problem"]}
        for name, problem in problems.items():
            print(f"not recorded: {name}: {problem}", file=sys.stderr)
        print(f"recorded {len(measured) - len(problems)} checks in {args.expected}")
        return int(bool(problems))

    outcomes = run_checks(checks, out)
    table = markdown(outcomes, command)
    (out / "nightly.md").write_text(table)
    write_json({**info, "expected_file": str(args.expected),
                "checks": [{"name": o.check.name, "value": o.value, "expected": o.check.expected,
                            "band": o.check.band, "constant_baseline": o.baseline,
                            "status": o.status, "note": o.note, "seconds": o.seconds,
                            "run_dir": o.run_dir} for o in outcomes]},
               out / "nightly.json")
    print(table)
    return int(any(o.status == "FAIL" for o in outcomes))


if __name__ == "__main__":
    sys.exit(main())
