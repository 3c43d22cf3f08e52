"""Messages (issue 32 item 7): a mistake made in ``--set`` (or an API override) is attributed to the override,
not to the scenario file; a target written as a percentage gets the hint to write a fraction."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from edgefl.cli import main
from edgefl.errors import UserError
from edgefl.scenario import ScenarioError, load_scenario
from edgefl.target import parse_target

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "scenarios" / "quickstart.toml"


@pytest.mark.parametrize(
    "override, words",
    [
        ("network.snr_db=abc", "network.snr_db: Input should be a valid number"),
        ("network.snr_db=1e400", "network.snr_db: Input should be a finite number"),
        ("data.num_clients=-3", "data.num_clients: Input should be greater than 0"),
        ("algorithm.nosuch=3", "unknown key 'nosuch'"),
        ("network.bandwith_mhz=2", "did you mean 'bandwidth_mhz'"),
    ],
)
def test_a_mistake_in_set_names_the_override(tmp_path, capsys, override, words):
    code = main(["run", str(QUICKSTART), "--out", str(tmp_path / "o"), "-q", "--set", override])
    err = capsys.readouterr().err
    assert code == 2 and words in err, err
    assert err.startswith(f"edgefl: error: --set {override!r} (overriding {QUICKSTART})"), err


def test_a_mistake_in_the_file_still_names_the_file(tmp_path, capsys):
    bad = tmp_path / "s.toml"
    bad.write_text(QUICKSTART.read_text().replace("snr_db = 20.0", "snr_db = 'abc'"))
    code = main(["run", str(bad), "--out", str(tmp_path / "o"), "-q", "--set", "run.rounds=2"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"edgefl: error: {bad}: network.snr_db"), err


def test_an_api_override_is_named_too():
    with pytest.raises(ScenarioError, match=r"^override 'network.snr_db' \(overriding .*quickstart.toml\)"):
        load_scenario(QUICKSTART, {"network.snr_db": "abc"})


@pytest.mark.parametrize(
    "text, hint",
    [
        ("acc_mean=85%", "'85%' is a percentage; acc_mean is an accuracy, a fraction in [0, 1]: write 0.85"),
        ("acc_worst= 80 %", "write 0.8"),
        ("energy_j=5%", "write energy_j's value in its own unit, a plain number without %"),
    ],
)
def test_a_target_written_as_a_percentage_gets_the_hint(text, hint):
    with pytest.raises(UserError, match=re.escape(hint)):
        parse_target(text)


def test_plot_titles_name_what_varies():
    """(issue 32 item 6, titles) the cells and their reuse, a controller, a selection policy, a backhaul and an
    over-the-air uplink are named in the run's plot titles; the defaults add nothing."""
    plain = load_scenario(QUICKSTART).title()
    assert plain == "fedavg: N = 30, m = 10, τ = 10, η = 0.05; SNR 20 dB, 1 MHz fdma"
    phones = ROOT / "scenarios" / "phones-in-a-cell.toml"
    varied = load_scenario(
        phones,
        ["network.cells=7", "network.reuse=3", "control.name=min_energy", "selection.name=oort"]
        + ["backhaul.rate_mbps=100"],
    ).title()
    for words in ("7 cells of 500 m, reuse 3", "controller min_energy", "selection oort", "backhaul 100 Mbit/s"):
        assert words in varied, varied
    aircomp = load_scenario(QUICKSTART, ["network.uplink=aircomp", "algorithm.fedavg.weighting='uniform'"]).title()
    assert "over the air" in aircomp


def test_a_long_title_wraps_to_the_figure():
    """A multi-cell run's title names much: it wraps to the figure's width instead of running off both edges."""
    import matplotlib.pyplot as plt

    from edgefl.run_plots import CHAR_EM, _suptitle

    fig = plt.figure(figsize=(6, 5.4))
    title = "fedavg: N = 60, m = 10, τ = 10, η = 0.05; cell 500 m, 19 cells (reuse 3), 10 MHz fdma, deadline 0.4 s"
    _suptitle(fig, title, "the cell")
    lines = fig._suptitle.get_text().splitlines()
    assert len(lines) >= 3 and lines[-1] == "the cell"
    assert all(len(line) <= 6 * 72 / (CHAR_EM * 9) for line in lines)
    assert " ".join(lines[:-1]) == title
    plt.close(fig)
