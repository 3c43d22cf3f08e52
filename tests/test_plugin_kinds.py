"""Every kind of plug-in, listed once (plugin_registry.KINDS, issue 32 item 2): the scenario, the registries,
the checkpoint's allow-list and docs/extending.md read the one table, and a run with a plug-in of every kind
resumes from its checkpoint byte-identical to an uninterrupted run (a selection policy, a process and a data
set also after ``kill -9``). And the user's faults have one root (issue 32 item 1)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import algorithms
import plugin_registry
from channel import path_loss
from edgefl import control, model_catalogue, selection
from edgefl.data import registry as data_registry
from edgefl.runner import Simulation
from edgefl.scenario import load_scenario
from edgefl.sim import processes

from conftest import HANG_S

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "scenarios" / "quickstart.toml"
COMPARED = ("metrics.csv", "clients.csv", "events.csv", "positions.csv", "battery.csv", "scenario.toml")

# One plug-in of each kind (its module: kind_<the section of its key>), each with state a checkpoint must carry (its own random stream, counters).
MODULES = {
    "kind_model": """
from torch import nn


def tiny(input_shape, num_classes, hidden: int = 8):
    size = 1
    for n in input_shape:
        size *= n
    return nn.Sequential(nn.Flatten(), nn.Linear(size, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
                         nn.Linear(hidden, num_classes))
""",
    "kind_selection": '''
import numpy as np
from edgefl.selection import Policy


class Shuffled(Policy):
    """k online clients in an order of its own stream, those that rested longest first."""

    def __init__(self, ctx, params=None):
        super().__init__(ctx, params)
        self.calls = 0

    def select(self, view, k):
        self.calls += 1
        order = np.lexsort((self.rng.random(len(view.online)), view.last_round))
        return np.sort(np.array([c for c in order if view.online[c]][:k], dtype=np.int64))
''',
    "kind_process": '''
import numpy as np
from pydantic import BaseModel, Field
from edgefl.sim.component import Component


class JitterParams(BaseModel):
    mean_wait_s: float = Field(0.05, gt=0)


class Jitter(Component):
    """Every step waits an exponential time drawn from its own stream (a foreground app, say)."""

    Params = JitterParams

    def __init__(self, mean_wait_s, seed):
        self.mean_wait_s, self.rng = mean_wait_s, np.random.default_rng([seed, 77])

    @classmethod
    def from_scenario(cls, params, network, population, seed):
        return cls(params.mean_wait_s, seed)

    def before_step(self, client, step):
        yield self.core.env.timeout(float(self.rng.exponential(self.mean_wait_s)))
''',
    "kind_data": """
import numpy as np
import torch
from pydantic import Field
from edgefl.data import DataParams, FederatedData


class Blobs(DataParams):
    samples_per_client: int = Field(40, gt=0)
    dim: int = Field(5, gt=0)

    def build(self, seed):
        rng = np.random.default_rng(seed)
        centres = rng.normal(0.0, 3.0, size=(3, self.dim))
        n = self.samples_per_client * self.num_clients
        y = rng.integers(0, 3, size=2 * n)
        x = centres[y] + rng.normal(size=(2 * n, self.dim))
        offsets = np.arange(self.num_clients + 1) * self.samples_per_client
        return FederatedData(
            name=self.name, num_classes=3, input_shape=(self.dim,),
            train_x=torch.tensor(x[:n], dtype=torch.float32), train_y=torch.tensor(y[:n]), train_offsets=offsets,
            test_x=torch.tensor(x[n:], dtype=torch.float32), test_y=torch.tensor(y[n:]), test_offsets=offsets,
            source="blobs")
""",
    "kind_algorithm": '''
import algorithms


class CountingAvg(algorithms.get("fedavg")):
    """FedAvg that keeps a count of its rounds and a step size that decays with it."""

    def round(self, r):
        self.count = getattr(self, "count", 0) + 1
        yield from super().round(r)
''',
    "kind_control": '''
import numpy as np
from edgefl.control import Allocation, Controller


class Wobble(Controller):
    """CPU frequencies drawn each round from its own stream between the device's bounds."""

    def allocate(self, obs, work):
        limits = self.ctx.devices
        self.drawn = getattr(self, "drawn", 0) + 1
        u = self.ctx.rng.random(len(limits.cpu_hz_max))
        return Allocation(cpu_hz=limits.cpu_hz_min + u * (limits.cpu_hz_max - limits.cpu_hz_min))
''',
    "kind_network": """
import numpy as np
from channel import log_distance_db


def walls(distance_m, network):
    loss_db = log_distance_db(distance_m, network.path_loss_intercept_db, network.path_loss_slope_db)
    return loss_db + np.where(np.asarray(distance_m) > 100.0, 15.0, 0.0)
""",
}
SMALL = [
    "data.num_clients=12",
    "algorithm.clients_per_round=4",
    "algorithm.local_steps=2",
    "data.samples_per_client=40",
    "run.rounds=4",
    "run.checkpoint_every=2",
]
# scenario key of each kind -> the --set overrides that name its plug-in above
NAMED = {
    "model.name": ["model.name=kind_model:tiny"],
    "selection.name": ["selection.name=kind_selection:Shuffled"],
    "process[].name": [],  # a [[process]] table: written into the scenario file (see scenario_file)
    "data.name": ["data.name=kind_data:Blobs", "data.dim=6"],
    "algorithm.name": ["algorithm.name=kind_algorithm:CountingAvg"],
    "control.name": ["control.name=kind_control:Wobble"],
    "network.path_loss": [
        "network.path_loss=kind_network:walls",
        "network.cell_radius_m=250",
    ],
}


@pytest.fixture
def plugin_folder(tmp_path, monkeypatch):
    """The plug-in modules above in the current folder (where edgefl looks for them), forgotten afterwards."""
    for name, source in MODULES.items():
        (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in MODULES:
        sys.modules.pop(name, None)


def scenario_file(folder: Path, key: str) -> Path:
    """quickstart.toml, with a [[process]] table naming the process plug-in when ``key`` is a process's."""
    text = QUICKSTART.read_text()
    if key == "data.name":  # the synthetic data's own keys are not the plug-in's
        text = re.sub(r"\nsynthetic_(alpha|beta) = .*", "", text)
    if key == "network.path_loss":  # a link budget instead of the configured SNR
        text = re.sub(r"\nsnr_db = .*", "", text)
    if key == "process[].name":
        text += '\n[[process]]\nname = "kind_process:Jitter"\nmean_wait_s = 0.02\n'
    path = folder / f"s-{key.replace('[].', '-').replace('.', '-')}.toml"
    path.write_text(text)
    return path


# -- the one table ---------------------------------------------------------------------------------
def test_every_registry_is_built_from_its_row_of_the_table():
    registries = {
        "algorithm.name": algorithms.ALGORITHMS,
        "data.name": data_registry.DATA_SETS,
        "control.name": control.CONTROLLERS,
        "selection.name": selection.POLICIES,
        "network.path_loss": path_loss.PATH_LOSS_MODELS,
        "process[].name": processes.PROCESSES,
        "model.name": model_catalogue.REGISTRY,
    }
    assert set(registries) == {kind.key for kind in plugin_registry.KINDS}, "a kind without a registry here"
    for key, registry in registries.items():
        kind = plugin_registry.kind_of(key)
        assert (registry.kind, registry.group, registry.expected, registry.form) == (
            kind.name,
            kind.group,
            kind.expected,
            kind.form,
        )
    assert plugin_registry.kind_of("process[3].name").key == "process[].name"
    with pytest.raises(KeyError):
        plugin_registry.kind_of("network.snr_db")


def test_the_docs_list_the_kinds_of_the_table():
    """docs/extending.md's table is generated from plugin_registry.KINDS (python -c 'import plugin_registry;
    print(plugin_registry.kinds_table())'): a kind added to the table and not to the page fails here."""
    text = (ROOT / "docs" / "extending.md").read_text()
    found = re.search(r"<!-- plug-in kinds: generated[^\n]*-->\n(.*?)<!-- end of plug-in kinds -->", text, re.S)
    assert found, "docs/extending.md lost its table of plug-in kinds"
    assert found.group(1) == plugin_registry.kinds_table()


def test_the_scenario_finds_a_plug_in_of_every_kind(plugin_folder):
    from edgefl.plugins import plugin_values

    for key, overrides in NAMED.items():
        scenario = load_scenario(scenario_file(plugin_folder, key), SMALL + overrides)
        found = plugin_values(scenario)
        expected = "process[0].name" if key == "process[].name" else key
        assert list(found) == [expected], (key, found)


# -- every kind resumes ---------------------------------------------------------------------------
@pytest.mark.parametrize("key", list(NAMED))
def test_a_run_with_a_plug_in_of_every_kind_resumes_identically(plugin_folder, key):
    from test_checkpoint import interrupted_and_resumed, outputs

    from edgefl.checkpoint import plugin_modules

    scenario = load_scenario(scenario_file(plugin_folder, key), SMALL + NAMED[key])
    kind = plugin_registry.kind_of(key)
    modules = plugin_modules(Simulation(scenario))
    assert (f"kind_{kind.section}" in modules) == kind.checkpoint  # the checkpoint's allow-list: the table
    straight = outputs(Simulation(scenario).run(progress=False), plugin_folder / "straight")
    resumed = outputs(interrupted_and_resumed(scenario, plugin_folder / "resumed", 2), plugin_folder / "resumed")
    assert set(resumed) == set(straight)
    for name in straight:
        assert resumed[name] == straight[name], (key, name)


@pytest.mark.e2e  # several whole edgefl processes: CI's second stage (make test-e2e)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGKILL")
@pytest.mark.parametrize("key", ["selection.name", "process[].name", "data.name"])
def test_kill_9_then_resume_with_a_plug_in(plugin_folder, key):
    """``edgefl run`` with a selection, a process or a data plug-in killed with SIGKILL once its checkpoint
    exists; ``--resume`` finishes it; the files equal an uninterrupted run's byte for byte."""
    from test_checkpoint import killed_then_resumed

    scenario = scenario_file(plugin_folder, key)
    args = [a for s in [*SMALL, "run.rounds=8", *NAMED[key]] for a in ("--set", s)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}

    def edgefl(out: Path, *extra: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "edgefl", "-v", "run", str(scenario), "--out", str(out), "--no-plots", *args]
            + list(extra),
            env=env,
            cwd=plugin_folder,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    reference, out = plugin_folder / "reference", plugin_folder / "res"
    first = edgefl(reference)
    _, err = first.communicate(timeout=HANG_S)
    assert first.returncode == 0, err.decode()[-2000:]
    command = ["-v", "run", scenario, "--no-plots", *args]
    assert "resuming" in killed_then_resumed(command, out, env=env, cwd=plugin_folder)
    for name in COMPARED:
        if (reference / name).exists():
            assert (out / name).read_bytes() == (reference / name).read_bytes(), name


# -- one root for the user's faults ----------------------------------------------------------------
def test_the_users_faults_have_one_root_and_keep_their_names():
    from edgefl.checkpoint import CheckpointError
    from edgefl.data import DataError
    from edgefl.data.errors import DataError as DataErrorThere
    from edgefl.errors import UserError, WorkerDied
    from edgefl.plugins import PluginError
    from edgefl.results import OutputError
    from edgefl.scenario import ScenarioError
    from edgefl.sweeps.plan import SweepError

    assert DataError is DataErrorThere
    for error in (ScenarioError, DataError, PluginError, CheckpointError, OutputError, SweepError, WorkerDied):
        assert issubclass(error, UserError), error
    for error in (ScenarioError, DataError, SweepError):  # ValueErrors too, as before the root
        assert issubclass(error, ValueError), error
    assert (ScenarioError.exit_code, DataError.exit_code, PluginError.exit_code, WorkerDied.exit_code) == (2, 2, 4, 75)


def test_the_cli_catches_the_root_once(monkeypatch, capsys):
    """A DataError or ScenarioError raised anywhere under a command: exit 2, its message, no traceback."""
    from edgefl import cli
    from edgefl.data import DataError
    from edgefl.scenario import ScenarioError

    for error in (DataError("the data is gone"), ScenarioError("a bad key")):

        def fail(_path, _overrides, error=error):
            raise error

        monkeypatch.setattr(cli, "load", fail)
        assert cli.main(["run", str(QUICKSTART)]) == 2
        err = capsys.readouterr().err
        assert f"edgefl: error: {error}" in err and "Traceback" not in err
