"""The worked examples of docs/*.md run as written (a block marked ``<!-- example: NAME -->``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = re.compile(r"<!-- example: (?P<name>[\w-]+) -->\n```python\n(?P<code>.*?)```", re.S)


def examples():
    for page in sorted((REPO / "docs").glob("*.md")):
        for match in EXAMPLE.finditer(page.read_text()):
            yield pytest.param(match["code"], id=f"{page.stem}:{match['name']}")


@pytest.mark.parametrize("code", list(examples()))
def test_documented_example_runs(code, monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    exec(compile(code, "<doc example>", "exec"), {"__name__": "__doc_example__"})
    assert capsys.readouterr().out  # each example prints what it shows


def test_the_architecture_page_has_its_worked_example():
    assert "architecture:foreground-app" in [p.id for p in examples()]
