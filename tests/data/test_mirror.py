"""Tests for knn.data.mirror: search order, verification, downloads and errors.

Each test runs against a tiny fake table of files in tmp_path; the real mirror
is hidden so results do not depend on the machine. Downloads are simulated by
replacing ``urlopen`` with a function that serves bytes.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import zipfile
from collections.abc import Callable
from pathlib import Path
from urllib.error import URLError

import pytest

from knn.data import mirror
from knn.data.mirror import DataError, Source, resolve

NAME = "toy/a.txt"
CONTENT = b"hello world\n"
URL = "https://example.invalid/toy/a.txt"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def real_mirror() -> Path | None:
    """The machine's shared mirror, found the way the library finds it."""
    for path in mirror._default_mirror_dirs():
        if path.is_dir():
            return path
    return None


REAL_MIRROR = real_mirror()


def serve(files: dict[str, bytes], calls: list[str]) -> Callable[..., io.BytesIO]:
    """A stand-in for urlopen that serves ``files`` by URL and records each request."""

    def fake_urlopen(url: str, timeout: float | None = None) -> io.BytesIO:
        calls.append(url)
        if url not in files:
            raise URLError("simulated: no route to host")
        return io.BytesIO(files[url])

    return fake_urlopen


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-file table, no env vars, no default mirror, no network."""
    monkeypatch.setattr(mirror, "CHECKSUMS", {NAME: sha(CONTENT)})
    monkeypatch.setattr(mirror, "SOURCES", {NAME: Source(url=URL)})
    monkeypatch.setattr(mirror, "_default_mirror_dirs", lambda: [])
    monkeypatch.setattr(mirror, "urlopen", serve({}, []))
    monkeypatch.delenv(mirror.ENV_MIRROR, raising=False)
    monkeypatch.delenv(mirror.ENV_CACHE, raising=False)


def write(root: Path, name: str, data: bytes) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_sha256_file_is_chunked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(mirror, "CHUNK_BYTES", 5)  # several chunks for a 12-byte file
    assert mirror.sha256_file(write(tmp_path, "f", CONTENT)) == sha(CONTENT)


def test_mirror_file_is_returned_in_place(tmp_path: Path):
    src = write(tmp_path / "mirror", NAME, CONTENT)
    got = resolve(NAME, mirror=tmp_path / "mirror", cache_dir=tmp_path / "cache")
    assert got == src
    assert not (tmp_path / "cache").exists()  # never copied


def test_mirror_from_env_var(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    src = write(tmp_path / "mirror", NAME, CONTENT)
    monkeypatch.setenv(mirror.ENV_MIRROR, str(tmp_path / "mirror"))
    assert resolve(NAME, cache_dir=tmp_path / "cache") == src


def test_argument_beats_env_var(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    src = write(tmp_path / "arg", NAME, CONTENT)
    write(tmp_path / "env", NAME, b"corrupt")
    monkeypatch.setenv(mirror.ENV_MIRROR, str(tmp_path / "env"))
    assert resolve(NAME, mirror=str(tmp_path / "arg"), cache_dir=tmp_path / "c") == src


def test_default_mirror_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    src = write(tmp_path / "shared", NAME, CONTENT)
    defaults = [tmp_path / "absent", tmp_path / "shared"]
    monkeypatch.setattr(mirror, "_default_mirror_dirs", lambda: defaults)
    assert resolve(NAME, cache_dir=tmp_path / "cache") == src


def test_explicit_mirror_must_exist(tmp_path: Path):
    with pytest.raises(DataError, match="not a directory"):
        resolve(NAME, mirror=tmp_path / "typo", cache_dir=tmp_path / "cache")


def test_empty_string_mirror_means_unset(tmp_path: Path):
    write(tmp_path / "cache", NAME, CONTENT)
    assert resolve(NAME, mirror="", cache_dir=tmp_path / "cache") == tmp_path / "cache" / NAME


def test_checksum_mismatch_names_file_and_both_hashes(tmp_path: Path):
    bad = b"hello wrld\n"
    write(tmp_path / "mirror", NAME, bad)
    with pytest.raises(DataError) as info:
        resolve(NAME, mirror=tmp_path / "mirror", cache_dir=tmp_path / "cache")
    msg = str(info.value)
    assert "\n" not in msg
    assert NAME in msg and sha(CONTENT) in msg and sha(bad) in msg
    assert "checksum mismatch" in msg


def test_cache_is_used_without_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    cached = write(tmp_path / "cache", NAME, CONTENT)
    monkeypatch.setenv(mirror.ENV_CACHE, str(tmp_path / "cache"))
    assert resolve(NAME) == cached


def test_missing_everywhere_is_one_line_naming_both_fixes(tmp_path: Path):
    (tmp_path / "mirror").mkdir()
    with pytest.raises(DataError) as info:
        resolve(NAME, mirror=tmp_path / "mirror", cache_dir=tmp_path / "cache")
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(NAME)
    assert mirror.ENV_MIRROR in msg and "data.mirror=" in msg and URL in msg
    assert "simulated: no route to host" in msg  # the urllib reason, wrapped
    assert isinstance(info.value.__cause__, URLError)
    assert not (tmp_path / "cache").exists()  # a failed request leaves nothing behind


def test_no_mirror_found_is_reported(tmp_path: Path):
    with pytest.raises(DataError, match="no data mirror found"):
        resolve(NAME, cache_dir=tmp_path / "cache")


def test_download_lands_atomically_and_only_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    calls: list[str] = []
    monkeypatch.setattr(mirror, "urlopen", serve({URL: CONTENT}, calls))
    monkeypatch.setattr(mirror, "CHUNK_BYTES", 4)  # stream in several pieces
    first = resolve(NAME, cache_dir=tmp_path / "cache")
    assert first == tmp_path / "cache" / NAME and first.read_bytes() == CONTENT
    assert files_under(tmp_path / "cache") == [NAME]  # no .part file left over
    assert resolve(NAME, cache_dir=tmp_path / "cache") == first
    assert calls == [URL]


def test_bad_download_never_reaches_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    tampered = b"tampered\n"
    monkeypatch.setattr(mirror, "urlopen", serve({URL: tampered}, []))
    with pytest.raises(DataError, match=f"checksum mismatch for {NAME}.*{sha(tampered)}"):
        resolve(NAME, cache_dir=tmp_path / "cache")
    assert files_under(tmp_path / "cache") == []


def test_interrupted_download_leaves_no_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    class Dropped(io.BytesIO):
        def read(self, size: int | None = -1) -> bytes:
            if self.tell() > 0:
                raise ConnectionResetError("simulated: connection reset")
            return super().read(4)

    monkeypatch.setattr(mirror, "urlopen", lambda url, timeout=None: Dropped(CONTENT))
    with pytest.raises(DataError, match=r"connection reset.*KNN_DATA_MIRROR"):
        resolve(NAME, cache_dir=tmp_path / "cache")
    assert files_under(tmp_path / "cache") == []


def test_download_disabled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    calls: list[str] = []
    monkeypatch.setattr(mirror, "urlopen", serve({URL: CONTENT}, calls))
    with pytest.raises(DataError, match="downloads are disabled"):
        resolve(NAME, cache_dir=tmp_path / "cache", download=False)
    assert calls == []


def test_file_without_public_source_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(mirror, "SOURCES", {NAME: Source(note="has no public URL (stand-in)")})
    with pytest.raises(DataError, match=r"has no public URL .*KNN_DATA_MIRROR") as info:
        resolve(NAME, cache_dir=tmp_path / "cache")
    assert "internet" not in str(info.value)


def test_unknown_name(tmp_path: Path):
    with pytest.raises(DataError, match=r"unknown data file 'nope\.txt'"):
        resolve("nope.txt", cache_dir=tmp_path)


def test_zip_members_are_extracted_from_one_download(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    members = {"trees/train.txt": b"(3 (2 a) (2 b))\n", "trees/dev.txt": b"(1 c)\n"}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    zip_url = "https://example.invalid/trees.zip"
    names = {f"sst/{m}": m for m in members}
    monkeypatch.setattr(mirror, "CHECKSUMS", {n: sha(members[m]) for n, m in names.items()})
    monkeypatch.setattr(
        mirror, "SOURCES", {n: Source(url=zip_url, member=m) for n, m in names.items()}
    )
    calls: list[str] = []
    monkeypatch.setattr(mirror, "urlopen", serve({zip_url: buf.getvalue()}, calls))
    for name, member in names.items():
        assert resolve(name, cache_dir=tmp_path).read_bytes() == members[member]
    assert calls == [zip_url]


def test_corrupt_zip_is_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    zip_url = "https://example.invalid/trees.zip"
    monkeypatch.setattr(mirror, "SOURCES", {NAME: Source(url=zip_url, member="a.txt")})
    monkeypatch.setattr(mirror, "urlopen", serve({zip_url: b"not a zip"}, []))
    with pytest.raises(DataError, match=r"cannot extract a\.txt"):
        resolve(NAME, cache_dir=tmp_path)
    assert files_under(tmp_path) == []


def test_cep_split_sizes_partition_and_determinism():
    split = mirror.cep_split(29_978)
    sizes = {k: len(v) for k, v in split.items()}
    assert sizes == {"train": 23_982, "valid": 2_997, "test": 2_999}
    assert sorted(i for part in split.values() for i in part) == list(range(29_978))
    assert all(part == sorted(part) for part in split.values())
    assert mirror.cep_split(29_978) == split


def test_cep_split_is_rebuilt_from_csv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    csv = b"smiles,PCE\n" + b"".join(b"C%d,1.0\n" % i for i in range(20))
    split_name = "cep/split.json"
    expected = mirror.cep_split_json(write(tmp_path / "scratch", "x.csv", csv))
    assert json.loads(expected)["train"] == mirror.cep_split(20)["train"]
    monkeypatch.setattr(
        mirror, "CHECKSUMS", {"cep/cep-processed.csv": sha(csv), split_name: sha(expected)}
    )
    sources = {
        "cep/cep-processed.csv": Source(url=URL),
        split_name: Source(derived_from="cep/cep-processed.csv"),
    }
    monkeypatch.setattr(mirror, "SOURCES", sources)
    monkeypatch.setattr(mirror, "BUILDERS", {split_name: lambda path, _: mirror.cep_split_json(path)})
    write(tmp_path / "mirror", "cep/cep-processed.csv", csv)
    got = resolve(split_name, mirror=tmp_path / "mirror", cache_dir=tmp_path / "cache")
    assert got == tmp_path / "cache" / split_name and got.read_bytes() == expected


@pytest.mark.skipif(REAL_MIRROR is None, reason="no shared data mirror on this machine")
def test_real_cep_split_rebuilds_byte_identical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.undo()  # the real table and sources, no network
    monkeypatch.setattr(mirror, "urlopen", serve({}, []))
    csv_name, split_name = "cep/cep-processed.csv", "cep/split-random-80-10-10-seed0.json"
    os.makedirs(tmp_path / "mirror" / "cep")
    os.symlink(REAL_MIRROR / csv_name, tmp_path / "mirror" / csv_name)
    got = resolve(split_name, mirror=tmp_path / "mirror", cache_dir=tmp_path / "cache")
    # built here from the CSV, not the real mirror's copy found some other way
    assert got == tmp_path / "cache" / split_name
    assert mirror.sha256_file(got) == mirror.CHECKSUMS[split_name]  # resolve checked it too


@pytest.mark.skipif(REAL_MIRROR is None, reason="no shared data mirror on this machine")
def test_table_matches_mirror_readme(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.undo()
    readme = (REAL_MIRROR / "README.md").read_text()
    rows = re.findall(r"^([0-9a-f]{64})  (\S+)$", readme, re.M)
    listed = {name: digest for digest, name in rows}
    assert len(listed) == len(rows)  # each file once: a second digest for a name would hide here
    assert listed == dict(mirror.CHECKSUMS)


def test_every_pinned_file_has_a_source(monkeypatch: pytest.MonkeyPatch):
    """Each file in the checksum table says where it comes from without a mirror (and no
    source is for an unpinned file); holds on machines without the mirror, too."""
    monkeypatch.undo()  # the real table and sources
    assert "ptb/ptb.train.txt" in mirror.CHECKSUMS and set(mirror.SOURCES) == set(mirror.CHECKSUMS)


@pytest.mark.skipif(REAL_MIRROR is None, reason="needs the data mirror's SST trees and vectors")
def test_glove_rebuilt_from_public_zip_verifies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Without a mirror, the GloVe extract is rebuilt from glove.6B.zip: the words of
    SST only, sorted, whatever the zip's order, extra words or number formatting."""
    import gzip
    import random

    monkeypatch.undo()
    name = mirror.GLOVE_6B_SST
    lines = gzip.decompress((REAL_MIRROR / name).read_bytes()).decode().splitlines()
    word, first, rest = lines[0].split(" ", 2)
    lines[0] = f"{word} {first}{'0' if '.' in first else '.0'} {rest}"  # 0.418 -> 0.4180
    lines += ["zzznotansstword 1 2 3", "Good 0 0 0"]  # not an SST type; cased, not lowercased
    random.Random(0).shuffle(lines)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("glove.6B.50d.txt", "\n".join(lines) + "\n")
        z.writestr("glove.6B.100d.txt", "other 1\n")
    calls: list[str] = []
    monkeypatch.setattr(mirror, "urlopen", serve({mirror.GLOVE_6B_URL: buf.getvalue()}, calls))
    trees = tmp_path / "trees_mirror"
    for tree in mirror.SST_TREES:  # a mirror with the trees but not the vectors
        (trees / tree).parent.mkdir(parents=True, exist_ok=True)
        (trees / tree).write_bytes((REAL_MIRROR / tree).read_bytes())
    path = resolve(name, mirror=trees, cache_dir=tmp_path / "cache")
    assert calls == [mirror.GLOVE_6B_URL]
    assert mirror.sha256_file(path) != mirror.CHECKSUMS[name]  # another gzip header...
    assert mirror.vectors_digest(path) == mirror.CONTENT_CHECKSUMS[name]  # ...same vectors
    assert resolve(name, mirror=trees, cache_dir=tmp_path / "cache") == path  # cache verifies


def test_content_digest_does_not_rescue_other_vectors(tmp_path: Path, monkeypatch):
    import gzip

    monkeypatch.setattr(mirror, "CHECKSUMS", {"v.txt.gz": sha(b"x")})
    monkeypatch.setattr(mirror, "CONTENT_CHECKSUMS", {"v.txt.gz": "0" * 64})
    path = tmp_path / "v.txt.gz"
    path.write_bytes(gzip.compress(b"good 1 2\n"))
    with pytest.raises(DataError, match="checksum mismatch"):
        mirror.verify(path, mirror.CHECKSUMS["v.txt.gz"], "v.txt.gz")
