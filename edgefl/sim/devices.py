"""What changes about the devices while a run goes on: the state the engine and its components share.

:class:`~edgefl.deployment.Population` is the devices as the scenario built them and stays so; a run's
:class:`DeviceState` starts as its copy, and the components that change a device write it (a controller's
knobs: the Knobs component; positions and links: Mobility), while the physics reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from channel import Link
from edgefl.deployment import Population


@dataclass
class DeviceState:
    cpu_hz: np.ndarray  # each CPU's frequency, Hz (the scenario's, or a controller's)
    tx_power_w: np.ndarray  # each device's transmit power, W (the scenario's, or a controller's)
    uplink: Sequence[Link]  # each device's link to the base station, at its power and position now
    downlink: Sequence[Link]
    distance_m: np.ndarray | None  # each device's distance to the base station now (m); None: no cell
    cell: np.ndarray | None = None  # several cells: each device's serving cell now [N] ...
    handovers: np.ndarray | None = None  # ... how many times it changed cell so far ...
    position_m: np.ndarray | None = None  # ... and where it is (x, y) [N, 2], m (the central site at the origin)

    @classmethod
    def of(cls, population: Population) -> "DeviceState":
        """The devices as the scenario built them (copies: the population is not written)."""
        distance_m = None if population.distance_m is None else population.distance_m.copy()
        return cls(
            population.cpu_hz.copy(),
            population.tx_power_w.copy(),
            list(population.uplink),
            list(population.downlink),
            distance_m,
            None if population.cells is None else population.cells.serving.copy(),
            None if population.cells is None else np.zeros(population.num_clients, dtype=np.int64),
            None if population.cells is None else population.cells.position_m.copy(),
        )
