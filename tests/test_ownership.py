"""Issue 20: edgefl never touches what it did not write, and a checkpoint runs no code.

One table of named cases, one per way a hostile or careless user reached user files or ran code (issue 20's
"User files deleted or overwritten" and "A checkpoint runs code", and `run --out /`): the command, its exit
code, a fragment of its message, and the files that must survive it byte for byte. A refused command (exit 2)
must leave its working folder exactly as it was (no marker, no .lock, no hidden temporary). The commands run in
this process (edgefl.cli.main) in a fresh folder holding a copy of one finished sweep (`sw/`, and `unmarked/`
without its marker) and one finished run (`rn/`), both computed once for the module.
"""

from __future__ import annotations

import os
import pickle
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import edgefl
from edgefl.checkpoint import format_line
from edgefl.cli import main
from edgefl.results import MARKER, OutputError

ROOT = Path(__file__).resolve().parents[1]
Q = str(ROOT / "scenarios" / "quickstart.toml")
FAST = ["--set", "run.rounds=1", "--set", "data.num_clients=10", "--set", "algorithm.clients_per_round=3"]
RUN = ["run", Q, *FAST, "--no-plots", "--quiet"]
SWEEP = ["sweep", Q, *FAST, "--grid", "algorithm.local_steps=1,2", "--quiet"]
COMPARE = ["compare", Q, *FAST, "--algorithms", "fedavg,fedprox", "--seeds", "1", "--quiet"]
# a checkpoint's first two lines (the format line of this edgefl: the crafted pickles after it reach the unpickler)
HEADER = edgefl.results.CHECKPOINT_MAGIC + b"; pid 1\n" + format_line()


class RunsCode:
    """Unpickled, runs ``touch pwned`` in the current folder (what a crafted checkpoint did before this issue)."""

    def __reduce__(self):
        return (os.system, ("touch pwned",))


class CallsSimulation:
    """Unpickled, calls edgefl's runner.Simulation with a scenario whose algorithm is a module of the current folder
    (issue 33: the module's import-time code ran before the checkpoint was rejected)."""

    def __reduce__(self):
        from edgefl.runner import Simulation
        from edgefl.scenario import load_scenario

        s = load_scenario(Q, ["data.num_clients=10", "algorithm.clients_per_round=3"])
        s = s.model_copy(update={"algorithm": s.algorithm.model_copy(update={"name": "pwn_mod:Algo"})})
        return (Simulation, (s,))


@dataclass
class Case:
    args: list[str]
    code: int
    fragment: str
    files: dict[str, bytes | str] = field(default_factory=dict)  # the user's files, written before the command
    absent: tuple[str, ...] = ()  # what must not exist afterwards (an absolute path: not be created nor changed)
    survive: tuple[str, ...] | None = None  # the user's files that must be unchanged (default: all of `files`)


CASES = {
    # -- user files deleted or overwritten (issue 20, 1-4), and `run --out /` (was exit 70) --------------------
    "sweep --out / (was: exit 0, files written into /)": Case(
        [*SWEEP, "--out", "/"],
        2,
        "is the filesystem root",
        absent=("/sweep.json", "/results.csv", "/points", "/computed.log", "/.lock", "/" + MARKER),
    ),
    "run --out /": Case([*RUN, "--out", "/"], 2, "is the filesystem root", absent=("/metrics.csv", "/" + MARKER)),
    "run --out the current folder": Case(
        [*RUN, "--out", "."], 2, "is the current folder", absent=("metrics.csv", MARKER)
    ),
    "run --out the home folder": Case(
        [*RUN, "--out", str(Path.home())], 2, "is the home folder", absent=(str(Path.home() / "metrics.csv"),)
    ),
    "sweep --out above the current folder": Case([*SWEEP, "--out", ".."], 2, "a folder above the current folder"),
    "sweep --out a folder holding the user's results.csv": Case(
        [*SWEEP, "--out", "mine"],
        2,
        "not an edgefl results folder",
        {"mine/results.csv": "my,own\n1,2\n"},
        absent=("mine/.lock", "mine/sweep.json", "mine/points"),
    ),
    "sweep --out a folder holding the user's computed.log": Case(
        [*SWEEP, "--out", "mine"],
        2,
        "not an edgefl results folder",
        {"mine/computed.log": "my notes\n"},
        absent=("mine/.lock", "mine/sweep.json"),
    ),
    "sweep --out a folder holding the user's sweep.json leaves no .lock": Case(
        [*SWEEP, "--out", "mine"],
        2,
        "not an edgefl results folder",
        {"mine/sweep.json": '{"a": 1}\n'},
        absent=("mine/.lock", "mine/points"),
    ),
    "sweep --out a folder of the user's files (issue 19)": Case(
        [*SWEEP, "--out", "mine"], 2, "--force to replace", {"mine/data.csv": "x\n", "mine/notes.md": "# notes\n"}
    ),
    "compare --out a folder holding the user's compare.csv and compare.txt": Case(
        [*COMPARE, "--out", "mine"],
        2,
        "not an edgefl results folder",
        {"mine/compare.csv": "mine\n", "mine/compare.txt": "mine\n"},
        absent=("mine/.lock", "mine/sweep.json"),
    ),
    "optimal-tau --out a folder holding the user's optimal_tau.csv": Case(
        ["optimal-tau", "sw", "--target", "acc_mean=0.1", "--out", "mine"],
        2,
        "not an edgefl results folder",
        {"mine/optimal_tau.csv": "mine\n"},
    ),
    "plot --out a folder holding the user's figure of the same name": Case(
        ["plot", "sw", "--out", "mine"], 2, "not an edgefl results folder", {"mine/tau-accuracy-energy.png": "mine"}
    ),
    "plot into a sweep folder without edgefl's marker": Case(["plot", "unmarked"], 2, "not an edgefl results folder"),
    "run --out mine3 beside the user's .mine3.old/ (was: deleted)": Case(
        [*RUN, "--out", "mine3"],
        2,
        "not an edgefl results folder",
        {"mine3/notes.txt": "mine\n", ".mine3.old/backup.txt": "my backup\n"},
    ),
    "run --out a new folder beside the user's .mine3.old/": Case(
        [*RUN, "--out", "mine3"], 0, "", {".mine3.old/backup.txt": "my backup\n"}
    ),
    "run --out mine beside the user's .mine.2024.tmp/ (was: deleted as a dead writer's)": Case(
        [*RUN, "--out", "mine"], 0, "", {".mine.2024.tmp/data.txt": "mine\n", ".mine.2024.1.tmp/x": "mine\n"}
    ),
    "run --out an absent mine beside the user's .mine.old/ (was: renamed to mine/)": Case(
        [*RUN, "--out", "mine"], 0, "", {".mine.old/u.txt": "mine\n", f".mine.999999999.old/{MARKER}": ""}
    ),
    "run --out a folder of summary.json and fig1.png (was: taken for edgefl's)": Case(
        [*RUN, "--out", "fake"], 2, "not an edgefl results folder", {"fake/summary.json": "{}\n", "fake/fig1.png": "x"}
    ),
    "run --out a run's folder of the previous edgefl (its marker names no kind): replaced": Case(
        [*RUN, "--out", "old"],
        0,
        "",
        {"old/" + MARKER: "written by edgefl; edgefl may replace this folder\n", "old/metrics.csv": "round\n"},
        survive=(),
    ),
    "run --out a sweep's folder": Case([*RUN, "--out", "sw"], 2, "holds a sweep written by edgefl, not a run's"),
    "sweep --out a run's folder": Case([*SWEEP, "--out", "rn"], 2, "holds a run's results written by edgefl"),
    "run with checkpoints beside the user's file .mine.checkpoint": Case(
        [*RUN, "--out", "mine", "--set", "run.checkpoint_every=1"],
        2,
        "is not an edgefl checkpoint",
        {".mine.checkpoint": "my notes\n"},
    ),
    "run (no checkpoints) beside the user's file .mine.checkpoint (was: deleted)": Case(
        [*RUN, "--out", "mine"], 0, "", {".mine.checkpoint": "my notes\n"}
    ),
    # -- a checkpoint runs code (issue 20) -------------------------------------------------------------------
    "--resume from a crafted checkpoint (__reduce__ -> os.system)": Case(
        [*RUN, "--out", "ev", "--resume"],
        2,
        "not an edgefl checkpoint",
        {".ev.checkpoint": HEADER + pickle.dumps({"format": 3, "state": RunsCode()})},
        absent=("pwned", "ev"),
    ),
    "--resume from a crafted checkpoint of the previous format (no header)": Case(
        [*RUN, "--out", "ev", "--resume"],
        2,
        "not an edgefl checkpoint",
        {".ev.checkpoint": pickle.dumps({"format": 2, "state": RunsCode()})},
        absent=("pwned", "ev"),
    ),
    "--resume from a checkpoint of {'format': 2} (was: exit 70, KeyError 'version')": Case(
        [*RUN, "--out", "ev", "--resume"],
        2,
        "not an edgefl checkpoint",
        {".ev.checkpoint": HEADER + pickle.dumps({"format": 2})},
        absent=("ev",),
    ),
    "--resume from a checkpoint of {'format': 2} without the header": Case(
        [*RUN, "--out", "ev", "--resume"],
        2,
        "not an edgefl checkpoint",
        {".ev.checkpoint": pickle.dumps({"format": 2})},
        absent=("ev",),
    ),
    "--resume from a checkpoint naming a function of edgefl": Case(
        [*RUN, "--out", "ev", "--resume"],
        2,
        "edgefl.results.shutil.rmtree",
        {
            ".ev.checkpoint": HEADER + b"\x80\x04\x8c\x0eedgefl.results\x8c\x0dshutil.rmtree\x93\x8c\x01x\x85R.",
            "x/keep.txt": "mine",
        },
        absent=("ev",),
    ),
}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One finished sweep (sw/) and one finished run (rn/), computed once."""
    base = tmp_path_factory.mktemp("finished")
    assert main([*SWEEP, "--out", str(base / "sw")]) == 0
    assert main([*RUN, "--out", str(base / "rn")]) == 0
    return base


def state(path: Path) -> tuple | None:
    """Whether ``path`` exists, and if so its inode's change time and size: None if absent."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    return info.st_ino, info.st_ctime_ns, info.st_size


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder`` (hidden ones too) with a file's bytes (None for a folder)."""
    return {str(p.relative_to(folder)): (None if p.is_dir() else p.read_bytes()) for p in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("case", CASES.values(), ids=list(CASES))
def test_edgefl_never_touches_what_it_did_not_write(case: Case, finished, tmp_path, monkeypatch, capsys):
    work = tmp_path / "work"  # the current folder; `..` is tmp_path
    shutil.copytree(finished / "sw", work / "sw")
    shutil.copytree(finished / "rn", work / "rn")
    for name, content in case.files.items():
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    shutil.copytree(finished / "sw", work / "unmarked")  # a sweep's files without the marker: not edgefl's
    (work / "unmarked" / MARKER).unlink()
    outside = {p: state(Path(p)) for p in case.absent if Path(p).is_absolute()}  # in / or the home folder
    monkeypatch.chdir(work)
    before = snapshot(tmp_path)
    code = main(case.args)
    err = capsys.readouterr().err
    assert code == case.code, err
    assert case.fragment in err
    assert "Traceback" not in err and "internal error" not in err
    for name in case.files if case.survive is None else case.survive:
        content = case.files[name]
        assert (work / name).read_bytes() == (content if isinstance(content, bytes) else content.encode()), name
    for name in case.absent:
        if name in outside:  # absent as before, or as something else left it (this machine is shared)
            assert state(Path(name)) == outside[name], name
        else:
            assert not (work / name).exists(), name
    if code == 2:  # refused: nothing written, nothing moved, nothing removed
        assert snapshot(tmp_path) == before
    elif "run" in case.args:  # the run's results are in place, and nothing of edgefl's is left beside them
        out = work / case.args[case.args.index("--out") + 1]
        assert (out / "metrics.csv").read_text().startswith("round,") and "kind: run" in (out / MARKER).read_text()
        assert not [
            p.name
            for p in work.iterdir()
            if p.name.startswith(f".{out.name}.")
            and p.name not in case.files
            and not any(f.startswith(p.name + "/") for f in case.files)
        ]


def test_force_replaces_a_folder_of_the_users_files(finished, tmp_path, monkeypatch, capsys):
    """--force is the one way to replace a folder edgefl did not write, for a run and for a sweep alike."""
    monkeypatch.chdir(tmp_path)
    for command, kind in ((RUN, "run"), (SWEEP, "sweep")):
        mine = tmp_path / f"mine-{kind}"
        mine.mkdir()
        (mine / "notes.txt").write_text("mine")
        assert main([*command, "--out", str(mine), "--force"]) == 0, capsys.readouterr().err
        assert not (mine / "notes.txt").exists()
        assert f"kind: {kind}" in (mine / MARKER).read_text()
    capsys.readouterr()


def test_the_python_api_follows_the_same_rule(tmp_path):
    """edgefl.run(out=...) refuses before running, Result.save and edgefl.sweep refuse, the user's files intact."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "summary.json").write_text("{}")
    overrides = {"run.rounds": 1, "data.num_clients": 10, "algorithm.clients_per_round": 3}
    with pytest.raises(OutputError, match="not an edgefl results folder"):
        edgefl.run(Q, overrides, out=mine, progress=False)
    result = edgefl.run(Q, overrides, progress=False)
    with pytest.raises(OutputError, match="not an edgefl results folder"):
        result.save(mine)
    with pytest.raises(OutputError, match="not an edgefl results folder"):
        edgefl.sweep(Q, {"algorithm.local_steps": [1, 2]}, out=mine, overrides=overrides, progress=False)
    assert [p.name for p in mine.iterdir()] == ["summary.json"] and (mine / "summary.json").read_text() == "{}"
    result.save(tmp_path / "new")
    result.save(tmp_path / "new")  # edgefl's own folder: replaced
    assert (tmp_path / "new" / "metrics.csv").exists()


DAMPED = """
from algorithms.fedavg import FedAvg


class DampedFedAvg(FedAvg):
    def round(self, r):
        before = self.w.clone()
        yield from super().round(r)
        self.w = before + 0.5 * (self.w - before)
"""


def test_a_plug_in_algorithm_still_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    """The restricted unpickler lets in the classes of the run's own plug-in (its module is the user's code)."""
    from test_checkpoint import interrupted_and_resumed

    from edgefl.results import checkpoint_file
    from edgefl.runner import Simulation
    from edgefl.scenario import load_scenario

    (tmp_path / "my_damped.py").write_text(DAMPED)
    monkeypatch.syspath_prepend(str(tmp_path))
    scenario = load_scenario(
        Q,
        [
            "algorithm.name=my_damped:DampedFedAvg",
            "run.rounds=3",
            "run.checkpoint_every=1",
            "data.num_clients=10",
            "algorithm.clients_per_round=3",
        ],
    )
    straight = Simulation(scenario).run(progress=False)
    resumed = interrupted_and_resumed(scenario, tmp_path / "res", stop_after=2)
    assert type(resumed.summary) is dict and resumed.metrics == straight.metrics
    assert checkpoint_file(tmp_path / "res").read_bytes().startswith(edgefl.results.CHECKPOINT_MAGIC)


def test_a_checkpoint_cannot_call_an_edgefl_class_with_arguments(tmp_path, monkeypatch, capsys):
    """Issue 33: a file with edgefl's header whose pickle calls runner.Simulation with a scenario naming a module of
    the current folder imported that module (its code ran) before the checkpoint was rejected. The unpickler now
    calls nothing of the project's with arguments from the file: refused at the call, the module never imported."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "pwn_mod.py").write_text("open('pwned', 'w').write('imported')\n")
    (tmp_path / ".ev.checkpoint").write_bytes(HEADER + pickle.dumps({"format": 3, "state": CallsSimulation()}))
    try:
        code = main([*RUN, "--out", "ev", "--resume"])
        err = capsys.readouterr().err
        assert code == 2 and "not an edgefl checkpoint" in err and "calls edgefl.runner.Simulation" in err, err
        assert not (tmp_path / "pwned").exists() and "pwn_mod" not in sys.modules
        assert not (tmp_path / "ev").exists()
    finally:
        sys.modules.pop("pwn_mod", None)
