"""A hostile user's campaign against edgefl (issue 20): generated cases, each judged on four rules.

    .venv/bin/python benchmarks/hostile_campaign.py --cases 600 --workers 2 [--seed 0] [--report FILE]

Families of cases, drawn from one seed (``--families`` picks some; ``--list`` shows them):

- structural mutations of the committed scenarios (sections removed, tables where values belong and the
  reverse, unknown and duplicated keys, wrong types deep in a table, truncated and bit-flipped files);
- faulty plug-ins written into the case's folder (raising at import, in construction or in a call,
  ``sys.exit`` at import, missing methods, path-loss functions returning the wrong shape, complex values,
  strings, NaN, -1e300 dB; objects of the wrong kind named as plug-ins);
- files and folders in the way of every writing command (``run``, ``sweep``, ``optimal-tau``, ``plot``,
  ``compare``): the user's own files in ``--out``, hidden ``.NAME.old``/``.NAME.<digits>.tmp`` folders beside
  it, ``--out`` a file, the root, the home or the current folder; named pipes and devices as inputs;
  crafted checkpoints whose unpickling would run a command; damaged results folders;
- misuse of the Python API (wrong argument types, mutated ``Scenario`` objects, out-of-range options);
- (issue 33 item 6, the families that grow with the features) ``keys``: every scenario key (every section's,
  every algorithm's, controller's, selection policy's, process's and data set's own keys) set to a hostile
  value (NaN, ±inf, ±1e300, -1, 0, 1e-300, text, an array, a table, a huge integer), one drawn per key and
  seed; ``kinds``: faulty plug-ins of every plug-in kind (:data:`PLUGIN_FAMILIES`, one entry per row of
  ``plugin_registry.KINDS``: tests/test_hostile_coverage.py fails when a kind or a key has none);
  ``combinations``: every pair of the features added since the campaign was first written (cells, reuse,
  handover, power control, backhaul, AirComp, selection policies, FedAsync/FedBuff, HierFAVG, ``[[process]]``,
  radio power keys, controllers), and ``api-sections``: each section of a loaded ``Scenario`` set to None.

Each case runs in a forked child (edgefl imported once) in a fresh folder, with a time limit. Rules:

1. no user file lost or changed (every file the case planted as the user's is compared byte for byte);
2. no internal error: exit code 70, a traceback on stderr, a crash by a signal, or (API) an exception that
   is not one of the documented error types;
3. no hang (the limit, 120 s by default);
4. no code run from a checkpoint (the crafted pickles would create a file; it must not exist).

It prints one line per broken rule and a table of counts; exit 1 if any rule broke.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import pickle
import random
import shutil
import signal
import sys
import tempfile
import time
import tomllib
import traceback
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "scenarios"
MNIST = (ROOT.parent / "shared" / "datasets" / "mnist").resolve()
SMALL = {"run": {"rounds": 1, "eval_every": 1}}


@dataclass
class Case:
    family: str
    name: str
    kind: str  # "cli" or "api"
    argv: list[str] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)  # planted before the case: the user's files
    user_files: list[str] = field(default_factory=list)  # which planted files must survive unchanged
    fifos: list[str] = field(default_factory=list)
    api: str = ""  # Python source run for an API case (edgefl imported as `edgefl`)
    marker: str | None = None  # a file a malicious checkpoint would create
    prepare: str | None = None  # "quick_sweep": a finished edgefl sweep folder made first
    refuse: bool = False  # the command must not succeed (e.g. --out the current folder)
    covers: tuple[str, ...] = ()  # the scenario keys and plug-in kinds (plugin_registry.KINDS keys) it tries


# -- scenario sources --------------------------------------------------------------------------------
def scenario_texts() -> dict[str, str]:
    texts = {}
    for path in sorted(SCENARIOS.glob("*.toml")):
        text = path.read_text()
        text = text.replace('"../../shared/datasets/mnist"', json.dumps(str(MNIST)))
        texts[path.stem] = text
    return texts


def toml_dump(doc: dict) -> str:
    import tomli_w

    return tomli_w.dumps(doc)


def shrink(doc: dict) -> dict:
    """A scenario made quick: one round, few clients where the data set allows."""
    doc = json.loads(json.dumps(doc))
    doc.setdefault("run", {}).update(rounds=1, eval_every=1)
    doc["run"].pop("checkpoint_every", None)
    doc.pop("sweep", None)
    return doc


WEIRD = [
    math.nan,
    math.inf,
    -math.inf,
    1e300,
    -1e300,
    -1,
    0,
    True,
    "x",
    "",
    [],
    [1, "a"],
    {},
    {"a": {"b": 1}},
    2**62,
    1e-300,
    [[1]],
    "../../../etc/passwd",
    "\x00",
    "é" * 3,
]


def mutate(doc: dict, rng: random.Random) -> tuple[str, dict | str]:
    """One structural mutation of a parsed scenario; returns (what, new document or raw text)."""
    doc = shrink(doc)
    sections = [k for k, v in doc.items() if isinstance(v, dict)]
    op = rng.choice(
        [
            "drop_section",
            "section_to_value",
            "value_to_table",
            "unknown_key",
            "unknown_section",
            "weird_value",
            "list_of_tables",
            "nest_deep",
            "rename_key",
            "empty",
            "truncate",
            "flip",
            "swap_sections",
            "classes",
        ]
    )
    if op == "empty":
        return op, ""
    if op in ("truncate", "flip"):
        text = toml_dump(doc).encode()
        if op == "truncate":
            return op, text[: rng.randrange(1, len(text))].decode(errors="ignore")
        data = bytearray(text)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        return op, bytes(data).decode("latin-1")
    section = rng.choice(sections)
    table = doc[section]
    keys = list(table)
    if op == "drop_section":
        del doc[section]
    elif op == "section_to_value":
        doc[section] = rng.choice(WEIRD[:10])
    elif op == "value_to_table" and keys:
        table[rng.choice(keys)] = {"value": 1, "nested": {"x": 2}}
    elif op == "unknown_key":
        table[rng.choice(["snr", "round", "lrate", "tau", "sead", "devise", "cpu_mhz"])] = 1
    elif op == "unknown_section":
        doc[rng.choice(["netwrk", "device", "runs", "sweeps", "process", "algorithms"])] = {"a": 1}
    elif op == "weird_value" and keys:
        table[rng.choice(keys)] = rng.choice(WEIRD)
    elif op == "list_of_tables":
        doc[section] = [table, table]
    elif op == "nest_deep":
        deep: dict = {"leaf": 1}
        for _ in range(rng.randint(5, 60)):
            deep = {"d": deep}
        table[rng.choice(keys) if keys else "x"] = deep
    elif op == "rename_key" and keys:
        k = rng.choice(keys)
        table[k.upper()] = table.pop(k)
    elif op == "swap_sections" and len(sections) > 1:
        a, b = rng.sample(sections, 2)
        doc[a], doc[b] = doc[b], doc[a]
    elif op == "classes":
        devices = doc.setdefault("devices", {})
        devices["classes"] = rng.choice(
            [
                [{"name": "a", "share": 0.5}],
                [{"share": 2.0}],
                [{}],
                "phones",
                [{"name": "a", "share": 1.0, "cpu_ghz": -1}],
                [{"name": "a", "share": 1.0, "nosuch": 1}],
            ]
        )
    return op, doc


# -- plug-in sources ----------------------------------------------------------------------------------
IMPORT_FAULTS = [
    "raise RuntimeError('boom at import')",
    "raise ImportError('inner import failed')",
    "import sys; sys.exit(0)",
    "import sys; sys.exit(3)",
    "raise SyntaxError('bad')",
    "x = 1 / 0",
    "raise MemoryError('no memory')",
    "raise KeyError('k')",
    "raise RecursionError('deep')",
    "import nosuchmodule_xyz",
]

PATH_LOSS_BODIES = [
    "return 3.0",
    "return None",
    "return ['a'] * len(distance_m)",
    "return distance_m * 1j",
    "return -1e300 + 0 * distance_m",
    "return float('nan') + 0 * distance_m",
    "import numpy as np; return np.concatenate([distance_m, distance_m[:5]])",
    "raise ValueError('my model failed')",
    "import sys; sys.exit(0)",
    "return distance_m.reshape(-1, 1)",
    "return {'a': 1}",
    "return 'abc'",
    "import numpy as np; return np.full(len(distance_m), np.inf)",
    "return 100.0 + 0 * distance_m",  # valid
]

ALGORITHM_CLASSES = [
    "class Alg:\n    def __init__(self, *a, **k):\n        raise RuntimeError('init failed')\n",
    "class Alg:\n    pass\n",
    "import algorithms\nclass Alg(algorithms.get('fedavg')):\n    def round(self, *a, **k):\n"
    "        raise ValueError('my round failed')\n",
    "import algorithms\nclass Alg(algorithms.get('fedavg')):\n    def round(self, *a, **k):\n"
    "        yield 'not an operation'\n",
    "import algorithms\nclass Alg(algorithms.get('fedavg')):\n    def round(self, *a, **k):\n        return 42\n",
    "Alg = 42\n",
    "def Alg(*a, **k):\n    return None\n",
]

CONTROLLER_CLASSES = [
    "class Ctl:\n    def __init__(self, *a, **k):\n        raise RuntimeError('ctl init failed')\n",
    "class Ctl:\n    pass\n",
    "Ctl = 'nope'\n",
    "from edgefl.control import get as _g\nclass Ctl(_g('static')):\n    def allocate(self, *a, **k):\n"
    "        raise ValueError('my allocate failed')\n",
]

DATA_CLASSES = [
    "class Data:\n    def __init__(self, *a, **k):\n        raise RuntimeError('data init failed')\n",
    "class Data:\n    pass\n",
    "Data = 3\n",
]


# -- case generation -----------------------------------------------------------------------------------
def structural_cases(rng: random.Random, count: int) -> list[Case]:
    texts = scenario_texts()
    names = [n for n in texts if n != "drdm-kmnist-cnn"]
    cases = []
    for i in range(count):
        name = rng.choice(names)
        doc = tomllib.loads(texts[name])
        op, new = mutate(doc, rng)
        text = new if isinstance(new, str) else toml_dump(new)
        cases.append(
            Case(
                "structure",
                f"{name}:{op}:{i}",
                "cli",
                ["run", "s.toml", "--out", "out", "--no-plots", "-q"],
                files={"s.toml": text.encode("utf-8", errors="surrogateescape")},
                user_files=["s.toml"],
            )
        )
    return cases


def quick_toml(extra: str = "") -> bytes:
    base = tomllib.loads(scenario_texts()["quickstart"])
    base = shrink(base)
    base["data"]["num_clients"] = 12
    base["algorithm"]["clients_per_round"] = 4
    base["algorithm"]["local_steps"] = 2
    return (toml_dump(base) + extra).encode()


def quick_doc() -> dict:
    return tomllib.loads(quick_toml().decode())


def with_keys(doc: dict, **sections) -> bytes:
    doc = json.loads(json.dumps(doc))
    for section, values in sections.items():
        doc.setdefault(section, {}).update(values)
    return toml_dump(doc).encode()


def plugin_cases(rng: random.Random) -> list[Case]:
    cases = []
    doc = quick_doc()
    run = ["run", "s.toml", "--out", "out", "--no-plots", "-q"]
    for i, fault in enumerate(IMPORT_FAULTS):
        for key, attr in (
            ("algorithm.name", "Alg"),
            ("data.name", "Data"),
            ("control.name", "Ctl"),
            ("network.path_loss", "pl"),
        ):
            section, k = key.split(".")
            scen = with_keys(doc, **{section: {k: f"myplug{i}:{attr}"}})
            cases.append(
                Case(
                    "plugin",
                    f"import-fault:{key}:{fault[:30]}",
                    "cli",
                    run,
                    files={"s.toml": scen, f"myplug{i}.py": (fault + "\n").encode()},
                    user_files=["s.toml"],
                    covers=(key,),
                )
            )
    link_budget = json.loads(json.dumps(doc))
    link_budget["network"].pop("snr_db", None)  # a link budget replaces the configured SNR
    budget = with_keys(link_budget, network={"distance_m": 200.0, "path_loss": "mypl:pl"})
    for i, body in enumerate(PATH_LOSS_BODIES):
        src = f"def pl(distance_m, network):\n    {body}\n"
        cases.append(
            Case(
                "plugin",
                f"path-loss:{body[:40]}",
                "cli",
                run,
                files={"s.toml": budget, "mypl.py": src.encode()},
                user_files=["s.toml", "mypl.py"],
                covers=("network.path_loss",),
            )
        )
        moving = with_keys(
            tomllib.loads(budget.decode()),
            devices={"speed_mps": 1.4},
            network={"cell_radius_m": 300.0, "path_loss": "mypl:pl"},
        )
        moving_doc = tomllib.loads(moving.decode())
        moving_doc["network"].pop("distance_m", None)
        cases.append(
            Case(
                "plugin",
                f"path-loss-moving:{body[:40]}",
                "cli",
                run,
                files={"s.toml": toml_dump(moving_doc).encode(), "mypl.py": src.encode()},
                user_files=["s.toml"],
            )
        )
    for target in (
        "os:system",
        "builtins:print",
        "os.path:join",
        "collections:OrderedDict",
        "math:pi",
        "json",
        "nosuch_mod:f",
        "os:nosuch",
        ":",
        "a:b:c",
    ):
        cases.append(
            Case(
                "plugin",
                f"wrong-kind:path_loss={target}",
                "cli",
                run,
                files={"s.toml": with_keys(link_budget, network={"distance_m": 200.0, "path_loss": target})},
            )
        )
        cases.append(
            Case(
                "plugin",
                f"wrong-kind:algorithm={target}",
                "cli",
                run,
                files={"s.toml": with_keys(doc, algorithm={"name": target})},
            )
        )
        cases.append(
            Case(
                "plugin",
                f"wrong-kind:control={target}",
                "cli",
                run,
                files={"s.toml": with_keys(doc, control={"name": target})},
            )
        )
        cases.append(
            Case(
                "plugin",
                f"wrong-kind:data={target}",
                "cli",
                run,
                files={"s.toml": with_keys(doc, data={"name": target})},
            )
        )
    for i, src in enumerate(ALGORITHM_CLASSES):
        cases.append(
            Case(
                "plugin",
                f"algorithm-class:{i}",
                "cli",
                run,
                files={"s.toml": with_keys(doc, algorithm={"name": f"myalg{i}:Alg"}), f"myalg{i}.py": src.encode()},
                covers=("algorithm.name",),
            )
        )
    for i, src in enumerate(CONTROLLER_CLASSES):
        cases.append(
            Case(
                "plugin",
                f"controller-class:{i}",
                "cli",
                run,
                files={"s.toml": with_keys(doc, control={"name": f"myctl{i}:Ctl"}), f"myctl{i}.py": src.encode()},
                covers=("control.name",),
            )
        )
    for i, src in enumerate(DATA_CLASSES):
        cases.append(
            Case(
                "plugin",
                f"data-class:{i}",
                "cli",
                run,
                files={"s.toml": with_keys(doc, data={"name": f"mydata{i}:Data"}), f"mydata{i}.py": src.encode()},
                covers=("data.name",),
            )
        )
    return cases


USER_NAMES = [
    "results.csv",
    "summary.json",
    "fig1.png",
    "sweep.json",
    "computed.log",
    "compare.csv",
    "compare.txt",
    "optimal_tau.csv",
    "metrics.csv",
    "notes.txt",
    "accuracy.png",
    "scenario.toml",
    ".lock",
    "points/x.csv",
]


class Evil:
    """Unpickling it would run a command that creates a file (rule 4)."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def evil_pickles(marker: str) -> list[bytes]:
    payloads = [
        Evil(marker),
        {"format": 2, "state": Evil(marker)},
        [Evil(marker)],
        {"format": 2},
        {"format": 2, "version": "0.1.0"},
        "not a checkpoint",
        42,
    ]
    out = [pickle.dumps(p, protocol=proto) for p in payloads for proto in (2, 5)]
    out += [b"", b"\x80\x05garbage", os.urandom(64)]
    return out


def placement_cases(rng: random.Random) -> list[Case]:
    cases = []
    q = quick_toml()
    run = ["run", "s.toml", "--no-plots", "-q"]
    sweep = ["sweep", "s.toml", "--grid", "algorithm.local_steps=1,2", "--seeds", "1", "-q"]
    # the user's own files in --out, for every writing command
    commands = {
        "run": (run + ["--out", "mine"], None),
        "run-force": (run + ["--out", "mine", "--force"], None),
        "sweep": (sweep + ["--out", "mine"], None),
        "optimal-tau": (["optimal-tau", "done", "--target", "acc_mean=0.3", "--out", "mine", "-q"], "quick_sweep"),
        "plot": (["plot", "done", "--out", "mine", "-q"], "quick_sweep"),
        "compare": (
            ["compare", "s.toml", "--algorithms", "fedavg,fedprox", "--seeds", "1", "--out", "mine", "-q"],
            None,
        ),
    }
    for cmd, (argv, prepare) in commands.items():
        for user in USER_NAMES + ["__several__"]:
            names = rng.sample(USER_NAMES, 4) if user == "__several__" else [user]
            files = {"s.toml": q}
            for n in names:
                files[f"mine/{n}"] = f"the user's own {n}\n".encode()
            if cmd == "run-force":  # --force replaces, as documented: only check nothing outside mine/ is touched
                files["beside.txt"] = b"keep me"
                cases.append(
                    Case(
                        "placement",
                        f"{cmd}:user-{user}",
                        "cli",
                        argv,
                        files=files,
                        user_files=["s.toml", "beside.txt"],
                        prepare=prepare,
                    )
                )
                continue
            cases.append(
                Case(
                    "placement",
                    f"{cmd}:user-{user}",
                    "cli",
                    argv,
                    files=files,
                    user_files=[k for k in files],
                    prepare=prepare,
                )
            )
    # hidden folders beside --out
    for hidden in (
        ".mine.old/backup.txt",
        ".mine.2024.tmp/x.txt",
        ".mine.123.tmp/y",
        ".mine.checkpoint.d/z",
        ".mine.old/deep/er.txt",
        ".mine.99999999.tmp/w",
    ):
        for with_out in (False, True):
            files = {"s.toml": q, hidden: b"user data"}
            if with_out:
                files["mine/notes.txt"] = b"user"
            cases.append(
                Case(
                    "placement",
                    f"run:hidden-{hidden}:{with_out}",
                    "cli",
                    run + ["--out", "mine"],
                    files=files,
                    user_files=list(files),
                )
            )
            cases.append(
                Case(
                    "placement",
                    f"sweep:hidden-{hidden}:{with_out}",
                    "cli",
                    sweep + ["--out", "mine"],
                    files=dict(files),
                    user_files=list(files),
                )
            )
    # --out that can never be a results folder
    home = os.path.expanduser("~")
    for out in ("/", home, ".", "./", "s.toml", "/dev/null", "mine/../", "/proc", "/etc"):
        for cmd, argv in (("run", run), ("sweep", sweep)):
            cases.append(
                Case(
                    "placement",
                    f"{cmd}:out={out}",
                    "cli",
                    argv + ["--out", out],
                    files={"s.toml": q, "user.txt": b"mine"},
                    user_files=["s.toml", "user.txt"],
                    refuse=True,
                )
            )
    # inputs that are special files
    for target in ("fifo", "/dev/zero", "/dev/null", "dir", "missing"):
        path = {"fifo": "trace.fifo", "dir": "adir"}.get(target, target)
        doc = quick_doc()
        doc["devices"] = dict(doc.get("devices", {}), availability="trace", availability_trace=path)
        files = {"s.toml": toml_dump(doc).encode()}
        if target == "dir":
            files["adir/x"] = b""
        cases.append(
            Case(
                "placement",
                f"input:{target}",
                "cli",
                run + ["--out", "o"],
                files=files,
                fifos=["trace.fifo"] if target == "fifo" else [],
            )
        )
        cases.append(
            Case(
                "placement",
                f"scenario-input:{target}",
                "cli",
                ["run", path if target != "missing" else "nosuch.toml", "--out", "o", "-q"],
                files={} if target != "dir" else {"adir/x": b""},
                fifos=["trace.fifo"] if target == "fifo" else [],
            )
        )
    # crafted checkpoints
    for i, blob in enumerate(evil_pickles("PWNED")):
        doc = quick_doc()
        doc["run"]["checkpoint_every"] = 1
        files = {"s.toml": toml_dump(doc).encode(), ".mine.checkpoint": blob}
        cases.append(
            Case(
                "checkpoint",
                f"resume:pickle-{i}",
                "cli",
                run + ["--out", "mine", "--resume"],
                files=files,
                user_files=["s.toml"],
                marker="PWNED",
            )
        )
    # damaged results folders for optimal-tau and plot
    damages = [
        "truncate",
        "drop-column",
        "header-only",
        "nan-cell",
        "inf-cell",
        "empty",
        "sweep-json-list",
        "sweep-json-garbage",
        "no-sweep-json",
        "results-dir",
        "binary",
    ]
    for damage in damages:
        for cmd in ("optimal-tau", "plot"):
            argv = [cmd, "done", "-q"] + (["--target", "acc_mean=0.3"] if cmd == "optimal-tau" else [])
            cases.append(
                Case(
                    "damaged", f"{cmd}:{damage}", "cli", argv, files={"damage": damage.encode()}, prepare="quick_sweep"
                )
            )
    # grids and seeds too large
    for extra in (
        ["--seeds", "1000000000"],
        [
            "--grid",
            "network.snr_db=" + ",".join(str(i) for i in range(1000)),
            "--grid",
            "algorithm.local_steps=" + ",".join(map(str, range(1, 1001))),
        ],
        ["--seeds", "0"],
        ["--seeds", "-3"],
        ["--grid", "nosuch.key=1,2"],
        ["--grid", "network.snr_db="],
        ["--grid", "algorithm.local_steps=1,1,1"],
    ):
        cases.append(
            Case(
                "placement",
                f"sweep:size:{' '.join(extra)[:40]}",
                "cli",
                ["sweep", "s.toml", "--out", "big", "-q", *extra],
                files={"s.toml": q},
            )
        )
    return cases


API_CALLS = [
    "edgefl.run(None)",
    "edgefl.run(123)",
    "edgefl.run('nosuch.toml')",
    "edgefl.run('s.toml', overrides=['x'])",
    "edgefl.run('s.toml', overrides={'nosuch.key': 1})",
    "edgefl.run('s.toml', overrides={'run.rounds': -5})",
    "edgefl.run('s.toml', out='/')",
    "edgefl.run('s.toml', overrides={'network.snr_db': float('nan')})",
    "edgefl.sweep('s.toml', grid=['algorithm.local_steps'])",
    "edgefl.sweep('s.toml', grid={'algorithm.local_steps': 3})",
    "edgefl.sweep('s.toml', grid={'algorithm.local_steps': [1]}, seeds='3')",
    "edgefl.sweep('s.toml', grid={'algorithm.local_steps': [1]}, seeds=-1)",
    "edgefl.sweep('s.toml', grid={'algorithm.local_steps': [1]}, seeds=10**9)",
    "edgefl.sweep(None)",
    "edgefl.sweep('s.toml', grid={'nosuch': [1]})",
    "edgefl.optimal_tau('nosuch', target=None)",
    "edgefl.optimal_tau('nosuch', target='acc_mean=0.5')",
    "edgefl.optimal_tau(None, target='acc_mean=0.5')",
    "edgefl.optimal_tau('.', target='acc_mean=0.5', window=0)",
    "edgefl.optimal_tau('.', target='acc_mean=85')",
    "edgefl.optimal_tau('.', target=5)",
    "edgefl.load_scenario(None)",
    "edgefl.load_scenario('s.toml', overrides=[1, 2])",
]

MUTATIONS = [
    "s.algorithm.name = 'nosuch'",
    "s.algorithm.clients_per_round = 1000",
    "s.network = None",
    "s.run.rounds = -5",
    "s.run = None",
    "s.data.num_clients = 0",
    "s.algorithm.lr = float('nan')",
    "s.devices = 'phones'",
    "s.network.snr_db = 1e300",
    "s.algorithm.local_steps = 'ten'",
    "s.model.name = 'gpt'",
    "s.algorithm = {}",
]


def api_cases() -> list[Case]:
    cases = [Case("api", f"call:{call}", "api", api=call, files={"s.toml": quick_toml()}) for call in API_CALLS]
    for mutation in MUTATIONS:
        src = f"s = edgefl.load_scenario('s.toml')\n{mutation}\nedgefl.run(s)\n"
        cases.append(Case("api", f"mutated:{mutation}", "api", api=src, files={"s.toml": quick_toml()}))
    return cases


# -- the families that grow with the features (issue 33 item 6) -------------------------------------------
HOSTILE_VALUES = [  # TOML literals, as --set reads them
    "nan",
    "inf",
    "-inf",
    "1e300",
    "-1e300",
    "-1",
    "0",
    "1e-300",
    "'x'",
    "''",
    "[]",
    "{}",
    "[1, 'a']",
    "4611686018427387904",  # 2**62
    "true",
]
PROCESS_TABLE = '\n[[process]]\nname = "thermal"\n'  # a [[process]] table for the process keys (process.0.<key>)


def scenario_keys() -> dict[str, tuple[list[str], str]]:
    """Every scenario key, -> (the overrides that make it apply, text appended to the scenario): the sections'
    keys (edgefl.scenario.SECTION_MODELS and the Scenario's other fields), the keys of every built-in algorithm
    (``algorithm.<name>.<key>``, that algorithm chosen), controller and selection policy (chosen), process
    (``process.0.<key>`` of a [[process]] table) and data set family (chosen; an IDX family reads the MNIST
    test split)."""
    import algorithms
    from edgefl import control, selection
    from edgefl.data import DataParams
    from edgefl.data.registry import FAMILIES, family_names
    from edgefl.scenario import SECTION_MODELS, Scenario
    from edgefl.sim import processes

    keys: dict[str, tuple[list[str], str]] = {}
    for section, model in SECTION_MODELS.items():
        for name in model.model_fields:
            keys[f"{section}.{name}"] = ([], "")
    for section, info in Scenario.model_fields.items():
        if section in SECTION_MODELS:
            continue
        if section == "process":
            keys["process.0.name"] = ([], PROCESS_TABLE)
            continue
        model = info.annotation
        for name in getattr(model, "model_fields", {}):
            keys[f"{section}.{name}"] = ([], "")
    for name in algorithms.names():
        for key in algorithms.get(name).Params.model_fields:
            keys[f"algorithm.{name}.{key}"] = ([f"algorithm.name={name}"], "")
    for registry, section in ((control, "control"), (selection, "selection")):
        for name in registry.names():
            for key in registry.get(name).Params.model_fields:
                keys.setdefault(f"{section}.{key}", ([f"{section}.name={name}"], ""))
    for name in processes.names():
        for key in getattr(processes.get(name).Params, "model_fields", {}):
            keys[f"process.0.{key}"] = ([], f'\n[[process]]\nname = "{name}"\n')
    for cls in FAMILIES:
        name = family_names(cls)[0]
        context = [f"data.name={name}"] + ([f"data.dir={MNIST}"] if "dir" in cls.model_fields else [])
        for key in cls.model_fields:
            if key not in DataParams.model_fields:
                keys.setdefault(f"data.{key}", (context, ""))
    return keys


def key_cases(rng: random.Random) -> list[Case]:
    """Every scenario key set to a hostile value (one drawn per key): exit 2 naming the key, or a sane run."""
    doc = quick_doc()
    for section in ("data", "network", "devices"):
        doc.setdefault(section, {})
    if doc["data"].get("name", "synthetic") != "synthetic":
        raise RuntimeError("the keys family expects the quickstart scenario's synthetic data")
    base = toml_dump(doc)
    cases = []
    for key, (context, extra) in scenario_keys().items():
        value = rng.choice(HOSTILE_VALUES)
        sets = [*context, f"{key}={value}"]
        if key.startswith("data.") and context:  # another data set: the synthetic data's own keys go
            text = toml_dump({**doc, "data": {"num_clients": doc["data"]["num_clients"]}})
        else:
            text = base
        cases.append(
            Case(
                "keys",
                f"{key}={value}",
                "cli",
                ["run", "s.toml", "--out", "out", "--no-plots", "-q", *[a for s in sets for a in ("--set", s)]],
                files={"s.toml": (text + extra).encode()},
                user_files=["s.toml"],
                covers=(key,),
            )
        )
    return cases


SELECT_FAULTS = [
    "return None",
    "return 'abc'",
    "return {'a': 1}",
    "return (i for i in range(k))",
    "return [2**70]",
    "return [0, 10**6]",
    "return [float('nan'), 1.0]",
    "return [1, 1]",
    "return []",
    "return view.online",
    "raise ValueError('my select failed')",
    "import sys; sys.exit(0)",
    "return [0.5]",
]
PROCESS_FAULTS = [
    "    @classmethod\n    def from_scenario(cls, params, network, population, seed):\n        return None\n",
    "    def before_step(self, client, step):\n        yield 5\n",
    "    def before_step(self, client, step):\n        return 3\n",
    "    def before_step(self, client, step):\n        raise RuntimeError('boom')\n        yield\n",
    "    def before_step(self, client, step):\n        yield self.core.env.timeout(-1)\n",
    "    def before_step(self, client, step):\n        yield self.core.env.timeout(float('nan'))\n",
    "    def before_step(self, client, step):\n        yield self.core.env.timeout(float('inf'))\n",
    "    def phase_start(self, phase, clients, plans):\n        return None\n",
    "    def phase_start(self, phase, clients, plans):\n        return {10**6}\n",
    "    def restrict(self, online):\n        return None\n",
    "    def chain_may_start(self, client):\n        return 'yes'\n",
    "    Params = {'a': 1}\n",
    "    class Params:\n        pass\n",
    "    def compute_start(self, client):\n        self.core.set_cpu_hz(client, 1e9)\n",
    "    def compute_start(self, client):\n        self.core.set_uplink_rate_factor(client, 2.0)\n",
    *(
        f"    changes_cpu_rate = True\n    def compute_start(self, client):\n        self.core.set_cpu_hz(client, {v})\n"
        for v in ("0", "float('nan')", "-1", "1e400")
    ),
    *(
        "    changes_uplink_rate = True\n    def compute_start(self, client):\n"
        f"        self.core.set_uplink_rate_factor(client, {v})\n"
        for v in ("0", "float('nan')", "-2", "1e400")
    ),
    *(
        f"    def compute_start(self, client):\n        self.core.set_tx_power_w(client, {v})\n"
        for v in ("0", "float('nan')", "-1", "1e400")
    ),
    "    def attach(self, core):\n        raise KeyError('attach')\n",
    "    def round_end(self, round_):\n        import sys; sys.exit(2)\n",
]


def _selection_cases(doc: dict) -> list[Case]:
    cases = []
    for i, body in enumerate(SELECT_FAULTS):
        src = f"from edgefl.selection import Policy\nclass P(Policy):\n    def select(self, view, k):\n        {body}\n"
        cases.append(
            _plugin_case("selection.name", f"mysel{i}", src, with_keys(doc, selection={"name": f"mysel{i}:P"}))
        )
    cases.append(
        Case(
            "kinds",
            "selection.name:abstract Policy",
            "cli",
            ["run", "s.toml", "--out", "out", "--no-plots", "-q"],
            files={"s.toml": with_keys(doc, selection={"name": "edgefl.selection.base:Policy"})},
            covers=("selection.name",),
        )
    )
    return cases


# faulty model factories (model.name): each must end in exit 4 naming model.name, nothing written
MODEL_FAULTS = [
    "def f(input_shape, num_classes):\n    raise RuntimeError('no layers')\n",
    "def f(input_shape, num_classes):\n    return None\n",
    "from torch import nn\ndef f(input_shape, num_classes):\n    return nn.Identity()\n",
    "import sys\ndef f(input_shape, num_classes):\n    sys.exit(3)\n",
    "from torch import nn\nclass M(nn.Module):\n    def forward(self, x):\n        raise ValueError('late')\n"
    "def f(input_shape, num_classes):\n    return M()\n",
]


def _model_cases(doc: dict) -> list[Case]:
    return [
        _plugin_case("model.name", f"mymodel{i}", src, with_keys(doc, model={"name": f"mymodel{i}:f"}))
        for i, src in enumerate(MODEL_FAULTS)
    ]


def _process_cases(doc: dict) -> list[Case]:
    cases = []
    for i, body in enumerate(PROCESS_FAULTS):
        src = "from edgefl.sim.component import Component\nclass C(Component):\n" + body
        text = toml_dump(doc).encode() + f'\n[[process]]\nname = "myproc{i}:C"\n'.encode()
        cases.append(_plugin_case("process[].name", f"myproc{i}", src, text))
    return cases


def _plugin_case(key: str, module: str, src: str, scenario: bytes) -> Case:
    return Case(
        "kinds",
        f"{key}:{module}:{src.strip().splitlines()[-1].strip()[:50]}",
        "cli",
        ["run", "s.toml", "--out", "out", "--no-plots", "-q"],
        files={"s.toml": scenario, f"{module}.py": src.encode()},
        user_files=["s.toml", f"{module}.py"],
        covers=(key,),
    )


# The faulty plug-ins of every plug-in kind: scenario key (plugin_registry.KINDS) -> the family that writes
# them (the older kinds' are in plugin_cases). A kind added to the table needs an entry here
# (tests/test_hostile_coverage.py).
PLUGIN_FAMILIES = {
    "algorithm.name": "plugin",
    "data.name": "plugin",
    "control.name": "plugin",
    "network.path_loss": "plugin",
    "selection.name": _selection_cases,
    "process[].name": _process_cases,
    "model.name": _model_cases,
}


def kind_cases() -> list[Case]:
    doc = quick_doc()
    return [case for family in PLUGIN_FAMILIES.values() if callable(family) for case in family(doc)]


# The features added since the campaign was first written, each as the overrides that turn it on (on the
# quickstart scenario, its SNR line replaced by a link budget where the feature needs one): every pair is run.
FEATURES = {
    "cells": ["network.cells=7", "network.cell_radius_m=300"],
    "reuse": ["network.cells=7", "network.cell_radius_m=300", "network.reuse=3"],
    "handover": ["network.cells=3", "network.cell_radius_m=300", "devices.speed_mps=30"],
    "power-control": ["network.cell_radius_m=300", "network.power_control_p0_dbm=-70"],
    "backhaul": ["backhaul.rate_mbps=100", "backhaul.latency_ms=20", "backhaul.energy_j_per_bit=1e-8"],
    "aircomp": ["network.uplink=aircomp", "algorithm.fedavg.weighting='uniform'"],
    "tdma": ["network.access=tdma"],
    "oort": ["selection.name=oort"],
    "power-of-choice": ["selection.name=power_of_choice"],
    "fedbuff": ["algorithm.name=fedbuff", "algorithm.fedbuff.buffer_size=3"],
    "fedasync": ["algorithm.name=fedasync"],
    "hierfavg": ["algorithm.name=hierfavg", "algorithm.hierfavg.edge_rounds=2"],
    "deadline-fit": ["control.name=deadline_fit", "network.deadline_s=1.0"],
    "min-energy": ["control.name=min_energy"],
    "radio-power": ["devices.tail_s=0.5", "devices.tail_power_w=1.0", "network.access_latency_s=0.05"],
    "thermal": [],  # a [[process]] table (PROCESS_TABLE)
    "markov": ["devices.availability=markov", "devices.mean_on_s=30", "devices.mean_off_s=15"],
    "batteries": ["devices.battery_j=5", "devices.battery_reserve_j=1"],
}


def combination_cases() -> list[Case]:
    doc = quick_doc()
    doc["network"].pop("snr_db", None)  # a link budget (cell_radius_m) where a feature sets one; else 20 dB
    cases = []
    names = list(FEATURES)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            sets = [*FEATURES[a], *FEATURES[b]]
            merged = dict(s.split("=", 1) for s in sets)  # a later value of a key wins (cells: reuse's)
            text = toml_dump(doc) + (PROCESS_TABLE if "thermal" in (a, b) else "")
            cases.append(
                Case(
                    "combinations",
                    f"{a}+{b}",
                    "cli",
                    ["run", "s.toml", "--out", "out", "--no-plots", "-q"]
                    + [x for k, v in merged.items() for x in ("--set", f"{k}={v}")],
                    files={"s.toml": text.encode()},
                    user_files=["s.toml"],
                )
            )
    return cases


def api_section_cases() -> list[Case]:
    """Each field of a loaded Scenario set to None in Python, then run: a documented error (or a run)."""
    from edgefl.scenario import Scenario

    return [
        Case(
            "api-sections",
            f"s.{name} = None",
            "api",
            api=f"s = edgefl.load_scenario('s.toml')\ns.{name} = None\nedgefl.run(s, out='out', progress=False)\n",
            files={"s.toml": quick_toml()},
        )
        for name in Scenario.model_fields
    ]


NEW_FAMILIES = ("keys", "kinds", "combinations", "api-sections")


def all_cases(seed: int, count: int, families: tuple[str, ...] | None = None) -> list[Case]:
    rng = random.Random(seed)
    fixed = plugin_cases(rng) + placement_cases(rng) + api_cases()
    cases = fixed + structural_cases(rng, max(count - len(fixed), 100))
    cases += key_cases(random.Random(seed)) + kind_cases() + combination_cases() + api_section_cases()
    return [c for c in cases if families is None or c.family in families]


def covered() -> set[str]:
    """The scenario keys and plug-in kinds some family tries (tests/test_hostile_coverage.py)."""
    return {key for case in all_cases(0, 0) for key in case.covers} | {
        key for key, family in PLUGIN_FAMILIES.items() if family == "plugin"
    }


# -- running one case ------------------------------------------------------------------------------------
PREPARED: Path | None = None  # one finished sweep, made once (in a child process) and copied per case


def make_prepared_sweep() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="hostile-sweep-"))
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            from edgefl.cli import main

            (folder / "base.toml").write_bytes(quick_toml())
            with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
                code = main(
                    [
                        "sweep",
                        str(folder / "base.toml"),
                        "--grid",
                        "algorithm.local_steps=1,2",
                        "--seeds",
                        "1",
                        "--out",
                        str(folder / "done"),
                        "-q",
                        "--workers",
                        "1",
                    ]
                )
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"could not prepare a sweep (exit {os.waitstatus_to_exitcode(status)})")
    return folder / "done"


def prepare_sweep(folder: Path) -> None:
    shutil.copytree(PREPARED, folder / "done", symlinks=True)


def damage(folder: Path, how: str) -> None:
    results = folder / "results.csv"
    text = results.read_text()
    lines = text.splitlines(keepends=True)
    if how == "truncate":
        results.write_text(text[: len(text) * 2 // 3])
    elif how == "drop-column":
        results.write_text("".join(",".join(line.rstrip("\n").split(",")[1:]) + "\n" for line in lines))
    elif how == "header-only":
        results.write_text(lines[0])
    elif how in ("nan-cell", "inf-cell"):
        cells = lines[1].rstrip("\n").split(",")
        cells[-1] = "nan" if how == "nan-cell" else "inf"
        lines[1] = ",".join(cells) + "\n"
        results.write_text("".join(lines))
    elif how == "empty":
        results.write_text("")
    elif how == "sweep-json-list":
        (folder / "sweep.json").write_text("[]")
    elif how == "sweep-json-garbage":
        (folder / "sweep.json").write_text("{not json")
    elif how == "no-sweep-json":
        (folder / "sweep.json").unlink()
    elif how == "results-dir":
        results.unlink()
        results.mkdir()
    elif how == "binary":
        results.write_bytes(os.urandom(300))


SYSTEM_FOLDERS = ("/", "/etc", os.path.expanduser("~"))
# The documented exceptions of the Python API (docs/python-api.md, "Errors"): module -> names
API_ERRORS = {
    "edgefl.scenario": ("ScenarioError",),
    "edgefl.sweeps.plan": ("SweepError",),
    "edgefl.plugins": ("PluginError",),
    "edgefl.results": ("OutputError",),
    "edgefl.checkpoint": ("CheckpointError",),
    "edgefl.errors": ("WorkerDied",),
}


def child(case: Case, folder: Path, err_path: Path) -> int:
    os.chdir(folder)
    sys.path.insert(0, str(folder)) if case.kind == "api" else None
    err = open(err_path, "w")
    os.dup2(err.fileno(), 2)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    if case.kind == "cli":
        from edgefl.cli import main

        try:
            return main(case.argv)
        except SystemExit as exc:  # argparse
            return exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            traceback.print_exc()
            return 99
    import edgefl

    try:
        exec(compile(case.api, "<case>", "exec"), {"edgefl": edgefl})
        return 0
    except BaseException as exc:  # judged by type: documented errors only
        import importlib

        documented = tuple(
            getattr(importlib.import_module(module), name) for module, names in API_ERRORS.items() for name in names
        )
        if isinstance(exc, documented):
            print(f"documented {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        print(f"UNDOCUMENTED {type(exc).__module__}.{type(exc).__name__}: {exc}", file=sys.stderr)
        traceback.print_exc()
        return 98


def run_case(case: Case, limit_s: float) -> dict:
    base = Path(tempfile.mkdtemp(prefix="hostile-"))
    folder = base / "work"
    folder.mkdir()
    try:
        if case.prepare == "quick_sweep":
            prepare_sweep(folder)
        how = case.files.pop("damage", None) if case.family == "damaged" else None
        if how is not None:
            damage(folder / "done", how.decode())
        for rel, data in case.files.items():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        for rel in case.fifos:
            os.mkfifo(folder / rel)
        before = {rel: (folder / rel).read_bytes() for rel in case.user_files}
        systems = [a for a in case.argv if a in SYSTEM_FOLDERS]
        system_before = {os.path.expanduser(a): set(os.listdir(os.path.expanduser(a))) for a in systems}
        err_path = base / "stderr"
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:  # the child
            code = 99
            try:
                signal.signal(signal.SIGALRM, signal.SIG_DFL)
                code = child(case, folder, err_path)
            finally:
                os._exit(code if isinstance(code, int) and 0 <= code < 256 else 1)
        deadline = start + limit_s
        status = None
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.02)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        elapsed = time.monotonic() - start
        err = err_path.read_text(errors="replace") if err_path.exists() else ""
        broken = []
        if status is None:
            broken.append("hang")
            code = None
        elif os.WIFSIGNALED(status):
            broken.append(f"signal {os.WTERMSIG(status)}")
            code = None
        else:
            code = os.WEXITSTATUS(status)
            if code in (70, 98, 99) or "Traceback" in err or "internal error" in err:
                broken.append(f"internal error (exit {code})")
        for rel, data in before.items():
            path = folder / rel
            if not path.is_file() or path.read_bytes() != data:
                broken.append(f"user file lost or changed: {rel}")
        if case.refuse and code == 0:
            broken.append("user file lost or changed: wrote into a folder that is never a results folder")
        if case.marker and (folder / case.marker).exists():
            broken.append("code ran from a checkpoint")
        if code == 0 and non_finite_output(folder):
            broken.append("non-finite output: NaN or inf in metrics.csv or summary.json")
        for system, entries in system_before.items():  # never a results folder (nothing may appear there)
            for name in sorted(set(os.listdir(system)) - entries):
                broken.append(f"user file lost or changed: wrote {name} into {system}")
                target = Path(system) / name
                shutil.rmtree(target) if target.is_dir() and not target.is_symlink() else target.unlink()
        return {
            "family": case.family,
            "name": case.name,
            "code": code,
            "seconds": round(elapsed, 2),
            "broken": broken,
            "stderr": err.strip().splitlines()[-1][:300] if err.strip() else "",
        }
    finally:
        shutil.rmtree(base, ignore_errors=True)


def non_finite_output(folder: Path) -> bool:
    """Whether a results folder the case wrote (any folder under it holding metrics.csv) has a NaN or an
    infinity in metrics.csv or summary.json (the house rule: no NaN/inf in outputs)."""
    for metrics in folder.rglob("metrics.csv"):
        cells = {cell.strip().lower() for line in metrics.read_text().splitlines() for cell in line.split(",")}
        if cells & {"nan", "inf", "-inf", "infinity", "-infinity"}:
            return True
        summary = metrics.parent / "summary.json"
        if summary.is_file() and any(t in summary.read_text() for t in ("NaN", "Infinity")):
            return True
    return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=600)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit-s", type=float, default=120.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", default=None, help="run only the cases whose name contains this")
    parser.add_argument(
        "--families",
        default=None,
        help="comma-separated families to run (new ones: " + ",".join(NEW_FAMILIES) + "); default: all",
    )
    parser.add_argument("--list", action="store_true", help="list the cases and stop")
    parser.add_argument("--report", type=Path, default=None, help="write every case's outcome here (JSON lines)")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import edgefl.cli  # noqa: F401  (imported once; every case forks from here)
    from edgefl.sweeps import cli as _  # noqa: F401

    cases = all_cases(args.seed, args.cases, tuple(args.families.split(",")) if args.families else None)
    if args.only:
        cases = [c for c in cases if args.only in c.name]
    print(
        f"{len(cases)} cases: " + ", ".join(f"{k} {v}" for k, v in Counter(c.family for c in cases).items()), flush=True
    )
    if args.list:
        for c in cases:
            print(c.family, c.name)
        return 0
    global PREPARED
    PREPARED = make_prepared_sweep()
    outcomes = []
    report = open(args.report, "w") if args.report else None
    if args.workers > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(args.workers, mp_context=multiprocessing.get_context("fork")) as pool:
            results = pool.map(run_case, cases, [args.limit_s] * len(cases), chunksize=4)
            for i, outcome in enumerate(results):
                outcomes.append(outcome)
                _show(outcome, report, i, len(cases))
    else:
        for i, case in enumerate(cases):
            outcome = run_case(case, args.limit_s)
            outcomes.append(outcome)
            _show(outcome, report, i, len(cases))
    by_family = Counter(o["family"] for o in outcomes)
    broken = Counter()
    for o in outcomes:
        for b in o["broken"]:
            broken[(o["family"], b.split(":")[0].split(" (")[0])] += 1
    codes = Counter(o["code"] for o in outcomes)
    print("\n| family | cases | " + " | ".join(["exit 0", "exit 2", "other exit", "broken"]) + " |")
    print("|---|---:|---:|---:|---:|---:|")
    for fam, n in sorted(by_family.items()):
        fam_o = [o for o in outcomes if o["family"] == fam]
        print(
            f"| {fam} | {n} | {sum(o['code'] == 0 for o in fam_o)} | {sum(o['code'] == 2 for o in fam_o)} | "
            f"{sum(o['code'] not in (0, 2) for o in fam_o)} | {sum(bool(o['broken']) for o in fam_o)} |"
        )
    print(
        f"| total | {len(outcomes)} | {codes[0]} | {codes[2]} | {len(outcomes) - codes[0] - codes[2]} | "
        f"{sum(bool(o['broken']) for o in outcomes)} |"
    )
    print("\nexit codes:", dict(sorted(codes.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))))
    for rule in (
        "user file lost or changed",
        "internal error",
        "hang",
        "code ran from a checkpoint",
        "non-finite output",
    ):
        print(f"{rule}: {sum(n for (f, b), n in broken.items() if b == rule)}")
    return 1 if any(o["broken"] for o in outcomes) else 0


def _show(outcome: dict, report, i: int, n: int) -> None:
    if report:
        report.write(json.dumps(outcome) + "\n")
        report.flush()
    if outcome["broken"]:
        print(
            f"[{i + 1}/{n}] {outcome['family']} {outcome['name']}: {'; '.join(outcome['broken'])} "
            f"(exit {outcome['code']}) {outcome['stderr'][:200]}",
            flush=True,
        )


if __name__ == "__main__":
    sys.exit(main())
