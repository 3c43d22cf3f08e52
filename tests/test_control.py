"""Controllers (edgefl/control): knobs charged by the engine, the built-ins, plug-ins, bad input."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from edgefl.plugins import PluginError
from edgefl.runner import Simulation
from edgefl.scenario import ScenarioError, scenario_from_dict


def scenario(
    control=None,
    network=None,
    devices=None,
    rounds=4,
    seed=3,
    local_steps=4,
    num_clients=8,
    m=4,
    eval_every=1,
    **algorithm,
):
    raw = {
        "run": {"seed": seed, "rounds": rounds, "eval_every": eval_every},
        "data": {"name": "synthetic", "num_clients": num_clients, "samples_per_client": 40},
        "algorithm": {
            "name": "fedavg",
            "local_steps": local_steps,
            "clients_per_round": m,
            "lr": 0.05,
            "batch_size": 8,
            **algorithm,
        },
        "network": {"distance_m": 300.0, "bandwidth_mhz": 1.0, "access": "fdma", "header_bits": 0, **(network or {})},
        "devices": {
            "cpu_ghz": 1.0,
            "cycles_per_sample": 2e7,
            "tx_power_dbm": 23.0,
            "idle_power_w": 0.0,
            **(devices or {}),
        },
    }
    if control is not None:
        raw["control"] = control
    return scenario_from_dict(raw)


def run(s, record=False):
    return Simulation(s).run(progress=False)


def events_of(result, kind):
    return [e for e in result.events if e.kind == kind]


# -- plug-ins: a user's controller, knobs charged exactly ------------------------------------------
PLUGIN = '''
import numpy as np
from pydantic import Field
from edgefl.control import Allocation, ControlParams, Controller

class HalfSpeed(Controller):
    """Every phase: CPUs at ``fraction`` of their highest frequency, power at the highest."""
    class Params(ControlParams):
        fraction: float = Field(0.5, gt=0, le=1)

    def allocate(self, obs, work):
        return Allocation(cpu_hz=self.ctx.devices.cpu_hz_max * self.params.fraction)

class Quiet(Controller):
    def allocate(self, obs, work):
        return Allocation(tx_power_w=self.ctx.devices.tx_power_w_max / 10)

class TooFast(Controller):
    def allocate(self, obs, work):
        return Allocation(cpu_hz=self.ctx.devices.cpu_hz_max * 2)

class EqualShares(Controller):
    def allocate(self, obs, work):
        share = np.zeros(self.ctx.num_clients)
        share[work.clients] = 1 / len(work.clients)
        return Allocation(band_share=share)
'''


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    (tmp_path / "my_controllers.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "my_controllers"
    sys.modules.pop("my_controllers", None)


def test_static_is_the_default_and_changes_nothing():
    plain, static = run(scenario()), run(scenario(control={"name": "static"}))
    assert plain.metrics == static.metrics
    assert [e.row() for e in plain.events] == [e.row() for e in static.events]


def test_a_user_controller_halving_the_cpu_doubles_compute_time_and_quarters_its_energy(plugin):
    base = run(scenario())
    half = run(scenario(control={"name": f"{plugin}:HalfSpeed", "fraction": 0.5}))
    # same learning (only the frequency changed)
    assert [r["acc_mean"] for r in base.metrics] == [r["acc_mean"] for r in half.metrics]
    b, h = events_of(base, "compute"), events_of(half, "compute")
    assert len(b) == len(h) > 0
    for x, y in zip(b, h):
        assert math.isclose(y.end_s - y.start_s, 2 * (x.end_s - x.start_s), rel_tol=1e-9)
        assert math.isclose(y.energy_j, x.energy_j / 4, rel_tol=1e-9)  # kappa C f^2
    assert half.summary["control"] == f"{plugin}:HalfSpeed"


def test_equal_band_shares_equal_processor_sharing_for_identical_uploads(plugin):
    # identical devices and links, uploads starting together: B/n each for the same time either way
    s = dict(network={"access_latency_s": 0.0}, devices={"cycles_per_sample": 1e3})
    shared, allocated = run(scenario(**s)), run(scenario(control={"name": f"{plugin}:EqualShares"}, **s))
    a, b = events_of(shared, "upload"), events_of(allocated, "upload")
    assert len(a) == len(b) > 0
    for x, y in zip(sorted(a, key=lambda e: (e.round, e.client)), sorted(b, key=lambda e: (e.round, e.client))):
        assert math.isclose(x.end_s - x.start_s, y.end_s - y.start_s, rel_tol=1e-9)
        assert math.isclose(x.energy_j, y.energy_j, rel_tol=1e-9)


def test_a_knob_outside_the_device_bounds_is_a_clear_error(plugin):
    with pytest.raises(PluginError, match=r"controller TooFast: cpu_hz\[\d+\] = .* outside"):
        run(scenario(control={"name": f"{plugin}:TooFast"}))


def test_lower_transmit_power_lowers_the_snr_by_the_same_factor(plugin):
    from channel import shannon_rate_bps

    s = dict(devices={"tx_power_dbm_min": 0.0}, network={"access": "dedicated"})
    loud = run(scenario(**s))
    quiet = run(scenario(control={"name": f"{plugin}:Quiet"}, **s))  # 10 dB below the highest power
    links = Simulation(scenario(**s)).population.uplink
    loud_up = sorted(events_of(loud, "upload"), key=lambda e: (e.round, e.client))
    quiet_up = sorted(events_of(quiet, "upload"), key=lambda e: (e.round, e.client))
    assert len(loud_up) == len(quiet_up) > 0
    for x, y in zip(loud_up, quiet_up):
        assert x.client == y.client
        snr = links[x.client].snr_linear(1e6)  # airtime = bits / (B log2(1 + SNR)), SNR 10 x lower
        ratio = (y.end_s - y.start_s) / (x.end_s - x.start_s)
        assert math.isclose(ratio, float(shannon_rate_bps(1e6, snr) / shannon_rate_bps(1e6, snr / 10)), rel_tol=1e-9)
        power_ratio = (y.energy_j / (y.end_s - y.start_s)) / (x.energy_j / (x.end_s - x.start_s))
        assert math.isclose(power_ratio, 0.1, rel_tol=1e-9)


# -- bad input -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "control, network, message",
    [
        ({"name": "min_enrgy"}, {"deadline_s": 1.0}, "unknown controller 'min_enrgy'"),
        ({"name": "deadline_fit"}, {}, "set it"),
        ({"name": "min_energy"}, {"access": "tdma", "deadline_s": 1.0}, "tdma"),
        ({"name": "deadline_fit", "margn": 0.5}, {"deadline_s": 1.0}, "control.margn"),
        ({"name": "deadline_fit", "margin": 2}, {"deadline_s": 1.0}, "control.margin"),
        ({"name": "no_such_module:Thing"}, {}, "cannot import"),
        ({"name": "adaptive_tau", "tau_min": 9, "tau_max": 3}, {}, "tau_min"),
        ({"name": "static", "channel_error_db": float("nan")}, {}, "channel_error_db"),
    ],
)
def test_bad_control_sections_name_the_field(control, network, message):
    with pytest.raises(ScenarioError, match=message):
        scenario(control=control, network=network)


def test_bounds_of_the_knobs_are_checked():
    with pytest.raises(ScenarioError, match="cpu_ghz_min = 3 must be <= cpu_ghz"):
        scenario(devices={"cpu_ghz_min": 3.0})
    with pytest.raises(ScenarioError, match="tx_power_dbm_min"):
        scenario(devices={"tx_power_dbm_min": 30.0})


def test_the_cli_rejects_a_bad_controller_with_exit_2(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "edgefl.cli",
            "run",
            "scenarios/quickstart.toml",
            "--set",
            "control.name=nope",
            "--out",
            str(tmp_path / "r"),
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2, out.stderr
    assert "control.name" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "r").exists()


# -- deadline_fit ------------------------------------------------------------------------------------
DEADLINE = dict(
    network={"deadline_s": 0.9, "access": "dedicated", "distance_m": 500.0}, devices={"cycles_per_sample": 1e7}
)


def test_deadline_fit_runs_what_fits_instead_of_being_cut():
    static = run(scenario(local_steps=12, **DEADLINE))
    fit = run(scenario(control={"name": "deadline_fit", "margin": 0.95}, local_steps=12, **DEADLINE))
    assert sum(r["uploads_missed"] for r in static.metrics) > 0  # τ = 12 steps do not fit
    assert sum(r["uploads_missed"] for r in fit.metrics) == 0
    assert sum(r["uploads_arrived"] for r in fit.metrics) == 4 * 4
    steps = [e.cycles / (8 * 1e7) for e in events_of(fit, "compute")]
    assert all(1 <= k <= 12 and k == int(k) for k in steps) and min(steps) < 12
    # every phase within the deadline
    for e in fit.events:
        assert e.end_s <= math.ceil(e.end_s / 0.9) * 0.9 + 1e-9


def test_deadline_fit_plans_a_promotion_only_for_an_idle_radio():
    """A message asked for in the radio's tail pays no promotion (docs/model.md section 8): with a 0.3 s promotion
    and a 0.4 s deadline, planning one before every message fitted nobody (issue 19's re-run of docs/control.md).
    The first round starts with every radio idle (one promotion each: little fits); from the second the radios are still in
    their 20 s tails, no promotion is planned, and τ = 6 steps of 20 ms fit in each phase."""
    s = scenario(
        control={"name": "deadline_fit", "margin": 0.95},
        local_steps=6,
        rounds=3,
        num_clients=4,
        m=4,
        network={"deadline_s": 0.4, "access": "dedicated", "distance_m": 100.0, "access_latency_s": 0.3},
        devices={"cycles_per_sample": 2.5e6, "cpu_ghz": 1.0, "tail_s": 20.0, "tail_power_w": 1.0},
    )
    result = run(s, record=True)
    promotions = [e for e in result.events if e.kind == "promotion"]
    assert len(promotions) == 4 and {e.round for e in promotions} == {0}  # before each device's first message
    later = [e for e in events_of(result, "compute") if e.round > 0]
    assert later and all(round(e.cycles / (8 * 2.5e6)) == 6 for e in later)  # all of τ fits without promotions
    assert sum(r["uploads_missed"] for r in result.metrics) == 0


def test_promotion_estimate_by_hand():
    from types import SimpleNamespace

    from edgefl.control.base import Observation
    from edgefl.control.estimate import promotion_s

    ctx = SimpleNamespace(
        num_clients=3,
        network=SimpleNamespace(access_latency_s=0.25, deadline_s=1.0),
        devices=SimpleNamespace(tail_s=np.array([5.0, 5.0, 0.5])),
    )
    obs = Observation(
        round=0,
        now_s=10.0,
        online=np.ones(3, bool),
        uplink_snr_per_w=np.ones(3),
        noise_scales_with_band=np.zeros(3, bool),
        downlink_rate_bps=np.ones(3),
        battery_j=None,
        energy_j=np.zeros(3),
        history=[],
        work=None,
        radio_connected_until_s=np.array([12.0, -np.inf, 10.2]),
    )
    # in its tail: none; idle: the first message only (the 5 s tail covers the phase); a 0.5 s tail < the 1 s
    # deadline: every later message may need one
    assert promotion_s(ctx, obs, np.array([2.0, 2.0, 3.0])).tolist() == [0.0, 0.25, 0.5]
    assert promotion_s(ctx, obs, np.array([0.0, 0.0, 0.0])).tolist() == [0.0, 0.0, 0.0]


# -- adaptive_tau ------------------------------------------------------------------------------------
def test_adaptive_tau_explores_then_commits_within_its_bounds():
    s = scenario(
        control={
            "name": "adaptive_tau",
            "tau_min": 2,
            "tau_max": 8,
            "tau_step": 2,
            "tau_first": 4,
            "explore_rounds": 4,
        },
        rounds=9,
        network={"bandwidth_mhz": 0.2},
    )
    result = run(s)
    taus = [r["tau"] for r in result.metrics]
    state = result.summary["control_state"]
    lo, hi = min(taus[1:5]), max(taus[1:5])
    assert taus[0] == 4 and taus[1:5] == [lo, hi, hi, lo] and hi == min(2 * lo, 8) and lo < hi
    assert len(set(taus[5:])) == 1 and taus[5] in (2, 4, 6, 8)
    assert 0 <= state["beta"] <= 0.95 and state["tau_star"] == taus[5]
    per_round = [e.cycles / (8 * 2e7) for e in events_of(result, "compute")]
    assert sorted(set(per_round)) == sorted(set(taus))  # the steps really ran


def test_adaptive_tau_formula_by_hand():
    from edgefl.control.adaptive_tau import AdaptiveTau

    c = AdaptiveTau.__new__(AdaptiveTau)
    c.params = AdaptiveTau.Params(tau_min=1, tau_max=100, tau_step=1)
    c.taus = [10, 10]
    history = [{"compute_energy_j": 1.0, "energy_j": 21.0}, {"compute_energy_j": 2.0, "energy_j": 42.0}]
    # a = 1 J / 10 steps = 0.1 J; b = 20 J per round; tau* = beta/(1-beta) * b/a = 200 -> capped at 100
    assert c._best_tau(history, 0.5) == 100
    assert c._best_tau(history, 0.2) == 50  # 0.25 * 200
    assert c._pair(20.0) == (14, 28)  # 20/sqrt(2) = 14.1
    assert c._pair(500.0) == (50, 100)  # tau_hi within tau_max


def test_a_sweep_cosimulates_the_points_of_a_controller():
    from edgefl.sweeps.plan import COSIMULATED, REPRICED, pricing_mode

    assert pricing_mode(scenario()) == REPRICED  # no deadline, no outage: one training re-priced
    assert pricing_mode(scenario(control={"name": "adaptive_tau"})) == COSIMULATED  # τ follows the channel


# -- min_energy ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "access,seed,pa_efficiency",
    [("fdma", 0, 1.0), ("fdma", 1, 1.0), ("dedicated", 0, 1.0), ("dedicated", 1, 1.0), ("fdma", 0, 0.3)],
)
def test_min_energy_keeps_the_learning_meets_the_deadline_and_spends_no_more_than_static(access, seed, pa_efficiency):
    """Only f, p and b change and the deadline is met: the same accuracy every round as static
    (whose phases end well before the deadline), every phase within it, and less energy in total (also with a
    power amplifier: the device draws p / pa_efficiency)."""
    net = {"access": access, "deadline_s": 3.0, "cell_radius_m": 400.0, "distance_m": None, "shadowing_std_db": 6.0}
    dev = {
        "cycles_per_sample": 5e6,
        "circuit_power_w": 0.05,
        "cpu_ghz_min": 0.1,
        "tx_power_dbm_min": -10.0,
        "pa_efficiency": pa_efficiency,
    }
    static = run(scenario(network=net, devices=dev, seed=seed, rounds=5))
    fitted = run(scenario(control={"name": "min_energy"}, network=net, devices=dev, seed=seed, rounds=5))
    assert sum(r["uploads_missed"] for r in static.metrics) == 0
    assert max(r["sim_time_s"] - p["sim_time_s"] for r, p in zip(static.metrics[1:], static.metrics)) < 3.0
    for a, b in zip(static.metrics, fitted.metrics):
        assert a["acc_mean"] == b["acc_mean"] and a["loss"] == b["loss"]
    assert sum(r["uploads_missed"] for r in fitted.metrics) == 0
    phases: dict = {}
    for e in fitted.events:
        start, end = phases.get((e.round, e.phase), (math.inf, -math.inf))
        phases[(e.round, e.phase)] = (min(start, e.start_s), max(end, e.end_s if e.kind != "tail" else start))
    assert all(end - start <= 3.0 + 1e-9 for start, end in phases.values())
    assert fitted.summary["energy_j"] < static.summary["energy_j"]
    assert fitted.summary["energy_by_category_j"]["compute"] < static.summary["energy_by_category_j"]["compute"]


def test_the_user_controller_of_docs_control_md_runs_as_written(tmp_path, monkeypatch):
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "control.md").read_text()
    code = re.search(r"```python\n(.*?)```", page, re.S).group(1)
    (tmp_path / "my_controllers.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        s = scenario(
            control={"name": "my_controllers:BatteryAware", "threshold_j": 1e4, "cpu_fraction": 0.5},
            devices={"battery_j": 1e3},
        )
        assert sum(r["uploads_arrived"] for r in run(s).metrics) == 0  # every battery under the threshold: nobody
        s = scenario(
            control={"name": "my_controllers:BatteryAware", "threshold_j": 10.0, "cpu_fraction": 0.5},
            devices={"battery_j": 1e4},
        )
        half, base = run(s), run(scenario(devices={"battery_j": 1e4}))
        assert [r["acc_mean"] for r in half.metrics] == [r["acc_mean"] for r in base.metrics]
        h, b = events_of(half, "compute"), events_of(base, "compute")
        assert all(math.isclose(x.energy_j, y.energy_j / 4, rel_tol=1e-9) for x, y in zip(h, b))
    finally:
        sys.modules.pop("my_controllers", None)
