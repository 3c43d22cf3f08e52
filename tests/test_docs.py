"""The scenario reference is generated from the schema; the committed page must match it."""

from pathlib import Path

from edgefl.scenario_doc import render

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_scenario_reference_is_up_to_date():
    committed = (DOCS / "scenarios.md").read_text()
    assert committed == render(), "regenerate: python -m edgefl.scenario_doc > docs/scenarios.md"
