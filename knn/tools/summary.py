"""Print ``result.json`` files as rows of a Markdown table.

``python -m knn.tools.summary RUN_DIR_OR_RESULT_JSON [...]``: one row per run
with the paper's number beside ours and whether the run was budgeted
(``make reproduce-ptb`` ends with this). Aggregating many runs over seeds is
the report's job, not this.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from knn.tools import results

HEADER = "| task | variant | params | valid {m} | test {m} | paper | protocol | wall | run |"


def row(result: dict[str, Any], where: str) -> str:
    m = result["metric"]
    paper = (result.get("paper") or {}).get("value")
    protocol = results.protocol(result)
    cells = [
        result["task"],
        result["variant"],
        f"{result['params'] / 1e6:.2f}m",
        f"{result['metrics']['valid'][m]:.2f}",
        f"{result['metrics']['test'][m]:.2f}",
        "-" if paper is None else f"{paper}",
        f"{protocol}, {result['epochs']} ep, {result['device']}",
        f"{result['wall_seconds'] / 60:.1f} min",
        where,
    ]
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    paths = [Path(a) for a in (sys.argv[1:] if argv is None else argv)]
    if not paths:
        print("usage: python -m knn.tools.summary RUN_DIR_OR_RESULT_JSON [...]", file=sys.stderr)
        return 2
    runs = []
    for p in paths:
        f = p / "result.json" if p.is_dir() else p
        if not f.is_file():
            print(f"error: no result.json at {p}", file=sys.stderr)
            return 1
        runs.append((json.loads(f.read_text()), str(f.parent)))
    metric = runs[0][0]["metric"]
    print(HEADER.format(m=metric))
    print("|" + "---|" * HEADER.count(" | ") + "---|")
    for result, where in runs:
        print(row(result, where))
    return 0


if __name__ == "__main__":
    sys.exit(main())
