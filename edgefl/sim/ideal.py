"""The ideal pricer: every operation takes zero time and zero energy; everyone finishes."""

from __future__ import annotations

from energy import EnergyLedger


class IdealPricer:
    can_change_participation = False
    journal: list | None = None  # nothing to replay: its state is the ledger (zero) and the clock (zero)
    analog_uplink = False  # every upload arrives as sent

    def __init__(self, num_clients: int):
        self.ledger = EnergyLedger(num_clients)
        self.events: list = []
        self.now = 0.0

    def start_round(self, needed: int):
        return None  # every device is always available

    def battery_levels(self):
        return None  # no batteries

    def positions_m(self):
        return None  # nobody moves

    def allocate(self, allocation) -> None:  # knobs cost nothing here
        pass

    def end_round(self, round_: int) -> None:
        pass

    def finish(self) -> None:  # nothing runs on after the run
        pass

    def superpose(self, updates):
        return updates

    def price_phase(self, phase) -> dict[int, bool]:
        return {client: True for client in phase.chains}
