"""The large-scale loss of every device-cell link of a multi-site layout (docs/multi-cell.md, "A 3GPP layout"):

    coupling loss (dB) = PL_state(d) + σ_state · z − G_sector(φ, θ)

- d: the ground distance to the site, or to its nearest copy with wraparound (channel.tr38901.hex_wrap_shifts_m),
  at least ``min_distance_m``;
- the LOS state of a device-site link (``los_mode = "random"``): LOS where u < P_LOS(d) (TR 38.901 Table 7.4.2-1),
  u ~ U(0, 1) drawn once per link: each link's state has the table's probability at every distance, and a moving
  device keeps its u (it turns LOS when it comes close enough: a simple spatially consistent state, in the spirit of
  §7.6.3.3, with an infinite correlation distance along its walk); fixed states: "los" or "nlos";
- z: standard normal per link, drawn once (``independent``), or spatially correlated fields read at the device's
  position (``correlated``): z = sqrt(ρ) z_common(x) + sqrt(1 − ρ) z_site(x), ρ the correlation between sites,
  each z exponentially correlated in space (channel.tr38901.CorrelatedField);
- σ: the state's (Table 7.4.1-1) with random LOS and no σ given, else the σ given;
- G: the sector's TR 38.901 element gain (Table 7.3-1) towards the device, times a vertical column's array gain
  with ``antenna_rows`` > 1 (channel.tr38901.column_gain_db); 0 dBi with one (omnidirectional) cell per site. Cell c is sector c mod K of site c // K (K sectors per site).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .tr38901 import SECTOR_BORESIGHTS_DEG, CorrelatedField, column_gain_db, element_gain_dbi, wrapped_offsets_m


@dataclass
class LargeScale:
    site_m: np.ndarray  # [S, 2] m
    sectors: int  # 1 (omnidirectional) or 3 per site
    shifts_m: np.ndarray  # [K, 2] wraparound translations (the zero shift only: none)
    min_distance_m: float
    path_loss_db: Callable[[np.ndarray], np.ndarray]  # the scenario's model in its fixed state, at a distance
    # random LOS: (distance, los) -> dB, P_LOS(distance), (distance, los) -> σ dB; None: a fixed state
    state_path_loss_db: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None
    los_probability: Callable[[np.ndarray], np.ndarray] | None = None
    state_sigma_db: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None
    los_uniform: np.ndarray | None = None  # [N, S] one u per link
    sigma_db: float | None = 0.0  # one σ for every link (None: the state's)
    z: np.ndarray | None = None  # [N, S] independent shadowing (standard normal), or None: the fields
    field: CorrelatedField | None = None  # correlated: fields [common LOS, common NLOS, S × LOS, S × NLOS]
    site_correlation: float = 0.5
    bs_height_m: float = 10.0
    ue_height_m: float = 1.5
    downtilt_deg: float = 0.0
    antenna_rows: int = 1  # a vertical column of elements per sector (1: the element alone, tilted mechanically)

    @property
    def num_cells(self) -> int:
        return len(self.site_m) * self.sectors

    def offsets_m(self, position_m: np.ndarray) -> np.ndarray:
        """Each device's offset [N, S, 2] to each site (its nearest copy with wraparound)."""
        return wrapped_offsets_m(position_m, self.site_m, self.shifts_m)

    def distance_m(self, position_m: np.ndarray) -> np.ndarray:
        """Ground distance [N, S] to each site (its nearest copy), at least min_distance_m."""
        offset = self.offsets_m(position_m)
        return np.maximum(np.hypot(offset[..., 0], offset[..., 1]), self.min_distance_m)

    def los(self, position_m: np.ndarray) -> np.ndarray | None:
        """Each device-site link's LOS state [N, S] (bool), or None with a fixed state."""
        if self.los_probability is None or self.los_uniform is None:
            return None
        return self.los_uniform < self.los_probability(self.distance_m(position_m))

    def shadowing_db(self, position_m: np.ndarray, distance_m: np.ndarray, los: np.ndarray | None) -> np.ndarray:
        """Each link's shadowing [N, S] (dB)."""
        if self.z is not None:
            z = self.z
        else:
            assert self.field is not None
            sites = len(self.site_m)
            values = self.field.values(position_m)  # [N, 2 + 2S]
            rho = self.site_correlation
            z_los = np.sqrt(rho) * values[:, 0:1] + np.sqrt(1.0 - rho) * values[:, 2 : 2 + sites]
            z_nlos = np.sqrt(rho) * values[:, 1:2] + np.sqrt(1.0 - rho) * values[:, 2 + sites :]
            z = z_nlos if los is None else np.where(los, z_los, z_nlos)
        if self.sigma_db is not None:
            return self.sigma_db * z
        assert self.state_sigma_db is not None and los is not None
        return self.state_sigma_db(distance_m, los) * z

    def site_shadowing_db(self, position_m: np.ndarray) -> np.ndarray:
        """Each device's shadowing towards each site [N, S] (dB) at ``position_m``."""
        return self.shadowing_db(position_m, self.distance_m(position_m), self.los(position_m))

    def site_loss_db(self, position_m: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Each device's path loss + shadowing to each site [N, S] (dB), and the links' LOS states (or None)."""
        distance = self.distance_m(position_m)
        los = self.los(position_m)
        if los is not None and self.state_path_loss_db is not None:
            path_loss = self.state_path_loss_db(distance, los)
        else:
            path_loss = np.asarray(self.path_loss_db(distance), dtype=np.float64)
        return path_loss + self.shadowing_db(position_m, distance, los), los

    def sector_gain_dbi(self, position_m: np.ndarray) -> np.ndarray:
        """Each sector's antenna gain towards each device [N, S, K] (dBi)."""
        offset = self.offsets_m(position_m)
        azimuth = np.degrees(np.arctan2(offset[..., 1], offset[..., 0]))  # [N, S], from the site
        ground = np.maximum(np.hypot(offset[..., 0], offset[..., 1]), self.min_distance_m)
        zenith = 90.0 + np.degrees(np.arctan2(self.bs_height_m - self.ue_height_m, ground))  # below the horizon
        boresight = np.asarray(SECTOR_BORESIGHTS_DEG)[None, None, :]
        if self.antenna_rows == 1:  # one element, tilted down mechanically
            return element_gain_dbi(azimuth[..., None] - boresight, zenith[..., None], self.downtilt_deg)
        # a column: upright elements, the beam tilted electrically (TR 38.901 calibration, configuration 1)
        element = element_gain_dbi(azimuth[..., None] - boresight, zenith[..., None], 0.0)
        return element + column_gain_db(zenith, self.antenna_rows, self.downtilt_deg)[..., None]

    def loss_db(self, position_m: np.ndarray) -> np.ndarray:
        """Every device's coupling loss to every cell [N, S·K] (dB): its site's path loss and shadowing, less the
        sector's antenna gain."""
        site_loss, _ = self.site_loss_db(position_m)
        if self.sectors == 1:
            return site_loss
        loss = site_loss[:, :, None] - self.sector_gain_dbi(position_m)
        return loss.reshape(len(loss), -1)
