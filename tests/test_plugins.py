"""Plug-ins for data sets and path-loss models (docs/extending.md), and the built-in path-loss models.

The plug-in examples are read from docs/extending.md, so the page is tested as written."""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from channel import free_space_db, log_distance_db, path_loss, umi_street_canyon_db
from edgefl.plugins import PluginError
from edgefl.runner import Simulation
from edgefl.scenario import ScenarioError, load_scenario

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "scenarios" / "quickstart.toml"
PHONES = ROOT / "scenarios" / "phones-in-a-cell.toml"


def documented_modules(tmp_path: Path) -> list[str]:
    """Write every ```python block of docs/extending.md that starts with '# <module>.py' as that file."""
    text = (ROOT / "docs" / "extending.md").read_text()
    names = []
    for block in re.findall(r"```python\n(.*?)```", text, flags=re.S):
        first = block.splitlines()[0]
        match = re.match(r"# (\w+)\.py", first)
        if match:
            (tmp_path / f"{match.group(1)}.py").write_text(block)
            names.append(match.group(1))
    return names


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    names = documented_modules(tmp_path)
    assert {"my_datasets", "my_path_loss", "my_governor"} <= set(names)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in names:
        sys.modules.pop(name, None)


# -- built-in path-loss models -----------------------------------------------------------------
def test_free_space_is_friis():
    # 4π·1 m·1 GHz / c = 41.9 -> 32.44 dB; +20 dB per decade of distance and of frequency
    assert free_space_db(1.0, 1.0) == pytest.approx(20 * math.log10(4 * math.pi * 1e9 / 299_792_458.0))
    assert free_space_db(1.0, 1.0) == pytest.approx(32.44, abs=0.01)
    assert free_space_db(100.0, 10.0) - free_space_db(10.0, 1.0) == pytest.approx(40.0)


def test_umi_street_canyon_follows_38_901():
    fc, h_bs, h_ut = 3.5, 10.0, 1.5
    breakpoint_m = 4 * (h_bs - 1) * (h_ut - 1) * fc * 1e9 / 299_792_458.0  # 210 m at 3.5 GHz
    assert breakpoint_m == pytest.approx(210.0, rel=1e-3)
    d = np.array([20.0, 100.0, 200.0, 400.0, 1000.0])
    los = umi_street_canyon_db(d, fc, line_of_sight=True)
    nlos = umi_street_canyon_db(d, fc)
    d3d = np.hypot(d, h_bs - h_ut)
    assert los[1] == pytest.approx(32.4 + 21 * math.log10(d3d[1]) + 20 * math.log10(fc))  # PL1 below d'BP
    assert nlos[2] == pytest.approx(35.3 * math.log10(d3d[2]) + 22.4 + 21.3 * math.log10(fc))  # NLOS formula wins
    assert (nlos >= los).all()  # NLOS = max(LOS, NLOS')
    # PL1 and PL2 meet at the breakpoint (the table's two LOS pieces are continuous there)
    below, above = umi_street_canyon_db(np.array([breakpoint_m - 1e-6, breakpoint_m + 1e-6]), fc, line_of_sight=True)
    assert above == pytest.approx(below, abs=0.05)
    assert np.all(np.diff(nlos) > 0)


def test_log_distance_is_the_default_and_its_keys_apply_to_it_only():
    s = load_scenario(PHONES)
    assert s.network.path_loss == "log_distance"
    assert path_loss.get("log_distance")(np.array([500.0]), s.network) == pytest.approx(log_distance_db(500.0))
    with pytest.raises(ScenarioError, match=r"network.path_loss: unknown path-loss model 'umi'.*umi_street_canyon"):
        load_scenario(PHONES, {"network.path_loss": "umi"})
    with pytest.raises(ScenarioError, match="network.ue_height_m"):
        load_scenario(PHONES, {"network.path_loss": "umi_street_canyon", "network.ue_height_m": 0.5})


@pytest.mark.parametrize("model", ["free_space", "umi_street_canyon"])
def test_a_built_in_model_sets_every_device_snr(model):
    s = load_scenario(
        PHONES,
        {
            "network.path_loss": model,
            "network.carrier_ghz": 2.0,
            "run.rounds": 1,
            "network.shadowing_std_db": 0.0,
            "devices.speed_mps": 0.0,
        },
    )
    result = Simulation(s).run(progress=False)
    distance = np.array([c["distance_m"] for c in result.clients])
    snr_db = np.array([c["uplink_snr_db"] for c in result.clients])
    loss = path_loss.get(model)(distance, s.network)
    # SNR + loss is the same for every device of one class (power, noise and band are fixed there)
    for name in {c["device_class"] for c in result.clients}:
        mine = np.array([c["device_class"] == name for c in result.clients])
        assert np.ptp((snr_db + loss)[mine]) < 1e-6


# -- plug-ins, as documented ---------------------------------------------------------------------
def test_a_data_set_of_ones_own(plugins):
    scenario = plugins / "blobs.toml"
    scenario.write_text(
        '[run]\nrounds = 3\n[data]\nname = "my_datasets:Blobs"\nnum_clients = 8\nspread = 2.0\n'
        "[algorithm]\nclients_per_round = 4\nlocal_steps = 5\n"
    )
    overrides = {}
    s = load_scenario(scenario)
    assert type(s.data).__name__ == "Blobs" and s.data.spread == 2.0 and s.data.dim == 5
    result = Simulation(s).run(progress=False)
    assert len(result.metrics) == 3 and result.metrics[-1]["acc_mean"] > 0.5  # 3 separable blobs
    assert load_scenario(scenario).to_dict()["data"]["spread"] == 2.0  # written with the run
    with pytest.raises(ScenarioError, match=r"data.spred: unknown key \(did you mean 'spread'\?\)"):
        load_scenario(scenario, {**overrides, "data.spred": 1.0})
    with pytest.raises(ScenarioError, match=r"data.spread: Input should be greater than 0"):
        load_scenario(scenario, {**overrides, "data.spread": -1.0})
    with pytest.raises(
        ScenarioError,
        match=r"data.name: data set 'my_datasets:np': my_datasets.np is not an "
        r"edgefl.data",
    ):
        load_scenario(scenario, {**overrides, "data.name": "my_datasets:np"})
    with pytest.raises(ScenarioError, match=r"data.name: data set 'no_such_module:X': cannot import 'no_such_module'"):
        load_scenario(scenario, {**overrides, "data.name": "no_such_module:X"})


def test_a_path_loss_model_of_ones_own(plugins):
    base = {"run.rounds": 1, "network.shadowing_std_db": 0.0, "devices.speed_mps": 0.0}
    walls = Simulation(load_scenario(PHONES, {**base, "network.path_loss": "my_path_loss:behind_walls"})).run(
        progress=False
    )
    plain = Simulation(load_scenario(PHONES, base)).run(progress=False)
    for w, p in zip(walls.clients, plain.clients):
        assert w["distance_m"] == p["distance_m"]  # same draws: only the loss differs
        expected = 15.0 if w["distance_m"] > 100.0 else 0.0
        assert p["uplink_snr_db"] - w["uplink_snr_db"] == pytest.approx(expected, abs=1e-9)
    with pytest.raises(ScenarioError, match=r"network.path_loss: path-loss model 'my_path_loss:np_'"):
        load_scenario(PHONES, {"network.path_loss": "my_path_loss:np_"})
    (plugins / "nan_loss.py").write_text(
        "import numpy as np\ndef far_nan(d, network):\n    return np.where(np.asarray(d) > 200, np.nan, 100.0)\n"
    )
    with pytest.raises(
        PluginError, match=r"network.path_loss = 'nan_loss:far_nan' returned nan dB at .* m \(\d+ of 50"
    ):
        Simulation(load_scenario(PHONES, {"network.path_loss": "nan_loss:far_nan"}))


# -- a component that reports (docs/extending.md, "A component that reports") ------------------------
def test_the_documented_governor_adds_a_column_and_reads_the_battery(plugins, tmp_path):
    import csv

    from edgefl.runner import write_results

    text = (ROOT / "docs" / "extending.md").read_text()
    table = next(b for b in re.findall(r"```toml\n(.*?)```", text, flags=re.S) if "my_governor:Governor" in b)
    path = tmp_path / "phones-governed.toml"
    phones = PHONES.read_text().replace('dir = "../../', f'dir = "{PHONES.parent}/../../')  # data.dir from here
    path.write_text(phones + "\n" + table)  # the page's [[process]] table
    scenario = load_scenario(
        path, ["run.rounds=3", "data.num_clients=20", "algorithm.clients_per_round=8", "algorithm.local_steps=3"]
    )
    simulation = Simulation(scenario)
    nominal = {float(f) for f in simulation.population.cpu_hz}  # the devices' frequencies as the scenario set them
    result = simulation.run(progress=False)
    write_results(result, tmp_path / "out", plots=False)
    rows = list(csv.DictReader(open(tmp_path / "out" / "metrics.csv")))
    counts = [int(r["slowed_computations"]) for r in rows]
    assert counts == sorted(counts) and counts[-1] > 0, counts  # batteries of 60 J and 30 J: some under 40 J
    events = list(csv.DictReader(open(tmp_path / "out" / "events.csv")))
    hz = {float(e["cpu_hz"]) for e in events if e["kind"] == "compute"}
    assert hz - nominal and {h * 2 for h in hz - nominal} <= nominal  # the slowed ones at half a nominal frequency
    assert all(e["cpu_hz"] == "" for e in events if e["kind"] != "compute")
    assert all(float(e["tx_power_w"]) > 0 for e in events if e["kind"] == "upload")
