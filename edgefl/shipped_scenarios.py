"""The scenario files that ship with edgefl (the repository's ``scenarios/``, installed as the data
package ``edgefl.scenarios``), so that ``pip install`` users have them too.

A scenario argument that is not an existing file but the name of a shipped scenario (``quickstart``
or ``quickstart.toml``) means the shipped file: ``edgefl run quickstart``. ``edgefl scenarios``
lists them; ``edgefl scenarios quickstart > my.toml`` copies one to edit.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

PACKAGE = "edgefl.scenarios"


def folder() -> Path:
    """The folder of the shipped scenario files (a real folder: setuptools installs it unzipped)."""
    return Path(str(resources.files(PACKAGE)))


def names() -> list[str]:
    """The shipped scenarios' names (file stems), sorted."""
    return sorted(p.stem for p in folder().glob("*.toml"))


def describe(name: str) -> str:
    """The first comment line of a shipped scenario (what it is), or ''."""
    for line in path(name).read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            return line.lstrip("# ").strip()
        if line.strip():
            break
    return ""


def path(name: str) -> Path:
    """The shipped file called ``name`` (with or without .toml); FileNotFoundError if none."""
    candidate = folder() / (name if name.endswith(".toml") else f"{name}.toml")
    if not candidate.is_file():
        raise FileNotFoundError(f"no shipped scenario {name!r}; shipped: {', '.join(names())}")
    return candidate


def resolve(argument: str | Path) -> Path:
    """``argument`` itself if it exists (or names a folder), else the shipped scenario of that name
    when it is a bare name (no folder part), else ``argument`` unchanged (the caller reports it)."""
    given = Path(argument)
    if given.exists() or len(given.parts) != 1:
        return given
    try:
        return path(given.name)
    except FileNotFoundError:
        return given
