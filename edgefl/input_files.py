"""Input files the user names: only regular files are read (a named pipe would block ``open()``, a device
never ends)."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def special_file(path: str | Path) -> str | None:
    """What ``path`` is when it is not a regular file edgefl can read ("a named pipe (FIFO)", "a folder", ...),
    or None for a regular file (or one that does not exist: the caller's open() says so). Checked with
    os.stat (following links) before opening."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode):
        return None
    return (
        "a folder"
        if stat.S_ISDIR(mode)
        else "a named pipe (FIFO)"
        if stat.S_ISFIFO(mode)
        else "a character device"
        if stat.S_ISCHR(mode)
        else "a block device"
        if stat.S_ISBLK(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "not a regular file"
    )
