"""Client selection policies (edgefl/selection, docs/selection.md): each built-in on a hand example, uniform
changes nothing, the queries of power-of-choice are charged, refusals and bad keys are clear errors."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from edgefl.control.base import Observation, Work
from edgefl.runner import Simulation
from edgefl.scenario import ScenarioError, scenario_from_dict
from edgefl.selection import base as selection_base
from edgefl.selection.best_channel import BestChannel
from edgefl.selection.energy_aware import EnergyAware
from edgefl.selection.fedcs import fedcs_greedy
from edgefl.selection.oort import Oort
from edgefl.selection.power_of_choice import PowerOfChoice

from conftest import HANG_S

N = 4


def hand_ctx(cpu_hz=(1e9, 2e9, 1e9, 1e9)):
    """A base station's context: a dedicated 1 MHz band each, Shannon rate B·log2(1 + SNR), 1 W, κ = 1e-28."""
    n = len(cpu_hz)
    network = SimpleNamespace(
        access="dedicated",
        downlink="broadcast",
        access_latency_s=0.0,
        deadline_s=None,
        bandwidth_hz=1e6,
        rate_bps=lambda band_hz, snr, link="up": band_hz * np.log2(1 + snr),
    )
    devices = SimpleNamespace(
        cpu_hz_max=np.asarray(cpu_hz, dtype=float),
        tx_power_w_max=np.ones(n),
        kappa=np.full(n, 1e-28),
        static_power_w=np.zeros(n),
        circuit_power_w=np.zeros(n),
        rx_power_w=np.zeros(n),
        pa_efficiency=None,
        tail_s=np.zeros(n),
    )
    return SimpleNamespace(
        num_clients=n,
        clients_per_round=2,
        local_steps=1,
        batch_size=1,
        model_bits=1e6,
        network=network,
        devices=devices,
        rng=np.random.default_rng(0),
    )


def hand_view(snr_per_w=(1.0, 15.0, 3.0, 7.0), online=None, battery=None, round_=0, **known):
    """1e9 cycles and 1e6 bits up per update, nothing down; SNR 1, 15, 3, 7 -> 1, 4, 2, 3 bit/s/Hz."""
    n = len(snr_per_w)
    obs = Observation(
        round=round_,
        now_s=0.0,
        online=np.ones(n, bool),
        uplink_snr_per_w=np.asarray(snr_per_w, dtype=float),
        noise_scales_with_band=np.zeros(n, bool),
        downlink_rate_bps=np.full(n, 1e6),
        battery_j=None if battery is None else np.asarray(battery, dtype=float),
        energy_j=np.zeros(n),
        history=[],
        work=Work(
            download_bits=np.zeros(n),
            cycles=np.full(n, 1e9),
            upload_bits=np.full(n, 1e6),
            steps=np.ones(n),
            messages=np.zeros(n),
        ),
    )
    fields = {
        "duration_s": np.full(n, np.nan),
        "loss": np.full(n, np.nan),
        "samples": np.zeros(n),
        "last_round": np.full(n, -1),
        "queried_loss": np.full(n, np.nan),
        "train_sizes": np.full(n, 10),
    }
    fields.update({k: np.asarray(v) for k, v in known.items()})
    return selection_base.SelectionView(
        round=round_, obs=obs, online=np.ones(n, bool) if online is None else np.asarray(online), **fields
    )


# -- each policy on a hand example ----------------------------------------------------------------------------
def test_best_channel_takes_the_highest_mean_snr_online_ties_to_the_lower_id():
    policy = BestChannel(hand_ctx(cpu_hz=(1e9,) * 5))
    policy.ctx.devices.tx_power_w_max = np.array([1.0, 1.0, 1.0, 0.5, 1.0])
    # mean SNR = SNR per W x p = 1, 5, 3, 2, 2; client 1 offline: 3 (client 2), then 2 (clients 3, 4: 3 first)
    view = hand_view(snr_per_w=(1.0, 5.0, 3.0, 4.0, 2.0), online=[True, False, True, True, True])
    assert policy.select(view, 2).tolist() == [2, 3]


def test_energy_aware_takes_the_least_energy_per_update_by_hand():
    # E = κ C f² + p S / r: client 0: 0.1 + 1/1 = 1.1 J; 1: 0.4 + 1/4 = 0.65; 2: 0.1 + 1/2 = 0.6; 3: 0.1 + 1/3
    ctx = hand_ctx()
    energy = selection_base.estimated_energy_j(ctx, hand_view().obs, 2)
    assert energy == pytest.approx([1.1, 0.65, 0.6, 0.1 + 1 / 3])
    policy = EnergyAware(ctx)
    assert policy.select(hand_view(), 2).tolist() == [2, 3]
    assert policy.select(hand_view(online=[True, True, True, False]), 2).tolist() == [1, 2]


def test_energy_aware_by_battery_takes_the_fullest():
    policy = EnergyAware(hand_ctx(), EnergyAware.Params(rank_by="battery"))
    assert policy.select(hand_view(battery=[5.0, 30.0, 10.0, 20.0]), 2).tolist() == [1, 3]


def test_fedcs_greedy_by_hand():
    # T_d = 0.1 s; updates 1.0, 0.2, 0.5, 3.0 s; uploads 0.3, 0.4, 0.2, 0.1 s, one after another:
    # 1 first (round 0.1 + 0.6), then 2 (Θ = 0.6 + 0 + 0.2 = 0.8), then 0 (Θ = 0.8 + 0.2 + 0.3 = 1.3 -> 1.4 s);
    # 3 would end at 0.1 + 1.3 + 1.7 + 0.1 = 3.2 s > 1.5 s
    down, update, up = np.full(4, 0.1), np.array([1.0, 0.2, 0.5, 3.0]), np.array([0.3, 0.4, 0.2, 0.1])
    ids = np.arange(4)
    assert fedcs_greedy(ids, down, update, up, deadline_s=1.5, limit=4) == [1, 2, 0]
    assert fedcs_greedy(ids, down, update, up, deadline_s=1.5, limit=2) == [1, 2]
    assert fedcs_greedy(ids, down, update, up, deadline_s=3.2, limit=4) == [1, 2, 0, 3]
    assert fedcs_greedy(ids, down, update, up, deadline_s=0.5, limit=4) == [1]  # none fits: the fastest


def oort_view(**over):
    known = dict(
        duration_s=[1.0, 2.0, 4.0, np.nan],
        loss=[0.5, 1.0, 2.0, np.nan],
        samples=[10, 10, 10, 0],
        last_round=[0, 0, 1, -1],
    )
    known.update(over)
    return hand_view(round_=2, **known)


def test_oort_scores_by_hand():
    # U = 5, 10, 20 -> u = 0, 1/3, 1; bonus √(0.1 ln 3 / L) with L = 1, 1, 2; T = 2 s: client 2 (4 s) x (2/4)^2
    params = Oort.Params(preferred_duration_s=2.0, alpha=2.0, exploration=0.0, exploration_min=0.0)
    policy = Oort(hand_ctx(), params)
    score, _ = policy.scores(oort_view(), 2)
    b1, b2 = math.sqrt(0.1 * math.log(3)), math.sqrt(0.1 * math.log(3) / 2)
    assert score[:3] == pytest.approx([b1, 1 / 3 + b1, (1 + b2) * 0.25])
    assert np.isnan(score[3])
    assert policy.select(oort_view(), 2).tolist() == [0, 1]  # the slow client with the most utility loses
    no_penalty = Oort(hand_ctx(), params.model_copy(update={"alpha": 0.0}))
    assert no_penalty.select(oort_view(), 2).tolist() == [1, 2]


def test_oort_explores_the_unexplored_with_its_share_of_the_slots():
    params = Oort.Params(preferred_duration_s=2.0, exploration=1.0, exploration_min=1.0)
    assert Oort(hand_ctx(), params).select(oort_view(), 1).tolist() == [3]  # ε = 1: the one never tried
    half = Oort(hand_ctx(), params.model_copy(update={"exploration": 0.5, "exploration_min": 0.5}))
    assert half.select(oort_view(), 2).tolist() == [1, 3]  # one slot each: the best score (1), the unexplored (3)


def test_power_of_choice_keeps_the_highest_queried_losses():
    policy = PowerOfChoice(hand_ctx(cpu_hz=(1e9,) * 5), PowerOfChoice.Params(candidates=3, by_data_size=False))
    view = hand_view(snr_per_w=(1.0,) * 5, online=[True, True, False, True, True])
    asked = policy.candidates(view, 2)
    assert len(asked) == 3 and len(set(asked.tolist())) == 3 and view.online[asked].all()
    view.queried_loss[:] = [np.nan, 0.3, np.nan, 0.9, 0.5]
    assert policy.select(view, 2).tolist() == [3, 4]
    view.queried_loss[:] = [np.nan, 0.3, np.nan, np.nan, np.nan]  # one report arrived: the rest at random
    chosen = policy.select(view, 2)
    assert 1 in chosen and len(chosen) == 2 and view.online[chosen].all()


# -- in a run -------------------------------------------------------------------------------------------------
def scenario(selection=None, algorithm="fedavg", rounds=3, **network):
    raw = {
        "run": {"seed": 5, "rounds": rounds},
        "data": {"name": "synthetic", "num_clients": 8, "samples_per_client": 40},
        "algorithm": {"name": algorithm, "local_steps": 2, "clients_per_round": 3, "lr": 0.05, "batch_size": 8},
        "network": {
            "cell_radius_m": 400.0,
            "bandwidth_mhz": 1.0,
            "access": "fdma",
            "fading": "rayleigh",
            "header_bits": 0,
            **network,
        },
        "devices": {"cpu_ghz": 1.0, "cycles_per_sample": 2e6, "tx_power_dbm": 23.0},
    }
    if selection is not None:
        raw["selection"] = selection
    return scenario_from_dict(raw)


def selected_per_round(result):
    out: dict[int, set[int]] = {}
    for e in result.events:
        if e.label == "train":
            out.setdefault(e.round, set()).add(e.client)
    return [sorted(out[r]) for r in sorted(out)]


def test_uniform_is_the_default_and_changes_nothing():
    plain, uniform = scenario(), scenario({"name": "uniform"})
    assert "selection" not in plain.to_dict() and "selection" not in uniform.to_dict()
    a, b = Simulation(plain).run(progress=False), Simulation(uniform).run(progress=False)
    assert a.metrics == b.metrics and a.events == b.events and a.clients == b.clients


def test_best_channel_in_a_run_selects_the_strongest_mean_links():
    s = scenario({"name": "best_channel"})
    sim = Simulation(s)
    snr_per_w = sim.pricer.channel_state()[0]
    result = sim.run(progress=False)
    best = sorted(np.argsort(-snr_per_w, kind="stable")[:3].tolist())  # static devices: the same every round
    assert selected_per_round(result) == [best] * 3


def test_power_of_choice_queries_are_charged():
    result = Simulation(scenario({"name": "power_of_choice", "candidates": 6})).run(progress=False)
    evaluations = [e for e in result.events if e.label == "evaluate"]
    assert len(evaluations) == 3 * 6  # d forward passes a round, priced
    assert all(e.energy_j > 0 for e in evaluations)
    for round_, chosen in enumerate(selected_per_round(result)):
        asked = {e.client for e in evaluations if e.round == round_}
        assert set(chosen) <= asked and len(chosen) == 3


@pytest.mark.parametrize("name", ["fedcs", "oort", "energy_aware"])
def test_each_policy_runs_and_is_reproducible(name):
    s = scenario({"name": name}, deadline_s=5.0)
    a, b = Simulation(s).run(progress=False), Simulation(s).run(progress=False)
    assert a.metrics == b.metrics
    assert all(1 <= len(c) <= 3 for c in selected_per_round(a))
    assert a.summary["selection"] == name


def test_a_plugin_policy_by_module_and_class(tmp_path, monkeypatch):
    (tmp_path / "my_sel.py").write_text(
        "from edgefl.selection import Policy\n"
        "import numpy as np\n"
        "class Lowest(Policy):\n"
        "    def select(self, view, k):\n"
        "        return np.flatnonzero(view.online)[:k]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    result = Simulation(scenario({"name": "my_sel:Lowest"})).run(progress=False)
    assert selected_per_round(result) == [[0, 1, 2]] * 3


def test_the_policy_of_docs_selection_md_runs_as_written(tmp_path, monkeypatch):
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "selection.md").read_text()
    code = re.search(r"```python\n(# my_selection.py.*?)```", page, re.S).group(1)
    (tmp_path / "my_selection.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        rounds = selected_per_round(
            Simulation(scenario({"name": "my_selection:Nearest"}, rounds=4)).run(progress=False)
        )
    finally:
        sys.modules.pop("my_selection", None)
    assert all(len(c) == 3 for c in rounds)
    assert all(not set(a) & set(b) for a, b in zip(rounds, rounds[1:]))  # never the same client twice in a row


ENTRY_POINT = "[edgefl.selection]\nlowest = my_installed_selection:Lowest\n"


def test_an_installed_policy_runs_by_its_entry_point_name(tmp_path, monkeypatch):
    from edgefl import selection

    (tmp_path / "my_installed_selection.py").write_text(
        "from edgefl.selection import Policy\n"
        "class Lowest(Policy):\n"
        "    def select(self, view, k):\n"
        "        return [c for c in range(len(view.online)) if view.online[c]][:k]\n"
    )
    info = tmp_path / "my_installed_selection-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my_installed_selection\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINT)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert "lowest" in selection.names() and selection.get("lowest").__name__ == "Lowest"
        assert selected_per_round(Simulation(scenario({"name": "lowest"})).run(progress=False)) == [[0, 1, 2]] * 3
    finally:
        sys.modules.pop("my_installed_selection", None)


def test_a_plugin_returning_offline_or_too_many_clients_is_its_fault(tmp_path, monkeypatch):
    from edgefl.plugins import PluginError

    (tmp_path / "bad_sel.py").write_text(
        "from edgefl.selection import Policy\n"
        "class All(Policy):\n"
        "    def select(self, view, k):\n"
        "        return list(range(len(view.online)))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.raises(PluginError, match=r"of 1 to 3 distinct client indices"):
            Simulation(scenario({"name": "bad_sel:All"})).run(progress=False)
    finally:
        sys.modules.pop("bad_sel", None)


# -- refusals and bad keys ------------------------------------------------------------------------------------
@pytest.mark.parametrize("algorithm", ["drdm", "drfa", "partial_avg", "scaff_pd"])
def test_algorithms_that_sample_themselves_refuse_a_policy(algorithm):
    with pytest.raises(
        ScenarioError, match=rf"selection.name = 'oort' does not apply to algorithm.name = '{algorithm}'"
    ):
        scenario({"name": "oort"}, algorithm=algorithm)
    scenario({"name": "uniform"}, algorithm=algorithm)  # uniform: their own sampling, accepted


def test_an_unknown_policy_suggests_the_nearest():
    with pytest.raises(ScenarioError, match=r"did you mean 'oort'"):
        scenario({"name": "orot"})


def test_fedcs_needs_a_deadline():
    with pytest.raises(ScenarioError, match=r"network.deadline_s"):
        scenario({"name": "fedcs"})


def test_fedcs_max_clients_above_the_clients_selected_a_round_is_refused_and_at_most_m_runs():
    """Issue 28: FedCS `max_clients` > m was accepted, then the run exited 4 blaming the policy (it returned more
    clients than the algorithm asked for)."""
    with pytest.raises(
        ScenarioError, match=r"selection.max_clients = 5 is more than the 3 clients .*clients_per_round"
    ):
        scenario({"name": "fedcs", "max_clients": 5}, deadline_s=1.0)
    result = Simulation(scenario({"name": "fedcs", "max_clients": 3}, deadline_s=1.0)).run(progress=False)
    assert 1 <= max(len(s) for s in selected_per_round(result)) <= 3


BAD_KEYS = [
    ("fedcs", "deadline_s"),
    ("fedcs", "candidate_fraction"),
    ("fedcs", "max_clients"),
    ("oort", "preferred_duration_s"),
    ("oort", "alpha"),
    ("oort", "exploration"),
    ("oort", "exploration_decay"),
    ("oort", "exploration_min"),
    ("power_of_choice", "candidates"),
]


@pytest.mark.parametrize("name, key", BAD_KEYS)
@pytest.mark.parametrize("value", [math.nan, math.inf, 1e300, -1.0])
def test_every_key_is_bounded(name, key, value):
    with pytest.raises(ScenarioError, match=rf"selection\.{key}"):
        scenario({"name": name, key: value}, deadline_s=5.0)


def test_other_keys_are_named():
    with pytest.raises(ScenarioError, match=r"selection.rank_by"):
        scenario({"name": "energy_aware", "rank_by": "cheapest"})
    with pytest.raises(ScenarioError, match=r"selection.candidates"):
        scenario({"name": "oort", "candidates": 3})  # another policy's key
    with pytest.raises(ScenarioError, match=r"devices.battery_j"):
        scenario({"name": "energy_aware", "rank_by": "battery"})


@pytest.mark.parametrize(
    "overrides, named",
    [
        (["selection.name=oort", "selection.alpha=nan"], "selection.alpha"),
        (["selection.name=drdm_sampler"], "selection.name"),
        (["selection.name=oort", "algorithm.name=drdm"], "selection.name"),
    ],
)
def test_the_cli_exits_2_naming_the_key(tmp_path, overrides, named):
    args = [sys.executable, "-m", "edgefl", "run", "scenarios/quickstart.toml", "--out", str(tmp_path / "out")]
    for o in overrides:
        args += ["--set", o]
    done = subprocess.run(args, capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert named in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


SLEEPER = """
import os
import signal
import time

from edgefl.selection.uniform import Uniform


class Sleeper(Uniform):
    name = "sleeper"

    def select(self, view, k):
        # Ctrl-C as in a terminal: a process started from a background job (a CI runner's, `cmd &`) inherits SIGINT
        # ignored, and Python then installs no handler (this test slept its 600 s there)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, delivered while the policy sleeps: no timing window
        time.sleep(600)
        return super().select(view, k)
"""


ROOT = Path(__file__).resolve().parents[1]


def test_a_selection_policy_that_never_returns_can_be_interrupted(tmp_path):
    """Issue 33: a policy that sleeps must at least be interruptible: Ctrl-C is exit 130, nothing half-written,
    not a plug-in fault (exit 4) nor a hang."""
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    out = tmp_path / "out"
    args = [sys.executable, "-m", "edgefl", "run", str(ROOT / "scenarios" / "quickstart.toml"), "--out", str(out)]
    args += ["--set", "selection.name=sleeper:Sleeper", "--set", "run.rounds=2", "--no-plots"]
    done = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path, timeout=HANG_S)
    assert done.returncode == 130, done.stderr
    assert "edgefl: interrupted" in done.stderr and "Traceback" not in done.stderr
    assert not out.exists()
