"""Device mobility: random-waypoint motion inside the cell, path loss recomputed each round.

Each moving device walks in a straight line at its speed (m/s) towards a waypoint drawn uniformly
over the cell's annulus d ∈ [d_min, R], and draws the next waypoint on arrival (no pause): the
random waypoint model (Johnson and Maltz, "Dynamic source routing in ad hoc wireless networks",
1996). A straight segment between two points of the disk stays in the disk, so a device never
leaves the cell; it may pass closer than d_min to the base station, where the path loss is taken
at d_min. Positions advance to the current simulated time at the start of every round; links
(path loss from the new distance; shadowing is a property of the device and stays) are then
rebuilt, and the next phases' physics uses them. With several cells (docs/multi-cell.md), waypoints are drawn over
the cells' union (a segment between two of its points may cross a corner outside it) and the serving cell is
re-checked with a hysteresis (handover, edgefl.sim.components.CellMobility).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Callable

import numpy as np

from channel import Link


def uniform_in_annulus(rng: np.random.Generator, size: int, r_min: float, r_max: float) -> np.ndarray:
    """``size`` points uniform over the annulus r_min <= |p| <= r_max, as [size, 2] (m)."""
    radius = np.sqrt(rng.uniform(r_min**2, r_max**2, size=size))
    angle = rng.uniform(0.0, 2 * np.pi, size=size)
    return np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)


class RandomWaypoint:
    def __init__(
        self,
        distance_m: np.ndarray,
        speed_mps: np.ndarray,
        r_min: float,
        r_max: float,
        rng: np.random.Generator,
        position_m: np.ndarray | None = None,
        draw: Callable[[np.random.Generator, int], np.ndarray] | None = None,
    ):
        """``position_m`` [N, 2]: where devices start (default: the drawn distances at a random bearing); ``draw(rng,
        n)``: n waypoints (default: uniform over the annulus r_min .. r_max; several cells: over their union)."""
        self.rng, self.r_min, self.r_max = rng, r_min, r_max
        self._draw = draw if draw is not None else lambda rng, n: uniform_in_annulus(rng, n, r_min, r_max)
        if position_m is None:
            angle = rng.uniform(0.0, 2 * np.pi, size=len(distance_m))  # the drawn distances, at a random bearing
            self.position_m = np.stack([distance_m * np.cos(angle), distance_m * np.sin(angle)], axis=1)
        else:
            self.position_m = np.array(position_m, dtype=np.float64)
        self.speed_mps = np.asarray(speed_mps, dtype=np.float64)
        self.waypoint_m = self._draw(rng, len(distance_m))
        self.time_s = 0.0

    @property
    def distance_m(self) -> np.ndarray:
        return np.hypot(self.position_m[:, 0], self.position_m[:, 1])

    def advance(self, now_s: float) -> None:
        """Move every device for the time since the last call."""
        left = self.speed_mps * max(0.0, now_s - self.time_s)  # metres still to walk
        self.time_s = max(self.time_s, now_s)
        moving = np.flatnonzero(left > 0)
        while len(moving):
            at = slice(None) if len(moving) == len(left) else moving  # (every device: views, not copies)
            to_go = self.waypoint_m[at] - self.position_m[at]
            gap = np.hypot(to_go[:, 0], to_go[:, 1])
            left_m = left[at]
            arrive = gap <= left_m
            if not np.count_nonzero(arrive):  # nobody reaches a waypoint (most updates of an asynchronous run, [8]):
                self.position_m[at] += (left_m / gap)[:, None] * to_go  # every gap > left_m > 0, the step below
                break  # (drawing no waypoint draws nothing)
            step = np.where(arrive, 1.0, left_m / np.where(gap > 0, gap, 1.0))  # the share of the way to go walked
            self.position_m[at] += step[:, None] * to_go
            left[at] = np.where(arrive, left_m - gap, 0.0)
            arrived = moving[arrive]
            self.waypoint_m[arrived] = self._draw(self.rng, len(arrived))
            moving = arrived[left[arrived] > 0]

    def links(
        self,
        uplink: Sequence[Link],
        downlink: Sequence[Link],
        path_loss_db,
        bs_tx_power_w: float,
        distance_m: np.ndarray | None = None,
    ) -> tuple[MovedLinks, MovedLinks]:
        """The links at the current positions: budget links get the path loss (``path_loss_db(distance_m)``,
        the scenario's model) of the new distance (at least r_min); configured-SNR links do not depend on it.
        ``distance_m``: :attr:`distance_m` now, where the caller has it."""
        distance_m = self.distance_m if distance_m is None else distance_m
        loss_db = np.asarray(path_loss_db(np.maximum(distance_m, self.r_min)), dtype=np.float64)
        return MovedLinks(uplink, loss_db), MovedLinks(downlink, loss_db, bs_tx_power_w)


class MovedLinks(Sequence[Link]):
    """``links`` moved to the path losses ``path_loss_db`` [N] (dB) and the transmit power ``tx_power_w`` (None:
    each link's own): each budget link ``link.moved(...)``, a configured-SNR link as it is. A link is built when it is
    first read: a moving population's links change at every server update of an asynchronous run, and its physics
    reads the arrays (PhasePhysics.links_moved: MeanSnr.moved, by the same rule, channel.link.moved_fields), a
    component a few links (benchmarks [8]: 100 ``Link`` s per update built, a few read). Links moved again are moved
    from the links these were moved from: a move sets the power, the path loss and the interference (0) and keeps
    every other field of its link, so the same fields."""

    _links: Sequence[Link]
    _tx_power_w: float | None

    def __init__(self, links: Sequence[Link], path_loss_db, tx_power_w: float | None = None):
        if isinstance(links, MovedLinks):  # (moved again: from the links those were moved from)
            tx_power_w = links._tx_power_w if tx_power_w is None else tx_power_w
            links = links._links
        if len(path_loss_db) != len(links):
            raise ValueError(f"{len(links)} links and {len(path_loss_db)} path losses")
        self._links, self._tx_power_w = links, tx_power_w
        self.path_loss_db = np.asarray(path_loss_db, dtype=np.float64)  # [N] dB, every link's (read-only)
        self._built: dict[int, Link] = {}

    def power_w(self, own):
        """The transmit power of links moved here (W): ``own``, the links' own (a float, or an array of every link's),
        unless one was given for all."""
        return own if self._tx_power_w is None else self._tx_power_w

    def __len__(self) -> int:
        return len(self._links)

    def __getitem__(self, index):  # (an int or a slice, as a list's)
        if isinstance(index, slice):
            return [self[k] for k in range(*index.indices(len(self)))]
        n = len(self._links)
        k = int(index) + (n if index < 0 else 0)
        if not 0 <= k < n:
            raise IndexError(f"link {index} of {n}")
        link = self._built.get(k)
        if link is None:
            link = self._links[k]
            if link.mode == "budget":
                link = link.moved(self.power_w(link.tx_power_w), self.path_loss_db[k])
            self._built[k] = link
        return link
