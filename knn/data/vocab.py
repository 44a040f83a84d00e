"""A token <-> id table, standing in for torchtext's ``Vocab``.

torchtext cannot be installed beside torch 2.13, and the project needs only a
few of its features. Ids are assigned deterministically so that the same data
gives the same ids on every machine and run: specials first (in the order
given), then tokens by descending frequency, ties broken by first occurrence.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

DEFAULT_UNK = "<unk>"


class Vocab:
    """An immutable list of token types with a reverse index.

    ``vocab[token]`` returns the token's id. An unknown token maps to the id of
    ``unk_token`` when that token is in the vocabulary, and otherwise raises
    ``KeyError``: silently mapping words to nothing would hide data bugs.
    """

    __slots__ = ("_itos", "_stoi", "_unk_id", "_unk_token")

    def __init__(self, itos: Sequence[str], unk_token: str | None = DEFAULT_UNK) -> None:
        """Wrap ``itos`` (id -> token); ``unk_token`` is used only if it is in ``itos``."""
        self._itos: tuple[str, ...] = tuple(itos)
        self._stoi: dict[str, int] = {tok: i for i, tok in enumerate(self._itos)}
        if len(self._stoi) != len(self._itos):
            dupes = sorted(t for t, n in Counter(self._itos).items() if n > 1)
            raise ValueError(f"vocabulary has duplicate tokens: {dupes[:10]}")
        self._unk_token = unk_token
        self._unk_id = self._stoi.get(unk_token) if unk_token is not None else None

    @classmethod
    def build(
        cls,
        tokens: Iterable[str],
        specials: Sequence[str] = (),
        max_size: int | None = None,
        min_freq: int = 1,
        unk_token: str | None = DEFAULT_UNK,
    ) -> Vocab:
        """Count ``tokens`` and keep the most frequent types.

        ``max_size`` caps the total size, specials included; ``min_freq``
        drops rarer types. Specials are always kept, even if they also occur
        in ``tokens`` (they then appear once, at their special position).
        """
        if max_size is not None and max_size < len(specials):
            raise ValueError(f"max_size={max_size} is smaller than the {len(specials)} specials")
        # Counter preserves insertion order, and sorted() is stable, so sorting
        # by count alone breaks ties by first occurrence.
        counts = Counter(tokens)
        special_set = set(specials)
        ranked = sorted(
            (t for t, n in counts.items() if n >= min_freq and t not in special_set),
            key=lambda t: -counts[t],
        )
        if max_size is not None:
            ranked = ranked[: max_size - len(specials)]
        return cls([*specials, *ranked], unk_token=unk_token)

    def __len__(self) -> int:
        return len(self._itos)

    def __contains__(self, token: object) -> bool:
        return token in self._stoi

    def __getitem__(self, token: str) -> int:
        """The id of ``token`` (or of the unk token for unknown tokens, if there is one)."""
        idx = self._stoi.get(token, self._unk_id)
        if idx is None:
            raise KeyError(
                f"token {token!r} is not in the vocabulary of {len(self)} types "
                f"and it has no unk token ({self._unk_token!r})"
            )
        return idx

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vocab):
            return NotImplemented
        return self._itos == other._itos and self._unk_token == other._unk_token

    def __hash__(self) -> int:
        return hash((self._itos, self._unk_token))

    def __repr__(self) -> str:
        head = ", ".join(repr(t) for t in self._itos[:5])
        return f"Vocab(size={len(self)}, unk={self._unk_token!r}, itos=[{head}, ...])"

    @property
    def itos(self) -> tuple[str, ...]:
        """Tokens in id order."""
        return self._itos

    @property
    def unk_id(self) -> int | None:
        """Id of the unk token, or ``None`` when unknown tokens are an error."""
        return self._unk_id

    def encode(self, tokens: Iterable[str]) -> list[int]:
        """Ids of ``tokens``, in order."""
        return [self[t] for t in tokens]

    def lookup_tokens(self, ids: Iterable[int]) -> list[str]:
        """Tokens of ``ids``, in order (accepts ints or 0-d tensors)."""
        return [self._itos[int(i)] for i in ids]

    def to_dict(self) -> dict[str, Any]:
        """Plain data (lists and strings) for checkpoints loaded with ``weights_only=True``."""
        return {"itos": list(self._itos), "unk_token": self._unk_token}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Vocab:
        """Inverse of :meth:`to_dict`."""
        return cls(data["itos"], unk_token=data.get("unk_token"))
