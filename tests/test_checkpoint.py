"""Run checkpoints (issue 13): `run.checkpoint_every = k` and `edgefl run --resume` continue a killed run from its
last checkpoint with outputs byte-identical to an uninterrupted run (summary.json's wall time aside).

The in-process cases stop a run right after a checkpoint, rebuild a fresh Simulation from the checkpoint and
finish; they cover every kind of state a run carries between rounds: an algorithm's own tensors (control
variates, duals, per-client models), the SimPy model's processes and RNG streams (availability on/off, mobility,
batteries, failures, fading, stragglers), a controller's and an observer's state, a compressor's residuals
and RNG. The subprocess case kills `edgefl run` with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from edgefl.cli import main
from edgefl.results import checkpoint_file
from edgefl.runner import Simulation, write_results
from edgefl.scenario import load_scenario

from conftest import HANG_S, hooked_edgefl

ROOT = Path(__file__).resolve().parents[1]
PHONES = ROOT / "scenarios" / "phones-in-a-cell.toml"
QUICKSTART = ROOT / "scenarios" / "quickstart.toml"
COMPARED = ("metrics.csv", "clients.csv", "events.csv", "positions.csv", "battery.csv", "scenario.toml")
SMALL = ["data.num_clients=20", "algorithm.clients_per_round=6", "algorithm.local_steps=3"]


class Killed(Exception):
    pass


def outputs(result, folder: Path) -> dict[str, bytes]:
    write_results(result, folder, plots=False)
    return {name: (folder / name).read_bytes() for name in COMPARED if (folder / name).exists()}


def interrupted_and_resumed(scenario, folder: Path, stop_after: int):
    """Run ``scenario`` with checkpoints, abort it in the round after ``stop_after`` rounds (as a kill would,
    after the checkpoint), then finish it from the checkpoint in a fresh Simulation."""
    checkpoint = checkpoint_file(folder)

    def abort(row):
        if row["round"] == stop_after + 1:
            raise Killed

    with pytest.raises(Killed):
        Simulation(scenario).run(progress=False, on_round=abort, checkpoint=checkpoint)
    resumed = Simulation.resume(scenario, checkpoint)
    assert resumed.record.rounds_done == stop_after
    return resumed.run(progress=False, checkpoint=checkpoint)


CASES = {
    "fedavg, everything on (markov availability, batteries, mobility, stragglers, deadline, FDMA, MCS, ARQ)": [],
    "scaffold (control variates)": ["algorithm.name=scaffold"],
    "drdm (mixture weights, snapshots)": ["algorithm.name=drdm"],
    "feddyn (per-client state)": ["algorithm.name=feddyn"],
    "partial_avg (per-client models, momentum)": ["algorithm.name=partial_avg"],
    "fedda (duals)": ["algorithm.name=fedda"],
    "min_energy controller with channel errors": ["control.name=min_energy", "control.channel_error_db=3"],
    "adaptive_tau controller": [
        "control.name=adaptive_tau",
        "control.explore_rounds=4",
        "control.tau_max=6",
        "run.eval_every=1",
    ],
    "topk compression with error feedback": ["compression.name=topk"],
    "qsgd compression": ["compression.name=qsgd"],
    "tdma, failures": ["network.access=tdma", "devices.p_fail=0.3"],
    "over-selection": ["algorithm.over_selection=0.5"],
    "ideal engine": ["run.engine=ideal"],
    "fedbuff on the ideal engine (chains in flight across rounds, a buffer)": [
        "run.engine=ideal",
        "algorithm.name=fedbuff",
        "algorithm.fedbuff.buffer_size=4",
    ],
    "fedbuff, everything on (chains in flight across rounds and a checkpoint, a buffer, dropped updates)": [
        "algorithm.name=fedbuff",
        "algorithm.fedbuff.buffer_size=3",
        "algorithm.fedbuff.max_staleness=2",
    ],
    "fedasync, everything on": ["algorithm.name=fedasync", "algorithm.fedasync.staleness=hinge"],
    "fedbuff evaluated by simulated time (run.eval_every_s)": [
        "algorithm.name=fedbuff",
        "algorithm.fedbuff.buffer_size=3",
        "run.eval_every_s=0.25",
    ],
    "oort selection (past durations and losses)": ["selection.name=oort"],
    "power_of_choice selection (charged loss queries)": ["selection.name=power_of_choice"],
    "seven cells, moving (handovers), power control": [
        "network.cells=7",
        "devices.speed_mps=40",
        "network.power_control_p0_dbm=-70",
    ],
    "hierfavg on seven cells, moving (edges following handovers), a backhaul (edge and cloud counts)": [
        "network.cells=7",
        "devices.speed_mps=40",
        "algorithm.name=hierfavg",
        "algorithm.hierfavg.edge_rounds=2",
        "backhaul.rate_mbps=100",
        "backhaul.latency_ms=20",
        "backhaul.energy_j_per_bit=1e-8",
    ],
    # issue 33: the aggregation noise's stream was not restored (126 rows of metrics.csv differed from round 25)
    "over-the-air computation (truncation's fading and the aggregation noise, streams of their own)": [
        "network.uplink=aircomp",
        "algorithm.fedavg.weighting=uniform",
    ],
    "fedcs selection, dedicated bands, rician block fading": [
        "selection.name=fedcs",
        "network.access=dedicated",
        "network.fading=rician",
        "network.coherence_s=0.05",
    ],
    "energy_aware selection (its observer's state)": [
        "selection.name=energy_aware",
    ],
}


@pytest.mark.parametrize("overrides", CASES.values(), ids=list(CASES))
def test_a_resumed_run_is_identical_to_an_uninterrupted_one(tmp_path, overrides):
    scenario = load_scenario(PHONES, [*SMALL, *overrides, "run.rounds=4", "run.checkpoint_every=2"])
    straight = outputs(Simulation(scenario).run(progress=False), tmp_path / "straight")
    resumed = outputs(interrupted_and_resumed(scenario, tmp_path / "resumed", stop_after=2), tmp_path / "resumed")
    assert set(resumed) == set(straight)
    for name in straight:
        assert resumed[name] == straight[name], name
    assert not checkpoint_file(tmp_path / "resumed").exists()  # removed once the results are written


JITTER = """
import numpy as np

from edgefl.sim.component import Component


class Jitter(Component):
    \"\"\"Each upload at a random share of its planned rate: a plug-in component with a random stream of its own.\"\"\"

    changes_uplink_rate = True
    may_change_participation = False

    @classmethod
    def from_scenario(cls, params, network, population, seed):
        return cls(seed)

    def __init__(self, seed):
        self.rng = np.random.default_rng([seed, 7])

    def chains_started(self, clients, plans, procs):
        for client in clients:
            self.core.set_uplink_rate_factor(client, float(self.rng.uniform(0.5, 1.0)))
"""


@pytest.mark.parametrize(
    "processes",
    [[{"name": "thermal", "throttle_c": 36.0, "resume_c": 33.0}], [{"name": "my_jitter:Jitter"}]],
    ids=["thermal", "a plug-in component with a random stream"],
)
def test_a_resumed_run_with_a_process_component_is_identical(tmp_path, monkeypatch, processes):
    """[[process]] components (issue 33: every component's state and random stream restored on --resume)."""
    import tomllib

    from edgefl.scenario import scenario_from_dict

    (tmp_path / "my_jitter.py").write_text(JITTER)
    monkeypatch.syspath_prepend(str(tmp_path))
    raw = tomllib.loads(PHONES.read_text())
    raw["data"]["dir"] = str((PHONES.parent / raw["data"]["dir"]).resolve())
    raw["run"].update(rounds=4, checkpoint_every=2)
    raw["data"]["num_clients"], raw["algorithm"]["clients_per_round"], raw["algorithm"]["local_steps"] = 20, 6, 3
    raw["process"] = processes
    try:
        scenario = scenario_from_dict(raw)
        straight = outputs(Simulation(scenario).run(progress=False), tmp_path / "straight")
        resumed = outputs(interrupted_and_resumed(scenario, tmp_path / "resumed", stop_after=2), tmp_path / "resumed")
        assert resumed == straight
    finally:
        sys.modules.pop("my_jitter", None)


def test_the_unpickler_makes_data_and_calls_nothing_of_the_project():
    """A checkpoint's pickle gets data back (named tuples, dataclasses, pydantic models, arrays, tensors, random
    generators) but cannot call a class of the project (REDUCE), make one with arguments (NEWOBJ), or have its own
    code run through a property, append or __setitem__ (issue 33)."""
    import pickle

    import numpy as np
    import torch

    from edgefl.checkpoint import restricted_loads
    from edgefl.sim.backhaul import Backhaul
    from edgefl.sim.booking import LogRow

    data = {
        "row": LogRow(1, "upload", "upload", 0.0, 1.0, 8.0, 2, 1.0, 0.0, "ok", 0.0, 0.2),
        "component": Backhaul(1e6, 0.01, 1e-9),
        "scenario": load_scenario(QUICKSTART),
        "array": np.arange(5.0),
        "tensor": torch.ones(3),
        "rng": np.random.default_rng(3),
        "torch_rng": torch.Generator().manual_seed(4),
    }
    back = restricted_loads(pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL))
    assert back["row"] == data["row"] and type(back["row"]) is LogRow
    assert vars(back["component"]) == vars(data["component"])
    assert back["scenario"] == data["scenario"] and torch.equal(back["tensor"], data["tensor"])
    assert back["rng"].random() == data["rng"].random()

    class Calls:
        def __init__(self, reduce):
            self.reduce = reduce

        def __reduce__(self):
            return self.reduce

    crafted = {  # (protocol 0 GLOBAL opcodes, then protocol 2+ NEWOBJ / NEWOBJ_EX / BUILD)
        "a class of the project called": pickle.dumps(Calls((Backhaul, (1.0, 0.0, 0.0)))),
        "made with arguments": b"\x80\x04cedgefl.sim.backhaul\nBackhaul\n(F1.0\nF0.0\nF0.0\nt\x81.",
        "made with keyword arguments": b"\x80\x04cedgefl.sim.backhaul\nBackhaul\n)}(Vrate_bps\nF1.0\nu\x92.",
        "a property set": b"\x80\x04cedgefl.sim.pricer\nSimPyPricer\n)\x81N}(Vbefore_step\nI1\nu\x86b.",
    }
    for what, crafted_bytes in crafted.items():
        with pytest.raises(pickle.UnpicklingError, match="which a checkpoint may not"):
            restricted_loads(crafted_bytes)
            raise AssertionError(what)


def test_availability_trace_resumes_identically(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text(
        "client,start_s,end_s\n" + "".join(f"{c},{0.3 * c},{5 + 2 * c}\n{c},{9 + c},1000\n" for c in range(6))
    )
    path = tmp_path / "s.toml"
    path.write_text(
        "[run]\nrounds = 6\ncheckpoint_every = 3\n[data]\nnum_clients = 6\nsamples_per_client = 30\n"
        "[algorithm]\nclients_per_round = 3\nlocal_steps = 2\n[network]\nsnr_db = 10.0\n"
        'deadline_s = 2.0\n[devices]\navailability = "trace"\navailability_trace = "trace.csv"\n'
    )
    scenario = load_scenario(path)
    straight = outputs(Simulation(scenario).run(progress=False), tmp_path / "straight")
    resumed = outputs(interrupted_and_resumed(scenario, tmp_path / "resumed", stop_after=3), tmp_path / "resumed")
    assert resumed == straight


def quickstart_checkpoint(out: Path) -> None:
    """The checkpoint beside ``out`` of the quickstart (4 rounds, a checkpoint every 2) killed in round 3."""
    scenario = load_scenario(QUICKSTART, ["run.rounds=4", "run.checkpoint_every=2"])

    def abort(row):
        if row["round"] == 3:
            raise Killed

    with pytest.raises(Killed):
        Simulation(scenario).run(progress=False, on_round=abort, checkpoint=checkpoint_file(out))


def test_a_checkpoint_of_another_scenario_is_refused_naming_the_keys(tmp_path, capsys):
    out = tmp_path / "res"
    quickstart_checkpoint(out)
    code = main(
        [
            "run",
            str(QUICKSTART),
            "--out",
            str(out),
            "--resume",
            "--quiet",
            "--no-plots",
            "--set",
            "run.rounds=4",
            "--set",
            "algorithm.lr=0.5",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "another scenario" in err and "algorithm.lr" in err
    assert not out.exists()
    checkpoint_file(out).write_bytes(b"not a pickle")
    code = main(
        ["run", str(QUICKSTART), "--out", str(out), "--resume", "--quiet", "--no-plots", "--set", "run.rounds=4"]
    )
    err = capsys.readouterr().err
    assert code == 2 and "not an edgefl checkpoint" in err and "Traceback" not in err


def test_a_checkpoint_of_another_version_is_refused_as_one_and_starting_again_replaces_it(tmp_path, capsys):
    """A checkpoint written by an older edgefl (format 3: the pickle right after the header; or one naming a class
    this edgefl no longer has) is an edgefl checkpoint of another version that cannot be resumed (exit 2, what to
    do), not "not an edgefl checkpoint"; run again without --resume, it is replaced."""
    from edgefl.checkpoint import FORMAT, format_line

    out = tmp_path / "res"
    args = ["run", str(QUICKSTART), "--out", str(out), "--quiet", "--no-plots", "--set", "run.rounds=4"]
    quickstart_checkpoint(out)
    path = checkpoint_file(out)
    written, line = path.read_bytes(), format_line()
    header = written.partition(b"\n")[0] + b"\n"  # edgefl's first line, as a checkpoint of every format has it
    assert written.startswith(header + line)
    state = written[len(header + line) :]
    renamed = state.replace(b"algorithms.fedavg", b"algorithms.fedavX")  # (same length: the pickle stays whole)
    assert renamed != state
    for content, what in [
        (header + state, f"an older one: its format is 3 or earlier, this edgefl reads format {FORMAT}"),
        (header + format_line(FORMAT - 1) + state, f"an older one: its format is {FORMAT - 1}"),
        (header + format_line(FORMAT + 1) + state, f"a newer one: its format is {FORMAT + 1}"),
        (header + line + renamed, "it names algorithms.fedavX.FedAvg, which this edgefl and its plug-ins do not have"),
    ]:
        path.write_bytes(content)
        code = main([*args, "--resume"])
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err and not out.exists(), err
        assert f"{path}: an edgefl checkpoint written by another version of edgefl ({what}" in err, err
        assert "cannot resume: run without --resume to start the run again" in err and "not an edgefl" not in err
    assert main(args + ["--set", "run.checkpoint_every=2"]) == 0  # started again: the old checkpoint replaced
    assert (out / "metrics.csv").exists() and not path.exists()


def test_resume_without_a_checkpoint_starts_from_round_1(tmp_path, capsys):
    out = tmp_path / "res"
    code = main(
        [
            "run",
            str(QUICKSTART),
            "--out",
            str(out),
            "--resume",
            "--no-plots",
            "--set",
            "run.rounds=2",
            "--set",
            "run.checkpoint_every=1",
        ]
    )
    assert code == 0 and "no checkpoint to resume from" in capsys.readouterr().err
    assert (out / "metrics.csv").exists() and not checkpoint_file(out).exists()


@pytest.mark.e2e  # several whole edgefl processes: CI's second stage (make test-e2e)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGKILL")
@pytest.mark.parametrize("algorithm", ["fedavg", "fedbuff"])  # fedbuff: chains in flight at the checkpoint
def test_kill_9_then_resume_gives_the_uninterrupted_results(tmp_path, algorithm):
    """`edgefl run` killed with SIGKILL once its checkpoint exists; `--resume` finishes it; the files equal an
    uninterrupted run's byte for byte."""
    args = [
        "--no-plots",
        "--set",
        f"algorithm.name={algorithm}",
        "--set",
        "run.rounds=8",
        "--set",
        "run.checkpoint_every=2",
        *sum((["--set", s] for s in SMALL), []),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    def edgefl(out: Path, *extra: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "edgefl", "-v", "run", str(PHONES), "--out", str(out), *args, *extra],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    reference, out = tmp_path / "reference", tmp_path / "res"
    assert edgefl(reference).wait(timeout=HANG_S) == 0
    command = ["-v", "run", PHONES, *args]
    err = killed_then_resumed(command, out, env=env, cwd=ROOT)
    assert f"resuming {algorithm} after round" in err
    checkpoint = checkpoint_file(out)
    for name in COMPARED:
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name
    assert not checkpoint.exists()
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left


def killed_then_resumed(command: list, out: Path, **popen) -> str:
    """`edgefl COMMAND --out OUT` (``popen``: more Popen arguments) SIGKILLed right after its first checkpoint is in
    place (conftest.hooked_edgefl: at that call, not after a guessed wait), then the same with --resume to the end;
    its stderr."""
    checkpoint = checkpoint_file(out)
    run = hooked_edgefl(
        [*command, "--out", out],
        name=checkpoint.name,
        when="after",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        **popen,
    )
    assert run.wait(timeout=HANG_S) == -signal.SIGKILL, run.stderr.read().decode()[-2000:]
    assert checkpoint.exists() and not out.exists()
    resumed = subprocess.Popen(
        [sys.executable, "-m", "edgefl", *map(str, command), "--out", str(out), "--resume"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        **popen,
    )
    _, err = resumed.communicate(timeout=HANG_S)
    assert resumed.returncode == 0, err.decode()[-2000:]
    return err.decode()


def test_a_checkpoint_being_written_carries_its_header_on_disk_before_the_state_is_pickled(tmp_path, monkeypatch):
    """A kill -9 while the state is pickled leaves a temporary file that recover() can prove its own (the header
    naming the dead writer) and remove; an empty one it would have to leave."""
    from edgefl import checkpoint as ckpt
    from edgefl.results import checkpoint_header

    seen = []

    def dump(self, obj):
        (tmp,) = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
        seen.append(tmp.read_bytes())
        raise KeyboardInterrupt  # killed while pickling

    monkeypatch.setattr(ckpt._Pickler, "dump", dump)
    sim = Simulation(load_scenario(QUICKSTART, ["run.rounds=2"]))
    sim.keep_checkpoints()
    with pytest.raises(KeyboardInterrupt):
        ckpt.save(sim, tmp_path / ".run.checkpoint")
    assert seen == [checkpoint_header() + ckpt.format_line()]
