"""The ideal pricer: every operation takes zero time and zero energy; everyone finishes."""

from __future__ import annotations

from collections import deque

from edgefl.sim.journal import journaled
from energy import EnergyLedger


class IdealPricer:
    can_change_participation = False
    journal: list | None = None  # its calls that change its state (the chains started), when a run checkpoints
    _journal_depth = 0
    analog_uplink = False  # every upload arrives as sent

    def __init__(self, num_clients: int):
        self.ledger = EnergyLedger(num_clients)
        self.events: list = []
        self.now = 0.0
        self._started: deque[int] = deque()  # chains started by start_chains, not yet returned by next_arrival

    def start_round(self, needed: int):
        return None  # every device is always available

    def battery_levels(self):
        return None  # no batteries

    def positions_m(self):
        return None  # nobody moves

    columns: dict[str, str] = {}  # no component adds a metrics.csv column

    def component_metrics(self) -> dict[str, float]:
        return {}

    def device_value(self, name: str):
        return None  # no component keeps anything

    def serving_cells(self):
        return None  # nobody hands over: the cells as dropped

    def allocate(self, allocation) -> None:  # knobs cost nothing here
        pass

    def end_round(self, round_: int) -> None:
        pass

    def finish(self) -> None:  # nothing runs on after the run
        pass

    def committed_energy_j(self) -> float:  # nothing runs on: what was booked
        return sum(self.ledger.by_category().values())

    def round_end_energy(self, round_: int) -> tuple[dict[str, float], float]:  # nothing is ever charged
        return self.ledger.by_category(), self.committed_energy_j()

    def superpose(self, updates, clients=None):
        return updates

    def price_phase(self, phase) -> dict[int, bool]:
        return {client: True for client in phase.chains}

    @journaled
    def start_chains(self, phase) -> None:
        """The phase's chains start now (an asynchronous server's Dispatch); they take no time."""
        self._started.extend(sorted(phase.chains))

    @journaled
    def next_arrival(self) -> tuple[int, bool] | None:
        """The next chain started by start_chains, in the order they were started, completed; None: none runs."""
        return (self._started.popleft(), True) if self._started else None

    def arrived_by_now(self) -> bool:
        """Whether a started chain has ended at this instant and next_arrival has not returned it (here: every
        one, as chains take no time)."""
        return bool(self._started)
