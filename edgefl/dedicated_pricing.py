"""Re-pricing a recorded trace on dedicated uplinks, vectorised (no SimPy).

With a dedicated band per client, no deadline and no outage, clients never interact:
each client's chain in a phase runs activity after activity, and the phase ends when
the last chain ends. The SimPy pricer then reduces to arithmetic that numpy can do for
the whole trace at once. This module does that arithmetic with the same formulas, the
same order of floating-point operations for times (begin + duration, chain by chain),
and the same fading draws (one ``fading_power_gain`` call per phase, in (client,
activity) order) as :class:`edgefl.sim.SimPyPricer`, so it agrees with a full SimPy
co-simulation to rounding (tests/test_reprice.py checks 1e-9 relative).

It exists because a sweep re-prices one training for every channel point: SimPy costs
about as much as the training itself; this costs a few milliseconds.

    compiled = compile_trace(trace)                 # once per training
    costs = price_dedicated(compiled, network, population, seed)   # per channel point
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from channel import fading_power_gain, shannon_rate_bps
from edgefl.physical import NetworkParams, Population
from edgefl.sim.activities import PhaseRecord
from edgefl.sim.engine import RoundCost
from energy import CATEGORIES, compute_energy_j, downlink_energy_j, idle_energy_j, uplink_energy_j

COMPUTE, DOWNLOAD, UPLOAD = 0, 1, 2
_KIND_CODE = {"compute": COMPUTE, "download": DOWNLOAD, "upload": UPLOAD}
_CATEGORY = {name: k for k, name in enumerate(CATEGORIES)}


def can_price_dedicated(network: NetworkParams) -> bool:
    """True when this module gives the same answer as the SimPy pricer."""
    return network.access == "dedicated" and network.deadline_s is None and network.outage_snr_db is None


@dataclass
class CompiledTrace:
    """A trace as flat arrays, one entry per activity, in the SimPy pricer's order:
    phase by phase, client by client (ascending ids), then chain order."""

    phase_round: np.ndarray  # [P] 0-based round of each phase
    phase_start: np.ndarray  # [P + 1] offsets into the activity arrays
    phase_chains: list[np.ndarray]  # per phase: the client of each chain, ascending
    phase_positions: list[list[np.ndarray]]  # per phase, per chain position k: activity ids
    client: np.ndarray  # [A]
    kind: np.ndarray  # [A] COMPUTE / DOWNLOAD / UPLOAD
    bits: np.ndarray  # [A]
    samples: np.ndarray  # [A]
    train_work: np.ndarray  # [A] bool: forward + backward (else forward only)
    chain: np.ndarray  # [A] index of the activity's chain within its phase

    @property
    def num_activities(self) -> int:
        return len(self.client)


def compile_trace(trace: list[PhaseRecord]) -> CompiledTrace:
    client, kind, bits, samples, train_work, chain = [], [], [], [], [], []
    phase_round, phase_start, phase_chains, phase_positions = [], [0], [], []
    for phase in trace:
        clients = sorted(phase.chains)
        positions: list[list[int]] = []
        for index, c in enumerate(clients):
            for k, activity in enumerate(phase.chains[c]):
                if k == len(positions):
                    positions.append([])
                positions[k].append(len(client))
                client.append(c)
                kind.append(_KIND_CODE[activity.kind])
                bits.append(activity.bits)
                samples.append(activity.samples)
                train_work.append(activity.work == "train")
                chain.append(index)
        phase_round.append(phase.round)
        phase_start.append(len(client))
        phase_chains.append(np.asarray(clients, dtype=np.int64))
        phase_positions.append([np.asarray(ids, dtype=np.int64) for ids in positions])
    return CompiledTrace(
        phase_round=np.asarray(phase_round, dtype=np.int64),
        phase_start=np.asarray(phase_start, dtype=np.int64),
        phase_chains=phase_chains,
        phase_positions=phase_positions,
        client=np.asarray(client, dtype=np.int64),
        kind=np.asarray(kind, dtype=np.int8),
        bits=np.asarray(bits, dtype=np.float64),
        samples=np.asarray(samples, dtype=np.float64),
        train_work=np.asarray(train_work, dtype=bool),
        chain=np.asarray(chain, dtype=np.int64),
    )


def _fading_gains(trace: CompiledTrace, network: NetworkParams, seed: int) -> np.ndarray:
    """The fading gain of every transmission (1 for compute), drawn as the SimPy pricer does."""
    gains = np.ones(trace.num_activities)
    if network.fading == "none":
        return gains
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0xFAD1]))
    is_tx = trace.kind != COMPUTE
    for p in range(len(trace.phase_round)):
        lo, hi = trace.phase_start[p], trace.phase_start[p + 1]
        ids = lo + np.flatnonzero(is_tx[lo:hi])
        if len(ids):
            gains[ids] = fading_power_gain(network.fading, rng, size=len(ids), rician_k=network.rician_k)
    return gains


def _durations(trace: CompiledTrace, network: NetworkParams, pop: Population, gains: np.ndarray):
    """Each activity's duration [s] and each compute activity's cycles."""
    c = trace.client
    per_sample = np.where(trace.train_work, pop.train_cycles_per_sample[c], pop.eval_cycles_per_sample[c])
    cycles = trace.samples * per_sample
    duration = cycles / pop.cpu_hz[c]
    up_mean = np.array([link.snr_linear(network.bandwidth_hz, 1.0) for link in pop.uplink], dtype=np.float64)
    down_mean = np.array([link.snr_linear(network.downlink_bandwidth_hz, 1.0) for link in pop.downlink],
                         dtype=np.float64)
    for code, mean, band in ((UPLOAD, up_mean, network.bandwidth_hz), (DOWNLOAD, down_mean,
                                                                         network.downlink_bandwidth_hz)):
        ids = np.flatnonzero(trace.kind == code)
        if len(ids):
            rate = np.asarray(shannon_rate_bps(band, mean[c[ids]] * gains[ids], network.efficiency,
                                               network.snr_gap_db), dtype=np.float64)
            duration[ids] = trace.bits[ids] / rate
    return duration, cycles


def price_dedicated(trace: CompiledTrace, network: NetworkParams, pop: Population, seed: int) -> list[RoundCost]:
    """Each round's end time and cumulative energy by category, as the SimPy pricer
    (seeded with ``seed``) would charge this trace on dedicated uplinks."""
    if not can_price_dedicated(network):
        raise ValueError("vectorised pricing needs access = 'dedicated', no deadline and no outage")
    gains = _fading_gains(trace, network, seed)
    duration, cycles = _durations(trace, network, pop, gains)
    begin = np.zeros(trace.num_activities)
    end = np.zeros(trace.num_activities)
    num_phases = len(trace.phase_round)
    idle_j = np.zeros(num_phases)
    phase_end = np.zeros(num_phases)
    now = 0.0
    for p in range(num_phases):  # phases run one after another: each starts when the last ended
        chains = trace.phase_chains[p]
        t = np.full(len(chains), now)
        busy = np.zeros(len(chains))
        for ids in trace.phase_positions[p]:  # k-th activity of every chain that has one
            ch = trace.chain[ids]
            b = t[ch]
            e = b + duration[ids]
            begin[ids], end[ids] = b, e
            busy[ch] = busy[ch] + (e - b)
            t[ch] = e
        idle_s = (t - now) - busy  # waiting inside the phase: rounding noise on dedicated bands
        idle_power = pop.idle_power_w[chains]
        charged = (idle_s > 1e-12) & (idle_power > 0)
        if charged.any():
            idle_j[p] = float(np.sum(idle_energy_j(idle_s[charged], idle_power[charged])))
        now = float(t.max()) if len(t) else now
        phase_end[p] = now

    c = trace.client
    energy = np.zeros(trace.num_activities)
    category = np.zeros(trace.num_activities, dtype=np.int64)
    comp = trace.kind == COMPUTE
    energy[comp] = compute_energy_j(cycles[comp], pop.cpu_hz[c[comp]], pop.kappa[c[comp]],
                                    pop.static_power_w[c[comp]])
    category[comp] = _CATEGORY["compute"]
    down = trace.kind == DOWNLOAD
    energy[down] = downlink_energy_j(end[down] - begin[down], pop.rx_power_w[c[down]])
    category[down] = _CATEGORY["downlink"]
    up = trace.kind == UPLOAD
    energy[up] = uplink_energy_j(end[up] - begin[up], pop.tx_power_w[c[up]], pop.circuit_power_w[c[up]])
    category[up] = _CATEGORY["uplink"]

    phase_of = np.repeat(np.arange(num_phases), np.diff(trace.phase_start))
    per_phase = np.zeros((num_phases, len(CATEGORIES)))
    np.add.at(per_phase, (phase_of, category), energy)
    per_phase[:, _CATEGORY["idle"]] += idle_j
    cumulative = np.cumsum(per_phase, axis=0)

    costs: dict[int, RoundCost] = {}
    for p in range(num_phases):  # the last phase of a round gives the round's totals
        r = int(trace.phase_round[p])
        costs[r] = RoundCost(r, float(phase_end[p]),
                             {name: float(cumulative[p, k]) for k, name in enumerate(CATEGORIES)})
    return [costs[r] for r in sorted(costs)]
