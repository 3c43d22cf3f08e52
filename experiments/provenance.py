"""Where a results page's numbers come from: the commit, the command, the date and the wall time of
the run that produced them, stored beside the page's data so that a re-render (--from-data) shows the
run's provenance, not the re-render's."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from edgefl.results import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
CODE = ("edgefl", "algorithms", "experiments", "scenarios")  # what the numbers depend on


def current(command: str, wall_s: float) -> dict:
    """This checkout's commit (short sha, with "+ uncommitted changes" when the code differs from it),
    the command, today's date (UTC) and the wall time (s)."""

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    if git("status", "--porcelain", "--", *CODE):
        commit += " + uncommitted changes"
    return {
        "commit": commit,
        "command": command,
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "wall_s": round(wall_s),
    }


def line(produced: dict, machine: str = "a 2-core machine shared with other jobs") -> str:
    """The page's first line under its title; a stored `note` (e.g. why the page was not re-run when
    the code changed) follows it."""
    wall = produced["wall_s"]
    wall_text = f"{wall / 60:.1f} min" if wall >= 60 else f"{wall} s"
    text = (
        f"*Produced at commit {produced['commit']} by `{produced['command']}` "
        f"({produced['date']}, {wall_text} of wall time on {machine})."
    )
    return text + (f" {produced['note']}*" if produced.get("note") else "*")


def write(path: Path, produced: dict) -> None:
    atomic_write_text(path, json.dumps(produced, indent=1) + "\n")


def read(path: Path) -> dict:
    return json.loads(path.read_text())
