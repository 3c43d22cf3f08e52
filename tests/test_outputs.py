"""Output hygiene of one run: rounds numbered from 1 in every file, plots that scale and stay in range,
a warning when most uploads were cut."""

from __future__ import annotations

import csv
import os

import matplotlib.image
from test_cli import TINY

from edgefl.cli import main
from edgefl.plots import MAX_BARS, plot_run
from edgefl.results import atomic_write_text


def test_rounds_are_numbered_from_1_in_every_file(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(TINY)
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet", "--no-plots"]) == 0
    metrics = {int(r["round"]) for r in csv.DictReader(open(tmp_path / "out" / "metrics.csv"))}
    events = {int(r["round"]) for r in csv.DictReader(open(tmp_path / "out" / "events.csv"))}
    assert metrics == events == {1, 2, 3}


def test_energy_per_client_plot_aggregates_by_class_beyond_max_bars(tmp_path):
    def client(i, cls):
        return {
            "client": i,
            "device_class": cls,
            "compute_energy_j": 1.0,
            "uplink_energy_j": 2.0,
            "downlink_energy_j": 0.5,
            "idle_energy_j": 0.1,
        }

    many = [client(i, "phone" if i % 3 else "sensor") for i in range(MAX_BARS * 50)]  # 10,000 clients
    (tmp_path / "many").mkdir()
    written = plot_run(tmp_path / "many", [], many, title="t")
    width = matplotlib.image.imread(written[-1]).shape[1]
    assert width < 1000  # two class bars, not 10,000 client bars


def test_a_warning_when_most_uploads_are_cut(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text(TINY + "deadline_s = 0.005\n")  # the messages fit it (a shorter one is refused), a chain not
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet", "--no-plots"]) == 0
    assert "warning:" in capsys.readouterr().err


def test_results_are_as_readable_as_any_file_the_user_writes(tmp_path):
    """The results folder and its files are written via temporary ones (created 0700 / 0600): they end with
    the mode of a plain mkdir() / open() under the user's umask."""
    path = tmp_path / "s.toml"
    path.write_text(TINY)
    previous = os.umask(0o022)
    try:
        out = tmp_path / "res"
        assert main(["run", str(path), "--out", str(out), "--no-plots", "--quiet"]) == 0
        atomic_write_text(tmp_path / "note.txt", "x")
    finally:
        os.umask(previous)
    assert out.stat().st_mode & 0o777 == 0o755
    assert (out / "metrics.csv").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "note.txt").stat().st_mode & 0o777 == 0o644
