"""Figures for a paper: `--format png|pdf|svg` on every command that draws and in the Python API (edgefl.figures),
byte-stable vector files, a wrong format refused with a hint (exit 2); `edgefl plot --target m=v` draws m; compare.png
names asynchronous rounds as server updates."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
from test_cli import TINY, write
from test_optimal_tau import GRID, synthetic_rows, write_fake_sweep

from edgefl import figures as figure_files
from edgefl.api import run
from edgefl.cli import main
from edgefl.figures import FORMATS, check_format, save_figure

MAGIC = {"png": b"\x89PNG", "pdf": b"%PDF", "svg": b"<?xml"}


def test_a_figure_is_the_same_bytes_every_time_in_every_format(tmp_path):
    for fmt in FORMATS:
        files = []
        for k in range(2):
            fig, ax = plt.subplots()
            ax.plot([1, 2, 3], label="a curve")
            ax.legend()
            files.append(save_figure(fig, tmp_path / f"{k}.{fmt}").read_bytes())
        assert files[0].startswith(MAGIC[fmt]) and files[0] == files[1], fmt  # no date, no random SVG ids
    assert b"/Type3" not in (tmp_path / "0.pdf").read_bytes()  # TrueType text, which publishers' checks accept


@pytest.mark.parametrize("value", ["jpg", "PDF ", "", None, 3])
def test_an_unknown_format_names_the_known_ones(value):
    with pytest.raises(ValueError, match="expected one of png, pdf, svg"):
        check_format(value)


def test_edgefl_run_writes_its_figures_in_the_format_asked(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(write(tmp_path, TINY)), "--out", str(out), "--format", "pdf", "--quiet"]) == 0
    figures = sorted(p.name for p in out.iterdir() if p.suffix in (".png", ".pdf", ".svg"))
    assert "accuracy.pdf" in figures and "gantt.pdf" in figures and all(f.endswith(".pdf") for f in figures)
    assert all((out / f).read_bytes().startswith(b"%PDF") for f in figures)
    assert "*.pdf)" in capsys.readouterr().out


COMMANDS = {
    "run": lambda tmp_path: ["run", str(write(tmp_path, TINY)), "--out", str(tmp_path / "out")],
    "compare": lambda tmp_path: [
        "compare",
        str(write(tmp_path, TINY)),
        "--algorithms",
        "fedavg",
        "--out",
        str(tmp_path / "out"),
    ],
    "optimal-tau": lambda tmp_path: ["optimal-tau", str(tmp_path), "--target", "acc_worst=0.5"],
    "plot": lambda tmp_path: ["plot", str(tmp_path)],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_wrong_format_exits_2_with_a_hint_before_any_work(command, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main([*COMMANDS[command](tmp_path), "--format", "jpeg"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "unknown figure format 'jpeg': expected one of png, pdf, svg (pdf or svg for a paper" in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def drawn(monkeypatch) -> list:
    """Record every figure edgefl writes (path, y labels, x tick labels, suptitle, y data of its lines, x labels of
    its visible axes) as it is written."""
    seen = []
    original = save_figure

    def record(fig, path, fmt=None, **kwargs):
        title = fig._suptitle.get_text() if fig._suptitle is not None else ""
        ys = [float(y) for ax in fig.axes for line in ax.get_lines() for y in line.get_ydata()]
        ticks = [ax.get_xticklabels() for ax in fig.axes]
        xlabels = [ax.get_xlabel() for ax in fig.axes if ax.get_visible()]
        seen.append((str(path), [ax.get_ylabel() for ax in fig.axes], ticks, title, ys, xlabels))
        return original(fig, path, fmt, **kwargs)

    monkeypatch.setattr(figure_files, "save_figure", record)
    from edgefl.sweeps import plots as sweep_plots

    monkeypatch.setattr(sweep_plots, "save_figure", record)
    return seen


def test_optimal_tau_and_plot_write_the_format_asked_and_plot_draws_the_targets_metric(tmp_path, capsys, monkeypatch):
    reach = {(5, 0): 30, (10, 0): 22, (5, 1): 32, (10, 1): 24}
    sweep = tmp_path / "sweep"
    rows = synthetic_rows(reach, 1.0, 40.0, 40, snrs=[0, 10], bandwidths=[0.5, 2])
    write_fake_sweep(sweep, [dict(r, acc_mean=0.05 + 0.9 * r["acc_worst"]) for r in rows], GRID)  # acc_mean ≤ 0.95
    seen = drawn(monkeypatch)
    assert main(["optimal-tau", str(sweep), "--target", "acc_worst=0.5", "--format", "svg", "--quiet"]) == 0
    analysis = sweep / "optimal-tau_acc_worst=0.5"
    for name in ("tau-heatmap", "tau-energy-curves", "tau-energy-split"):
        assert (analysis / f"{name}.svg").read_bytes().startswith(b"<?xml") and not (analysis / f"{name}.png").exists()
    seen.clear()
    assert main(["plot", str(sweep), "--target", "acc_mean=0.5", "--format", "pdf", "--quiet"]) == 0
    assert (sweep / "tau-accuracy-energy.pdf").read_bytes().startswith(b"%PDF")
    assert (sweep / "optimal-tau_acc_mean=0.5" / "tau-pareto.pdf").read_bytes().startswith(b"%PDF")
    (accuracy,) = [s for s in seen if s[0].endswith("tau-accuracy-energy.pdf")]
    assert set(accuracy[1]) - {""} == {"acc_mean"} and accuracy[3].startswith("acc_mean versus energy")  # the target's
    assert max(accuracy[4]) == pytest.approx(0.95)  # acc_mean's values, not acc_worst's (1.0)
    capsys.readouterr()
    assert main(["plot", str(sweep), "--target", "acc_mean=0.5", "--metric", "acc_worst", "--quiet"]) == 0
    assert [set(s[1]) - {""} for s in seen if s[0].endswith("tau-accuracy-energy.png")] == [{"acc_worst"}]  # --metric


def test_compare_writes_its_format_and_names_server_updates_beside_rounds(tmp_path, capsys, monkeypatch):
    seen = drawn(monkeypatch)
    out = tmp_path / "cmp"
    args = ["compare", str(write(tmp_path, TINY)), "--algorithms", "fedavg,fedbuff", "--seeds", "1"]
    args += ["--target", "loss=5", "--set", "run.rounds=2", "--out", str(out), "--format", "svg", "--quiet"]
    assert main(args) == 0
    figure = out / "compare_loss=5" / "compare.svg"
    assert figure.read_bytes().startswith(b"<?xml") and not figure.with_suffix(".png").exists()
    ((_, ylabels, ticks, title, _, _),) = seen
    assert ylabels[2] == "rounds to target\n(asynchronous: server updates)"
    assert [t.get_text() for t in ticks[2]] == ["fedavg\n(1/1)", "fedbuff\n(1/1)\nserver updates"]
    assert title.startswith("fedavg, fedbuff: N = 6")  # the scenario compared, then the target


def test_result_plot_and_save_write_the_format_asked(tmp_path):
    r = run(write(tmp_path, TINY), overrides={"run.rounds": 2}, progress=False)
    fig = r.plot("gantt", path=tmp_path / "gantt.pdf")
    assert fig.axes and (tmp_path / "gantt.pdf").read_bytes().startswith(b"%PDF")  # the figure is also returned
    plt.close(fig)
    plt.close(r.plot("accuracy", path=tmp_path / "accuracy.png", format="svg"))  # format= wins over the suffix
    assert (tmp_path / "accuracy.png").read_bytes().startswith(b"<?xml")
    with pytest.raises(ValueError, match="expected one of png, pdf, svg"):
        r.plot("energy", path=tmp_path / "energy.jpg")
    assert not (tmp_path / "energy.jpg").exists()
    r.save(tmp_path / "out", plot_format="svg")
    assert (tmp_path / "out" / "energy_rounds.svg").exists() and not list((tmp_path / "out").glob("*.png"))
    with pytest.raises(ValueError, match="expected one of png, pdf, svg"):
        r.save(tmp_path / "out2", plot_format="eps")
    assert not (tmp_path / "out2").exists()


def test_rounds_of_asynchronous_algorithms_are_named_server_updates():
    from edgefl.sweeps.plots import rounds_axis

    assert rounds_axis(["fedavg", "fedprox"]) == ("rounds to target", {"fedavg": "", "fedprox": ""})
    assert rounds_axis(["fedbuff", "fedasync"])[0] == "server updates to target"
    label, marks = rounds_axis(["fedavg", "fedasync"])
    assert label == "rounds to target\n(asynchronous: server updates)" and marks["fedasync"] == "\nserver updates"
    assert rounds_axis([None]) == ("rounds to target", {})  # nothing known: rounds


def test_the_pareto_front_of_an_asynchronous_sweep_counts_server_updates(tmp_path, monkeypatch):
    import json

    sweep = tmp_path / "sweep"
    write_fake_sweep(sweep, synthetic_rows({(5, 0): 3, (10, 0): 2}, 1.0, 1.0, 5, snrs=[0], bandwidths=[1]), GRID)
    manifest = json.loads((sweep / "sweep.json").read_text())
    manifest["definition"]["scenario"] = {"algorithm": {"name": "fedbuff"}}  # the sweep's own algorithm
    (sweep / "sweep.json").write_text(json.dumps(manifest))
    seen = drawn(monkeypatch)
    assert main(["plot", str(sweep), "--target", "acc_worst=0.5", "--window", "1", "--quiet"]) == 0
    (pareto,) = [s for s in seen if s[0].endswith("tau-pareto.png")]
    assert pareto[5] == ["server updates to target"]


def test_sweep_panels_name_cells_reuse_sectors_and_controller_in_words():
    from edgefl.sweeps.plots import _label

    keys = ["network.cells", "network.reuse", "network.sectors", "control.name"]
    assert _label(keys, [7, 3, 3, "deadline_fit"]) == "7 cells, reuse 3, 3 sectors a site, controller deadline_fit"
