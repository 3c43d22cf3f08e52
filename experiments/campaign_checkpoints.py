"""Issue 20: checkpoint campaign (item 2): crafted pickles that would run code (os.system, subprocess, eval,
exec, __import__, getattr, open, shutil.rmtree, functools.partial, operator.methodcaller, nested pickle.loads,
numpy.load, torch.load, a function re-exported by an edgefl module, edgefl.__main__, a torch storage whose inner
bytes run code, a journal whose calls run code or name a method that is not journaled), each with and without
the checkpoint header, and 300 truncated and 300 bit-flipped copies of a real checkpoint. Each is put at
.res.checkpoint and loaded by edgefl.checkpoint.restore on a fresh Simulation: it must raise CheckpointError
(exit 2) and run nothing (no file `pwned*` appears), or (a damaged one whose damage falls in numbers) load.

    PYTHONPATH=. OMP_NUM_THREADS=1 .venv/bin/python experiments/campaign_checkpoints.py

Result at the commit that added it: 649 checkpoints, about 420 refused and 230 loaded (the split varies with
the pid in the header, which shifts the bit flips), 0 problems (no code run, no other exception).
"""

# ruff: noqa: E402  (a campaign script: imports sit next to the gadgets that use them)
import io
import os
import pickle
import random
import sys
import tempfile
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from edgefl.checkpoint import CheckpointError, restore  # noqa: E402
from edgefl.results import checkpoint_file  # noqa: E402
from edgefl.runner import Simulation  # noqa: E402
from edgefl.scenario import load_scenario  # noqa: E402

work = Path(tempfile.mkdtemp(prefix="ck-campaign-"))
os.chdir(work)
scenario = load_scenario(
    ROOT / "scenarios" / "quickstart.toml",
    ["run.rounds=3", "run.checkpoint_every=1", "data.num_clients=10", "algorithm.clients_per_round=3"],
)
good = checkpoint_file(work / "res")


class Stop(Exception):
    pass


def stop(row):
    if row["round"] == 2:
        raise Stop


try:
    Simulation(scenario).run(progress=False, on_round=stop, checkpoint=good)
except Stop:
    pass
real = good.read_bytes()
HEADER = real.split(b"\n", 1)[0] + b"\n"


def R(f, *a):  # a pickle that calls f(*a) when loaded
    class X:
        def __reduce__(self):
            return (f, a)

    return X()


import builtins
import functools
import importlib
import operator
import shutil
import subprocess

import numpy

payloads = {
    "os.system": R(os.system, "touch pwned1"),
    "posix.system via subprocess": R(subprocess.call, ["touch", "pwned2"]),
    "subprocess.Popen": R(subprocess.Popen, ["touch", "pwned3"]),
    "builtins.eval": R(builtins.eval, "open('pwned4','w')"),
    "builtins.exec": R(builtins.exec, "open('pwned5','w')"),
    "builtins.__import__": R(builtins.__import__, "antigravity"),
    "importlib.import_module": R(importlib.import_module, "this"),
    "builtins.getattr": R(builtins.getattr, R(builtins.__import__, "os"), "system"),
    "builtins.open": R(builtins.open, "pwned6", "w"),
    "shutil.rmtree": R(shutil.rmtree, "x"),
    "functools.partial": R(functools.partial, os.system, "touch pwned7"),
    "operator.methodcaller": R(operator.methodcaller, "system", "touch pwned8"),
    "pickle.loads nested": R(pickle.loads, pickle.dumps(R(os.system, "touch pwned9"))),
    "numpy.load": R(numpy.load, "x.npy", None, True),
    "torch.load": R(torch.load, "x.pt"),
}
raw = {
    # edgefl's own module re-exporting a function (protocol 4 dotted name)
    "edgefl.results.shutil.rmtree": b"\x80\x04\x8c\x0eedgefl.results\x8c\x0dshutil.rmtree\x93\x8c\x01x\x85R.",
    "edgefl.results.os.system": b"\x80\x04\x8c\x0eedgefl.results\x8c\x09os.system\x93\x8c\x0btouch pwned\x85R.",
    # importing edgefl.__main__ runs the command line
    "edgefl.__main__": b"\x80\x04\x8c\x0fedgefl.__main__\x8c\x01X\x93.",
    # a class's metaclass / base reached through a project class
    "project class __class__": b"\x80\x04\x8c\redgefl.runner\x8c\x1aSimulation.__init__.__globals__\x93.",
}
# a tensor storage whose inner torch.save bytes run code (torch.storage._load_from_bytes)
buf = io.BytesIO()
torch.save(R(os.system, "touch pwned10"), buf)
inner = buf.getvalue()
raw["torch storage with code inside"] = (
    b"\x80\x04\x8c\rtorch.storage\x8c\x10_load_from_bytes\x93" + b"C" + bytes([len(inner)]) + inner + b"\x85R."
    if len(inner) < 256
    else b"\x80\x04\x8c\rtorch.storage\x8c\x10_load_from_bytes\x93"
    + b"B"
    + len(inner).to_bytes(4, "little")
    + inner
    + b"\x85R."
)
for name, obj in payloads.items():
    raw[name] = pickle.dumps({"format": 3, "state": obj})
raw["{'format': 2}"] = pickle.dumps({"format": 2})
raw["{'format': 3} only"] = pickle.dumps({"format": 3})
# the real checkpoint's dict with a gadget in its journal
raw["journal with code"] = None  # built below from the real checkpoint

results = {"refused": 0, "loaded": 0}
bad = []


def attempt(label, data):
    good.write_bytes(data)
    try:
        restore(Simulation(scenario), good)
        results["loaded"] += 1
    except CheckpointError:
        results["refused"] += 1
    except Exception as exc:  # anything else is exit 70
        import traceback

        bad.append(f"{label}: {type(exc).__name__}: {exc} " + traceback.format_exc()[-600:])
    ran = sorted(p.name for p in work.iterdir() if p.name.startswith("pwned"))
    if ran:
        bad.append(f"{label}: RAN CODE {ran}")
        for p in ran:
            (work / p).unlink()


# journal gadget: unpickle the real one restrictedly? simpler: replace the journal in a pickled copy
from edgefl.checkpoint import _Unpickler

sim = Simulation(scenario)
from edgefl.checkpoint import REBUILT

d = _Unpickler(io.BytesIO(real[len(HEADER) :]), {n: getattr(sim, n) for n in REBUILT}).load()
d["journal"] = [("start_round", zlib.compress(pickle.dumps(((R(os.system, "touch pwned11"),), {}))))]


class P(pickle.Pickler):
    def persistent_id(self, obj):
        return {id(getattr(sim, n)): n for n in REBUILT}.get(id(obj))


b = io.BytesIO()
P(b, protocol=5).dump(d)
raw["journal with code"] = b.getvalue()
d["journal"] = [("__init__", zlib.compress(pickle.dumps(((), {}))))]
b = io.BytesIO()
P(b, protocol=5).dump(d)
raw["journal calling a method that is not journaled"] = b.getvalue()

for label, data in raw.items():
    attempt(label, HEADER + data)
    attempt(label + " (no header)", data)
crafted = len(raw) * 2
rng = random.Random(0)
for k in range(300):
    cut = rng.randrange(len(real))
    attempt(f"truncated at {cut}", real[:cut])
for k in range(300):
    data = bytearray(real)
    i = rng.randrange(len(data))
    data[i] ^= 1 << rng.randrange(8)
    attempt(f"bit flip at {i}", bytes(data))
attempt("the real checkpoint", real)
print(f"{crafted} crafted + 600 damaged + 1 real = {crafted + 601} checkpoints: {results}; {len(bad)} problems")
for line in bad[:30]:
    print(" -", line)
