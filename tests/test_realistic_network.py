"""docs/realistic-network.md (experiments/realistic_network.py): the page is exactly what its runs
give, and the table code (seeds that never reach the target, tau*, ties) on a synthetic input."""

import math
from pathlib import Path

from conftest import load_experiment

REPO = Path(__file__).resolve().parents[1]


def experiment():
    return load_experiment("realistic_network")


def test_the_page_is_rendered_from_its_runs():
    mod = experiment()
    runs = mod.read_runs(mod.DATA)
    assert len(runs) == len(mod.CONFIGURATIONS) * len(mod.TAUS) * len(mod.SEEDS)
    page = mod.render(
        mod.summarise(runs),
        runs,
        2,
        (REPO / "experiments" / "realistic_network_why.md").read_text(),
        mod.provenance.read(mod.PRODUCED),
    )
    assert page == mod.PAGE.read_text()  # no hand edits: regenerate with --from-data
    assert mod.FIGURE.is_file()


def test_outcome_uses_only_evaluated_rounds():
    mod = experiment()
    # Evaluated every 2 rounds; the centred 5-evaluation average first reaches 0.85 at round 6
    # ((0.7 + 0.8 + 0.9 + 0.9 + 0.95) / 5 = 0.85); odd rounds carry no accuracy.
    accs = [0.7, 0.8, 0.9, 0.9, 0.95, 0.95]
    rows = []
    for r in range(1, 13):
        rows.append(
            {
                "round": r,
                "sim_time_s": 0.5 * r,
                "energy_j": 10.0 * r,
                "acc_mean": accs[r // 2 - 1] if r % 2 == 0 else None,
            }
        )
    assert mod.outcome(rows) == (60.0, 3.0, 6, 60.0)  # (committed: booked in rows without it; booked)
    for row in rows:
        row["committed_energy_j"] = row["energy_j"] + 100.0
    assert mod.outcome(rows) == (160.0, 3.0, 6, 60.0)
    assert mod.outcome([{**row, "acc_mean": 0.5 if row["acc_mean"] else None} for row in rows]) is None


def test_table_never_reached_tau_star_and_ties():
    mod = experiment()
    runs = []
    for name, _, _ in mod.CONFIGURATIONS:
        for tau in mod.TAUS:
            for seed in mod.SEEDS:
                energy = 100.0 / tau + 5.0 * seed  # the largest tau is cheapest...
                never = name == "baseline" and tau == mod.TAUS[-1] and seed == 0  # ...but one seed misses
                runs.append(
                    {
                        "config": name,
                        "tau": tau,
                        "seed": seed,
                        "energy_j": None if never else energy,
                        "sim_time_s": None if never else 1.0,
                        "rounds": None if never else 10,
                        "wall_s": 1.0,
                        "stopped": None,
                    }
                )
    summary = mod.summarise(runs)
    n = len(mod.SEEDS)
    last, second = mod.TAUS[-1], mod.TAUS[-2]
    assert summary["table"][("baseline", last)]["reached"] == n - 1
    assert summary["optimum"]["baseline"] == second  # tau every seed reaches
    assert summary["optimum"]["no-tail"] == last
    mean, half = summary["table"][("no-tail", last)]["energy"]
    seeds = [100.0 / last + 5.0 * s for s in mod.SEEDS]
    assert math.isclose(mean, sum(seeds) / n)
    assert half > abs(100.0 / second - 100.0 / last)  # seed spread hides the tau=10/20 gap
    assert summary["ties"]["no-tail"] == [second] and summary["ties"]["baseline"] == []
    assert mod.fmt(summary["table"][("baseline", last)], "energy", 1).endswith(f"({n - 1}/{n})")
    page = mod.render(
        summary, runs, 2, "why", {"commit": "abc1234", "command": "cmd", "date": "2026-01-01", "wall_s": 90}
    )
    assert page.splitlines()[2] == (
        "*Produced at commit abc1234 by `cmd` (2026-01-01, 1.5 min of wall time on a "
        "2-core machine shared with other jobs).*"
    )
    assert f"| {last} (tie: {second}) |" in page  # no-tail's first row
