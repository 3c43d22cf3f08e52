"""A phase's chains on their own clocks (edgefl.sim.chain.OwnClock) equal the same chains as SimPy processes.

Where nothing can see or act on a chain while it runs (SimPyPricer._on_own_clocks: every step inline, no
component acting during phases, no deadline, no over-selection), the core runs each chain at once on a clock of its
own and then lets its SimPy clock pass the last chain's waits. Checked here against the processes: the same rows (as
a set: without an event log their order across clients differs; with one, the same order: chain.in_end_order), the
same ledger bytes, clock and completions.
"""

from __future__ import annotations

import pytest

from edgefl.deployment import build_population, network_params
from edgefl.runner import Simulation
from edgefl.scenario import scenario_from_dict
from edgefl.sim import SimPyPricer


def scenario(**devices):
    return scenario_from_dict(
        {
            "run": {"seed": 3, "rounds": 4},
            "data": {"name": "synthetic", "num_clients": 8, "samples_per_client": 40},
            "algorithm": {"name": "fedavg", "local_steps": 3, "clients_per_round": 5, "lr": 0.05},
            "network": {"snr_db": 10.0, "bandwidth_mhz": 1.0, "access": "dedicated", "fading": "none"},
            "devices": {"cpu_ghz": 1.5, "idle_power_w": 0.05, **devices},
        }
    )


def pricers(s, model, **kwargs):
    population = build_population(
        s.network, s.devices, s.data.num_clients, model.train_flops_per_sample, model.eval_flops_per_sample, 0
    )
    return [SimPyPricer(network_params(s.network), population, s.run.seed, **kwargs) for _ in range(2)]


def traced(s):
    sim = Simulation(s, record_trace=True)
    sim.run(progress=False)
    return sim.engine.trace, sim.model


@pytest.mark.parametrize("devices", [{}, {"slowdown": "exponential", "slowdown_mean": 0.5}])
def test_own_clocks_equal_processes(devices, monkeypatch):
    s = scenario(**devices)
    trace, model = traced(s)
    own, processes = pricers(s, model, record_events=False)
    assert own._on_own_clocks(trace[0])
    monkeypatch.setattr(processes, "_on_own_clocks", lambda phase: False)
    for phase in trace:
        assert own.price_phase(phase) == processes.price_phase(phase)
        assert own.now == processes.now and type(own.now) is type(processes.now)  # (a clock's float or numpy's)
        rows_own = [tuple(r) for *_, rows in own._unbooked for r in rows]
        rows_processes = [tuple(r) for *_, rows in processes._unbooked for r in rows]
        assert sorted(rows_own) == sorted(rows_processes)  # the same rows (their order across clients differs)
        assert own.ledger.per_client().tobytes() == processes.ledger.per_client().tobytes()
    assert own.now > 0


@pytest.mark.parametrize("devices", [{}, {"slowdown": "exponential", "slowdown_mean": 0.5}])
def test_own_clocks_keep_the_event_log_in_the_processes_order(devices, monkeypatch):
    """With an event log (a co-simulated run, benchmarks [3]), the rows come in the order the processes ended them:
    by end time, ties (every broadcast ends at once) in the order SimPy scheduled them (RunResult.events' order)."""
    s = scenario(**devices)
    trace, model = traced(s)
    own, processes = pricers(s, model)
    assert own._on_own_clocks(trace[0])
    monkeypatch.setattr(processes, "_on_own_clocks", lambda phase: False)
    ties = 0
    for phase in trace:
        assert own.price_phase(phase) == processes.price_phase(phase)
        assert own.now == processes.now
        rows = [tuple(r) for *_, rows in processes._unbooked for r in rows]
        assert [tuple(r) for *_, rows in own._unbooked for r in rows] == rows  # the same rows in the same order
        ties += len(rows) - len({row[4] for row in rows})
    assert own.events == processes.events and len(own.events) > 0
    assert own.ledger.per_client().tobytes() == processes.ledger.per_client().tobytes()
    assert ties > 0  # (rows that end at once: their order is SimPy's scheduling order)
    assert next(own.env._eid) < next(processes.env._eid)  # (the own clocks' path was taken: fewer SimPy events)


def test_own_clocks_only_where_nothing_else_can_see_the_chains():
    s = scenario()
    trace, model = traced(s)
    for devices in ({"battery_j": 100.0}, {"tail_s": 0.5, "tail_power_w": 0.3}):
        s = scenario(**devices)
        assert not pricers(s, model, record_events=False)[0]._on_own_clocks(trace[0]), devices
    s = scenario_from_dict({**scenario().model_dump(mode="json"), "network": {"access": "fdma", "snr_db": 10.0}})
    assert not pricers(s, model, record_events=False)[0]._on_own_clocks(trace[0])


@pytest.mark.parametrize("same_times", [True, False])
def test_in_end_order_is_the_order_simpy_ends_the_steps(same_times):
    """chain.in_end_order against SimPy itself: chains of timeouts started together (steps of 0 s and ties included),
    their rows in the order the processes ended them; with every chain's steps ending at the same times (its path
    without a sort) and without."""
    import random

    import simpy

    from edgefl.sim.chain import in_end_order

    rng = random.Random(7)
    for _ in range(300):
        chains, steps = rng.randint(1, 7), rng.randint(1, 5)
        shared = [rng.choice([0.0, 0.1, 0.2, 0.3, 0.25]) for _ in range(steps)]
        seconds = [shared if same_times else [rng.choice([0.0, 0.1, 0.2, 0.3, 0.25]) for _ in range(steps)]]
        seconds *= chains if same_times else 1
        seconds += [
            [rng.choice([0.0, 0.1, 0.2, 0.3, 0.25]) for _ in range(steps)] for _ in range(chains - len(seconds))
        ]
        env, ended = simpy.Environment(), []

        def chain(c, env=env, ended=ended, seconds=seconds):
            for k, s in enumerate(seconds[c]):
                yield env.timeout(s)
                ended.append((c, k, env.now))

        log, spans = [], []
        for c in range(chains):
            env.process(chain(c))
            t, first = 0.0, len(log)
            for k, s in enumerate(seconds[c]):
                t += s
                log.append((c, k, "", 0.0, t))
            spans.append((first, len(log)))
        env.run()
        assert [(row[0], row[1], row[4]) for row in in_end_order(log, spans)] == ended
