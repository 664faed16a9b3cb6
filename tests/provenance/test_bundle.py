"""Forensic bundles: deterministic tar, manifest checks and hostile inputs (DESIGN §7)."""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
import json
import tarfile
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spector_gpu.errors import CorruptionError, ValidationError
from spector_gpu.provenance.bundle import (
    MANIFEST_NAME,
    BundleReport,
    read_bundle,
    verify_bundle,
    write_bundle,
)

FILES = {
    "memory.json": b'{"id":"0ABC","text":"Eva plays the cello."}',
    "lineage/episodes.jsonl": b'{"turn":1}\n{"turn":2}\n',
    "citations.json": b"[]",
    "empty.bin": b"",
    "caf\u00e9/\u00fc.txt": "ü".encode(),
}


def _tar(members: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for info, data in members:
            info.size = len(data) if info.type in (tarfile.REGTYPE, tarfile.AREGTYPE) else 0
            tf.addfile(info, io.BytesIO(data) if info.size else None)
    return buf.getvalue()


def _info(name: str, type_: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = type_, link
    return info


def _members(path: Path) -> list[tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(path) as tf:
        out = []
        for m in tf.getmembers():
            stream = tf.extractfile(m)
            out.append((m, stream.read() if stream else b""))
    return out


def test_round_trip_and_manifest(tmp_path: Path) -> None:
    info = write_bundle(tmp_path / "b.tar", FILES)
    assert read_bundle(tmp_path / "b.tar") == FILES
    data = (tmp_path / "b.tar").read_bytes()
    assert info.sha256 == hashlib.sha256(data).hexdigest() and info.size == len(data)
    assert [e.name for e in info.files] == sorted(FILES)
    with tarfile.open(tmp_path / "b.tar") as tf:
        manifest = json.loads(tf.extractfile(MANIFEST_NAME).read())  # type: ignore[union-attr]
    assert manifest["format"] == "spector_gpu.bundle" and manifest["version"] == 1
    assert manifest["files"] == [
        {"name": n, "sha256": hashlib.sha256(FILES[n]).hexdigest(), "size": len(FILES[n])}
        for n in sorted(FILES)
    ]
    assert not list(tmp_path.glob("*.partial"))


def test_two_writes_are_byte_identical(tmp_path: Path) -> None:
    a = write_bundle(tmp_path / "a.tar", FILES)
    b = write_bundle(str(tmp_path / "b.tar"), dict(reversed(list(FILES.items()))))
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()
    assert a.sha256 == b.sha256


def test_tar_headers_are_fixed(tmp_path: Path) -> None:
    write_bundle(tmp_path / "b.tar", FILES)
    members = _members(tmp_path / "b.tar")
    names = [m.name for m, _ in members]
    assert names == sorted(list(FILES) + [MANIFEST_NAME])
    for m, _ in members:
        assert (m.mtime, m.uid, m.gid, m.uname, m.gname, m.mode, m.type) == (
            0,
            0,
            0,
            "",
            "",
            0o644,
            tarfile.REGTYPE,
        )


@pytest.mark.parametrize(
    "name",
    [
        "/etc/passwd",
        "../up",
        "a/../b",
        "a//b",
        "./a",
        "a/",
        "",
        "a\x00b",
        "a\nb",
        "a\\b",
        "x" * 256,
        "é" * 128,
        MANIFEST_NAME,
    ],
)
def test_write_rejects_unsafe_names(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValidationError, match=r"files\["):
        write_bundle(tmp_path / "b.tar", {name: b"x"})
    assert list(tmp_path.iterdir()) == []


def test_write_rejects_non_bytes(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="expected bytes"):
        write_bundle(tmp_path / "b.tar", {"a": "text"})  # type: ignore[dict-item]
    long_names = {"x" * 255: b"", "d/" + "é" * 126: b"1"}  # need PAX path records
    info = write_bundle(tmp_path / "ok.tar", long_names)
    assert read_bundle(tmp_path / "ok.tar", expected_sha256=info.sha256) == long_names
    again = write_bundle(tmp_path / "ok.tar", long_names)  # replaces the file atomically
    assert again.sha256 == info.sha256 and not list(tmp_path.glob("*.partial"))


def test_tampered_file_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "b.tar"
    write_bundle(path, FILES)
    data = path.read_bytes()
    path.write_bytes(data.replace(b"cello", b"viola"))
    report = verify_bundle(path)
    assert not report.ok and report.tampered == ["memory.json"]
    assert report.missing == report.extra == report.errors == []
    with pytest.raises(CorruptionError, match=r"tampered memory\.json"):
        read_bundle(path)


def test_missing_and_extra_files_are_detected(tmp_path: Path) -> None:
    path = tmp_path / "b.tar"
    write_bundle(path, FILES)
    members = [(m, d) for m, d in _members(path) if m.name != "citations.json"]
    members.append((_info("zz-added.txt"), b"sneaky"))
    path.write_bytes(_tar(members))
    report = verify_bundle(path)
    assert report.missing == ["citations.json"] and report.extra == ["zz-added.txt"]
    assert report.tampered == [] and report.errors == [] and not report.ok


def test_manifest_missing_or_broken(tmp_path: Path) -> None:
    path = tmp_path / "b.tar"
    write_bundle(path, FILES)
    members = [(m, d) for m, d in _members(path) if m.name != MANIFEST_NAME]
    path.write_bytes(_tar(members))
    report = verify_bundle(path)
    assert not report.ok and report.extra == sorted(FILES)
    assert any("manifest.json is missing" in e for e in report.errors)
    for bad in [
        b"not json",
        b'{"format":"x","version":1,"files":[]}',
        b'{"format":"spector_gpu.bundle","version":1,"files":[{"name":"../x",'
        b'"sha256":"' + b"0" * 64 + b'","size":1}]}',
    ]:
        path.write_bytes(_tar([(_info(MANIFEST_NAME), bad)]))
        report = verify_bundle(path)
        assert not report.ok and any(e.startswith(MANIFEST_NAME) for e in report.errors)


def test_expected_sha256_anchors_a_rewritten_manifest(tmp_path: Path) -> None:
    path = tmp_path / "b.tar"
    info = write_bundle(path, FILES)
    assert verify_bundle(path, expected_sha256=info.sha256).ok
    write_bundle(path, {**FILES, "memory.json": b"{}"})  # consistent forgery
    assert verify_bundle(path).ok
    report = verify_bundle(path, expected_sha256=info.sha256)
    assert not report.ok and "expected_sha256" in report.errors[0]


@pytest.mark.parametrize(
    ("member", "why"),
    [
        (_info("link", tarfile.SYMTYPE, "/etc/passwd"), "symlink"),
        (_info("hard", tarfile.LNKTYPE, "memory.json"), "hard link"),
        (_info("dir", tarfile.DIRTYPE), "directory"),
        (_info("dev", tarfile.CHRTYPE), "character device"),
        (_info("fifo", tarfile.FIFOTYPE), "fifo"),
        (_info("../evil"), "unsafe name"),
        (_info("/abs"), "unsafe name"),
        (_info("a\\..\\b"), "unsafe name"),
    ],
)
def test_hostile_members_are_reported_not_followed(
    tmp_path: Path, member: tarfile.TarInfo, why: str
) -> None:
    path = tmp_path / "b.tar"
    write_bundle(path, FILES)
    path.write_bytes(_tar(_members(path) + [(member, b"x")]))
    report = verify_bundle(path)
    assert not report.ok and any(why in e for e in report.errors)
    assert report.tampered == report.missing == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.tar"]  # nothing extracted


def test_truncated_and_non_tar_files_give_reports(tmp_path: Path) -> None:
    path = tmp_path / "b.tar"
    write_bundle(path, FILES)
    data = path.read_bytes()
    cases = {
        "truncated-in-data": data[:600],
        "truncated-in-header": data[: 512 * 3 + 100],
        "one-byte": data[:1],
        "empty": b"",
        "text": b"hello, I am not a tar file\n" * 50,
        "gzip": gzip.compress(data, mtime=0),
        "garbage-after-end": data + b"\x01" * 512,
        "damaged-header": data[:512] + b"\xff" * 512 + data[1024:],
    }
    for label, blob in cases.items():
        path.write_bytes(blob)
        report = verify_bundle(path)
        assert not report.ok, label
        assert report.errors or report.missing, label
    assert verify_bundle(tmp_path / "does-not-exist.tar").errors


def test_size_caps(tmp_path: Path) -> None:
    path = tmp_path / "b.tar"
    write_bundle(path, {"big.bin": b"\x00" * 5000})
    assert verify_bundle(path).ok
    assert any("cap" in e for e in verify_bundle(path, max_bytes=4096).errors)
    report = verify_bundle(path, max_member_bytes=4000)
    assert any("big.bin" in e and "cap" in e for e in report.errors) and not report.ok


@settings(max_examples=150, deadline=None)
@given(
    edits=st.lists(st.tuples(st.integers(0, 10239), st.integers(0, 255)), min_size=1, max_size=4),
    cut=st.none() | st.integers(0, 10240),
)
def test_mutated_bytes_never_crash_verify(edits: list[tuple[int, int]], cut: int | None) -> None:
    blob = bytearray(_canonical())
    for pos, value in edits:
        if pos < len(blob):
            blob[pos] = value
    report, contents = _verify_bytes(bytes(blob[:cut]))
    assert report.ok == (not (report.tampered or report.missing or report.extra or report.errors))
    if report.ok:  # whatever still verifies must carry the original contents
        assert contents == FILES


@functools.cache
def _canonical() -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        write_bundle(Path(tmp) / "b.tar", FILES)
        return (Path(tmp) / "b.tar").read_bytes()


def _verify_bytes(blob: bytes) -> tuple[BundleReport, dict[str, bytes] | None]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "b.tar"
        path.write_bytes(blob)
        report = verify_bundle(path)
        return report, (read_bundle(path) if report.ok else None)
