"""`edgefl compare`: algorithms on one scenario, seeds, targets with CIs (a sweep over algorithm.name)."""

from __future__ import annotations

import csv
import math

from edgefl.cli import main
from edgefl.sweeps.compare import compare
from edgefl.target import Target
from test_cli import TINY


def test_compare_writes_a_row_per_algorithm_with_the_one_target_definition(tmp_path, capsys):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    out = tmp_path / "cmp"
    code = main(["compare", str(path), "--algorithms", "fedavg,drdm", "--seeds", "2", "--target", "loss=5",
                 "--set", "run.rounds=4", "--out", str(out), "--quiet"])
    assert code == 0
    rows = list(csv.DictReader(open(out / "compare.csv")))
    assert [r["algorithm"] for r in rows] == ["fedavg", "drdm"]
    assert float(rows[0]["energy_ratio_to_first"]) == 1.0 and rows[0]["seeds_reached"] == "2"
    assert (out / "compare.png").exists() and "rounds-to-target" in capsys.readouterr().out
    # rerunning resumes: nothing is computed again, the same table
    assert main(["compare", str(path), "--algorithms", "fedavg,drdm", "--seeds", "2", "--target", "loss=5",
                 "--set", "run.rounds=4", "--out", str(out), "--quiet"]) == 0
    assert list(csv.DictReader(open(out / "compare.csv"))) == rows


def test_compare_means_and_paired_ratios_by_hand():
    def run(name, seed, energy_per_round, reach):
        return [{"algorithm.name": name, "seed": seed, "round": r, "energy_j": r * energy_per_round,
                 "sim_time_s": r * 0.1, "acc_worst": 1.0 if r >= reach else 0.0} for r in range(1, 11)]

    rows = run("a", 0, 1.0, 3) + run("a", 1, 2.0, 3) + run("b", 0, 1.0, 6) + run("b", 1, 2.0, 6)
    a, b = compare(rows, Target("acc_worst", 0.5), window=1)
    assert a.rounds[0] == 3 and b.rounds[0] == 6
    assert a.energy_j[0] == 4.5 and b.energy_j[0] == 9.0  # (3 + 6) / 2, (6 + 12) / 2
    assert b.energy_ratio[0] == 2.0 and b.energy_ratio[1] == 0.0  # 6/3 and 12/6: paired, no spread
    assert math.isclose(a.time_s[0], 0.3)


def test_compare_rejects_an_unknown_algorithm(tmp_path, capsys):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    assert main(["compare", str(path), "--algorithms", "fedavg,fedavgg", "--out", str(tmp_path / "x"), "--quiet"]) == 2
    assert "fedavgg" in capsys.readouterr().err
