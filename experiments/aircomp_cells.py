"""How much the other cells' senders cost over-the-air computation on 7 cells (docs/over-the-air.md, "On several
cells"): for phones-in-a-cell's drop on 7 cells (50 phones, 10 MHz, Rayleigh fading, truncation at 0 dB), every
scheduled device sends in one network-wide slot; per cell, the receive SNR without interference (ρ_c) and with the
other co-channel cells' senders (ρ_c,eff), over rounds and seeds. Engine only (no training): a few seconds.

    .venv/bin/python experiments/aircomp_cells.py [--seeds 0 1 2 3 4] [--rounds 20]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

from edgefl.deployment import build_population, network_params  # noqa: E402
from edgefl.scenario import load_scenario  # noqa: E402
from edgefl.sim import Activity, PhaseRecord, SimPyPricer  # noqa: E402

SCENARIO = REPO / "scenarios" / "phones-in-a-cell.toml"


def losses_db(reuse: int, seeds: list[int], rounds: int) -> np.ndarray:
    """10 log10(ρ_c / ρ_c,eff) (dB) of every cell with senders, every round and seed."""
    out = []
    for seed in seeds:
        s = load_scenario(
            SCENARIO,
            {
                "network.cells": 7,
                "network.reuse": reuse,
                "network.uplink": "aircomp",
                "network.aircomp_threshold_db": 0.0,
                "algorithm.fedavg.weighting": "uniform",
                "algorithm.over_selection": 0.0,
                "devices.speed_mps": 0.0,
                "devices.availability": "always",
                "devices.battery_j": None,
                "run.seed": seed,
            },
        )
        n = s.data.num_clients
        pop = build_population(s.network, s.devices, n, 1.0, 1.0, seed=seed)
        pricer = SimPyPricer(network_params(s.network), pop, seed)
        for r in range(rounds):
            can = pricer.start_round(n)
            chains = {c: [Activity("upload", "upload", bits=32.0 * 7850)] for c in np.flatnonzero(can).tolist()}
            pricer.price_phase(PhaseRecord(r, 0, chains))
            uplink = pricer.uplink
            for c, eff in uplink.cell_snr.items():
                out.append(10 * np.log10(uplink.cell_clear_snr[c] / eff))
    return np.array(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args(argv)
    for reuse in (1, 3):
        loss = losses_db(reuse, args.seeds, args.rounds)
        p = np.percentile(loss, [5, 50, 95])
        print(
            f"reuse {reuse}: {len(loss)} cell-rounds, SNR lost to the other cells' senders (dB): "
            f"5th {p[0]:.2f}, median {p[1]:.2f}, 95th {p[2]:.2f}, max {loss.max():.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
