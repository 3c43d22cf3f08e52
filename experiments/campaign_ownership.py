"""Issue 20: files-and-folders-in-the-way campaign for the ownership rule (issue 20, item 1): every writing command x
what --out is x what lies beside it x --force. Invariants: exit 0 or 2 only (never 70, no traceback); a refused
command (2) leaves the work folder byte-identical; the user's files outside --out always survive, those inside
survive unless --force succeeded; nothing of edgefl's hidden is left beside --out; /, home untouched.

    PYTHONPATH=. OMP_NUM_THREADS=1 .venv/bin/python experiments/campaign_ownership.py

(as root it tries to write into / and the home folder: it checks they are left alone.) Result at the commit that
added it: 836 cases; exit codes 0: 402, 2: 434; 0 violations (the code before: 814 cases without / and home,
217 violations, 24 exits 70).
"""

import contextlib
import io
import itertools
import os
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
Q = str(ROOT / "scenarios" / "quickstart.toml")
FAST = ["--set", "run.rounds=1", "--set", "data.num_clients=10", "--set", "algorithm.clients_per_round=3", "--no-plots"]
SWEEP_FAST = FAST[:-1]

from edgefl.cli import main  # noqa: E402  (after sys.path)
from edgefl.results import MARKER  # noqa: E402


def quiet(args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(args)
        except SystemExit as exc:
            code = exc.code
    return code, err.getvalue()


base = Path(tempfile.mkdtemp(prefix="own-campaign-"))
assert quiet(["sweep", Q, *SWEEP_FAST, "--grid", "algorithm.local_steps=1,2", "--out", str(base / "sw"), "-q"])[0] == 0
assert quiet(["run", Q, *FAST, "--out", str(base / "rn"), "-q"])[0] == 0


def write(path: Path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def setup_target(kind, W):
    """Make --out's target; returns (the --out argument, user files inside it (paths), whether it is edgefl's)."""
    T = W / "T"
    if kind == "absent":
        return "T", []
    if kind == "empty":
        T.mkdir()
        return "T", []
    if kind == "user_files":
        for n in ("notes.txt", "results.csv", "summary.json", "fig1.png", "compare.csv", "optimal_tau.csv"):
            write(T / n, f"user {n}")
        return "T", [
            T / n for n in ("notes.txt", "results.csv", "summary.json", "fig1.png", "compare.csv", "optimal_tau.csv")
        ]
    if kind == "user_hidden":
        write(T / ".hidden", "user")
        return "T", [T / ".hidden"]
    if kind == "user_sweep_json":
        write(T / "sweep.json", '{"a": 1}')
        return "T", [T / "sweep.json"]
    if kind == "run_folder":
        shutil.copytree(base / "rn", T)
        return "T", []
    if kind == "sweep_folder":
        shutil.copytree(base / "sw", T)
        return "T", []
    if kind == "legacy_marker":
        write(T / MARKER, "written by edgefl; edgefl may replace this folder\n")
        write(T / "metrics.csv", "round\n")
        return "T", []
    if kind == "analysis_folder":
        write(T / MARKER, "written by edgefl; edgefl may write into or replace this folder\nkind: analysis\n")
        write(T / "optimal_tau.csv", "x")
        return "T", []
    if kind == "file":
        write(T, "user file")
        return "T", [T]
    if kind == "symlink_user":
        write(W / "U" / "mine.txt", "user")
        T.symlink_to(W / "U")
        return "T", [W / "U" / "mine.txt"]
    if kind == "symlink_dangling":
        T.symlink_to(W / "nowhere")
        return "T", []
    if kind == "root":
        return "/", []
    if kind == "home":
        return str(Path.home()), []
    if kind == "cwd":
        return ".", []
    if kind == "parent":
        return "..", []
    raise KeyError(kind)


def setup_clutter(kind, W, name):
    files = []
    if kind == "user_old":
        files = [W / f".{name}.old" / "backup.txt"]
    elif kind == "user_tmp":
        files = [W / f".{name}.2024.tmp" / "x", W / f".{name}.77.abc.tmp" / "y"]
    elif kind == "user_checkpoint":
        files = [W / f".{name}.checkpoint"]
    elif kind == "lookalike_backup":  # edgefl's marker, a dead-looking pid, but no writer file
        files = [W / f".{name}.999999999.old" / MARKER, W / f".{name}.999999999.old" / "metrics.csv"]
    elif kind == "writer_of_other_target":
        files = [W / f".{name}.999999999.old" / ".edgefl-writer"]
        write(files[0], "edgefl writer\npid 999999999\ntarget other\n")
        return files
    for f in files:
        write(f, "user")
    return files


COMMANDS = {
    "run": lambda out: ["run", Q, *FAST, "--out", out, "-q"],
    "run+checkpoints": lambda out: ["run", Q, *FAST, "--set", "run.checkpoint_every=1", "--out", out, "-q"],
    "run --resume": lambda out: ["run", Q, *FAST, "--resume", "--out", out, "-q"],
    "sweep": lambda out: ["sweep", Q, *SWEEP_FAST, "--grid", "algorithm.local_steps=1", "--out", out, "-q"],
    "compare": lambda out: [
        "compare",
        Q,
        *SWEEP_FAST,
        "--algorithms",
        "fedavg",
        "--seeds",
        "1",
        "--no-plots",
        "--out",
        out,
        "-q",
    ],
    "optimal-tau": lambda out: ["optimal-tau", "sw", "--target", "acc_mean=0.1", "--no-plots", "--out", out],
    "plot": lambda out: ["plot", "sw", "--out", out],
}
HAS_FORCE = {"run", "run+checkpoints", "sweep", "compare"}
TARGETS = [
    "absent",
    "empty",
    "user_files",
    "user_hidden",
    "user_sweep_json",
    "run_folder",
    "sweep_folder",
    "legacy_marker",
    "analysis_folder",
    "file",
    "symlink_user",
    "symlink_dangling",
    "root",
    "home",
    "cwd",
    "parent",
]
CLUTTER = ["none", "user_old", "user_tmp", "user_checkpoint", "lookalike_backup", "writer_of_other_target"]


def snapshot(folder: Path):
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_symlink():
            out[str(p)] = ("link", os.readlink(p))
        elif p.is_dir():
            out[str(p)] = None
        else:
            out[str(p)] = p.read_bytes()
    return out


def names(folder: Path):
    return {p.name: p.lstat().st_ino for p in folder.iterdir()}


codes, violations, cases = Counter(), [], 0
start_dir = os.getcwd()
for target, clutter, command, force in itertools.product(TARGETS, CLUTTER, COMMANDS, (False, True)):
    if force and command not in HAS_FORCE:
        continue
    if target in ("root", "home", "cwd", "parent") and clutter != "none":
        continue
    cases += 1
    top = Path(tempfile.mkdtemp(prefix="case-", dir=base))
    W = top / "work"
    W.mkdir()
    shutil.copytree(base / "sw", W / "sw")
    out, inside = setup_target(target, W)
    outside = setup_clutter(clutter, W, "T")
    user_outside = {f: f.read_bytes() for f in outside}
    user_inside = {f: f.read_bytes() for f in inside}
    os.chdir(W)
    before = snapshot(top)
    root_before, home_before = names(Path("/")), names(Path.home())
    args = COMMANDS[command](out) + (["--force"] if force else [])
    code, err = quiet(args)
    os.chdir(start_dir)
    codes[code] += 1
    label = f"{command}{' --force' if force else ''} --out {target} beside {clutter}"
    bad = []
    if code not in (0, 2) or "Traceback" in err or "internal error" in err:
        bad.append(f"exit {code}: {err.strip()[-300:]}")
    for f, content in user_outside.items():
        if not f.exists() or f.read_bytes() != content:
            bad.append(f"user file outside --out lost: {f.relative_to(W)}")
    for f, content in user_inside.items():
        if (not f.exists() or f.read_bytes() != content) and not (force and code == 0):
            bad.append(f"user file inside --out lost without --force: {f.relative_to(W)}")
    if code == 2 and snapshot(top) != before:
        bad.append("refused, but the work folder changed")
    if code == 0 and target not in ("root", "home", "cwd", "parent"):
        leftovers = [
            p.name
            for p in W.iterdir()
            if p.name.startswith(".T.") and str(p) not in before and p.name != ".T.checkpoint"
        ]
        if leftovers:
            bad.append(f"left beside --out: {leftovers}")
    if target in ("root", "home") and (names(Path("/")) != root_before or names(Path.home()) != home_before):
        new = (set(names(Path("/"))) - set(root_before)) | (set(names(Path.home())) - set(home_before))
        if new & {
            "metrics.csv",
            "sweep.json",
            "results.csv",
            ".lock",
            MARKER,
            "points",
            "computed.log",
            "compare.csv",
            "optimal_tau.csv",
            "tau-accuracy-energy.png",
        }:
            bad.append(f"wrote into {target}: {new}")
    if target in ("cwd", "parent") and code != 2:
        bad.append("wrote into the current folder or above it")
    if bad:
        violations.append((label, bad))
    shutil.rmtree(top, ignore_errors=True)

print(f"{cases} cases; exit codes {dict(codes)}; {len(violations)} violations")
for label, bad in violations[:40]:
    print(" -", label, "|", "; ".join(bad))
shutil.rmtree(base, ignore_errors=True)
