"""Update compression (edgefl/compression.py): the numerics, the bits charged, reproducibility, bad keys."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from edgefl.compression import QSGD, Compressor, TopK, build_compressor
from edgefl.runner import Simulation
from edgefl.scenario import ScenarioError, scenario_from_dict


def scenario(compression=None, algorithm="fedavg", executor="batched", rounds=4, **algo):
    raw = {
        "run": {"seed": 2, "rounds": rounds, "executor": executor},
        "data": {"name": "synthetic", "num_clients": 8, "samples_per_client": 40},
        "algorithm": {"name": algorithm, "local_steps": 3, "clients_per_round": 4, "lr": 0.05, "batch_size": 8, **algo},
        "network": {"snr_db": 10.0, "bandwidth_mhz": 1.0, "header_bits": 100},
    }
    if compression is not None:
        raw["compression"] = compression
    return scenario_from_dict(raw)


def run(s):
    return Simulation(s).run(progress=False)


def test_qsgd_is_unbiased_and_its_variance_is_bounded():
    d, b = 50, 3
    q = QSGD(num_clients=1, seed=0, bits=b)
    # its own stream: drawn from torch's global one, v depended on the tests run before in the same process, and
    # for about 1 v in 40 a coordinate barely above a level never rounds up in 4000 draws (sample std 0)
    v = torch.randn(1, d, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    draws = torch.cat([q.compress(v, np.array([0]), "params") for _ in range(4000)])
    s = q.levels
    # E[Q(v)] = v: every coordinate's mean within 5 standard errors
    std_err = draws.std(dim=0) / math.sqrt(len(draws))
    assert ((draws.mean(dim=0) - v[0]).abs() <= 5 * std_err + 1e-12).all()
    # E‖Q(v) − v‖² <= min(d/s², √d/s) ‖v‖² (Alistarh et al. 2017, Lemma 3.1)
    variance = ((draws - v) ** 2).sum(dim=1).mean()
    assert variance <= min(d / s**2, math.sqrt(d) / s) * (v**2).sum() * 1.05
    # values on the grid of s levels of the norm
    levels = draws.abs() / torch.linalg.vector_norm(v) * s
    assert torch.allclose(levels, levels.round(), atol=1e-9)


def test_topk_keeps_k_entries_and_error_feedback_loses_nothing():
    d, clients = 40, np.array([1, 3])
    top = TopK(num_clients=4, seed=0, fraction=0.1)
    deltas = [torch.randn(2, d) for _ in range(5)]
    sent = [top.compress(x, clients, "params") for x in deltas]
    assert all(((s != 0).sum(dim=1) == 4).all() for s in sent)  # k = ceil(0.1 * 40)
    # what was sent plus what is still kept equals everything the clients produced
    assert torch.allclose(sum(sent) + top.residual["params"][clients], sum(deltas), atol=1e-5)
    assert top.bits(d) == 4 * (32 + 6)


def test_none_and_32_bits_change_nothing():
    plain = run(scenario())
    for compression in ({"name": "none"}, {"name": "qsgd", "bits": 32}, {"name": "topk", "fraction": 1.0}):
        same = run(scenario(compression))
        assert same.metrics == plain.metrics
        assert [e.row() for e in same.events] == [e.row() for e in plain.events]


def test_no_compression_is_a_compressor_that_changes_nothing():
    """The engine tests no compressor for None: "none" is the base Compressor, updates and sizes as they are."""
    none = build_compressor(scenario().compression, num_clients=3, seed=0, bits_per_param=32)
    assert type(none) is Compressor and not none.changes_updates and none.bits(10) == 320.0
    bits = np.array([320.0 + 7, 2 * 320.0, 5.0])  # a model and 7 bits, two models, a scalar
    assert none.upload_bits(bits, None, 320.0, 10) is bits
    delta = torch.randn(3, 10)
    assert none.compress(delta, np.arange(3), "params") is delta


@pytest.mark.parametrize("algorithm, vectors", [("fedavg", 1), ("drdm", 2), ("scaffold", 2)])
def test_upload_bits_are_the_compressed_sizes(algorithm, vectors):
    result = run(scenario({"name": "qsgd", "bits": 4}, algorithm=algorithm))
    d = result.summary["model_parameters"]
    uploads = [e for e in result.events if e.kind == "upload" and e.label == "upload" and e.bits > 1000]
    assert uploads
    assert {e.bits for e in uploads} == {vectors * (32 + 4 * d) + 100}
    top = run(scenario({"name": "topk", "fraction": 0.25}, algorithm=algorithm))
    k = math.ceil(0.25 * d)
    assert {e.bits for e in top.events if e.kind == "upload" and e.bits > 1000} == {
        vectors * k * (32 + math.ceil(math.log2(d))) + 100
    }


def test_compression_really_changes_the_numerics_and_8_bits_stays_close():
    plain = run(scenario(rounds=8))
    eight = run(scenario({"name": "qsgd", "bits": 8}, rounds=8))
    two = run(scenario({"name": "qsgd", "bits": 2}, rounds=8))
    assert eight.metrics[-1]["loss"] != plain.metrics[-1]["loss"]
    assert abs(eight.metrics[-1]["loss"] - plain.metrics[-1]["loss"]) < 0.05 * plain.metrics[-1]["loss"]
    assert two.metrics[-1]["loss"] != eight.metrics[-1]["loss"]


@pytest.mark.parametrize("compression", [{"name": "qsgd", "bits": 3}, {"name": "topk", "fraction": 0.2}])
def test_batched_and_loop_executors_give_identical_numbers(compression):
    batched = run(scenario(compression, algorithm="drdm"))
    loop = run(scenario(compression, algorithm="drdm", executor="loop"))
    for a, b in zip(batched.metrics, loop.metrics):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)
        assert a["energy_j"] == b["energy_j"]


@pytest.mark.parametrize(
    "compression, message",
    [
        ({"name": "qsgd", "bits": 1}, "compression.bits"),
        ({"name": "topk", "fraction": 0}, "compression.fraction"),
        ({"name": "topk", "bits": 4}, "applies to name"),
        ({"name": "qsgd", "fraction": 0.1}, "apply to name"),
        ({"name": "zip"}, "compression.name"),
        ({"name": "qsgd", "bitz": 4}, "compression.bitz"),
    ],
)
def test_bad_compression_keys_name_the_field(compression, message):
    with pytest.raises(ScenarioError, match=message):
        scenario(compression)


@pytest.mark.parametrize("algorithm", ["fedda", "c_fedda", "fast_fedda"])
def test_dual_averaging_uploads_are_compressed(algorithm):
    """The FedDA family aggregates carried duals, not the parameters: those are what gets compressed."""
    plain = run(scenario(algorithm=algorithm))
    for compression in ({"name": "qsgd", "bits": 2}, {"name": "topk", "fraction": 0.1}):
        squeezed = run(scenario(compression, algorithm=algorithm))
        assert squeezed.metrics[-1]["loss"] != plain.metrics[-1]["loss"]
        assert all(math.isfinite(m["loss"]) for m in squeezed.metrics)


def test_evaluations_are_charged_uncompressed():
    """SCAFF-PD uploads a gradient (an Evaluate result: not compressed) and later its update (compressed)."""
    result = run(scenario({"name": "qsgd", "bits": 4}, algorithm="scaff_pd"))
    d = result.summary["model_parameters"]
    sizes = {e.bits for e in result.events if e.kind == "upload" and e.bits > 1000}
    assert sizes == {32 * d + 32 + 100, 32 + 4 * d + 100}


def test_partial_averaging_refuses_compression():
    with pytest.raises(ScenarioError, match="does not apply to partial_avg"):
        scenario({"name": "qsgd", "bits": 4}, algorithm="partial_avg")


def test_compression_keys_are_learning_keys_in_a_sweep(tmp_path):
    from edgefl.sweeps.plan import REPRICED, plan_sweep

    path = tmp_path / "s.toml"
    path.write_text(
        '[run]\nrounds = 2\n[data]\nname = "synthetic"\nnum_clients = 8\nsamples_per_client = 40\n'
        '[algorithm]\nname = "fedavg"\nclients_per_round = 4\n[compression]\nname = "qsgd"\n'
    )
    plan = plan_sweep(path, [], ["compression.bits=32,4", "network.snr_db=5,25"])
    assert {p.mode for p in plan.points} == {REPRICED}
    trainings = {p.values["compression.bits"]: set() for p in plan.points}
    for p in plan.points:
        trainings[p.values["compression.bits"]].add(p.training)
    assert all(len(t) == 1 for t in trainings.values())  # one training per setting, re-priced per channel
    assert trainings[32] != trainings[4]
