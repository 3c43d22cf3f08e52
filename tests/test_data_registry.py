"""Data sets as a registry of typed params classes: one declaration per family, used by the
scenario ([data] validation), the runner (build) and the generated docs."""

import ast
import tomllib
from pathlib import Path

import pytest
import torch

import edgefl.data as data
from edgefl.data import DataError, DataParams, build_federated_data, data_params
from edgefl.data.registry import FAMILIES, family_names
from edgefl.runner import Simulation
from edgefl.scenario import Scenario, ScenarioError, check_sweep_key, load_scenario, scenario_from_dict

REPO = Path(__file__).resolve().parents[1]
MNIST_DIR = REPO.parent / "shared" / "datasets" / "mnist"


def test_registry_is_derived_from_the_families_name_literals():
    assert data.DATASET_NAMES == (
        "synthetic",
        "mnist",
        "fashion_mnist",
        "kmnist",
        "cifar10",
        "cifar100",
        "femnist",
        "shakespeare",
        "federated_npz",
        "synthetic_priority",
        "image_priority",
        "sparse_regression",
        "low_rank_matrix",
    )
    for name, cls in data.REGISTRY.items():
        assert issubclass(cls, DataParams) and name in family_names(cls)
    served = [name for cls in FAMILIES for name in family_names(cls)]
    assert len(served) == len(set(served)), "a name is served by two families"
    assert data.DEFAULT_DATASET in data.REGISTRY


@pytest.mark.parametrize("cls", FAMILIES, ids=lambda c: c.__name__)
def test_every_key_is_typed_and_described(cls):
    assert cls.__doc__ and cls.build is not DataParams.build
    for key, field in cls.model_fields.items():
        assert field.description, f"{cls.__name__}.{key} has no description"
    assert cls.model_config.get("extra") == "forbid"


def test_scenario_data_is_the_families_params_object():
    s = scenario_from_dict(
        {
            "data": {"name": "sparse_regression", "num_clients": 3, "regression_dim": 8, "regression_sparsity": 2},
            "algorithm": {"clients_per_round": 2},
            "model": {"name": "regression"},
        }
    )
    assert type(s.data) is data.REGISTRY["sparse_regression"]
    assert s.data.samples_per_client == 128 and s.data.test_per_client == 32  # the family's defaults
    assert type(Scenario().data) is data.REGISTRY["synthetic"]
    no_name = scenario_from_dict({"data": {"num_clients": 4}, "algorithm": {"clients_per_round": 2}})
    assert no_name.data.name == "synthetic"
    # the resolved scenario holds exactly the family's keys and validates again to the same object
    dumped = s.to_dict()["data"]
    assert set(dumped) == set(type(s.data).model_fields)
    assert scenario_from_dict(s.to_dict()).data == s.data


def test_runner_builds_from_the_params_object():
    s = scenario_from_dict(
        {
            "data": {"name": "synthetic_priority", "num_clients": 6, "samples_per_client": 20, "synthetic_dim": 5},
            "algorithm": {"clients_per_round": 2},
            "run": {"engine": "ideal"},
        }
    )
    sim = Simulation(s)
    direct = build_federated_data("synthetic_priority", 6, s.run.seed, samples_per_client=20, synthetic_dim=5)
    assert torch.equal(sim.data.train_x, direct.train_x) and list(sim.data.client_roles) == list(direct.client_roles)


def test_cross_key_constraints_are_validation_errors():
    with pytest.raises(ScenarioError, match="regression_sparsity = 9: expected 1..regression_dim"):
        scenario_from_dict({"data": {"name": "sparse_regression", "regression_dim": 8, "regression_sparsity": 9}})
    with pytest.raises(ScenarioError, match="matrix_rank = 5: expected 1..matrix_side"):
        scenario_from_dict({"data": {"name": "low_rank_matrix", "matrix_side": 4, "matrix_rank": 5}})
    with pytest.raises(ScenarioError, match="priority_clients = 40: expected 1..num_clients"):
        scenario_from_dict({"data": {"name": "synthetic_priority", "priority_clients": 40}})
    with pytest.raises(DataError, match="max_train_samples = 5: expected at least one sample per client"):
        data_params("mnist", 10, dir=REPO, max_train_samples=5)


def test_data_params_errors_name_the_key():
    with pytest.raises(DataError, match=r"unknown data set 'mnsit' \(did you mean 'mnist'\?\)"):
        data_params("mnsit", 4)
    with pytest.raises(DataError, match="data.dir is not set"):
        data_params("kmnist", 4)
    with pytest.raises(DataError, match="data.matrix_side: not a key of data.name = 'sparse_regression'"):
        data_params("sparse_regression", 4, matrix_side=3)


def test_sweep_keys_may_be_any_data_sets_key():
    for key in ("data.synthetic_alpha", "data.dirichlet_alpha", "data.matrix_rank", "data.name"):
        check_sweep_key(key)
    with pytest.raises(ValueError, match="did you mean 'data.zipf_sigma'"):
        check_sweep_key("data.zipf_sigm")


def test_every_committed_scenario_loads():
    for path in sorted((REPO / "scenarios").glob("*.toml")):
        overrides = []
        if not load_raw_dir_exists(path):  # scenarios that expect the full MNIST beside the checkout
            if not MNIST_DIR.is_dir():
                continue
            overrides = [f"data.dir={MNIST_DIR}"]
        s = load_scenario(path, overrides)
        assert type(s.data) is data.REGISTRY[s.data.name]


def load_raw_dir_exists(path: Path) -> bool:
    with open(path, "rb") as handle:
        section = tomllib.load(handle).get("data", {})
    return "dir" not in section or (path.parent / section["dir"]).is_dir()


OWN_PACKAGES = ("edgefl", "algorithms", "channel", "energy", "plugin_registry")
# deferred on purpose, and no cycle (tests/test_layers.py::test_no_deferred_import_hides_a_cycle): the models (torch)
# are built only once the scenario's sections are valid (tests/test_quick_answers.py)
DEFERRED_OWN = {("sections.py", "edgefl")}


def _function_level_imports(path: Path) -> list[str]:
    """The imports of edgefl's own packages inside functions (third-party ones, e.g. torch where it is used, cannot
    close an import cycle)."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                names = (
                    [a.name for a in inner.names]
                    if isinstance(inner, ast.Import)
                    else [inner.module or ""]
                    if isinstance(inner, ast.ImportFrom)
                    else []
                )
                for name in names:
                    if name.split(".")[0] in OWN_PACKAGES and (path.name, name) not in DEFERRED_OWN:
                        found.append(f"{path.name}:{inner.lineno}")
    return found


def test_no_imports_hidden_inside_functions():
    """Import cycles must not be hidden by function-level imports of edgefl's own modules (plots: matplotlib is
    optional work)."""
    files = sorted((REPO / "edgefl" / "data").glob("*.py")) + sorted((REPO / "edgefl" / "scenario").glob("*.py"))
    found = [hit for f in files for hit in _function_level_imports(f)]
    assert found == []
    runner = _function_level_imports(REPO / "edgefl" / "runner.py")
    assert len(runner) <= 1  # write_results' lazy matplotlib (edgefl.plots), commented there
