"""How a study page (docs/reproduce-*.md and the like) is made: an experiment script computes named numbers
from its stored runs, and a Jinja2 template in experiments/templates/ writes the prose and the tables around
them. The number formats every page shares are defined here once, as the templates' filters."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import jinja2
import numpy as np

from edgefl.results import atomic_write_text
from experiments import provenance

TEMPLATES = Path(__file__).resolve().parent / "templates"


def over_seeds(values) -> list[float]:
    """[mean, sample std] of one number per seed; [value] for a single seed. What a study stores for a
    table cell, shown by `pm` as "m ± s" (or "m")."""
    v = np.asarray(values, dtype=float)
    return [float(v.mean())] if v.size == 1 else [float(v.mean()), float(v.std(ddof=1))]


def fixed(value: float, digits: int = 2) -> str:
    """A plain number with a fixed number of decimals: 3.14159 -> "3.14"."""
    return f"{value:.{digits}f}"


def sig(value: float, digits: int = 3) -> str:
    """A number to `digits` significant digits: 1.1523 -> "1.15"."""
    return f"{value:.{digits}g}"


def signed(value: float, digits: int = 2) -> str:
    """A signed number with a fixed number of decimals: 2.2 -> "+2.20"."""
    return f"{value:+.{digits}f}"


def pct(value: float | Sequence[float], digits: int = 2) -> str:
    """A fraction as percent (or percentage points): 0.8123 -> "81.23"; a (mean, spread) pair gives
    "81.23 ± 1.50"."""
    if isinstance(value, (int, float)):
        return f"{100 * value:.{digits}f}"
    mean, spread = value
    return f"{100 * mean:.{digits}f} ± {100 * spread:.{digits}f}"


def signed_pct(value: float | Sequence[float], digits: int = 2) -> str:
    """A difference of fractions in signed percentage points: -0.0164 -> "-1.64"; a (mean, 95 % half-width)
    pair gives "-1.64 ± 1.55"."""
    if isinstance(value, (int, float)):
        return f"{100 * value:+.{digits}f}"
    mean, half = value
    return f"{100 * mean:+.{digits}f} ± {100 * half:.{digits}f}"


def pm(value: Sequence[float], digits: int = 2) -> str:
    """A (mean, spread) pair as it is, no scaling: (0.324, 0.034) -> "0.324 ± 0.034" with digits = 3; a
    lone [mean] (one seed: no spread) -> "0.324"."""
    if len(value) == 1:
        return f"{value[0]:.{digits}f}"
    mean, spread = value
    return f"{mean:.{digits}f} ± {spread:.{digits}f}"


def minutes(seconds: float) -> str:
    """A duration in whole minutes: 1620.4 -> "27"."""
    return f"{seconds / 60:.0f}"


def names(items: Sequence[str], empty: str = "none") -> str:
    """A comma-separated list, or `empty` when there is nothing: ["DRFA", "FedAvg"] -> "DRFA, FedAvg"."""
    return ", ".join(items) or empty


FILTERS: dict[str, Callable] = {
    "fixed": fixed,
    "signed": signed,
    "sig": sig,
    "pct": pct,
    "signed_pct": signed_pct,
    "pm": pm,
    "minutes": minutes,
    "names": names,
    "all": all,
    "provenance": provenance.line,
}


def environment() -> jinja2.Environment:
    """Templates as Markdown: no HTML escaping; a block tag alone on its line leaves no blank line; an
    undefined name is an error, not an empty string."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(FILTERS)
    return env


def render(template: str, filters: dict[str, Callable] | None = None, **context) -> str:
    """experiments/templates/<template> over `context`, with the shared filters and a study's own `filters`."""
    env = environment()
    env.filters.update(filters or {})
    return env.get_template(template).render(**context)


def store_and_render(
    summary: dict, summary_path: Path, doc: Path, render: Callable[[dict], str], wall_s: float
) -> None:
    """Write a study's stored results, then its page rendered from what was stored (so a run's page is exactly
    what ``--from-data`` gives)."""
    summary_path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(summary_path, json.dumps(summary, indent=1) + "\n")
    atomic_write_text(doc, render(json.loads(summary_path.read_text())))
    print(f"wrote {doc} and {summary_path} ({wall_s / 60:.1f} min)")
