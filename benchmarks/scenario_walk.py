"""The walk of the scenario from ``Simulation.__init__`` (issue 32 item 4's must-show): which files the Scenario
object itself is handed to while a run is built, and how often the walk climbs back up.

    python benchmarks/scenario_walk.py [--set key=value ...]

Traced with ``sys.setprofile``: every Python call made inside ``Simulation(scenario)`` whose frame holds the
scenario object (by identity: an argument, an item of a tuple argument, ``self`` of one of its methods) is a *handoff* from the nearest frame
up the stack that held it. Printed: the handoffs in order (caller file -> callee file, function), the distinct
files (edgefl's own), the *climbs back up* (a handoff into a file above the caller in the walk's tree, each file's
parent being the file that first handed it the object) and the *second paths* (a file handed the object again from
another file than its parent: the runner reading the scenario before and after parts.py, say). Sections (``s.network`` ...)
are traced too: the walk is every file the scenario or one of its sections is handed to. The default scenario is quickstart with
every optional part on (controller, selection policy, compressor, backhaul), so every builder is visited.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EVERY_PART = [
    "network.access=fdma",
    "network.deadline_s=1.0",
    "control.name=min_energy",
    "selection.name=best_channel",
    "compression.name=qsgd",
    "compression.bits=4",
    "backhaul.rate_mbps=100",
    "backhaul.latency_ms=5",
    "run.rounds=1",
]


def short(filename: str) -> str:
    path = Path(filename).resolve()
    for base in (ROOT, *map(Path, sys.path)):
        try:
            return str(path.relative_to(Path(base).resolve()))
        except ValueError:
            continue
    return filename


def trace(scenario) -> list[tuple[str, str, str, str]]:
    """(caller file, callee file, callee function, what) of every handoff of ``scenario`` or one of its sections
    during ``Simulation(scenario)``; what: "scenario" or the section's name."""
    from pydantic import BaseModel

    from edgefl.runner import Simulation

    watched = {id(scenario): "scenario"}
    for name in type(scenario).model_fields:
        value = getattr(scenario, name)
        if isinstance(value, BaseModel):
            watched[id(value)] = name

    holders: list[object] = []  # the frames holding the scenario, outermost first
    handoffs: list[tuple[str, str, str, str]] = []

    def profile(frame, event, arg):
        if event == "call":
            values = list(frame.f_locals.values())
            values += [item for v in values if isinstance(v, tuple) for item in v]  # sections handed in a tuple too
            held = [watched[id(v)] for v in values if id(v) in watched]
            if held:
                parent = frame.f_back
                while parent is not None and parent not in holders:
                    parent = parent.f_back
                caller = short(parent.f_code.co_filename) if parent is not None else "<start>"
                what = "scenario" if "scenario" in held else ",".join(dict.fromkeys(held))
                handoffs.append((caller, short(frame.f_code.co_filename), frame.f_code.co_qualname, what))
                holders.append(frame)
        elif event == "return" and holders and holders[-1] is frame:
            holders.pop()

    sys.setprofile(profile)
    try:
        Simulation(scenario)
    finally:
        sys.setprofile(None)
    return handoffs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default=str(ROOT / "scenarios" / "quickstart.toml"))
    parser.add_argument("--set", action="append", default=None, help="overrides (default: every optional part on)")
    args = parser.parse_args()
    from edgefl.scenario import load_scenario

    scenario = load_scenario(args.scenario, EVERY_PART if args.set is None else args.set)
    handoffs = trace(scenario)
    handoffs = [h for h in handoffs if h[1].startswith(("edgefl", "algorithms", "energy", "channel"))]  # ours
    parent: dict[str, str] = {}  # each file: the file that first handed it the scenario or a section
    climbs, second = [], []
    for caller, callee, function, what in handoffs:
        if callee == caller:
            continue
        up, node = False, caller
        while node in parent:  # is the callee above the caller?
            node = parent[node]
            up = up or node == callee
        if up:
            climbs.append((caller, callee, function, what))
        elif callee in parent and parent[callee] != caller:
            second.append((caller, callee, function, what))
        parent.setdefault(callee, caller)
    print("handoffs (caller -> callee: function [what]):")
    for caller, callee, function, what in handoffs:
        print(f"  {caller} -> {callee}: {function} [{what}]")
    whole = list(dict.fromkeys(f for _, f, _, what in handoffs if what == "scenario"))
    walk = list(dict.fromkeys(f for _, f, _, _ in handoffs))
    runner = list(dict.fromkeys(f for c, f, _, _ in handoffs if c == "edgefl/runner.py" and f != c))
    print(f"\n{len(whole)} files handed the whole scenario: {', '.join(whole)}")
    functions = list(dict.fromkeys(f"{f.rsplit('/', 1)[-1]}:{fn}" for _, f, fn, what in handoffs if what == "scenario"))
    print(f"{len(functions)} functions handed the whole scenario: {', '.join(functions)}")
    print(f"runner.py hands the scenario to: {', '.join(runner)}")
    print(f"{len(walk)} files in the walk (the scenario or a section): {', '.join(walk)}")
    print(f"{len(climbs)} climbs back up (a handoff into a file above the caller):")
    for caller, callee, function, what in climbs:
        print(f"  {caller} -> {callee}: {function} [{what}]")
    print(f"{len(second)} second paths (a file handed the scenario or a section again, from another file):")
    for caller, callee, function, what in second:
        print(f"  {caller} -> {callee}: {function} [{what}]")


if __name__ == "__main__":
    main()
