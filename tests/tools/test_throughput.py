"""knn.tools.throughput: counted FLOPs match the model's products; the peak and profile are reported."""
import json
from pathlib import Path

import pytest

from knn.tools import throughput


@pytest.fixture
def fast_peak(monkeypatch):
    """A small peak product: the tests check bookkeeping, not the machine's rate."""
    real = throughput.gemm_peak_gflops
    monkeypatch.setattr(throughput, "gemm_peak_gflops", lambda device: real(device, n=64, reps=2))


@pytest.mark.parametrize("depth", [1, 2])
def test_flops_per_token_are_every_product_of_the_kernel_lm(fake_ptb, fast_peak, depth):
    d, V = 8, len(fake_ptb.vocab)  # debug=smoke's hidden
    overrides = ["experiment=ptb/gated_5m", "debug=smoke", "device=cpu", "threads=1", f"model.depth={depth}"]
    command = "python -m knn.tools.throughput " + " ".join(overrides)
    result = throughput.measure(overrides, steps=2, command=command, warmup=1, profile_steps=2)
    # Forward + backward (3 products each) of: the tied decoder d -> V; per layer the one
    # input projection d -> 3d (W^(1), W_λ, W_f) and the per-step gate U h[t-1], d -> d.
    # Missing any of them (e.g. a product FlopCounterMode cannot see) changes the count.
    assert result["flops_per_token"] == 6 * d * V + depth * (6 * d * 3 * d + 6 * d * d)
    assert result["tokens_per_step"] == 4 * 8  # batch_size x bptt of debug=smoke
    assert set(result["gemm_gflops_by_library"]) == {"aten", "knn"}
    assert result["gemm_peak_gflops"] == max(result["gemm_gflops_by_library"].values())
    # achieved_gflops is rounded to 0.1 and fraction_of_peak to 0.001 before they are compared.
    tolerance = 0.05 / result["gemm_peak_gflops"] + 5e-4
    assert result["fraction_of_peak"] == pytest.approx(result["achieved_gflops"] / result["gemm_peak_gflops"], abs=tolerance)
    ops = result["profile"]["self_time_by_op"]
    assert ops and 0 < sum(o["share"] for o in ops) <= 1 + 1e-3 * len(ops)
    assert [o["share"] for o in ops] == sorted((o["share"] for o in ops), reverse=True)
    assert [o["ms_per_step"] for o in ops] == sorted((o["ms_per_step"] for o in ops), reverse=True)
    # Each op's ms_per_step and share are its self time over the steps and over the total, so
    # one total per step explains them all: ms_per_step = share * total, up to their roundings
    # (0.01 ms and 0.001). The intervals of the total that each op allows must overlap.
    low = max((o["ms_per_step"] - 0.005) / (o["share"] + 5e-4) for o in ops)
    high = min((o["ms_per_step"] + 0.005) / (o["share"] - 5e-4) for o in ops if o["share"] > 5e-4)
    assert low <= high * (1 + 1e-9)
    # Provenance (knn.train.provenance) of this measurement: the scan and the products ran.
    assert result["command"] == command and result["git_commit"] is not None
    assert result["machine"]["torch_threads"] == 1 and result["machine"]["cpu_model"]
    assert result["ops"]["fused_scan"] in (True, False) and result["ops"]["onednn"] in (True, False)


@pytest.mark.parametrize(("overrides", "name"), [
    (["experiment=ptb/gated_5m"], "throughput_ptb_gated_5m.json"),
    (["experiment=ptb/lstm_5m", "device=cuda", "keep_freed_memory=false"],
     "throughput_ptb_lstm_5m_device=cuda_keep_freed_memory=false.json"),
    (["task=ptb", "model=lstm_lm", "task.data.mirror=/a b"],
     "throughput_task=ptb_model=lstm_lm_task.data.mirror=-a-b.json"),
])
def test_result_name_keeps_measurements_apart(overrides, name):
    assert throughput.result_name(overrides) == name


@pytest.mark.parametrize(("flags", "written"), [
    ([], "outputs/bench/throughput_ptb_gated_5m.json"),
    (["--record"], "experiments/bench/throughput_ptb_gated_5m.json"),
    (["--out", "here/t.json"], "here/t.json"),
])
def test_main_writes_outside_version_control_unless_recording(tmp_path, monkeypatch, flags, written):
    calls = []

    def fake_measure(overrides, steps, command, profile_steps=0):
        calls.append(command)
        return {"overrides": overrides, "command": command}

    monkeypatch.setattr(throughput, "measure", fake_measure)
    monkeypatch.chdir(tmp_path)
    argv = ["experiment=ptb/gated_5m", "--steps", "3", *flags]
    assert throughput.main(argv) == Path(written)
    assert calls[0] == "python -m knn.tools.throughput " + " ".join(argv)
    assert [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()] == [written]
    assert json.loads((tmp_path / written).read_text())["command"] == calls[0]
