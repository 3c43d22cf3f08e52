"""Study pages (docs/reproduce-*.md and the like) are rendered by experiments/pages.py from a template in
experiments/templates/ over the runs stored beside the page: re-rendering each converted page from its stored
runs gives exactly the committed page, so a page and its stored results cannot drift apart."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import jinja2
import pytest

from experiments import pages

from conftest import load_experiment

REPO = Path(__file__).resolve().parents[1]

# study script -> (the committed page, how the script renders it from its stored runs, running nothing)
STUDIES = {
    "reproduce_drdm": (
        REPO / "docs" / "reproduce-drdm.md",
        lambda mod: mod.render(mod.load_bundle(mod.DATA_DIR / mod.BUNDLE)),
    ),
    "reproduce_fast_fedda": (
        REPO / "docs" / "reproduce-fast-fedda.md",
        lambda mod: mod.render(json.loads(mod.SUMMARY.read_text())),
    ),
    "reproduce_fedalign": (
        REPO / "docs" / "reproduce-fedalign.md",
        lambda mod: mod.render(json.loads(mod.SUMMARY.read_text())),
    ),
    "reproduce_partial_averaging": (
        REPO / "docs" / "reproduce-partial-averaging.md",
        lambda mod: mod.render(json.loads(mod.SUMMARY.read_text())),
    ),
    "algorithms_on_one_network": (
        REPO / "docs" / "algorithms-on-one-network.md",
        lambda mod: mod.render(json.loads(mod.SUMMARY.read_text())),
    ),
    "asynchronous": (
        REPO / "docs" / "asynchronous.md",
        lambda mod: mod.render(json.loads(mod.SUMMARY.read_text())),
    ),
    "committed_energy": (
        REPO / "docs" / "committed-energy.md",
        lambda mod: mod.render(json.loads(mod.DATA.read_text())),
    ),
    "multi_cell_target": (
        REPO / "docs" / "multi-cell-grids.md",
        lambda mod: mod.render(json.loads(mod.GRIDS.read_text())),
    ),
    "over_the_air": (
        REPO / "docs" / "over-the-air.md",
        lambda mod: mod.render(json.loads(mod.SUMMARY.read_text())),
    ),
    "calibration": (
        REPO / "docs" / "calibration.md",
        lambda mod: mod.render(json.loads(mod.DATA.read_text())),
    ),
    "event_interference": (
        REPO / "docs" / "event-interference.md",
        lambda mod: mod.render(json.loads(mod.DATA.read_text())),
    ),
    "model_size": (
        REPO / "docs" / "model-size.md",
        lambda mod: mod.render(json.loads(mod.SUMMARY.read_text())),
    ),
    "realistic_network": (
        REPO / "docs" / "realistic-network.md",
        lambda mod: render_realistic_network(mod),
    ),
}


def render_realistic_network(mod) -> str:
    runs = mod.read_runs(mod.DATA)
    why = (REPO / "experiments" / "realistic_network_why.md").read_text()
    return mod.render(mod.summarise(runs), runs, 2, why, mod.provenance.read(mod.PRODUCED))


@pytest.mark.parametrize("study", sorted(STUDIES))
def test_the_committed_page_is_its_stored_runs_rendered(study):
    page, render = STUDIES[study]
    rendered = render(load_experiment(study))
    committed = page.read_text()
    diff = "".join(list(difflib.unified_diff(committed.splitlines(True), rendered.splitlines(True), n=1))[:40])
    assert rendered == committed, f"{page.name} differs from its stored runs' rendering:\n{diff}"


@pytest.mark.parametrize("study", sorted(STUDIES))
def test_a_converted_study_has_its_template_and_no_page_text_in_python(study):
    source = (REPO / "experiments" / f"{study}.py").read_text()
    assert "pages.render(" in source
    assert "w = L.append" not in source  # the old way: the page built line by line in Python


def test_the_shared_formats():
    assert pages.pct(0.81234) == "81.23"
    assert pages.pct((0.8123, 0.015)) == "81.23 ± 1.50"
    assert pages.pct(0.70, 0) == "70"
    assert pages.signed_pct((-0.0164, 0.0155)) == "-1.64 ± 1.55"
    assert pages.signed_pct(0.05) == "+5.00"
    assert pages.signed(2.21) == "+2.21"
    assert pages.pm((0.3241, 0.0339), 3) == "0.324 ± 0.034"
    assert pages.pm([0.3241], 3) == "0.324"  # one seed: no spread
    assert pages.over_seeds([1.0, 2.0, 4.0]) == pytest.approx([7 / 3, (7 / 3) ** 0.5])  # sample std, ddof = 1
    assert pages.over_seeds([0.5]) == [0.5]
    assert pages.sig(1.1525, 3) == "1.15" and pages.sig(1.1525, 2) == "1.2"
    assert pages.fixed(7.44, 1) == "7.4"
    assert pages.minutes(1650) == "28"
    assert pages.names([]) == "none" and pages.names(["DRFA", "FedAvg"]) == "DRFA, FedAvg"


def test_a_template_naming_a_missing_number_fails_instead_of_printing_nothing(tmp_path, monkeypatch):
    (tmp_path / "t.md.j2").write_text("worst {{ worst|pct }}%\n{% for r in rows %}\n| {{ r }} |\n{% endfor %}\n")
    monkeypatch.setattr(pages, "TEMPLATES", tmp_path)
    assert pages.render("t.md.j2", worst=0.5, rows=[1, 2]) == "worst 50.00%\n| 1 |\n| 2 |\n"
    with pytest.raises(jinja2.UndefinedError):
        pages.render("t.md.j2", rows=[])


def test_a_run_stores_its_results_then_renders_the_page_from_what_it_stored(tmp_path, capsys):
    summary = {"value": 0.1 + 0.2, "rows": [1, 2]}
    pages.store_and_render(summary, tmp_path / "data" / "s.json", tmp_path / "page.md", lambda d: f"{d}", 90.0)
    stored = json.loads((tmp_path / "data" / "s.json").read_text())
    assert stored == summary and (tmp_path / "page.md").read_text() == f"{stored}"
    assert "(1.5 min)" in capsys.readouterr().out
