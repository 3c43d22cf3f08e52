"""`edgefl compare`: algorithms on one scenario, seeds, targets with CIs (a sweep over algorithm.name)."""

from __future__ import annotations

import csv
import math

from test_cli import TINY

from edgefl.cli import main
from edgefl.sweeps.compare import compare, differences, significance
from edgefl.target import Target


def test_compare_writes_a_row_per_algorithm_with_the_one_target_definition(tmp_path, capsys):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    out = tmp_path / "cmp"
    code = main(
        [
            "compare",
            str(path),
            "--algorithms",
            "fedavg,drdm",
            "--seeds",
            "2",
            "--target",
            "loss=5",
            "--set",
            "run.rounds=4",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert code == 0
    report = out / "compare_loss=5"  # one folder per target
    rows = list(csv.DictReader(open(report / "compare.csv")))
    assert [r["algorithm"] for r in rows] == ["fedavg", "drdm"]
    assert float(rows[0]["energy_ratio_to_first"]) == 1.0 and rows[0]["seeds_reached"] == "2"
    assert (report / "compare.png").exists() and "rounds-to-target" in capsys.readouterr().out
    # rerunning resumes: nothing is computed again, the same table
    assert (
        main(
            [
                "compare",
                str(path),
                "--algorithms",
                "fedavg,drdm",
                "--seeds",
                "2",
                "--target",
                "loss=5",
                "--set",
                "run.rounds=4",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    assert list(csv.DictReader(open(report / "compare.csv"))) == rows
    # a second target keeps the first one's outputs (as optimal-tau_<target>/); no target: compare/
    first = (report / "compare.txt").read_text()
    assert (
        main(
            [
                "compare",
                str(path),
                "--algorithms",
                "fedavg,drdm",
                "--seeds",
                "2",
                "--target",
                "loss=3",
                "--set",
                "run.rounds=4",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "compare",
                str(path),
                "--algorithms",
                "fedavg,drdm",
                "--seeds",
                "2",
                "--set",
                "run.rounds=4",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    assert (report / "compare.txt").read_text() == first and "target loss=5" in first
    assert "target loss=3" in (out / "compare_loss=3" / "compare.txt").read_text()
    assert (out / "compare" / "compare.csv").exists() and not (out / "compare" / "compare.png").exists()
    assert not (out / "compare.csv").exists()


def test_compare_prints_each_algorithms_own_settings_and_significance_in_words(tmp_path, capsys):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY + "[algorithm.fedprox]\nmu_p = 0.5\n")
    out = tmp_path / "cmp"
    assert (
        main(
            [
                "compare",
                str(path),
                "--algorithms",
                "fedavg,fedprox,drdm",
                "--seeds",
                "2",
                "--target",
                "loss=5",
                "--set",
                "run.rounds=3",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "fedprox: mu_p = 0.5, weighting = data_size" in printed  # the file's value
    assert "drdm: mu = 1.0, gamma = 0.001" in printed  # the defaults
    assert "fedavg: weighting = data_size" in printed
    rows = {r["algorithm"]: r for r in csv.DictReader(open(out / "compare_loss=5" / "compare.csv"))}
    assert rows["fedprox"]["own_settings"] == "mu_p = 0.5, weighting = data_size"
    for name in ("fedprox", "drdm"):
        mean, half = float(rows[name]["energy_difference_to_first_j"]), float(rows[name]["energy_difference_ci95"])
        words = "significant" if abs(mean) > half else "not significant"
        assert rows[name]["energy_difference_significant"].startswith(words)
        assert (
            f"{name} vs fedavg: energy to target differs by {mean:+.4g} J (95% paired CI "
            f"[{mean - half:+.4g}, {mean + half:+.4g}] J, 2 seeds): {words}"
        ) in printed
    assert printed == (out / "compare_loss=5" / "compare.txt").read_text() + "wrote " + printed.split("wrote ")[1]


def test_compare_means_and_paired_ratios_by_hand():
    def run(name, seed, energy_per_round, reach):
        return [
            {
                "algorithm.name": name,
                "seed": seed,
                "round": r,
                "energy_j": r * energy_per_round,
                "sim_time_s": r * 0.1,
                "acc_worst": 1.0 if r >= reach else 0.0,
            }
            for r in range(1, 11)
        ]

    rows = run("a", 0, 1.0, 3) + run("a", 1, 2.0, 3) + run("b", 0, 1.0, 6) + run("b", 1, 2.0, 6)
    a, b = compare(rows, Target("acc_worst", 0.5), window=1)
    assert a.rounds[0] == 3 and b.rounds[0] == 6
    assert a.energy_j[0] == 4.5 and b.energy_j[0] == 9.0  # (3 + 6) / 2, (6 + 12) / 2
    assert b.energy_ratio[0] == 2.0 and b.energy_ratio[1] == 0.0  # 6/3 and 12/6: paired, no spread
    assert math.isclose(a.time_s[0], 0.3)
    # paired differences: b - a = 6 - 3 and 12 - 6 J: mean 4.5, t-interval 12.706 * std(3, 6) / sqrt(2) = 19.06
    assert b.energy_difference_j[0] == 4.5 and math.isclose(b.energy_difference_j[1], 12.7062 * 1.5, rel_tol=1e-4)
    assert significance(b.energy_difference_j) == "not significant" and b.paired_seeds == 2
    assert significance((4.5, 1.0)) == "significant" and significance((4.5, math.nan)) == "one seed: cannot tell"
    assert differences([a, b], Target("acc_worst", 0.5), 0.95) == [
        "b vs a: energy to target differs by +4.5 J (95% paired CI [-14.56, +23.56] J, 2 seeds): not significant"
    ]


def test_compare_rejects_an_unknown_algorithm(tmp_path, capsys):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    assert main(["compare", str(path), "--algorithms", "fedavg,fedavgg", "--out", str(tmp_path / "x"), "--quiet"]) == 2
    assert "fedavgg" in capsys.readouterr().err


def test_compare_with_an_algorithm_added_reuses_the_finished_runs(tmp_path, capsys):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    out = tmp_path / "cmp"
    common = ["--seeds", "1", "--target", "loss=5", "--set", "run.rounds=2", "--out", str(out), "--quiet", "--no-plots"]
    assert main(["compare", str(path), "--algorithms", "fedavg,drdm", *common]) == 0
    capsys.readouterr()
    assert main(["compare", str(path), "--algorithms", "fedavg,drdm,fedprox", *common]) == 0
    printed = capsys.readouterr().out
    assert "the sweep's grid grew: 2 points before, 3 now" in printed
    rows = list(csv.DictReader(open(out / "compare_loss=5" / "compare.csv")))
    assert [r["algorithm"] for r in rows] == ["fedavg", "drdm", "fedprox"]
    assert len((out / "computed.log").read_text().splitlines()) == 3  # fedavg and drdm were not run again
