"""The Synthetic(alpha, beta) data are the same numbers however they are batched (issue 30, item 3).

The generator draws its laws and samples in chunks of clients into reused buffers; the random stream and every
float64 operation element by element are those of the code before (main e5cc782, which drew them client after client
for log-normal sizes and in 64 MiB chunks for fixed ones). The digests below were computed with that code
(``git archive e5cc782 edgefl``; the same ``digest`` of ``build_federated_data(...)``), before the change: every
committed page, test and scenario that uses synthetic data keeps its numbers. Each case is also built with tiny
chunks (groups of one client when a client's samples exceed the buffer), the laws kept only as far as the samples'
size allows (the 10^6-device path: the rest drawn again from their saved stream states) or none kept, which must not
change a bit either."""

from __future__ import annotations

import hashlib
import time

import numpy as np
import pytest

import edgefl.data.synthetic as synthetic
from edgefl.data import build_federated_data, synthetic_alpha_beta

# name: (data.name, num_clients, seed, other keys, sha256[:16] of train x, y, test x, y and both offsets at e5cc782)
CASES = {
    "fixed": ("synthetic", 3000, 0, dict(samples_per_client=20), "f1c63d9bbcc0c9bd"),
    "lognormal": ("synthetic", 200, 1, {}, "1f9cef8e8e2086ee"),
    "small": (
        "synthetic",
        50,
        2,
        dict(samples_per_client=11, synthetic_dim=7, synthetic_classes=4, synthetic_alpha=0.5, synthetic_beta=0.5),
        "7a734fba7efbaa77",
    ),
    "alpha0": (
        "synthetic",
        40,
        3,
        dict(synthetic_alpha=0.0, synthetic_beta=2.0, samples_per_client=2),
        "e88bc8952304235c",
    ),
    "priority": ("synthetic_priority", 30, 4, {}, "c97d4cd7db07c695"),
    "priority_fixed": (
        "synthetic_priority",
        20,
        5,
        dict(samples_per_client=30, synthetic_dim=10, synthetic_classes=3),
        "365ba603854bfc0f",
    ),
}
ALPHA_BETA_25 = "70cbfea61e7740d8"  # synthetic_alpha_beta(25, 1.0, 1.0, default_rng(3)): each client's x, y bytes


def digest(data) -> str:
    h = hashlib.sha256()
    for tensor in (data.train_x, data.train_y, data.test_x, data.test_y):
        h.update(tensor.numpy().tobytes())
    for offsets in (data.train_offsets, data.test_offsets):
        h.update(np.asarray(offsets, dtype=np.int64).tobytes())
    return h.hexdigest()[:16]


@pytest.fixture(params=["default", "tiny-chunks", "replayed"])
def chunking(request, monkeypatch):
    if request.param != "default":
        monkeypatch.setattr(synthetic, "CHUNK_VALUES", 2000)  # 2 clients' laws a chunk: 16 groups of samples
        monkeypatch.setattr(synthetic, "BLOCK_VALUES", 5000)  # laws kept in blocks of 3 chunks
        monkeypatch.setattr(synthetic, "KEEP_LAWS_BYTES", 0)  # laws kept only as many as the samples will take
    if request.param == "replayed":  # no law kept: every chunk's drawn twice
        laws = synthetic.SyntheticLaws
        monkeypatch.setattr(synthetic, "SyntheticLaws", lambda *args: laws(*args[:6], keep_bytes=0))
    return request.param


@pytest.mark.parametrize("case", sorted(CASES))
def test_synthetic_data_equal_the_code_before(case, chunking):
    name, clients, seed, keys, expected = CASES[case]
    assert digest(build_federated_data(name, clients, seed=seed, **keys)) == expected


def test_synthetic_client_list_equals_the_code_before(chunking):
    h = hashlib.sha256()
    for x, y in synthetic_alpha_beta(25, 1.0, 1.0, np.random.default_rng(3)):
        assert x.dtype == np.float32 and y.dtype == np.int64
        h.update(x.tobytes())
        h.update(y.tobytes())
    assert h.hexdigest()[:16] == ALPHA_BETA_25


def test_the_noise_drawn_ahead_never_overwrites_the_group_the_caller_holds(monkeypatch):
    """A thread draws the next group's noise while the caller copies a group out: never into the buffer it holds, so
    a slow caller still reads the code before's numbers."""
    monkeypatch.setattr(synthetic, "CHUNK_VALUES", 2000)  # 2 clients' laws a chunk: 16 groups of samples
    _, chunks = synthetic.synthetic_samples(25, 1.0, 1.0, np.random.default_rng(3))
    h, groups = hashlib.sha256(), 0
    for n, x, y in chunks:
        time.sleep(0.002)  # the drawer has long finished the next group
        for xc, yc in zip(np.split(x.astype(np.float32), np.cumsum(n)[:-1]), np.split(y, np.cumsum(n)[:-1])):
            h.update(xc.tobytes())
            h.update(yc.tobytes())
        groups += 1
    assert groups >= 10 and h.hexdigest()[:16] == ALPHA_BETA_25


def test_a_slow_first_touch_is_waited_for(monkeypatch):
    """The laws' pass draws into memory that a thread maps ahead by writing zeros: a draw must wait for its own
    memory's, or those zeros would land on drawn values (here the touch is slowed down to make that certain)."""
    touch = synthetic._first_touch

    def slow_touch(memory):
        time.sleep(0.005)
        touch(memory)

    monkeypatch.setattr(synthetic, "_first_touch", slow_touch)
    name, clients, seed, keys, expected = CASES["fixed"]  # 3,000 clients' laws, all kept: 4 draws, each touched first
    assert digest(build_federated_data(name, clients, seed=seed, **keys)) == expected
