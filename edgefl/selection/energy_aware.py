"""``energy_aware``: the k online clients that spend the least estimated energy per update, or (``rank_by =
"battery"``) that have the most battery left. The energy of an update is estimated from the mean channel
and the devices' nominal knobs, for each device's last work (edgefl.selection.base.estimated_energy_j):

    E_i = κ_i C_i f_i² + P_static,i C_i / f_i + (p_i / η_i + P_circuit,i) S_i / r_up,i + P_rx,i D_i / r_down,i   (J)

(docs/model.md; radio tails and idle power are left out). Ties go to the lower client id."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from edgefl.selection.base import Policy, SelectionParams, SelectionView, estimated_energy_j, first_k


class EnergyAware(Policy):
    name = "energy_aware"

    class Params(SelectionParams):
        rank_by: Literal["energy", "battery"] = Field(
            "energy",
            description="energy: least estimated energy per update first; battery: most battery left first "
            "(needs devices.battery_j).",
        )

    @classmethod
    def check_scenario(cls, scenario) -> None:
        devices = scenario.devices
        has_battery = devices.battery_j is not None or any(c.battery_j is not None for c in devices.classes)
        if scenario.selection.params().rank_by == "battery" and not has_battery:
            raise ValueError('selection.rank_by = "battery" ranks clients by battery level: set devices.battery_j')

    def select(self, view: SelectionView, k: int) -> np.ndarray:
        if self.params.rank_by == "battery":
            levels = view.obs.battery_j
            level = np.full(self.ctx.num_clients, np.inf) if levels is None else np.asarray(levels)  # mains: full
            order = np.argsort(-level, kind="stable")
        else:
            order = np.argsort(estimated_energy_j(self.ctx, view.obs, k), kind="stable")
        return first_k(order, view.online, k)
