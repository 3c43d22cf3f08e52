"""docs/calibration.md: edgefl's TR 38.901 UMi and UMa layouts against the 3GPP large-scale calibration.

Geometry only (no training, no engine): for each layout (19 sites, 3 sectors, wraparound, random LOS, 6 GHz), devices
are dropped as a run drops them (edgefl.deployment.build_population), and their coupling loss to the serving cell and
their downlink geometry are taken from the links' large-scale loss (channel.large_scale) with the interference
formula a run uses (channel.cells.downlink_interference_w, full load). The reference is the median over companies of
the 3GPP calibration results, R1-165974 (TR 38.901 §7.8.1, 6 GHz), as tabulated at 5 %, 10 %, ..., 95 % in
QuaDRiGa's tutorials/calib_3GPP_ref_data.m (fraunhoferhhi/QuaDRiGa, commit 03ce921).

    .venv/bin/python experiments/calibration.py                 # ~10 s
    .venv/bin/python experiments/calibration.py --from-data     # re-render from docs/data/calibration.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from channel import db_to_linear, dbm_to_w, linear_to_db, noise_power_w  # noqa: E402
from channel.cells import downlink_interference_w  # noqa: E402
from edgefl.deployment import build_population  # noqa: E402
from edgefl.results import atomic_write_text  # noqa: E402
from edgefl.scenario import scenario_from_dict  # noqa: E402
from experiments import pages, provenance  # noqa: E402

PAGE = ROOT / "docs" / "calibration.md"
FIGURE = ROOT / "docs" / "figures" / "calibration.png"
DATA = ROOT / "docs" / "data" / "calibration.json"
PERCENTILES = (5, 50, 95)

# TR 38.901 Table 7.8-1 (large-scale calibration), what edgefl models of it: 6 GHz, 20 MHz, UT noise figure 9 dB,
# BS power 44 dBm (UMi) / 49 dBm (UMa), minimum distance 10 m / 35 m, 12 deg downtilt, handover margin 0 (the
# strongest cell serves). Not modelled: 80 % of the devices indoor (O2I loss, heights 3(n_fl - 1) + 1.5 m), the BS
# panel (10 x 1 elements: ~10 dB array gain, a narrower vertical beam).
LAYOUTS = {
    "UMi, ISD 200 m": {
        "path_loss": "umi_street_canyon",
        "inter_site_m": 200.0,
        "bs_height_m": 10.0,
        "min_distance_m": 10.0,
        "bs_tx_power_dbm": 44.0,
        "reference": 0,
    },
    "UMa, ISD 500 m": {
        "path_loss": "uma",
        "inter_site_m": 500.0,
        "bs_height_m": 25.0,
        "min_distance_m": 35.0,
        "bs_tx_power_dbm": 49.0,
        "reference": 1,
    },
}
# R1-165974 medians at 6 GHz, percentiles 5, 10, ..., 95 (QuaDRiGa's cl38900a(1, :, s) and gf38900a(1, :, s)): the
# coupling gain (dB, the negative of the coupling loss) and the geometry (dB, serving / sum of the others, no noise).
REFERENCE_GAIN_DB = (
    [-142.3, -136.4, -132.4, -128.9, -125.8, -122.9, -120.3, -117.6, -115.0, -112.2,
     -109.5, -106.4, -103.2, -99.9, -96.2, -92.2, -87.6, -82.0, -74.8],  # UMi
    [-150.4, -144.7, -140.6, -137.0, -133.9, -131.1, -128.4, -125.8, -123.1, -120.3,
     -117.5, -114.7, -111.8, -109.1, -106.1, -102.8, -98.8, -93.7, -86.0],  # UMa
)  # fmt: skip
REFERENCE_GEOMETRY_DB = (
    [-1.7, -0.5, 0.4, 1.2, 2.1, 3.0, 4.0, 5.0, 6.1, 7.3, 8.6, 9.9, 11.4, 13.0, 14.9, 17.0, 19.4, 22.1, 24.9],
    [-1.0, 0.1, 1.1, 2.0, 2.9, 3.9, 5.0, 6.0, 7.2, 8.6, 9.9, 11.3, 12.9, 14.7, 16.5, 18.6, 20.9, 23.4, 25.6],
)


ROWS = (10, 1)  # the calibration's panel (Table 7.8-1, configuration 1: 10 x 1 elements, 0.8 wavelengths), one element


def network_keys(layout: dict, rows: int) -> dict:
    keys = {k: v for k, v in layout.items() if k != "reference"}
    return keys | {
        "antenna_rows": rows,
        "cells": 19,
        "sectors": 3,
        "wraparound": True,
        "line_of_sight": "random",
        "carrier_ghz": 6.0,
        "bandwidth_mhz": 20.0,
        "device_noise_figure_db": 9.0,
        "downtilt_deg": 12.0,
        "cell_radius_m": layout["inter_site_m"] / np.sqrt(3.0),
    }


def drop(layout: dict, rows: int, devices: int, seed: int) -> dict[str, np.ndarray]:
    """Coupling loss (dB), geometry SIR and SINR (dB) of ``devices`` dropped on the layout."""
    scenario = scenario_from_dict({"network": network_keys(layout, rows)})
    pop = build_population(scenario.network, scenario.devices, devices, 1.0, 1.0, seed=seed)
    cells = pop.cells
    assert cells is not None
    loss = cells.link_loss_db(cells.position_m)
    rows = np.arange(devices)
    coupling = loss[rows, cells.serving]
    gain = db_to_linear(-loss)
    bs_w = float(dbm_to_w(layout["bs_tx_power_dbm"]))
    interference = downlink_interference_w(bs_w, gain, cells.serving, cells.band, 1.0)
    signal = bs_w * gain[rows, cells.serving]
    noise = noise_power_w(20e6, 9.0)
    return {
        "coupling_loss_db": coupling,
        "sir_db": linear_to_db(signal / interference),
        "sinr_db": linear_to_db(signal / (interference + noise)),
        "los": cells.serving_los(cells.position_m, cells.serving),
    }


def measure(devices: int, seeds: list[int]) -> dict:
    results = {}
    for (layout_name, layout), rows in ((item, rows) for item in LAYOUTS.items() for rows in ROWS):
        name = f"{layout_name}, {'panel of ' + str(rows) if rows > 1 else 'one element'}"
        drops = [drop(layout, rows, devices, seed) for seed in seeds]
        merged = {k: np.concatenate([d[k] for d in drops]) for k in drops[0]}
        ref = layout["reference"]
        results[name] = {
            "layout": layout_name,
            "rows": rows,
            "devices": int(len(merged["coupling_loss_db"])),
            "los_share": float(np.mean(merged["los"])),
            "coupling_loss_db": {p: float(np.percentile(merged["coupling_loss_db"], p)) for p in PERCENTILES},
            "sir_db": {p: float(np.percentile(merged["sir_db"], p)) for p in PERCENTILES},
            "sinr_db": {p: float(np.percentile(merged["sinr_db"], p)) for p in PERCENTILES},
            # the reference's coupling loss at percentile p is minus its coupling gain at 100 - p
            "reference_coupling_loss_db": {p: -REFERENCE_GAIN_DB[ref][(100 - p) // 5 - 1] for p in PERCENTILES},
            "reference_geometry_db": {p: REFERENCE_GEOMETRY_DB[ref][p // 5 - 1] for p in PERCENTILES},
            "cdf": {
                k: np.sort(merged[k]).tolist()[:: max(1, len(merged[k]) // 400)] for k in ("coupling_loss_db", "sir_db")
            },
        }
    return results


def figure(results: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    colours = {"UMi, ISD 200 m": "tab:blue", "UMa, ISD 500 m": "tab:red"}
    levels = np.arange(5, 100, 5)
    for name, r in results.items():
        ref = LAYOUTS[r["layout"]]["reference"]
        style = "-" if r["rows"] > 1 else ":"
        for ax, key, ref_x in (
            (axes[0], "coupling_loss_db", [-g for g in REFERENCE_GAIN_DB[ref][::-1]]),
            (axes[1], "sir_db", REFERENCE_GEOMETRY_DB[ref]),
        ):
            x = np.asarray(r["cdf"][key])
            ax.plot(
                x, 100 * np.arange(1, len(x) + 1) / len(x), style, color=colours[r["layout"]], label=f"edgefl, {name}"
            )
            if r["rows"] > 1:
                ax.plot(ref_x, levels, "+--", color=colours[r["layout"]], label=f"3GPP R1-165974, {r['layout']}")
    axes[0].set_xlabel("coupling loss to the serving cell (dB)")
    axes[1].set_xlabel("downlink geometry, no noise (dB)")
    for ax in axes:
        ax.set_ylabel("CDF (%)")
        ax.grid(alpha=0.3)
    axes[1].set_xlim(-15, 35)
    axes[0].legend(fontsize=7, loc="lower right")
    fig.suptitle("TR 38.901 large-scale calibration, 6 GHz, 19 sites x 3 sectors, wraparound")
    fig.tight_layout()
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(FIGURE, dpi=110)
    plt.close(fig)


def summary(stored: dict) -> dict:
    """The page's numbers from the stored results (docs/data/calibration.json; percentile keys as strings)."""
    results = stored["results"]
    panel = [r for r in results.values() if r["rows"] > 1]

    def spread(values) -> str:
        return f"{min(values):.1f}-{max(values):.1f} dB"

    def pair(ours: dict, ref: dict | None) -> list[str]:
        return [f"{ours[str(p)]:.1f} / " + (f"{ref[str(p)]:.1f}" if ref else "–") for p in PERCENTILES]

    rows = []
    for name, r in results.items():
        rows.append(
            {
                "name": name,
                "metric": "coupling loss (dB)",
                "cells": pair(r["coupling_loss_db"], r["reference_coupling_loss_db"]),
            }
        )
        rows.append(
            {"name": name, "metric": "geometry, no noise (dB)", "cells": pair(r["sir_db"], r["reference_geometry_db"])}
        )
        rows.append({"name": name, "metric": "geometry SINR with noise (dB)", "cells": pair(r["sinr_db"], None)})
    panel_of = {r["layout"]: r for r in panel}
    return {
        "rows": rows,
        "los": ", ".join(f"{name}: {100 * r['los_share']:.0f} %" for name, r in results.items()),
        "devices": next(iter(results.values()))["devices"],
        "gap_text": ", ".join(
            f"{r['reference_geometry_db']['50'] - r['sir_db']['50']:.1f} dB ({r['layout'].split(',')[0]})"
            for r in panel
        ),
        "cl_gap": spread([r["reference_coupling_loss_db"]["50"] - r["coupling_loss_db"]["50"] for r in panel]),
        "low_gap": spread([r["reference_geometry_db"]["5"] - r["sir_db"]["5"] for r in panel]),
        "high_gap": spread([abs(r["reference_geometry_db"]["95"] - r["sir_db"]["95"]) for r in panel]),
        "element_gap": spread(
            [panel_of[r["layout"]]["sir_db"]["50"] - r["sir_db"]["50"] for r in results.values() if r["rows"] == 1]
        ),
    }


def render(stored: dict) -> str:
    """docs/calibration.md from the stored results (experiments/templates/calibration.md.j2)."""
    return pages.render(
        "calibration.md.j2",
        produced=provenance.line(stored["produced"]),
        command=stored["produced"]["command"],
        **summary(stored),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", type=int, default=5700, help="devices per drop (default 5700: 100 per cell)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--from-data", action="store_true", help="re-render the page from docs/data/calibration.json")
    args = parser.parse_args(argv)
    if not args.from_data:
        start = time.perf_counter()
        results = measure(args.devices, args.seeds)
        command = "python experiments/calibration.py" + ("" if argv is None else " " + " ".join(argv))
        produced = provenance.current(command.strip(), time.perf_counter() - start)
        atomic_write_text(DATA, json.dumps({"results": results, "produced": produced}, indent=1) + "\n")
    stored = json.loads(DATA.read_text())
    figure(stored["results"])
    atomic_write_text(PAGE, render(stored))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
