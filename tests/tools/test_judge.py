"""knn.tools.judge: the paper's order and declared targets, judged from experiment data."""

from __future__ import annotations

from knn.tools import judge
from knn.tools.report import Experiment
from knn.tools.results import aggregate


def row(name: str, paper: dict, tests: list[float], label: str = "full") -> dict:
    runs = [{"task": "ptb", "variant": name, "model": "knn_lm", "seed": s, "metric": "ppl",
             "metrics": {"valid": {"ppl": t}, "test": {"ppl": t}}, "params": 1,
             "wall_seconds": 1.0, "protocol": label, "run_dir": f"/runs/{name}/{s}"}
            for s, t in enumerate(tests)]
    [group] = aggregate(runs) if runs else [None]
    return {"experiment": Experiment(f"ptb/{name}", "ptb", name, paper, {}), "group": group,
            "label": label}


def test_paper_order_is_judged_pairwise_with_both_spreads() -> None:
    rows = [row("const", {"value": 84.3}, [88.0, 87.0]),
            row("gated", {"value": 73.6, "target": {"within": 0.03}}, [74.0, 76.0]),
            row("learned", {"value": 76.8}, [75.0, 77.0]),
            row("lstm", {"value": None}, [80.0])]  # no paper number: not ordered
    order = judge.ordering(rows)
    assert [(o["better"], o["worse"]) for o in order] == [("ptb/gated", "ptb/learned"),
                                                          ("ptb/learned", "ptb/const")]
    assert order[0]["verdict"] == "within the spread"  # 75 vs 76, stds 1.41
    assert order[1]["verdict"] == "ahead"  # 76 vs 87.5
    [t] = judge.targets(rows)
    assert t["experiment"] == "ptb/gated" and t["best"] == 74.0 and t["met"]  # 74 <= 75.81
    text = "\n".join(judge.markdown(rows))
    assert "best of 2 74.00 within 3% of the paper's 73.6 (limit 75.81): **met**" in text


def test_rows_of_other_labels_are_not_compared_and_a_miss_is_not_met() -> None:
    rows = [row("gated", {"value": 73.6, "target": {"within": 0.03}}, [76.0]),
            row("learned", {"value": 76.8}, [70.0], label="budgeted 30 min")]
    assert judge.ordering(rows) == []  # one row per label: nothing to order
    [t] = judge.targets(rows)
    assert not t["met"] and t["limit"] == 73.6 * 1.03
    assert judge.markdown([row("x", {"value": None}, [1.0])]) == []
