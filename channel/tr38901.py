"""3GPP TR 38.901 (v17) system-level pieces: LOS probability, path loss and shadowing by LOS state, shadowing
decorrelation distances, the base-station antenna element pattern, and a spatially correlated shadowing field.

Sources (TR 38.901 V17.0.0, 2022-03): Table 7.4.2-1 (LOS probability), Table 7.4.1-1 (path loss and shadow
fading σ), Table 7.5-6 Part-1 (decorrelation distance of the shadow fading), Table 7.3-1 (antenna element
pattern), §7.2 / Table 7.8-1 (sector boresights 30°, 150°, 270°). Outdoor devices only (no O2I loss).
Units: m, GHz for the carrier (as the tables write it), dB, degrees where the name says so.
"""

from __future__ import annotations

import numpy as np

from arraychecks import out

from .path_loss import rma_breakpoint_m, rma_db, uma_db, umi_street_canyon_db

SCENARIOS = ("umi_street_canyon", "uma", "rma")  # the path-loss models with a LOS probability and a σ per state

# Table 7.4.1-1: shadow fading σ (dB) by state; RMa LOS: 4 dB up to the breakpoint, 6 dB beyond (handled below).
SHADOWING_STD_DB = {"umi_street_canyon": (4.0, 7.82), "uma": (4.0, 6.0), "rma": (4.0, 8.0)}  # (LOS, NLOS)
# Table 7.5-6 Part-1: decorrelation distance of the shadow fading (m), (LOS, NLOS).
SHADOWING_DECORRELATION_M = {"umi_street_canyon": (10.0, 13.0), "uma": (37.0, 50.0), "rma": (37.0, 120.0)}


def los_probability(scenario: str, distance_m, ue_height_m: float = 1.5):
    """P_LOS(d2D) of TR 38.901 Table 7.4.2-1 (outdoor devices), d2D the ground distance in m:

    - UMi street canyon: 1 for d <= 18 m, else 18/d + exp(−d/36)·(1 − 18/d);
    - UMa: 1 for d <= 18 m, else [18/d + exp(−d/63)·(1 − 18/d)]·[1 + C'(h_UT)·(5/4)(d/100)³·exp(−d/150)],
      C'(h_UT) = 0 for h_UT <= 13 m, ((h_UT − 13)/10)^1.5 up to 23 m;
    - RMa: 1 for d <= 10 m, else exp(−(d − 10)/1000)."""
    d = np.asarray(distance_m, dtype=np.float64)
    safe = np.maximum(d, 1e-9)
    if scenario == "umi_street_canyon":
        p = np.where(d <= 18.0, 1.0, 18.0 / safe + np.exp(-safe / 36.0) * (1.0 - 18.0 / safe))
    elif scenario == "uma":
        c = 0.0 if ue_height_m <= 13.0 else ((ue_height_m - 13.0) / 10.0) ** 1.5
        base = 18.0 / safe + np.exp(-safe / 63.0) * (1.0 - 18.0 / safe)
        p = np.where(d <= 18.0, 1.0, base * (1.0 + c * 1.25 * (safe / 100.0) ** 3 * np.exp(-safe / 150.0)))
    elif scenario == "rma":
        p = np.where(d <= 10.0, 1.0, np.exp(-(safe - 10.0) / 1000.0))
    else:
        raise ValueError(f"no LOS probability for {scenario!r}; expected one of {SCENARIOS}")
    return out(np.clip(p, 0.0, 1.0))


STATE_MODELS = {"umi_street_canyon": umi_street_canyon_db, "uma": uma_db, "rma": rma_db}


def path_loss_by_state_db(scenario: str, distance_m, los, carrier_ghz, bs_height_m, ue_height_m):
    """Each link's path loss (dB) in its LOS state (``los`` bool, the shape of ``distance_m``)."""
    model = STATE_MODELS[scenario]
    return out(
        np.where(
            los,
            model(distance_m, carrier_ghz, bs_height_m, ue_height_m, True),
            model(distance_m, carrier_ghz, bs_height_m, ue_height_m, False),
        )
    )


def shadowing_std_by_state_db(scenario: str, distance_m, los, carrier_ghz, bs_height_m, ue_height_m):
    """Each link's shadow-fading σ (dB) in its LOS state (Table 7.4.1-1; RMa LOS: 4 dB to d_BP, 6 dB beyond)."""
    sigma_los, sigma_nlos = SHADOWING_STD_DB[scenario]
    d = np.asarray(distance_m, dtype=np.float64)
    los_sigma = np.full(d.shape, sigma_los)
    if scenario == "rma":
        los_sigma = np.where(d <= rma_breakpoint_m(carrier_ghz, bs_height_m, ue_height_m), 4.0, 6.0)
    return out(np.where(los, los_sigma, sigma_nlos))


# -- the base station's antenna element (Table 7.3-1) ---------------------------------------------------------------
ELEMENT_MAX_GAIN_DBI = 8.0  # G_E,max
ELEMENT_HPBW_DEG = 65.0  # θ3dB = φ3dB
ELEMENT_MAX_ATTENUATION_DB = 30.0  # A_max
ELEMENT_SIDE_LOBE_DB = 30.0  # SLA_V
SECTOR_BORESIGHTS_DEG = (30.0, 150.0, 270.0)  # three sectors per site (TR 38.901 Table 7.8-1)


def element_gain_dbi(azimuth_deg, zenith_deg=90.0, tilt_deg=0.0):
    """The TR 38.901 Table 7.3-1 element gain (dBi) towards an azimuth off boresight φ (deg, any value: wrapped to
    (−180, 180]) and a zenith angle θ (deg; 90: the horizon), the element tilted down by ``tilt_deg``:
    A_H = −min(12 (φ/65)², 30), A_V = −min(12 ((θ − 90 − tilt)/65)², 30), A = −min(−(A_H + A_V), 30),
    G = 8 dBi + A. At boresight 8 dBi; at ±32.5° on the horizon 5 dBi (−3 dB); behind the antenna 8 − 30 = −22 dBi."""
    phi = (np.asarray(azimuth_deg, dtype=np.float64) + 180.0) % 360.0 - 180.0
    theta = np.asarray(zenith_deg, dtype=np.float64) - 90.0 - tilt_deg
    a_h = -np.minimum(12.0 * (phi / ELEMENT_HPBW_DEG) ** 2, ELEMENT_MAX_ATTENUATION_DB)
    a_v = -np.minimum(12.0 * (theta / ELEMENT_HPBW_DEG) ** 2, ELEMENT_SIDE_LOBE_DB)
    return out(ELEMENT_MAX_GAIN_DBI - np.minimum(-(a_h + a_v), ELEMENT_MAX_ATTENUATION_DB))


PANEL_SPACING_WAVELENGTHS = 0.8  # vertical element spacing d_V of TR 38.901 Table 7.8-1's BS antenna configuration 1


def column_gain_db(
    zenith_deg, rows: int, tilt_deg: float = 0.0, spacing_wavelengths: float = PANEL_SPACING_WAVELENGTHS
):
    """Array gain (dB) of a vertical column of ``rows`` elements ``spacing_wavelengths`` apart, electrically tilted
    down by ``tilt_deg`` (TR 38.901 §7.3: weights w_m = exp(−j2π m d cos θ_tilt)/sqrt(M), θ_tilt = 90° + tilt):
    10 log10 |Σ_m exp(j2π m d (cos θ − cos θ_tilt))|² / M, 10 log10 M at the beam, 0 dB for one element."""
    theta = np.radians(np.asarray(zenith_deg, dtype=np.float64))
    if rows == 1:
        return out(np.zeros(theta.shape))
    phase = 2.0 * np.pi * spacing_wavelengths * (np.cos(theta) - np.cos(np.radians(90.0 + tilt_deg)))
    m = np.arange(rows)
    field = np.exp(1j * phase[..., None] * m).sum(axis=-1)
    with np.errstate(divide="ignore"):
        return out(np.maximum(10.0 * np.log10(np.abs(field) ** 2 / rows), -100.0))


# -- a spatially correlated shadowing field -------------------------------------------------------------------------
class CorrelatedField:
    """A zero-mean, unit-variance random field z(x) on the plane with E[z(x) z(y)] = exp(−|x − y| / d_corr) (the
    exponential model of TR 38.901 §7.5 step 4 / §7.6.3.1), one per (site, LOS state), as a sum of M random
    sinusoids (random Fourier features, Rahimi & Recht 2007): z(x) = sqrt(2/M) Σ_m cos(k_m·x + ψ_m), ψ uniform,
    k_m drawn from the spectral density of the exponential kernel in 2-D, p(k) ∝ (1/d² + |k|²)^(−3/2), i.e.
    |k| = (1/d)·sqrt(1/(1 − u)² − 1) with u ~ U(0, 1), the direction uniform. The covariance over realisations is
    exactly the model's; one realisation is approximately Gaussian (M terms, central limit). A field is defined
    everywhere, so a moving device reads the same field at its new position (mobility moves through it)."""

    def __init__(self, rng: np.random.Generator, decorrelation_m: np.ndarray, terms: int = 256):
        """``decorrelation_m`` [F]: one independent field per entry (m, > 0)."""
        d = np.asarray(decorrelation_m, dtype=np.float64)
        u = rng.uniform(0.0, 1.0, size=(len(d), terms))
        radius = np.sqrt(1.0 / (1.0 - u) ** 2 - 1.0) / d[:, None]
        angle = rng.uniform(0.0, 2.0 * np.pi, size=(len(d), terms))
        self.k = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=-1)  # [F, M, 2] rad/m
        self.phase = rng.uniform(0.0, 2.0 * np.pi, size=(len(d), terms))  # [F, M]
        self.terms = terms

    def values(self, position_m: np.ndarray) -> np.ndarray:
        """z of every field at every point [N, F] (``position_m`` [N, 2] or [N, F, 2]: a point per field)."""
        p = np.asarray(position_m, dtype=np.float64)
        if p.ndim == 2:
            arg = np.einsum("nd,fmd->nfm", p, self.k)
        else:
            arg = np.einsum("nfd,fmd->nfm", p, self.k)
        return out(np.sqrt(2.0 / self.terms) * np.cos(arg + self.phase[None]).sum(axis=-1))


def hex_wrap_shifts_m(num_sites: int, inter_site_m: float) -> np.ndarray:
    """The 7 translations (x, y) [7, 2] in m of a hexagonal layout of 1 + 3n(n + 1) sites (n rings: 7 or 19 sites)
    under which copies of it tile the plane (wraparound): none, and (q, r) = (n + 1, n) in axial coordinates and
    its five rotations by 60° ((q, r) -> (−r, q + r)); |shift|² = 3n² + 3n + 1 sites' worth of area × ISD²."""
    rings = {7: 1, 19: 2}.get(num_sites)
    if rings is None:
        raise ValueError(f"wraparound needs a hexagonal layout of 7 or 19 sites, got {num_sites}")
    q, r = rings + 1, rings
    axial = [(0, 0)]
    for _ in range(6):
        axial.append((q, r))
        q, r = -r, q + r
    a = np.array(axial, dtype=np.float64)
    return out(inter_site_m * np.stack([a[:, 0] + a[:, 1] / 2, (np.sqrt(3) / 2) * a[:, 1]], axis=1))


def wrapped_offsets_m(position_m: np.ndarray, site_m: np.ndarray, shifts_m: np.ndarray) -> np.ndarray:
    """Each device's offset (x, y) [N, S, 2] to the nearest copy of each site (the site moved by each of
    ``shifts_m`` [K, 2]; K = 1 with the zero shift: no wraparound)."""
    p = np.asarray(position_m, dtype=np.float64)[:, None, None, :]
    copies = np.asarray(site_m, dtype=np.float64)[None, :, None, :] + np.asarray(shifts_m)[None, None, :, :]
    offset = p - copies  # [N, S, K, 2]
    nearest = np.argmin(np.hypot(offset[..., 0], offset[..., 1]), axis=2)  # [N, S]
    return out(np.take_along_axis(offset, nearest[:, :, None, None], axis=2)[:, :, 0, :])
