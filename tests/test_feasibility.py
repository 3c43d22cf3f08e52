"""Derived quantities checked once before a run (issue 13, item 1): a rate that delivers nothing, an absurd
round time or energy, a trace with fewer than m devices: exit 2 naming the keys, nothing written; a deadline
that cuts everything: a warning. Every committed scenario passes (edgefl/feasibility.py)."""

from __future__ import annotations

import itertools
import logging
import math
import tomllib
from pathlib import Path

import pytest

from edgefl.cli import main
from edgefl.errors import UserError
from edgefl.feasibility import MAX_ROUND_J, MAX_ROUND_S, Keys, check_feasible, markov_wait_s
from edgefl.models import build_model
from edgefl.parts import parts_of
from edgefl.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "scenarios" / "quickstart.toml"  # configured SNR, mcs over Rayleigh, no deadline
PHONES = ROOT / "scenarios" / "phones-in-a-cell.toml"  # link budget in a cell, device classes, deadline
IMAGE_DATA = ("mnist", "fashion_mnist", "kmnist")


def parts(path, overrides=None):
    """(the run's parts, the sections the messages name) as Simulation builds them, without the data (never read)."""
    s = load_scenario(path, overrides)
    shape, classes = s.data.layout()
    model = build_model(s.model.name, shape, classes, s.run.seed, hidden=s.model.hidden)
    return parts_of(s, None, model), Keys(s.network, s.devices, s.model, s.backhaul)


def run(base, sets, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["run", str(base), "--out", str(out), "--no-plots", "--quiet", "--set", "run.rounds=1"]
    for text in sets:
        argv += ["--set", text]
    code = main(argv)
    return code, capsys.readouterr().err, out


# -- named cases: exit 2, the keys named, nothing written ----------------------------------------------
@pytest.mark.parametrize(
    "base, sets, expected",
    [
        pytest.param(
            QUICKSTART,
            [
                "network.snr_db=-50",
                "network.bandwidth_mhz=0.001",
                'network.fading="none"',
                'network.rate="shannon"',
                'model.name="mlp"',
                "model.hidden=2000",
                "network.downlink_snr_db=20",
            ],
            [
                "nominal round of device",
                "its upload takes",
                "more than 1e+07 s",
                "network.snr_db = -50",
                "network.bandwidth_mhz = 0.001",
                "model.name = 'mlp'",
                "raise network.bandwidth_mhz or the SNR",
                "network.deadline_s",
            ],
            id="upload_of_years_at_-50dB_over_1kHz",
        ),
        pytest.param(
            QUICKSTART,
            ["devices.cpu_ghz=1e-5", "algorithm.local_steps=100000", "algorithm.batch_size=1000"],
            [
                "its compute takes",
                "algorithm.local_steps = 100000",
                "algorithm.batch_size = 1000",
                "devices.cpu_ghz = 1e-05",
                "devices.cycles_per_sample = 20000",
                "raise devices.cpu_ghz",
            ],
            id="centuries_of_compute_on_a_10kHz_cpu",
        ),
        pytest.param(
            QUICKSTART,
            ["network.snr_db=-50"],
            [
                "no upload can be expected to arrive",
                "at most -50 dB",
                "lowest entry of the MCS table (-6.7 dB",
                "Rayleigh",
                "network.snr_db = -50",
                "network.rate = 'mcs'",
                "raise the SNR (network.snr_db)",
            ],
            id="mcs_outage_under_rayleigh_at_-50dB",
        ),
        pytest.param(
            QUICKSTART,
            ['network.fading="none"', "network.outage_snr_db=30"],
            [
                "no upload can be expected to arrive",
                "without fading",
                "network.outage_snr_db = 30",
                "network.snr_db = 20",
            ],
            id="no_fading_below_the_packet_error_threshold",
        ),
        pytest.param(
            QUICKSTART,
            ["devices.cpu_ghz=100", "devices.kappa=1e-20", "algorithm.local_steps=100"],
            [
                "costs",
                "more than 1e+09 J",
                "its compute costs",
                "devices.cpu_ghz = 100",
                "devices.kappa = 1e-20",
                "lower devices.kappa",
            ],
            id="a_round_costing_more_than_the_largest_battery",
        ),
        pytest.param(
            PHONES,
            ["network.cell_radius_m=100000"],
            [
                "no upload can be expected to arrive",
                "network.cell_radius_m = 100000",
                "devices.tx_power_dbm = 23",
                "network.path_loss = 'log_distance'",
                "a shorter network.distance_m or network.cell_radius_m",
            ],
            id="phones_in_a_100km_cell",
        ),
        pytest.param(
            PHONES,
            ["devices.cpu_ghz=100", "devices.kappa=1e-20"],
            ["costs", "more than 1e+09 J", "its compute costs", "devices.cpu_ghz = 100", "devices.kappa = 1e-20"],
            id="phones_energy_counted_until_the_deadline",
        ),
        # Issue 28 item 7: a run in which no message can finish within the deadline even at the best rate (it
        # trained on, every chain cut, with a warning only at the end)
        pytest.param(
            QUICKSTART,
            ["network.deadline_s=0.0001"],
            [
                "no download can finish within network.deadline_s = 0.0001 s, even at the best rate",
                "a model of 1.952e+04 bits (model.name = 'linear': d = 610 parameters x network.bits_per_param = 32",
                "at 5.555e+06 bit/s, the best rate of any device",
                "rayleigh draw exceeds with probability 1e-06",
                "network.bandwidth_mhz = 1",
                "raise network.deadline_s to at least 0.00351",
            ],
            id="no_download_within_the_deadline",
        ),
        pytest.param(
            PHONES,
            ["network.deadline_s=0.008"],  # a download takes 5.7 ms at the best rate, an upload (16QAM cap) 13 ms
            [
                "no upload can finish within network.deadline_s = 0.008 s",
                "a model of 2.52e+05 bits",
                "network.header_bits = 800",
                "network.uplink_max_bits_per_hz = 2.41",
                "bit/s",
            ],
            id="no_upload_within_the_deadline",
        ),
        pytest.param(
            QUICKSTART,
            [
                "network.deadline_s=0.0001",
                'network.uplink="aircomp"',
                "network.downlink_bandwidth_mhz=1000",
                'algorithm.fedavg.weighting="uniform"',
            ],
            [
                "no upload can finish within network.deadline_s = 0.0001 s: over the air a model of 610 values",
                "0.00061 s",
            ],
            id="no_aircomp_slot_within_the_deadline",
        ),
        # Issue 33 item 2: what ran on past any limit (no output) is refused before the run
        pytest.param(
            PHONES,
            ["network.cells=7", "algorithm.name=hierfavg", "backhaul.rate_mbps=1e-300"],
            [
                "the backhaul's exchange with the cloud takes 5.04e+299 s of simulated time a round",
                "backhaul.rate_mbps = 1e-300",
                "backhaul.latency_ms = 10",
                "2.52e+05 bits",
            ],
            id="a_backhaul_so_slow_a_round_takes_years",
        ),
        pytest.param(
            PHONES,
            ["selection.name=oort", "devices.mean_on_s=1", "devices.mean_off_s=1000"],
            [
                'devices.availability = "markov" with devices.mean_on_s = 1 and devices.mean_off_s = 1000',
                "online 0.0999 % of the time",
                "algorithm.clients_per_round = 10 are online at once only every 1.02e+19 s",
                "lower algorithm.clients_per_round (to 1 or less)",
            ],
            id="oort_with_markov_availability_mostly_off",
        ),
        pytest.param(
            PHONES,
            ["network.cells=7", "network.inter_site_m=1"],
            ["network.inter_site_m = 1 puts the base stations closer than twice network.min_distance_m = 35"],
            id="seven_cells_1m_apart",
        ),
        pytest.param(
            PHONES,
            ["algorithm.name=hierfavg", "algorithm.hierfavg.edge_rounds=10000"],
            ["algorithm.hierfavg.edge_rounds: Input should be less than or equal to 1000"],
            id="ten_thousand_edge_rounds",
        ),
        pytest.param(
            PHONES,
            ["algorithm.name=hierfavg", "algorithm.hierfavg.edge_rounds=1000", "run.rounds=1001"],
            ["run.rounds = 1001 x algorithm.hierfavg.edge_rounds = 1000 is 1,001,000 training phases"],
            id="a_million_edge_rounds",
        ),
        # issue 33 item 4: a setting under which the model can never change (it ran, silently, without an update)
        pytest.param(
            PHONES,
            ["algorithm.name=fedbuff", "algorithm.fedbuff.buffer_size=100000", "devices.harvest_w=0"],
            [
                "algorithm.fedbuff.buffer_size = 100000 uploads per server update",
                "pay for at most 43299 chains in the whole run",
                "the model would never change",
            ],
            id="a_fedbuff_buffer_no_battery_can_fill",
        ),
    ],
)
def test_infeasible_runs_are_exit_2_naming_the_keys(base, sets, expected, tmp_path, capsys):
    code, err, out = run(base, sets, tmp_path, capsys)
    assert code == 2 and err.startswith("edgefl: error:"), err
    for text in expected:
        assert text in err, (text, err)
    assert "Traceback" not in err and not out.exists()


def test_a_trace_with_fewer_devices_than_m_is_exit_2(tmp_path, capsys):
    trace = tmp_path / "trace.csv"
    trace.write_text("client,start_s,end_s\n0,0,100\n1,0,100\n2,50,200\n2,300,400\n")
    code, err, out = run(
        QUICKSTART, ['devices.availability="trace"', f"devices.availability_trace={trace}"], tmp_path, capsys
    )
    assert code == 2, err
    assert "lists 3 device(s)" in err and "algorithm.clients_per_round = 10" in err and "trace.csv" in err, err
    assert not out.exists()


def test_a_sweep_refused_before_its_first_point_leaves_nothing_behind(tmp_path, capsys):
    """Issue 33: a sweep refused for "no upload can arrive" left its results folder (sweep.json, points/, the lock
    and the marker)."""
    out = tmp_path / "sweep"
    argv = ["sweep", str(QUICKSTART), "--out", str(out), "--quiet", "--grid", "algorithm.local_steps=1,2"]
    code = main([*argv, "--set", "run.rounds=1", "--set", "network.snr_db=-50"])
    err = capsys.readouterr().err
    assert code == 2 and "no upload can be expected to arrive" in err, err
    assert not out.exists()


# -- warnings: the run goes on ------------------------------------------------------------------------
def test_a_deadline_that_cuts_everything_is_a_warning_and_the_run_goes_on(tmp_path, capsys):
    # the messages fit (a download takes 3.5 ms at the best rate), the compute on a 100 kHz CPU does not
    code, err, out = run(QUICKSTART, ["network.deadline_s=0.01", "devices.cpu_ghz=0.0001"], tmp_path, capsys)
    assert code == 0, err
    assert "edgefl: warning: network.deadline_s = 0.01 is shorter than every device's nominal phase" in err, err
    assert "expect every upload to be cut" in err
    assert (out / "metrics.csv").exists()


def test_cells_that_serve_no_device_are_named_in_a_warning(tmp_path, capsys):
    """Issue 28 item 7: 19 cells and 12 devices: cells with nobody in them, silently."""
    sets = ["network.cells=19", "data.num_clients=12", "algorithm.clients_per_round=3", "devices.speed_mps=0"]
    code, err, out = run(PHONES, sets, tmp_path, capsys)
    assert code == 0, err
    assert "of network.cells = 19 serve no device as dropped (cells " in err, err
    clients = (out / "clients.csv").read_text().splitlines()
    header = clients[0].split(",")
    served = {int(line.split(",")[header.index("cell")]) for line in clients[1:]}
    named = err.split("(cells ")[1].split(";")[0]
    assert {int(c) for c in named.split(", ")} == set(range(19)) - served
    code, err, _ = run(PHONES, ["network.cells=7", "devices.speed_mps=0"], tmp_path / "seven", capsys)
    assert code == 0 and "serve no device" not in err, err  # 50 devices over 7 cells: every cell serves some


def test_a_trace_that_never_has_m_online_at_once_is_an_error(tmp_path):
    # each round waits for m devices online: the first round would wait through the whole trace (before, the
    # warning said rounds go on, then SimPy stopped with "No scheduled events left": exit 70)
    trace = tmp_path / "trace.csv"
    rows = "".join(f"{c},{10 * c},{10 * c + 5}\n" for c in range(10))  # ten devices, one at a time
    trace.write_text("client,start_s,end_s\n" + rows + "0,2,4\n")  # and an overlapping interval of device 0
    with pytest.raises(
        UserError,
        match=r"never has algorithm.clients_per_round = 10 devices online at the same "
        r"time \(at most 1\).*Lower algorithm.clients_per_round to 1",
    ):
        check_feasible(*parts(QUICKSTART, {"devices.availability": "trace", "devices.availability_trace": str(trace)}))


def test_some_devices_in_permanent_outage_is_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="edgefl"):
        check_feasible(
            *parts(
                QUICKSTART,
                {
                    "network.snr_db": None,
                    "network.cell_radius_m": 5000.0,
                    "network.fading": "none",
                    "data.num_clients": 200,
                },
            )
        )
    assert "devices practically never upload" in caplog.text and "m from the base station" in caplog.text


# -- what passes ----------------------------------------------------------------------------------------
def test_the_check_is_a_lower_bound_alone_on_the_band():
    """An FDMA band shared by m uploaders is slower than the nominal round: the nominal upload is the whole band's."""
    check_feasible(*parts(QUICKSTART, {"network.access": "fdma", "network.fading": "none"}))
    assert MAX_ROUND_S == 1e7 and MAX_ROUND_J == 1e9


def test_many_devices_mostly_online_are_not_refused_for_markov_availability():
    """1,000 phones online two thirds of the time, m = 10: P(X = 9) (about 1e-463) is below the smallest float. The
    check once computed it with scipy.stats (0 there), read the wait as infinite and refused the run ("every inf s";
    lower m "to 666 or less"). The ratio of the two probabilities is computed without either (markov_wait_s)."""
    check_feasible(*parts(PHONES, {"data.num_clients": 1000}))
    assert markov_wait_s(1000, 10, 30.0, 15.0) < 1.0


@pytest.mark.parametrize("n", [1, 2, 7, 50, 1000, 10**5])
@pytest.mark.parametrize("on, off", [(30.0, 15.0), (1.0, 1000.0), (1000.0, 1.0), (5.0, 50.0)])
def test_the_markov_wait_is_the_binomials(n, on, off):
    """markov_wait_s = P(X < m) / (P(X = m - 1) (n - m + 1) / off), X ~ Binomial(n, on / (on + off)), as scipy.stats
    computes it wherever both probabilities are floats (relative 1e-9); above MAX_ROUND_S on both sides otherwise."""
    from scipy.stats import binom

    p = on / (on + off)
    for m in sorted({1, min(2, n), max(1, n // 10), max(1, n // 2), n}):
        below, at = float(binom.cdf(m - 1, n, p)), float(binom.pmf(m - 1, n, p))
        wait_s = markov_wait_s(n, m, on, off)
        if below > 0 and at > 0:
            assert wait_s == pytest.approx(below / (at * (n - m + 1) / off), rel=1e-9), (n, m)
        elif below > 0:  # (the probability of m - 1 below the smallest float while the share of time below m is not)
            assert wait_s > MAX_ROUND_S, (n, m)
    assert markov_wait_s(n, n + 1, on, off) == math.inf  # never n + 1 of n


def test_the_ideal_engine_is_not_priced():
    check_feasible(
        *parts(
            QUICKSTART,
            {
                "run.engine": "ideal",
                "devices.cpu_ghz": 1e-5,
                "algorithm.local_steps": 100000,
                "algorithm.batch_size": 1000,
            },
        )
    )


def _grid_corners(grid: dict) -> list[dict]:
    """Every combination of each swept key's smallest and largest value (all values of a non-numeric key)."""
    choices = []
    for key, values in grid.items():
        numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        choices.append([(key, v) for v in ([min(numbers), max(numbers)] if len(numbers) == len(values) else values)])
    return [dict(combo) for combo in itertools.product(*choices)] if choices else [{}]


@pytest.mark.parametrize("path", sorted((ROOT / "scenarios").glob("*.toml")), ids=lambda p: p.stem)
def test_every_committed_scenario_passes(path, tmp_path, caplog):
    """With its default keys and at the corners of its sweep grid; no warning either. (The data files are not
    read: any folder does for data.dir.)"""
    data_dir = (
        {"data.dir": str(tmp_path)} if tomllib.loads(path.read_text()).get("data", {}).get("name") in IMAGE_DATA else {}
    )
    s = load_scenario(path, data_dir)
    with caplog.at_level(logging.WARNING, logger="edgefl"):
        for corner in _grid_corners(s.sweep.grid):
            check_feasible(*parts(path, dict(corner, **data_dir)))  # no UserError
    assert not [r for r in caplog.records if r.name == "edgefl.feasibility"], caplog.text


def test_the_check_raises_user_error_directly():
    with pytest.raises(UserError, match="network.outage_snr_db = 30"):
        check_feasible(*parts(QUICKSTART, {"network.fading": "none", "network.outage_snr_db": 30}))
