"""Which implementation the dispatching ops actually ran, for a run's provenance.

:func:`knn.ops.recurrence.string_kernel_recurrence`, :func:`knn.ops.linear.linear`,
:func:`knn.ops.dropout.bernoulli`, the pooled layer node and the SST classifier's loss
node each pick their implementation per call (the fused op or the PyTorch reference;
oneDNN or ``F.linear``; our sampler or torch's ``bernoulli_``; a C++ node or the
module's composition). A build that fails falls back silently apart from one
warning, so every result records what really ran: :func:`ops_report` gives,
per op, ``True`` (the fast path ran at least once), ``False`` (only the
fallback ran) or ``None`` (the op was never called, e.g. an LSTM has no
string-kernel scan).

The tally is per process and only grows; a tool measuring one model in a
process that ran others calls :func:`reset` first. Code that ``torch.compile``
traced records its paths at every call, as eager code does (Dynamo replays the
counter's updates after each run of the graph).
"""

from __future__ import annotations

from collections import Counter

_calls: Counter[str] = Counter()

#: op -> (its fast path, its fallback), the names passed to :func:`record`.
OPS = {
    "fused_scan": ("fused_scan", "reference_scan"),
    "onednn": ("onednn", "aten_linear"),
    "fused_bernoulli": ("fused_bernoulli", "torch_bernoulli"),
    # the SST classifier's C++ nodes (knn.ops.pooled)
    "pooled_node": ("pooled_node", "pooled_reference"),
    "classifier_loss_node": ("classifier_loss_node", "classifier_module_loss"),
}


def record(path: str) -> None:
    """Count one call of ``path`` (one of the names in :data:`OPS`)."""
    _calls[path] += 1


def reset() -> None:
    """Forget every call counted so far."""
    _calls.clear()


def ops_report() -> dict[str, bool | None]:
    """Per op: whether its fast path ran (``None``: the op never ran)."""
    out: dict[str, bool | None] = {}
    for op, (fast, fallback) in OPS.items():
        out[op] = True if _calls[fast] else (False if _calls[fallback] else None)
    return out
