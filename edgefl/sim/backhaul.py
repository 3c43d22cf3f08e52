"""The backhaul between the edge servers (one at each base station) and a cloud server (``[backhaul]``,
docs/multi-cell.md): a component (edgefl.sim.component).

At the end of every round in which uploads reached the edges, each edge that received some sends one aggregate to
the cloud and receives the cloud's model back, every edge over a link of its own (in parallel): the round is
longer by 2 · (latency + bits / rate) seconds, and the backhaul spends 2 · bits · edges · energy per bit joules,
reported apart from the devices' energy (metrics.csv ``backhaul_energy_j``). An aggregate is the size of the
largest upload message (headers included) that arrived in the round. Only uploads that got through count (an
upload cut, lost or never started reaches no edge): a round in which none arrived has no exchange with the cloud.
The edge is the cell serving the device when its upload arrived. One cell: one edge, the base station, on the way
to the cloud.
"""

from __future__ import annotations

from edgefl.sim.component import Component
from edgefl.sim.physics import UPLOAD


def backhaul_round_s(latency_s: float, bits: float, rate_bps: float) -> float:
    """The round's exchange with the cloud (s): up and back, 2 (latency + bits / rate), every edge in parallel."""
    return 2.0 * (latency_s + bits / rate_bps)


class Backhaul(Component):
    may_change_participation = False  # it only adds time and energy

    def __init__(self, rate_bps: float, latency_s: float, energy_j_per_bit: float):
        self.rate_bps, self.latency_s, self.energy_j_per_bit = rate_bps, latency_s, energy_j_per_bit
        self.time_s = self.energy_j = 0.0  # so far
        self.cloud_rounds = 0  # exchanges with the cloud so far
        self._edges: set[int] = set()  # the edges that received uploads this round ...
        self._bits = 0.0  # ... and the largest upload message that arrived (bits)
        self._upload_bits: dict[int, float] = {}  # client -> the largest upload message of its chain running

    columns = {  # metrics.csv, so far
        "cloud_rounds": "exchanges between the edges and the cloud",
        "backhaul_s": "time the server waited for the backhaul (s)",
        "backhaul_energy_j": "energy of the backhaul, apart from the devices' (J)",
    }

    def metrics(self) -> dict[str, float]:
        return {"cloud_rounds": self.cloud_rounds, "backhaul_s": self.time_s, "backhaul_energy_j": self.energy_j}

    def phase_start(self, phase, clients, plans) -> set[int]:
        for client in clients:
            bits = [float(step.bits) for step in plans[client] if step.kind == UPLOAD]
            if bits:
                self._upload_bits[client] = max(bits)
        return set()

    def upload_arrived(self, client: int) -> None:
        cells = self.core.devices.cell
        self._edges.add(0 if cells is None else int(cells[client]))
        self._bits = max(self._bits, self._upload_bits.get(client, 0.0))

    def round_end(self, round_: int) -> None:
        if not self._edges:
            return
        seconds = backhaul_round_s(self.latency_s, self._bits, self.rate_bps)
        self.energy_j += 2.0 * self._bits * len(self._edges) * self.energy_j_per_bit  # J = bits x J/bit
        self.time_s += seconds
        self.cloud_rounds += 1
        self._edges, self._bits = set(), 0.0
        if seconds > 0:  # the server waits for the cloud: simulated time passes
            env = self.core.env
            env.run(until=env.now + seconds)
