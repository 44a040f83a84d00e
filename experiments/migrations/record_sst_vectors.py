"""One-off migration: name the vector file of SST runs made before runs recorded it.

    python experiments/migrations/record_sst_vectors.py [ROOT]   # default: experiments/

Until commit a8db95d an SST run with ``task.vectors.path: null`` used the mirror's
spaCy stand-in (``vectors/en_core_web_md-3.8.0.sst-vocab.300d.txt.gz``); from then on
null means GloVe 6B 50d, and every SST run records the file in
``extra.vectors.file``. This adds that field, with the stand-in's name, to the SST
``result.json`` files that lack it and whose config left the path null; a run that
named a file gets that name. Nothing else changes; rerunning changes nothing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from knn.data.mirror import SPACY_STAND_IN


def migrate(path: Path) -> bool:
    """Add ``extra.vectors.file`` to one SST result; True if the file changed."""
    run = json.loads(path.read_text())
    extra = run.get("extra") or {}
    if run.get("task") != "sst" or "vectors" in extra:
        return False
    named = ((run.get("config") or {}).get("task") or {}).get("vectors", {}).get("path")
    run["extra"] = {**extra, "vectors": {"file": named or SPACY_STAND_IN,
                                         "note": "added by record_sst_vectors.py"}}
    path.write_text(json.dumps(run, indent=2, ensure_ascii=False) + "\n")
    return True


if __name__ == "__main__":
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "experiments")
    for f in sorted(root.rglob("result.json")):
        if migrate(f):
            print(f"added extra.vectors: {f}")
