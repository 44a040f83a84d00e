"""The result row printed at the end of ``make reproduce-ptb``."""

from __future__ import annotations

from knn.tools.summary import main


def test_row_for_smoke_run(train_smoke, tmp_path, capsys) -> None:
    train_smoke(tmp_path, "experiment=ptb/gated_5m", "train.max_minutes=1e-9")
    assert main([str(tmp_path)]) == 0
    header, _, row = capsys.readouterr().out.splitlines()
    assert "test ppl" in header
    # smoke outranks the budget: its numbers mean nothing (labels: knn.tools.results.protocol)
    assert "| ptb | gated_5m |" in row and "| 73.6 |" in row and "| smoke (limited batches)," in row


def test_missing_result(tmp_path, capsys) -> None:
    assert main([str(tmp_path)]) == 1
    assert "no result.json" in capsys.readouterr().err
