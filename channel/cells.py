"""Multi-cell radio: hexagonal layouts, association, handover, uplink power control, SINR.

Units: m, W, dB/dBm where the name says so. Sources: 3GPP TR 38.901 §7.2 / TR 36.814 Annex A (hexagonal
layouts by inter-site distance), TS 38.213 §7.1.1 (open-loop uplink power control), TS 38.300 / TS 36.331
(handover on a hysteresis margin: A3 event). docs/multi-cell.md derives the interference model.
"""

from __future__ import annotations

import numpy as np

from arraychecks import out, require_nonnegative

HEX_CELL_COUNTS = (1, 7, 19)  # a centre site and 0, 1 or 2 rings around it


def hex_axial_coordinates(num_cells: int) -> np.ndarray:
    """The sites' axial coordinates (q, r) [C, 2], ring by ring (the centre first, then each ring from the east,
    counter-clockwise): 1, 7 or 19 sites."""
    if num_cells not in HEX_CELL_COUNTS:
        raise ValueError(f"a hexagonal layout has 1, 7 or 19 cells, got {num_cells}")
    rings = HEX_CELL_COUNTS.index(num_cells)
    coords = [(0, 0)]
    directions = [(1, 0), (0, 1), (-1, 1), (-1, 0), (0, -1), (1, -1)]  # axial neighbours, counter-clockwise
    for ring in range(1, rings + 1):
        q, r = ring, 0  # start east of the centre, walk the ring's six sides
        for side in range(6):
            dq, dr = directions[(side + 2) % 6]
            for _ in range(ring):
                coords.append((q, r))
                q, r = q + dq, r + dr
    return np.array(coords, dtype=np.int64)


def hex_sites_m(num_cells: int, inter_site_m: float) -> np.ndarray:
    """Base-station positions (x, y) in m [C, 2] of a hexagonal layout of 1, 7 or 19 cells: neighbouring sites
    ``inter_site_m`` apart (3GPP TR 38.901 §7.2, TR 36.814 Annex A.2.1.1: ISD 500 m urban macro), the centre at the
    origin. Axial (q, r) → x = ISD (q + r/2), y = ISD (√3/2) r."""
    axial = hex_axial_coordinates(num_cells).astype(np.float64)
    isd = float(require_nonnegative(inter_site_m, "inter_site_m"))
    return out(np.stack([isd * (axial[:, 0] + axial[:, 1] / 2), isd * (np.sqrt(3) / 2) * axial[:, 1]], axis=1))


def hex_reuse_bands(num_cells: int, reuse: int) -> np.ndarray:
    """Each cell's band [C] (0 .. reuse - 1) on a hexagonal layout: reuse 1, all cells on band 0; reuse 3, band
    (q - r) mod 3 of the axial coordinates, so that no two neighbours share a band (a neighbour differs by
    (±1, 0), (0, ±1) or ±(1, -1): q - r changes by 1 or 2, never 0 mod 3)."""
    if reuse not in (1, 3):
        raise ValueError(f"reuse is 1 or 3, got {reuse}")
    if reuse == 1:
        return np.zeros(num_cells, dtype=np.int64)
    axial = hex_axial_coordinates(num_cells)
    return (axial[:, 0] - axial[:, 1]) % 3


def in_hex_cell(offset_m: np.ndarray, inter_site_m: float) -> np.ndarray:
    """Whether points at ``offset_m`` [K, 2] from a site lie in its hexagonal cell (the points nearer to it than to
    its six neighbours ``inter_site_m`` away): the projection on each neighbour's direction is at most ISD/2."""
    angles = np.arange(6) * np.pi / 3  # the neighbours' directions (axial unit steps)
    directions = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    return np.all(offset_m @ directions.T <= inter_site_m / 2, axis=1)


def drop_in_hex_cells(
    rng: np.random.Generator, size: int, sites_m: np.ndarray, inter_site_m: float, min_distance_m: float
) -> np.ndarray:
    """``size`` points (x, y) in m [size, 2] uniform over the union of the sites' hexagonal cells (equal areas: a
    cell drawn uniformly, then a point uniform in its hexagon by rejection from the bounding square), at least
    ``min_distance_m`` from their site (3GPP TR 36.814: 35 m)."""
    circumradius = inter_site_m / np.sqrt(3)
    if min_distance_m >= inter_site_m / 2:  # the exclusion disk reaches the hexagon's sides: rejection would not end
        raise ValueError(
            f"min_distance_m = {min_distance_m:g} must be below half the inter-site distance {inter_site_m:g} m"
        )
    points = np.empty((size, 2))
    cell = rng.integers(0, len(sites_m), size=size)
    todo = np.arange(size)
    while len(todo):
        offset = rng.uniform(-circumradius, circumradius, size=(len(todo), 2))
        ok = in_hex_cell(offset, inter_site_m) & (np.hypot(offset[:, 0], offset[:, 1]) >= min_distance_m)
        points[todo[ok]] = sites_m[cell[todo[ok]]] + offset[ok]
        todo = todo[~ok]
    return points


def drop_in_disks(
    rng: np.random.Generator, size: int, sites_m: np.ndarray, radius_m: float, min_distance_m: float
) -> np.ndarray:
    """``size`` points [size, 2] (m): a site drawn uniformly, then a point uniform over the annulus
    ``min_distance_m`` <= d <= ``radius_m`` around it (listed sites: disks that may overlap)."""
    cell = rng.integers(0, len(sites_m), size=size)
    radius = np.sqrt(rng.uniform(min_distance_m**2, radius_m**2, size=size))
    angle = rng.uniform(0.0, 2 * np.pi, size=size)
    return sites_m[cell] + np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)


def site_distances_m(position_m: np.ndarray, sites_m: np.ndarray) -> np.ndarray:
    """Every device's ground distance to every site [N, C] (m)."""
    diff = np.asarray(position_m, dtype=np.float64)[:, None, :] - np.asarray(sites_m, dtype=np.float64)[None, :, :]
    return out(np.hypot(diff[..., 0], diff[..., 1]))


def strongest_cell(link_loss_db: np.ndarray) -> np.ndarray:
    """Each device's serving cell [N]: the strongest mean link, i.e. the least loss (path loss + shadowing, dB)
    over the cells [N, C] (every cell transmits its reference signals at the same power); ties: the lower index."""
    return np.argmin(np.asarray(link_loss_db, dtype=np.float64), axis=1)


def handover(serving: np.ndarray, link_loss_db: np.ndarray, margin_db: float) -> np.ndarray:
    """Each device's serving cell after a handover check [N]: the strongest cell if its mean link beats the
    serving cell's by more than ``margin_db`` (the A3 event's hysteresis, TS 36.331 §5.5.4.4), else the same."""
    loss = np.asarray(link_loss_db, dtype=np.float64)
    best = np.argmin(loss, axis=1)
    rows = np.arange(len(loss))
    switch = loss[rows, serving] - loss[rows, best] > margin_db
    return np.where(switch, best, serving)


def open_loop_tx_power_dbm(max_power_dbm, p0_dbm: float, alpha: float, path_loss_db):
    """Open-loop fractional uplink power control, TS 38.213 §7.1.1 (no closed-loop term, one resource):
    P = min(P_max, P0 + α·PL), dBm; P0 the target received power (dBm), α ∈ [0, 1] the fraction of the path loss
    PL (dB, the serving cell's, shadowing included: what the device measures) it compensates."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    return out(np.minimum(np.asarray(max_power_dbm, dtype=np.float64), p0_dbm + alpha * np.asarray(path_loss_db)))


def uplink_interference_w(
    tx_power_w: np.ndarray, gain: np.ndarray, serving: np.ndarray, band: np.ndarray, load: float
) -> np.ndarray:
    """Mean uplink interference at each base station [C] (W), from the expected load of the co-channel cells:
    I_b = load · Σ_{c ≠ b, band(c) = band(b)} mean_{j served by c} P_j g_{j,b}: on a resource, one device of each
    co-channel cell transmits, a cell's average device, a fraction ``load`` of the time (the activity factor; 1:
    full buffer). ``gain`` [N, C]: each device's linear mean gain to each site (path loss and shadowing)."""
    gain = np.asarray(gain, dtype=np.float64)
    num_cells = gain.shape[1]
    mean_rx = np.zeros((num_cells, num_cells))  # [c, b]: cell c's average device, received at site b
    for c in range(num_cells):
        members = serving == c
        if members.any():
            mean_rx[c] = (tx_power_w[members, None] * gain[members]).mean(axis=0)
    co_channel = (band[:, None] == band[None, :]) & ~np.eye(num_cells, dtype=bool)  # [c, b]
    return out(load * (mean_rx * co_channel).sum(axis=0))


def downlink_interference_w(
    bs_power_w: float, gain: np.ndarray, serving: np.ndarray, band: np.ndarray, load: float
) -> np.ndarray:
    """Mean downlink interference at each device [N] (W): load · Σ_{c ≠ serving, band(c) = band(serving)}
    P_BS g_{k,c}, from the co-channel base stations transmitting a fraction ``load`` of the time."""
    gain = np.asarray(gain, dtype=np.float64)
    co_channel = (band[None, :] == band[serving][:, None]) & (np.arange(gain.shape[1])[None, :] != serving[:, None])
    return out(load * bs_power_w * (gain * co_channel).sum(axis=1))


def sinr(signal_w, noise_w, interference_w):
    """Signal to interference and noise ratio (linear): S / (N + Σ I), all in W."""
    return out(np.asarray(signal_w, dtype=np.float64) / (np.asarray(noise_w) + np.asarray(interference_w)))
