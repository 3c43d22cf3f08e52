"""Byte-identity of a run's outputs between two versions of the engine (issue 21's must-show table).

    python benchmarks/engine_identity.py run OUT [--rounds 8] [--only CASE,...] [--full-phones]
        runs every case with ``python -m edgefl run ... --no-plots -q`` into OUT/<case>/ (the code on
        PYTHONPATH / the current checkout)
    python benchmarks/engine_identity.py compare A B
        compares A/<case>/<file> with B/<case>/<file> byte for byte, prints a table; exit 1 if any differ

Cases: every committed scenario (scenarios/*.toml, ``run.rounds`` cut to --rounds, phones-in-a-cell at its
full 60 rounds with --full-phones) and the engine cases of the SimPy issue's old-vs-new table on the
quickstart scenario: deadline, TDMA, FDMA, Rayleigh, Rician, outage, link budget, everything on (plus block
fading, radio states, batteries that run out mid-chain, a controller that sets knobs, failures and
over-selection, which the pricer's components serve), and HierFAVG's edge servers (several cells, a backhaul). Each engine case exercises what it names (deadline:
27 cuts; outage: 12 lost messages; batteries: 39 chains stopped empty; failures: 23 failed, 5 stopped).
"""

from __future__ import annotations

import argparse
import filecmp
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = ("metrics.csv", "events.csv", "clients.csv", "battery.csv", "positions.csv")
QUICK = ROOT / "scenarios" / "quickstart.toml"
MNIST = ROOT.parent / "shared" / "datasets" / "mnist"
# Scenarios whose data set is not shipped: run on the MNIST test split (KMNIST has the same IDX format).
DATA = {"drdm-mnist-linear": [f"data.dir={MNIST}"], "drdm-kmnist-cnn": [f"data.dir={MNIST}", "data.name=mnist"]}

# Engine cases: overrides of the quickstart scenario (FDMA, Rayleigh, MCS by default) without its snr_db line
# (the default is the same 20 dB, and a link budget can then replace it).
BASE = ["network.access=dedicated", "network.fading=none", "network.rate=shannon"]
EVERYTHING = [
    "network.cell_radius_m=500",
    "network.shadowing_std_db=8",
    "network.noise_figure_db=9",
    "network.bandwidth_mhz=10",
    "network.access=fdma",
    "network.fading=rayleigh",
    "network.rate=mcs",
    "network.max_retransmissions=3",
    "network.access_latency_s=0.05",
    "network.deadline_s=2.0",
    "network.header_bits=800",
    "devices.tail_s=1.0",
    "devices.tail_power_w=1.0",
    "devices.battery_j=300",
    "devices.battery_reserve_j=10",
    "devices.harvest_w=0.02",
    "devices.availability=markov",
    "devices.mean_on_s=30",
    "devices.mean_off_s=15",
    "devices.speed_mps=1.4",
    "devices.slowdown=exponential",
    "devices.slowdown_mean=0.5",
]
ENGINE_CASES = {
    "default": BASE,
    "deadline": BASE + ["network.deadline_s=0.02", "devices.slowdown=exponential"],
    "tdma": BASE[1:] + ["network.access=tdma", "devices.tail_s=0.5", "devices.tail_power_w=0.5"],
    "fdma": BASE[1:] + ["network.access=fdma"],
    "rayleigh": ["network.access=fdma", "network.fading=rayleigh", "network.rate=shannon"],
    "rician": ["network.access=fdma", "network.fading=rician", "network.rician_k=3", "network.rate=mcs"],
    "outage": BASE + ["network.fading=rayleigh", "network.outage_snr_db=17", "network.max_retransmissions=1"],
    "batteries": BASE
    + [
        "devices.battery_j=0.008",
        "devices.battery_reserve_j=0.001",
        "devices.harvest_w=0.0001",
        "network.access_latency_s=0.01",
        "devices.tail_s=0.2",
        "devices.tail_power_w=0.5",
    ],
    "block-fading": ["network.coherence_s=0.01", "network.access=fdma", "network.fading=rayleigh"],
    "link-budget": BASE + ["network.cell_radius_m=300", "network.noise_figure_db=9", "network.shadowing_std_db=8"],
    "radio-states": [
        "network.access_latency_s=0.1",
        "devices.tail_s=2",
        "devices.tail_power_w=1",
        "devices.promotion_power_w=1.2",
        "network.deadline_s=0.6",
    ],
    "failures-overselect": ["devices.p_fail=0.2", "algorithm.over_selection=0.3"],
    "control-min-energy": BASE[1:] + ["network.access=fdma", "control.name=min_energy", "network.deadline_s=1.0"],
    "everything": EVERYTHING,
    "everything-tdma": EVERYTHING + ["network.access=tdma", "devices.p_fail=0.1"],
    # a selection policy without a controller (its own observer), and a controller that only plans (τ)
    "selection-alone": BASE[1:] + ["network.access=fdma", "selection.name=energy_aware"],
    "control-adaptive-tau": ["control.name=adaptive_tau", "run.eval_every=1"],
    # every optional part a run is built from: a controller, a selection policy, a compressor, a backhaul
    "parts": BASE[1:]
    + ["network.access=fdma", "control.name=min_energy", "network.deadline_s=1.0", "selection.name=best_channel"]
    + ["compression.name=qsgd", "compression.bits=4", "backhaul.rate_mbps=100", "backhaul.latency_ms=5"],
    # edge servers and a cloud: HierFAVG over several cells, over one cell with a backhaul, over one cell alone
    # (FedAvg's outputs), and FedAvg with a backhaul (its columns, no edge rounds)
    "hierfavg-cells": ["algorithm.name=hierfavg", "algorithm.hierfavg.edge_rounds=2", "network.cells=7"]
    + ["network.cell_radius_m=300", "devices.speed_mps=1.4"],
    "hierfavg-backhaul": ["algorithm.name=hierfavg", "algorithm.hierfavg.edge_rounds=3", "backhaul.rate_mbps=50"],
    "hierfavg-alone": ["algorithm.name=hierfavg", "algorithm.hierfavg.edge_rounds=2"],
    "fedavg-backhaul": ["backhaul.rate_mbps=100", "backhaul.latency_ms=5"],
    # an asynchronous server: chains dispatched one at a time, trained when they end (Engine.settle); update
    # compression's stream and error feedback in dispatch order
    "fedasync": ["algorithm.name=fedasync", "algorithm.fedasync.concurrency=5", "run.threads=1"],
    "fedbuff-everything": EVERYTHING
    + ["algorithm.name=fedbuff", "algorithm.fedbuff.buffer_size=3", "algorithm.fedbuff.max_staleness=4"]
    + ["compression.name=qsgd", "compression.bits=4", "run.threads=1"],
    "fedasync-topk": ["algorithm.name=fedasync", "compression.name=topk", "run.threads=1"],
}


def cases(rounds: int, full_phones: bool, base: Path) -> dict[str, list[str]]:
    """case -> the edgefl run arguments (scenario, --set ...); ``base``: where the engine cases' scenario is written."""
    base.write_text(
        "".join(line for line in QUICK.read_text().splitlines(keepends=True) if not line.startswith("snr_db"))
    )
    out = {}
    for path in sorted((ROOT / "scenarios").glob("*.toml")):
        n = None if (full_phones and path.stem == "phones-in-a-cell") else rounds
        args = [str(path)] + ([] if n is None else ["--set", f"run.rounds={n}"])
        for s in DATA.get(path.stem, []):
            args += ["--set", s]
        out[f"scenario:{path.stem}"] = args
    for name, sets in ENGINE_CASES.items():
        args = [str(base), "--set", f"run.rounds={rounds}"]
        for s in sets:
            args += ["--set", s]
        out[f"engine:{name}"] = args
    return out


def run(out: Path, rounds: int, only: set[str] | None, full_phones: bool) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for case, args in cases(rounds, full_phones, out / "engine-base.toml").items():
        if only and case.split(":", 1)[1] not in only and case not in only:
            continue
        folder = out / case.replace(":", "_")
        t = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "edgefl", "run", *args, "--out", str(folder), "--force", "--no-plots", "-q"],
            cwd=out,
            capture_output=True,
            text=True,
            env=os.environ,
        )
        status = "ok" if proc.returncode == 0 else f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}"
        print(f"{case:40s} {time.perf_counter() - t:6.1f} s  {status}", flush=True)


def compare(a: Path, b: Path) -> int:
    names = sorted({p.name for p in a.iterdir() if p.is_dir()} | {p.name for p in b.iterdir() if p.is_dir()})
    bad = 0
    print(f"{'case':40s} result")
    for name in names:
        present, differ = [], []
        for f in FILES:
            fa, fb = a / name / f, b / name / f
            if not fa.exists() and not fb.exists():
                continue
            if fa.exists() != fb.exists():
                differ.append(f + (" (only in A)" if fa.exists() else " (only in B)"))
            elif not filecmp.cmp(fa, fb, shallow=False):
                differ.append(f)
            else:
                present.append(f)
        if not present and not differ:
            differ.append("no outputs")
        bad += bool(differ)
        print(f"{name:40s} " + (f"differ: {', '.join(differ)}" if differ else f"identical ({len(present)} files)"))
    print(f"{len(names) - bad} of {len(names)} cases identical")
    return 1 if bad else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("out", type=Path)
    r.add_argument("--rounds", type=int, default=8)
    r.add_argument("--only", default="")
    r.add_argument("--full-phones", action="store_true")
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = parser.parse_args()
    if args.cmd == "run":
        run(args.out, args.rounds, set(filter(None, args.only.split(","))) or None, args.full_phones)
    else:
        sys.exit(compare(args.a, args.b))


if __name__ == "__main__":
    main()
