"""The energy-optimal τ: rounds- and energy-to-target, confidence intervals, eligibility, and the
property that τ* never increases as the channel gets cheaper (higher SNR, wider band).

The property follows from E(τ) = R(τ)·(τ·a + b): for τ' > τ to win at a cheaper channel b' < b
while τ wins at b, R(τ') ≥ R(τ) would be needed, and then τ' costs more at b' too. It holds
for any R(τ), monotone or not; the test feeds random learning curves through the same
function `edgefl optimal-tau` uses (edgefl.sweeps.analysis.optimal_tau).
"""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgefl.cli import main
from edgefl.errors import UserError
from edgefl.results import mark
from edgefl.sweeps.analysis import mean_ci, optimal_tau, pareto_front
from edgefl.sweeps.plan import SweepError
from edgefl.target import Target, centred_moving_average, parse_target, rounds_to_target

SNRS = [0, 10, 20, 30]
BANDWIDTHS = [0.5, 2, 10]
GRID = ["network.snr_db", "network.bandwidth_mhz", "algorithm.local_steps"]


def transmit_j_per_round(snr_db: float, bandwidth_mhz: float, scale: float) -> float:
    """b: P·M / (B·log2(1 + SNR)), decreasing in SNR and bandwidth."""
    return scale / (bandwidth_mhz * math.log2(1 + 10 ** (snr_db / 10)))


def synthetic_rows(
    reach_round: dict[tuple[int, int], int], a: float, b_scale: float, num_rounds: int, snrs=SNRS, bandwidths=BANDWIDTHS
) -> list[dict]:
    """results.csv rows for learning that reaches acc 1 at round R(τ, seed) (a step), whatever
    the channel, with E(round) = round·(τ·a + b(channel))."""
    rows = []
    for snr in snrs:
        for bw in bandwidths:
            b = transmit_j_per_round(snr, bw, b_scale)
            for (tau, seed), reach in reach_round.items():
                for r in range(1, num_rounds + 1):
                    compute, uplink = r * tau * a, r * b
                    rows.append(
                        {
                            "network.snr_db": snr,
                            "network.bandwidth_mhz": bw,
                            "algorithm.local_steps": tau,
                            "seed": seed,
                            "round": r,
                            "acc_worst": 1.0 if r >= reach else 0.0,
                            "energy_j": compute + uplink,
                            "compute_energy_j": compute,
                            "uplink_energy_j": uplink,
                            "downlink_energy_j": 0.0,
                            "idle_energy_j": 0.0,
                        }
                    )
    return rows


@settings(max_examples=40, deadline=None)
@given(
    taus=st.lists(st.integers(1, 40), min_size=2, max_size=6, unique=True),
    seeds=st.integers(1, 3),
    data=st.data(),
    a=st.floats(1e-4, 10.0),
    b_scale=st.floats(1e-3, 1e3),
    window=st.sampled_from([1, 3, 5]),
)
def test_tau_star_never_increases_as_snr_or_bandwidth_rises(taus, seeds, data, a, b_scale, window):
    num_rounds = 25
    # R(τ) per seed: anything from 1 to past the end of the run (never reached), monotone or not.
    reach = {(tau, s): data.draw(st.integers(1, num_rounds + 5)) for tau in taus for s in range(seeds)}
    rows = synthetic_rows(reach, a, b_scale, num_rounds)
    result = optimal_tau(rows, GRID, Target("acc_worst", 0.5), window=window)
    star = {c.channel: c.tau_star for c in result.per_channel}
    assert len(star) == len(SNRS) * len(BANDWIDTHS)
    for bw in BANDWIDTHS:  # along SNR at fixed bandwidth
        column = [star[(snr, bw)] for snr in SNRS]
        if column[0] is None:  # no τ reaches: the same for every channel (learning does not depend on it)
            assert all(t is None for t in column)
            continue
        assert all(x >= y for x, y in zip(column, column[1:])), column
    for snr in SNRS:  # along bandwidth at fixed SNR
        row = [star[(snr, bw)] for bw in BANDWIDTHS]
        if row[0] is not None:
            assert all(x >= y for x, y in zip(row, row[1:])), row


def test_expensive_channel_prefers_large_tau_cheap_channel_small_tau():
    # R(τ) = 48, 41, 32, 25 for τ = 5, 10, 20, 30 (DRDM paper, Figure 3).
    reach = {(5, 0): 48, (10, 0): 41, (20, 0): 32, (30, 0): 25}
    rows = synthetic_rows(reach, a=1.0, b_scale=60.0, num_rounds=60, snrs=[0, 30], bandwidths=[0.5, 10])
    result = optimal_tau(rows, GRID, Target("acc_worst", 0.5), window=1)
    star = {c.channel: c.tau_star for c in result.per_channel}
    assert star[(0, 0.5)] == 30  # b = 120 J per round against a = 1 J per step
    assert star[(30, 10)] == 5  # b ≈ 0.6 J per round


def test_energy_to_target_is_the_cumulative_energy_at_the_rounds_to_target():
    reach = {(5, 0): 10, (5, 1): 12, (5, 2): 14, (10, 0): 6, (10, 1): 7, (10, 2): 30}
    rows = synthetic_rows(reach, a=0.5, b_scale=1.0, num_rounds=20, snrs=[10], bandwidths=[1])
    result = optimal_tau(rows, GRID, Target("acc_worst", 0.5), window=1)
    (channel,) = result.per_channel
    by_tau = {s.tau: s for s in channel.candidates}
    b = transmit_j_per_round(10, 1, 1.0)
    assert by_tau[5].rounds_mean == 12
    # t-interval, 3 seeds: t(0.975, 2) = 4.303, sd of (10, 12, 14) = 2
    assert by_tau[5].rounds_ci == pytest.approx(4.302653 * 2 / math.sqrt(3), rel=1e-5)
    assert by_tau[5].energy_mean == pytest.approx(12 * (5 * 0.5 + b))
    assert by_tau[5].compute_mean == pytest.approx(12 * 5 * 0.5)
    assert by_tau[5].transmit_mean == pytest.approx(12 * b)
    # seed 2 never reaches with τ = 10 (round 30 > 20 rounds): reported, and τ = 10 is not eligible
    assert by_tau[10].never_reached == [2] and not by_tau[10].eligible
    assert "never reached by seed(s) 2" in by_tau[10].status
    assert by_tau[10].rounds_mean == 6.5  # over the seeds that reached it
    assert channel.tau_star == 5


def test_rows_in_any_order_give_the_same_outcomes():
    # results.csv holds each run's rows in round order (read as they are); rows in another order are sorted first
    reach = {(5, 0): 10, (5, 1): 12, (10, 0): 6, (10, 1): 7}
    rows = synthetic_rows(reach, a=0.5, b_scale=1.0, num_rounds=20, snrs=[10], bandwidths=[1])
    shuffled = [rows[i] for i in np.random.default_rng(0).permutation(len(rows))]
    ordered, mixed = (optimal_tau(r, GRID, Target("acc_worst", 0.5), window=3) for r in (rows, shuffled))
    assert sorted((s.tau, s.rounds_mean, s.energy_mean) for s in mixed.per_tau) == sorted(
        (s.tau, s.rounds_mean, s.energy_mean) for s in ordered.per_tau
    )
    assert {s.tau: s.rounds_mean for s in ordered.per_tau} == {5: 11, 10: 6.5}


def test_no_eligible_tau_is_reported_as_never_reached():
    rows = synthetic_rows({(5, 0): 99, (10, 0): 99}, 1.0, 1.0, 10, snrs=[0], bandwidths=[1])
    (channel,) = optimal_tau(rows, GRID, Target("acc_worst", 0.5)).per_channel
    assert channel.tau_star is None and channel.status.startswith("never reached")


def test_centred_moving_average_and_first_rounds_to_target():
    assert centred_moving_average([0, 0, 1, 1, 1], 3).tolist() == pytest.approx([0, 1 / 3, 2 / 3, 1, 1])
    assert centred_moving_average([1, 2, 3, 4], 1).tolist() == [1, 2, 3, 4]
    # one lucky round (0.9 at round 3) does not count with a window of 5, it does with 1
    rounds = list(range(1, 11))
    acc = [0.1, 0.2, 0.9, 0.3, 0.4, 0.8, 0.85, 0.85, 0.9, 0.9]
    target = Target("acc_worst", 0.8)
    assert rounds_to_target(rounds, acc, target, 1) == 3
    assert rounds_to_target(rounds, acc, target, 5) == 8  # rounds 6..10 average 0.86
    assert rounds_to_target(rounds, acc, target) == 8  # the default window is 5
    # rounds without an evaluation (None or NaN) are skipped; a loss target is reached from above
    assert rounds_to_target([1, 2, 3, 4], [None, 0.9, None, 0.2], Target("loss", 0.5), 1) == 4
    assert rounds_to_target([1, 2, 3, 4], [math.nan, 0.9, math.nan, 0.2], Target("loss", 0.5), 1) == 4
    assert rounds_to_target([1, 2], [0.1, 0.2], target, 5) is None
    # never before a measured evaluation reached it (issue 19): evaluated every 2 rounds, the centred average
    # at round 2 (0.751, 0.85, 0.86: 0.820) is above 0.8, the measured 0.751 is not
    assert centred_moving_average([0.751, 0.85, 0.86, 0.9], 5)[0] == pytest.approx(0.820333, abs=1e-6)
    assert rounds_to_target([2, 4, 6, 8], [0.751, 0.85, 0.86, 0.9], target, 5) == 4
    # nor before the average does: a lucky evaluation above the target whose average is below it
    assert rounds_to_target([2, 4, 6, 8], [0.5, 0.81, 0.6, 0.9], target, 5) is None


def test_mean_ci_and_pareto_front():
    mean, half = mean_ci([1.0, 2.0, 3.0, 4.0])
    assert mean == 2.5 and half == pytest.approx(3.182446 * math.sqrt(5 / 3) / 2, rel=1e-6)
    assert math.isnan(mean_ci([3.0])[1])
    # (rounds, energy): (1, 9) (2, 5) (3, 6) (4, 1) (5, 1): front = 0, 1, 3
    assert pareto_front([(1, 9), (2, 5), (3, 6), (4, 1), (5, 1)]) == [0, 1, 3]


def test_t_intervals_and_p_values_are_scipy_stats_numbers():
    """mean_ci and paired_log_ratio use scipy.special's t functions (scipy.stats loads 3x slower): scipy.stats.t's
    own numbers, bit for bit."""
    from scipy import stats

    from edgefl.sweeps.analysis import paired_log_ratio

    rng = np.random.default_rng(0)
    for n in (2, 3, 5, 10, 30):
        x = rng.lognormal(size=n)
        for confidence in (0.8, 0.95, 0.99):
            half = stats.t.ppf(0.5 + confidence / 2, n - 1) * x.std(ddof=1) / math.sqrt(n)
            assert mean_ci(x, confidence)[1] == half
        energy, reference = dict(enumerate(x)), dict(enumerate(rng.lognormal(size=n)))
        d = np.log(x / np.array([reference[s] for s in range(n)]))
        statistic = abs(d.mean()) / (d.std(ddof=1) / math.sqrt(n))
        assert paired_log_ratio(energy, reference, 0.95)[2] == float(2 * stats.t.sf(statistic, n - 1))


@pytest.mark.parametrize("text", ["acc_worst", "acc_worst=", "=0.8", "acc_worst=high", "acc_worst=nan"])
def test_bad_target_is_a_user_error(text):
    with pytest.raises(UserError, match="--target"):
        parse_target(text)


def test_missing_tau_in_grid_is_a_user_error():
    rows = synthetic_rows({(5, 0): 3}, 1.0, 1.0, 5, snrs=[0], bandwidths=[1])
    with pytest.raises(SweepError, match="algorithm.local_steps"):
        optimal_tau(rows, ["network.snr_db", "network.bandwidth_mhz"], Target("acc_worst", 0.5))


def write_fake_sweep(directory, rows, grid_keys):
    directory.mkdir()
    mark(directory, "sweep")  # as `edgefl sweep` does: plot may add its figures to the folder
    points = {(tuple(r[k] for k in grid_keys), r["seed"]) for r in rows}
    manifest = {
        "format": 1,
        "definition": {"grid": [[k, sorted({r[k] for r in rows})] for k in grid_keys]},
        "points": [{"values": dict(zip(grid_keys, values)), "seed": seed} for values, seed in sorted(points)],
    }
    (directory / "sweep.json").write_text(json.dumps(manifest))
    header = list(rows[0])
    with open(directory / "results.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows([r[k] for k in header] for r in rows)


def run_cli(capsys, *args):
    """`edgefl ARGS` in this process: (exit code, stdout, stderr)."""
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_optimal_tau_and_plot_write_tables_and_figures(tmp_path, capsys):
    reach = {(5, 0): 30, (10, 0): 22, (20, 0): 15, (30, 0): 12, (5, 1): 32, (10, 1): 24, (20, 1): 16, (30, 1): 13}
    rows = synthetic_rows(reach, a=1.0, b_scale=40.0, num_rounds=40, snrs=[0, 10, 20], bandwidths=[0.5, 2, 10])
    sweep = tmp_path / "sweep"
    write_fake_sweep(sweep, rows, GRID)
    code, out, err = run_cli(capsys, "optimal-tau", str(sweep), "--target", "acc_worst=0.5", "--window", "3")
    assert code == 0, err
    assert "centred moving average over 3 evaluations" in out and "SNR\\BW" in out
    analysis = sweep / "optimal-tau_acc_worst=0.5_w3"  # named by the target (and the window: not the default)
    for name in (
        "optimal_tau.csv",
        "tau_energy.csv",
        "optimal_tau.txt",
        "tau-heatmap.png",
        "tau-energy-curves.png",
        "tau-energy-split.png",
    ):
        assert (analysis / name).stat().st_size > 0, name
    with open(analysis / "optimal_tau.csv") as handle:
        table = list(csv.DictReader(handle))
    assert len(table) == 9
    star = {(float(r["network.snr_db"]), float(r["network.bandwidth_mhz"])): int(r["tau_star"]) for r in table}
    assert star[(0, 0.5)] == 30 and star[(20, 10)] == 5
    # the set of τ not significantly worse than τ*: in both tables and in the printed report
    sets = {(float(r["network.snr_db"]), float(r["network.bandwidth_mhz"])): r["tau_set"] for r in table}
    assert all(
        str(star[k]) in sets[k]
        or any(int(lo) <= star[k] <= int(hi) for lo, hi in (p.split("-") for p in sets[k].split(",") if "-" in p))
        for k in sets
    )
    assert "τ set (not significantly worse than τ*, paired, 95%)" in out
    with open(analysis / "tau_energy.csv") as handle:
        per_tau = list(csv.DictReader(handle))
    assert {"within_ci", "log_ratio_to_optimal", "log_ratio_ci95", "paired_p_value"} <= set(per_tau[0])
    for r in per_tau:
        if r["is_optimal"] == "True":
            assert r["within_ci"] == "True" and float(r["log_ratio_to_optimal"]) == 0.0
    code, out, err = run_cli(capsys, "plot", str(sweep), "--target", "acc_worst=0.5", "--window", "3")
    assert code == 0, err
    assert (sweep / "tau-accuracy-energy.png").stat().st_size > 0 and (analysis / "tau-pareto.png").stat().st_size > 0
    # a second target does not overwrite the first
    before = (analysis / "optimal_tau.csv").read_bytes()
    code, out, err = run_cli(capsys, "optimal-tau", str(sweep), "--target", "acc_worst=0.6")
    assert code == 0, err
    assert (sweep / "optimal-tau_acc_worst=0.6" / "optimal_tau.csv").exists()
    assert (analysis / "optimal_tau.csv").read_bytes() == before


def test_cli_optimal_tau_user_errors_exit_2_without_traceback(tmp_path, capsys):
    rows = synthetic_rows({(5, 0): 3}, 1.0, 1.0, 5, snrs=[0], bandwidths=[1])
    sweep = tmp_path / "sweep"
    write_fake_sweep(sweep, rows, GRID)
    for args in (
        ["optimal-tau", str(sweep), "--target", "acc_wrst=0.8"],
        ["optimal-tau", str(tmp_path / "nowhere"), "--target", "acc_worst=0.8"],
        ["optimal-tau", str(sweep), "--target", "acc_worst=0.8", "--window", "0"],
        ["plot", str(sweep), "--metric", "nope"],
        ["plot", str(sweep), "--at", "network.fading=none"],
    ):
        code, _, err = run_cli(capsys, *args)
        assert code == 2, (args, err)
        assert err.startswith("edgefl: error:") and "Traceback" not in err
    assert not list(sweep.glob("optimal-tau*")) and not (sweep / "optimal_tau.csv").exists()


# -- the set of τ not significantly worse than τ* ---------------------------------------------------------
def energies_rows(energy: dict[tuple[int, int], float]) -> list[dict]:
    """One channel point; every (τ, seed) reaches the target at round 1 with the given energy."""
    return [
        {
            "network.snr_db": 0,
            "network.bandwidth_mhz": 1,
            "algorithm.local_steps": tau,
            "seed": seed,
            "round": 1,
            "acc_worst": 1.0,
            "energy_j": e,
            "compute_energy_j": e / 2,
            "uplink_energy_j": e / 2,
            "downlink_energy_j": 0.0,
            "idle_energy_j": 0.0,
        }
        for (tau, seed), e in energy.items()
    ]


def test_tau_set_holds_tau_star_and_the_taus_the_seeds_cannot_tell_apart():
    import numpy as np

    seed_effect = np.random.default_rng(0).uniform(0.5, 2.0, 10)  # the seeds differ a lot; pairing removes it
    wobble = [0.1, -0.1] * 5  # ln-ratio of each seed: mean 0, not significant
    energy = {}
    for seed in range(10):
        energy[(5, seed)] = seed_effect[seed]  # τ*
        energy[(10, seed)] = seed_effect[seed] * math.exp(0.002 + wobble[seed])  # as good, within the noise
        energy[(15, seed)] = seed_effect[seed] * 1.5 * math.exp(wobble[seed] / 10)  # worse on every seed
    (channel,) = optimal_tau(energies_rows(energy), GRID, Target("acc_worst", 0.5), window=1).per_channel
    assert channel.tau_star == 5 and channel.tau_set == [5, 10]
    mean, half, p = channel.paired[15]
    assert mean == pytest.approx(math.log(1.5)) and mean - half > 0 and p < 1e-6
    mean, half, p = channel.paired[10]
    assert mean == pytest.approx(0.002) and mean - half < 0 < mean + half and p > 0.5
    # unpaired, the seed effect (0.5-2x) hides even the 50 % difference
    by_tau = {s.tau: s for s in channel.candidates}
    assert by_tau[15].energy_mean - by_tau[15].energy_ci < by_tau[5].energy_mean + by_tau[5].energy_ci


def test_a_tau_that_misses_the_target_on_a_seed_is_not_in_the_set_and_one_seed_cannot_tell():
    energy = {(5, s): 1.0 + s for s in range(3)} | {(10, s): 1.1 + s for s in range(3)}
    rows = energies_rows(energy)
    rows = [r if not (r["algorithm.local_steps"] == 10 and r["seed"] == 2) else {**r, "acc_worst": 0.0} for r in rows]
    (channel,) = optimal_tau(rows, GRID, Target("acc_worst", 0.5), window=1).per_channel
    assert channel.tau_set == [5]  # τ = 10 missed the target with seed 2: not eligible
    single = energies_rows({(5, 0): 1.0, (10, 0): 3.0})
    (channel,) = optimal_tau(single, GRID, Target("acc_worst", 0.5), window=1).per_channel
    assert channel.tau_star == 5 and channel.tau_set == [5, 10]  # one seed: nothing is significant


def test_tau_set_labels_join_neighbours_in_the_grid():
    from edgefl.sweeps.analysis import tau_set_label

    grid = [5, 10, 15, 20, 25, 30]
    assert tau_set_label([10, 15], grid) == "10-15"
    assert tau_set_label([5, 15, 20], grid) == "5,15-20"
    assert tau_set_label([30], grid) == "30"
    assert tau_set_label([5, 10, 15, 20, 25, 30], grid) == "5-30"


def test_heatmap_axes_are_whichever_two_channel_keys_the_grid_has():
    from edgefl.sweeps.plots import heatmap_axes

    snr_bw = [(s, b) for s in (0, 10) for b in (1, 2)]
    assert heatmap_axes(["network.snr_db", "network.bandwidth_mhz"], snr_bw) == (
        "network.snr_db",
        "network.bandwidth_mhz",
    )
    # a link budget: transmit power and distance, bandwidth across
    keys = ["devices.tx_power_dbm", "network.distance_m", "network.bandwidth_mhz"]
    assert heatmap_axes(keys, [(p, d, b) for p in (10, 23) for d in (100, 300) for b in (1, 5)]) == (
        "devices.tx_power_dbm",
        "network.bandwidth_mhz",
    )
    assert heatmap_axes(keys, [(23, d, b) for d in (100, 300) for b in (1, 5)]) == (  # one power: not an axis
        "network.distance_m",
        "network.bandwidth_mhz",
    )
    assert heatmap_axes(["network.distance_m", "algorithm.name"], [(d, a) for d in (1, 2) for a in "ab"]) is None


@pytest.mark.parametrize("lo, hi", [(0.00105, 0.00128), (0.0011, 0.004), (0.002, 0.03), (0.001, 1000.0), (3.0, 3.3)])
def test_log_ticks_are_at_least_three_inside_the_range(lo, hi):
    from edgefl.sweeps.plots import log_ticks

    ticks = log_ticks(lo, hi)
    assert len(ticks) >= 3 and all(lo <= t <= hi for t in ticks) and ticks == sorted(set(ticks))
    assert len(ticks) <= 12  # readable: powers of ten over many decades, not every 1..9


def test_optimal_tau_draws_the_heatmap_of_a_link_budget_sweep(tmp_path, capsys):
    reach = {(5, 0): 30, (10, 0): 22, (20, 0): 15, (5, 1): 32, (10, 1): 24, (20, 1): 16}
    rows = synthetic_rows(reach, a=1.0, b_scale=40.0, num_rounds=40, snrs=[0, 10, 20], bandwidths=[0.5, 2, 5, 10])
    for r in rows:  # the same numbers, as a link budget's grid: distance instead of SNR
        r["network.distance_m"] = {0: 1000, 10: 300, 20: 100}[r.pop("network.snr_db")]
    grid = ["network.distance_m", "network.bandwidth_mhz", "algorithm.local_steps"]
    sweep = tmp_path / "sweep"
    write_fake_sweep(sweep, [{k: r[k] for k in [*grid, *[k for k in r if k not in grid]]} for r in rows], grid)
    code, out, err = run_cli(capsys, "optimal-tau", str(sweep), "--target", "acc_worst=0.5")
    assert code == 0, err
    assert "no heatmap" not in out and (sweep / "optimal-tau_acc_worst=0.5" / "tau-heatmap.png").stat().st_size > 0


def test_plot_draws_the_metric_its_target_names(tmp_path, capsys, monkeypatch):
    """`edgefl plot --target acc_mean=...` draws acc_mean (it drew acc_worst, the --metric default, before)."""
    import edgefl.sweeps.plots as plots

    reach = {(5, 0): 30, (10, 0): 22, (20, 0): 15, (30, 0): 12, (5, 1): 32, (10, 1): 24, (20, 1): 16, (30, 1): 13}
    rows = synthetic_rows(reach, a=1.0, b_scale=40.0, num_rounds=40, snrs=[0, 10, 20], bandwidths=[0.5, 2, 10])
    rows = [{**r, "acc_mean": r["acc_worst"]} for r in rows]
    sweep = tmp_path / "sweep"
    write_fake_sweep(sweep, rows, GRID)
    drawn = []
    monkeypatch.setattr(plots, "plot_accuracy_energy", lambda rows, keys, metric, path, panels: drawn.append(metric))
    monkeypatch.setattr(plots, "plot_pareto", lambda result, path, panels, algorithm=None: path)
    for args, metric in (
        (["--target", "acc_mean=0.5"], "acc_mean"),
        ([], "acc_worst"),
        (["--target", "acc_mean=0.5", "--metric", "acc_worst"], "acc_worst"),
    ):
        code, out, err = run_cli(capsys, "plot", str(sweep), *args)
        assert code == 0, err
        assert drawn[-1] == metric, (args, drawn)


def test_a_results_cell_reads_back_as_the_number_or_text_it_was():
    """results.csv's cells (edgefl.sweeps.analysis._value, parsed as a float first for speed): integer literals are
    ints, other numbers floats, anything else its text; an empty cell None."""
    from edgefl.sweeps.analysis import _value

    cases = {"15": 15, "-0": 0, " 7 ": 7, "1_000": 1000, "15.0": 15.0, "1e3": 1000.0, "1E-3": 0.001, "0.5": 0.5}
    for text, expected in cases.items():
        assert _value(text) == expected and type(_value(text)) is type(expected), text
    assert math.isinf(_value("inf")) and math.isnan(_value("nan")) and type(_value("-inf")) is float
    assert [_value(t) for t in ("", "repriced", "0x1", "True")] == [None, "repriced", "0x1", "True"]


def test_the_quick_reading_of_results_csv_gives_the_line_by_line_rows_or_leaves_the_file_to_it(tmp_path, monkeypatch):
    """read_sweep reads results.csv a column at a time (edgefl.sweeps.folder._quick_table): the same cells, parsed to
    the same values and types, as the line-by-line reading; with ``metrics``, only the columns the analyses read. A
    file it cannot tell is sound (quotes, a number that may not be finite, a line of another length, ...) goes to the
    line-by-line reading, which says what is wrong."""
    from edgefl.sweeps import folder

    reach = {(5, 0): 3, (10, 0): 2, (5, 1): 4, (10, 1): 3}
    rows = synthetic_rows(reach, a=1.0, b_scale=4.0, num_rounds=12, snrs=[0, 10], bandwidths=[0.5, 2])
    for k, r in enumerate(rows):  # cells of every kind: ints, floats, empty, text, few values and many
        r.update(acc_mean=None if k % 5 == 0 else k / 7, uploads=k, committed_energy_j=float(k), mode="repriced")
    sweep = tmp_path / "sweep"
    write_fake_sweep(sweep, rows, GRID)
    text = (sweep / "results.csv").read_text()  # (csv's \r\n line ends made \n, as edgefl writes results.csv)
    (sweep / "results.csv").write_text(text)
    keys, header, quick = folder.read_sweep(sweep)
    _, _, some = folder.read_sweep(sweep, metrics=["acc_mean"])
    assert folder._quick_table((sweep / "results.csv").read_text(), [*keys, "seed", "round"], None) is not None
    monkeypatch.setattr(folder, "_quick_table", lambda *args: None)
    _, _, slow = folder.read_sweep(sweep)

    def typed(table):
        return [[(k, type(v), v) for k, v in row.items()] for row in table]

    assert typed(quick) == typed(slow) and quick[5]["acc_mean"] is None and type(quick[1]["uploads"]) is int
    names = [*GRID, "seed", "round", "energy_j", "compute_energy_j", "uplink_energy_j", "downlink_energy_j"]
    names += ["idle_energy_j", "acc_mean", "committed_energy_j", "mode"]
    assert typed(some) == typed([{k: r[k] for k in header if k in names} for r in slow])
    monkeypatch.undo()

    lines = text.splitlines(keepends=True)
    needed = [*GRID, "seed", "round"]
    for changed, error in (
        (lines[0] + lines[1].replace(",repriced", ',"repriced"') + "".join(lines[2:]), None),  # quoted: the same
        (text.replace("\n", "\r\n"), None),  # csv's own line ends: the same rows
        (text.replace("0.5,5,0,2,", "0.5,5,0,2.0,", 1), "seed and round must be integers"),
        (lines[0] + lines[1].replace(",5,", ",5,,", 1) + "".join(lines[2:]), "line 2 has"),
        (text.replace(",repriced", ",nan", 1), "column mode: nan is not a finite number"),
        (text.replace(",repriced", ",1e400", 1), "column mode: inf is not a finite number"),
        (text.replace(",repriced", ",9" + "0" * 320 + ".5", 1), "column mode: inf is not a finite number"),
        (text.replace(",repriced", ",NaN", 1), "column mode: nan is not a finite number"),
    ):
        assert folder._quick_table(changed, needed, None) is None
        (sweep / "results.csv").write_text(changed)
        if error is None:
            assert typed(folder.read_sweep(sweep)[2]) == typed(slow)
        else:
            with pytest.raises(SweepError, match=error):
                folder.read_sweep(sweep)
