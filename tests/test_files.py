"""Tests of xlapy.files: reading only regular files, within a size limit."""

from __future__ import annotations

import os

import pytest

from xlapy.errors import XlapyError
from xlapy.files import open_regular_file, read_regular_file


def test_a_regular_file_is_read_whole(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"abc\x00def")
    assert read_regular_file(path) == b"abc\x00def"
    assert read_regular_file(path, max_bytes=7, nofollow=True) == b"abc\x00def"


def test_a_file_over_the_limit_is_refused_before_reading(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"12345678")
    with pytest.raises(XlapyError, match=f"cannot read {path}: 8 bytes, more than 7"):
        read_regular_file(path, max_bytes=7)


def test_links_are_followed_unless_refused(tmp_path):
    target, link = tmp_path / "target", tmp_path / "link"
    target.write_bytes(b"x")
    link.symlink_to(target)
    assert read_regular_file(link) == b"x"
    with pytest.raises(XlapyError, match=f"cannot read {link}: "):
        read_regular_file(link, nofollow=True)


@pytest.mark.parametrize("make, message", [
    (lambda p: p.mkdir(), "a directory"),
    (lambda p: os.mkfifo(p), "not a regular file"),  # nobody writes to it: reading would block forever
    (lambda p: p.symlink_to("/dev/zero"), "not a regular file"),  # never ends
    (lambda p: None, "No such file or directory"),
])
def test_anything_but_a_regular_file_is_refused(tmp_path, make, message):
    path = tmp_path / "f"
    make(path)
    with pytest.raises(XlapyError, match=f"cannot read {path}: {message}"):
        open_regular_file(path)
