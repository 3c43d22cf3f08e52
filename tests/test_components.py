"""The engine's component protocol (edgefl.sim.component): hooks called in order, only where
overridden; a CPU frequency changed in the middle of a computation re-times it and charges each
segment at its own frequency; energy is booked from what happened (a knob changed later does not
re-price earlier phases)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from edgefl.control import Allocation
from edgefl.deployment import build_population, network_params
from edgefl.scenario import scenario_from_dict
from edgefl.sim import Activity, PhaseRecord, SimPyPricer
from edgefl.sim.component import Component, overriding
from edgefl.sim.components import Knobs, OverSelection, default_components

N = 4
KAPPA = 1e-28


def world(**devices):
    s = scenario_from_dict(
        {
            "data": {"num_clients": N},
            "algorithm": {"clients_per_round": N},
            "network": {"snr_db": 10.0, "bandwidth_mhz": 1.0, "access": "dedicated"},
            "devices": {
                "cpu_ghz": 1.0,
                "cycles_per_sample": 2e4,
                "kappa": KAPPA,
                "static_power_w": 0.1,
                "idle_power_w": 0.0,
                **devices,
            },
        }
    )
    return network_params(s.network), build_population(s.network, s.devices, N, 1e5, 3e4, seed=0)


def train(samples=25_000.0):  # 25,000 samples x 2e4 cycles = 5e8 cycles: 0.5 s at 1 GHz
    return {c: [Activity("compute", "train", samples=samples)] for c in range(N)}


class Throttle(Component):
    """Sets client 0's CPU to ``hz`` at ``at_s`` (a process of its own, started at attach)."""

    changes_cpu_rate = True

    def __init__(self, at_s: float, hz: float):
        self.at_s, self.hz = at_s, hz

    def attach(self, core) -> None:
        super().attach(core)
        core.env.process(self._throttle())

    def _throttle(self):
        yield self.core.env.timeout(self.at_s)
        self.core.set_cpu_hz(0, self.hz)


def test_a_cpu_frequency_changed_mid_computation_re_times_it_and_charges_each_segment_at_its_own_rate():
    network, population = world()
    pricer = SimPyPricer(
        network, population, 0, components=[*default_components(network, population, 0), Throttle(0.2, 0.25e9)]
    )
    completed = pricer.price_phase(PhaseRecord(0, 0, train()))
    assert all(completed.values())
    # client 0: 2e8 cycles at 1 GHz in 0.2 s, then 3e8 at 0.25 GHz in 1.2 s: ends at 1.4 s; the others at 0.5 s
    assert pricer.now == pytest.approx(1.4, rel=1e-12)
    rows = [e for e in pricer.events if e.client == 0]
    assert [(e.start_s, e.end_s) for e in rows] == [(0, pytest.approx(0.2)), (pytest.approx(0.2), pytest.approx(1.4))]
    assert [e.cycles for e in rows] == [pytest.approx(2e8), pytest.approx(3e8)]
    # each segment: kappa C f^2 + P_static C / f at its own f
    expected = [KAPPA * 2e8 * 1e9**2 + 0.1 * 0.2, KAPPA * 3e8 * 0.25e9**2 + 0.1 * 1.2]
    assert [e.energy_j for e in rows] == [pytest.approx(j, rel=1e-12) for j in expected]
    assert pricer.ledger.per_client()[0].sum() == pytest.approx(sum(expected), rel=1e-12)
    (other,) = [e for e in pricer.events if e.client == 1]
    assert other.end_s == pytest.approx(0.5) and other.energy_j == pytest.approx(KAPPA * 5e8 * 1e18 + 0.1 * 0.5)


class SlowStart(Component):
    """Sets client 0's CPU to ``hz`` from its compute_start hook (from inside the client's own chain)."""

    changes_cpu_rate = True

    def __init__(self, hz: float):
        self.hz = hz

    def compute_start(self, client: int) -> None:
        if client == 0:
            self.core.set_cpu_hz(0, self.hz)


def test_a_cpu_frequency_set_in_a_compute_start_hook_times_that_computation_at_it():
    """Found by the [[process]] work: set_cpu_hz from the chain's own hook interrupted the running process
    ("A process is not allowed to interrupt itself", exit 70)."""
    network, population = world()
    pricer = SimPyPricer(
        network, population, 0, components=[*default_components(network, population, 0), SlowStart(0.5e9)]
    )
    assert all(pricer.price_phase(PhaseRecord(0, 0, train())).values())
    (row,) = [e for e in pricer.events if e.client == 0]  # 5e8 cycles at 0.5 GHz: 1 s, one segment
    assert (row.start_s, row.end_s) == (0, pytest.approx(1.0))
    assert row.energy_j == pytest.approx(KAPPA * 5e8 * 0.5e9**2 + 0.1 * 1.0, rel=1e-12)


def test_a_cpu_frequency_set_between_phases_times_the_next_computation_at_it():
    network, population = world()
    pricer = SimPyPricer(
        network, population, 0, components=[*default_components(network, population, 0), Throttle(1e9, 1e9)]
    )
    pricer.set_cpu_hz(2, 2e9)
    pricer.price_phase(PhaseRecord(0, 0, train()))
    (row,) = [e for e in pricer.events if e.client == 2]
    assert row.end_s == pytest.approx(0.25) and row.energy_j == pytest.approx(KAPPA * 5e8 * 4e18 + 0.1 * 0.25)


def test_a_deadline_cuts_a_throttled_computation_at_the_speed_it_ran_at():
    network, population = world()
    network = replace(network, deadline_s=0.6)
    pricer = SimPyPricer(
        network, population, 0, components=[*default_components(network, population, 0), Throttle(0.2, 0.25e9)]
    )
    completed = pricer.price_phase(PhaseRecord(0, 0, train()))
    assert not completed[0] and all(completed[c] for c in range(1, N))
    rows = [e for e in pricer.events if e.client == 0]
    assert [e.status for e in rows] == ["ok", "cut"]
    assert rows[1].cycles == pytest.approx(0.4 * 0.25e9)  # 0.2 s .. 0.6 s at 0.25 GHz


def test_energy_is_booked_from_what_happened_not_from_the_knobs_when_it_is_booked():
    """A controller's CPU frequency set after a phase (no ledger read in between) does not re-price it."""
    network, population = world()
    pricer = SimPyPricer(network, population, 0)
    pricer.price_phase(PhaseRecord(0, 0, train()))
    pricer.allocate(Allocation(cpu_hz=[2e9] * N))  # books nothing
    assert pricer._unbooked  # the phase is still unbooked
    first = pricer.ledger.per_client().sum(axis=1)
    assert first == pytest.approx([KAPPA * 5e8 * 1e18 + 0.1 * 0.5] * N, rel=1e-12)
    pricer.price_phase(PhaseRecord(0, 1, train()))
    second = pricer.ledger.per_client().sum(axis=1) - first
    assert second == pytest.approx([KAPPA * 5e8 * 4e18 + 0.1 * 0.25] * N, rel=1e-12)


def test_the_core_calls_only_the_hooks_a_component_overrides_in_component_order():
    calls = []

    class Recorder(Component):
        def __init__(self, name):
            self.name = name

        def phase_start(self, phase, clients, plans):
            calls.append((self.name, "phase_start", phase.phase))
            return {3} if self.name == "b" else set()

        def round_end(self, round_):
            calls.append((self.name, "round_end", round_))

    network, population = world()
    a, b = Recorder("a"), Recorder("b")
    pricer = SimPyPricer(network, population, 0, components=[a, b, OverSelection(), Knobs(population)])
    assert pricer.components[:2] == [pricer.radio, pricer.uplink]  # the core's own components come first
    assert overriding(pricer.components, "round_end") == [pricer.radio.round_end, a.round_end, b.round_end]
    assert overriding(pricer.components, "wakeups") == []
    completed = pricer.price_phase(PhaseRecord(0, 0, train()))
    pricer.end_round(0)
    assert calls == [("a", "phase_start", 0), ("b", "phase_start", 0), ("a", "round_end", 0), ("b", "round_end", 0)]
    assert completed == {0: True, 1: True, 2: True, 3: False}  # b's phase_start: client 3 does nothing
    assert pricer.online_clients(N) is None  # no component restricts who takes part


class SlowLink(Component):
    """Halves client 0's uplink (or downlink) rate at ``at_s``."""

    changes_uplink_rate = changes_downlink_rate = True

    def __init__(self, at_s: float, link: str = "uplink"):
        self.at_s, self.link = at_s, link

    def attach(self, core) -> None:
        super().attach(core)
        core.env.process(self._fade())

    def _fade(self):
        yield self.core.env.timeout(self.at_s)
        getattr(self.core, f"set_{self.link}_rate_factor")(0, 0.5)


@pytest.mark.parametrize("access", ["dedicated", "tdma", "fdma"])
def test_an_uplink_rate_halved_mid_upload_re_times_the_rest(access):
    network, population = world()
    network = replace(network, access=access)
    chains = {0: [Activity("upload", "upload", bits=1e6)]}
    plain = SimPyPricer(network, population, 0)
    plain.price_phase(PhaseRecord(0, 0, chains))
    (ref,) = plain.events
    airtime = ref.end_s - ref.start_s
    slow = SimPyPricer(
        network, population, 0, components=[*default_components(network, population, 0), SlowLink(airtime / 4)]
    )
    slow.price_phase(PhaseRecord(0, 0, chains))
    (row,) = slow.events
    # a quarter at the planned rate, the three quarters left at half of it
    assert row.end_s - row.start_s == pytest.approx(airtime / 4 + 2 * 3 * airtime / 4, rel=1e-12)
    assert row.energy_j == pytest.approx(ref.energy_j * 1.75 / 1.0, rel=1e-12)  # its airtime at its transmit power
    assert row.status == "ok" and row.bits == ref.bits


def test_a_downlink_rate_halved_mid_download_re_times_the_rest():
    network, population = world()
    chains = {0: [Activity("download", "broadcast", bits=1e6)]}
    plain = SimPyPricer(network, population, 0)
    plain.price_phase(PhaseRecord(0, 0, chains))
    (ref,) = plain.events
    airtime = ref.end_s - ref.start_s
    slow = SimPyPricer(
        network,
        population,
        0,
        components=[*default_components(network, population, 0), SlowLink(airtime / 4, "downlink")],
    )
    slow.price_phase(PhaseRecord(0, 0, chains))
    (row,) = slow.events
    assert row.end_s - row.start_s == pytest.approx(airtime / 4 + 2 * 3 * airtime / 4, rel=1e-12)
    assert row.energy_j == pytest.approx(ref.energy_j * 1.75, rel=1e-12)  # its time at the receive power
    assert row.status == "ok" and row.bits == ref.bits


def test_a_rate_change_needs_a_component_that_declares_it():
    network, population = world()
    pricer = SimPyPricer(network, population, 0)
    with pytest.raises(RuntimeError, match="changes_uplink_rate"):
        pricer.set_uplink_rate_factor(0, 0.5)
    with pytest.raises(RuntimeError, match="changes_cpu_rate"):
        pricer.set_cpu_hz(0, 2e9)
    with pytest.raises(RuntimeError, match="changes_downlink_rate"):
        pricer.set_downlink_rate_factor(0, 0.5)
