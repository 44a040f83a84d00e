"""knn.train.memory: with freed memory kept, a large tensor allocated again is not page-faulted."""

import json
import subprocess
import sys

import pytest

# Run in a child process: the setting is process-wide and cannot be undone.
# Counts the minor page faults of allocating and filling 64 MB once the heap has
# settled (glibc reuses the block from the third allocation on).
CHILD = """
import json, resource, sys, torch
from knn.train.memory import keep_freed_memory
kept = keep_freed_memory() if sys.argv[1] == "keep" else False
def faults_of_a_fresh_64mb_tensor():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    torch.empty(16 * 2**20).fill_(1.0)  # freed at once
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
for _ in range(3):
    faults_of_a_fresh_64mb_tensor()
print(json.dumps({"kept": kept, "faults": faults_of_a_fresh_64mb_tensor()}))
"""


def settled_allocation_faults(mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_kept_memory_is_reused_without_page_faults():
    kept, returned = settled_allocation_faults("keep"), settled_allocation_faults("return")
    if not kept["kept"]:
        pytest.skip("the C library is not glibc")
    assert returned["faults"] >= 16_000 // 512  # every page again (even as 2 MiB huge pages)
    assert kept["faults"] * 10 < returned["faults"]


@pytest.mark.parametrize("setting", [True, False])
def test_trainer_keeps_freed_memory_when_configured(train_smoke, tmp_path, monkeypatch, setting):
    calls = []
    monkeypatch.setattr("knn.train.loop.keep_freed_memory", lambda: calls.append(1))
    train_smoke(tmp_path, "device=cpu", f"keep_freed_memory={setting}")
    assert calls == ([1] if setting else [])
