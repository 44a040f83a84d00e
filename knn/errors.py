"""Errors a user can act on, raised by every layer and printed as one line.

They live at the bottom of the package so that the layer that detects a
problem (a task checking its config, :mod:`knn.io` failing to write a file)
raises the same class the entry point (:mod:`knn.train.__main__`,
:mod:`knn.predict`) catches, without importing anything above it.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A config that cannot run; the message is one line."""


class CheckpointError(RuntimeError):
    """A checkpoint, or another file a run writes (``result.json``, ``failed.json``, a
    tool's JSON), that cannot be read or written; the message is one line."""
