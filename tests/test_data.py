"""Tests of edgefl.data: IDX files, Synthetic(alpha, beta), partitioning, federated data sets."""

from __future__ import annotations

import gzip
import hashlib
import os
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from edgefl.data import (
    KNOWN_MD5,
    DataError,
    FederatedData,
    build_federated_data,
    client_test_indices,
    dirichlet_partition,
    largest_remainder,
    load_idx_dataset,
    read_idx,
    stratified_split,
    synthetic_alpha_beta,
    zipf_sizes,
)

IDX_TYPE_CODES = {np.uint8: 0x08, np.int8: 0x09, np.int16: 0x0B, np.int32: 0x0C, np.float32: 0x0D, np.float64: 0x0E}


def write_idx(path: Path, array: np.ndarray) -> Path:
    """Write ``array`` as an IDX file (gzip-compressed when the name ends in .gz)."""
    header = bytes([0, 0, IDX_TYPE_CODES[array.dtype.type], array.ndim])
    header += b"".join(struct.pack(">I", s) for s in array.shape)
    data = header + array.astype(array.dtype.newbyteorder(">")).tobytes()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def write_split(directory: Path, split: str, images: np.ndarray, labels: np.ndarray, gz: bool = False) -> None:
    prefix = "train" if split == "train" else "t10k"
    suffix = ".gz" if gz else ""
    write_idx(directory / f"{prefix}-images-idx3-ubyte{suffix}", images.astype(np.uint8))
    write_idx(directory / f"{prefix}-labels-idx1-ubyte{suffix}", labels.astype(np.uint8))


def fake_images(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, 28, 28), dtype=np.uint8), np.arange(n) % 10


def mnist_dir() -> Path | None:
    shared = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "mnist"
    for candidate in (shared, Path(os.environ.get("EDGEFL_MNIST_DIR", "/nonexistent"))):
        if (candidate / "t10k-images-idx3-ubyte.gz").is_file() or (candidate / "t10k-images-idx3-ubyte").is_file():
            return candidate
    return None


MNIST_DIR = mnist_dir()
needs_mnist = pytest.mark.skipif(
    MNIST_DIR is None, reason="MNIST t10k not found in ../shared/datasets/mnist or $EDGEFL_MNIST_DIR"
)


# ---------------------------------------------------------------- IDX


@pytest.mark.parametrize("suffix", ["", ".gz"])
@pytest.mark.parametrize(
    "array",
    [
        np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4),
        np.array([-5, 0, 70000, -(2**31)], dtype=np.int32),
        np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4),
        np.array([[1.5, -2.25]], dtype=np.float64),
        np.array([-3, 7], dtype=np.int16),
    ],
    ids=["uint8-3d", "int32", "float32", "float64", "int16"],
)
def test_idx_round_trip(tmp_path, suffix, array):
    path = write_idx(tmp_path / f"a-idx{suffix}", array)
    back = read_idx(path)
    assert back.dtype == array.dtype.newbyteorder("=")
    assert back.shape == array.shape
    np.testing.assert_array_equal(back, array)
    back[...] = 0  # a writable native array, not a view of the file buffer


def test_idx_raw_file_has_big_endian_header(tmp_path):
    path = write_idx(tmp_path / "x", np.array([258], dtype=np.int32))
    assert path.read_bytes() == bytes([0, 0, 0x0C, 1, 0, 0, 0, 1, 0, 0, 1, 2])
    assert read_idx(path).tolist() == [258]


def test_idx_rejects_bad_magic_and_truncation(tmp_path):
    bad = tmp_path / "bad"
    bad.write_bytes(b"\x1f\x8b\x08\x01rest")
    with pytest.raises(DataError, match="not an IDX file"):
        read_idx(bad)
    good = write_idx(tmp_path / "good", np.zeros((4, 5), dtype=np.uint8))
    cut = tmp_path / "cut"
    cut.write_bytes(good.read_bytes()[:-3])
    with pytest.raises(DataError, match="truncated or corrupt"):
        read_idx(cut)
    notgz = tmp_path / "plain.gz"
    notgz.write_bytes(good.read_bytes())
    with pytest.raises(DataError, match="not a valid gzip"):
        read_idx(notgz)


def test_known_md5_table_is_complete_and_well_formed():
    assert set(KNOWN_MD5) == {"mnist", "fashion_mnist", "kmnist"}
    for files in KNOWN_MD5.values():
        assert set(files) == {
            "train-images-idx3-ubyte.gz",
            "train-labels-idx1-ubyte.gz",
            "t10k-images-idx3-ubyte.gz",
            "t10k-labels-idx1-ubyte.gz",
        }
        assert all(len(h) == 32 and int(h, 16) >= 0 for h in files.values())
    assert KNOWN_MD5["mnist"]["t10k-images-idx3-ubyte.gz"] == "9fb629c4189551a2d022fa330f9573f3"
    assert KNOWN_MD5["mnist"]["t10k-labels-idx1-ubyte.gz"] == "ec29112dd5afa0611ce80d1b7f02629c"


def test_md5_mismatch_names_file_and_both_checksums(tmp_path):
    images, labels = fake_images(20)
    write_split(tmp_path, "test", images, labels, gz=True)
    actual = hashlib.md5((tmp_path / "t10k-images-idx3-ubyte.gz").read_bytes()).hexdigest()
    with pytest.raises(DataError) as info:
        load_idx_dataset("mnist", tmp_path)
    message = str(info.value)
    assert "t10k-images-idx3-ubyte.gz" in message
    assert actual in message and KNOWN_MD5["mnist"]["t10k-images-idx3-ubyte.gz"] in message
    loaded = load_idx_dataset("mnist", tmp_path, verify_md5=False)
    np.testing.assert_array_equal(loaded["test"][0], images)


def test_raw_files_load_without_checksum_and_train_is_optional(tmp_path):
    images, labels = fake_images(30)
    write_split(tmp_path, "test", images, labels)
    loaded = load_idx_dataset("fashion_mnist", tmp_path)
    assert loaded["train"] is None
    x, y = loaded["test"]
    assert x.dtype == np.uint8 and x.shape == (30, 28, 28)
    assert y.dtype == np.int64 and y.tolist() == labels.tolist()


def test_a_file_is_decoded_once_and_read_again_when_it_changes(tmp_path):
    images, labels = fake_images(30)
    write_split(tmp_path, "test", images, labels)
    first = load_idx_dataset("mnist", tmp_path)["test"][0]
    shared = load_idx_dataset("mnist", tmp_path, shared=True)["test"][0]
    assert first.flags.writeable and not shared.flags.writeable  # the decoded array itself: read-only
    assert load_idx_dataset("mnist", tmp_path, shared=True)["test"][0] is shared  # decoded once
    first[:] = 0  # a caller's own copy: the next load does not see it
    np.testing.assert_array_equal(load_idx_dataset("mnist", tmp_path)["test"][0], images)
    changed, _ = fake_images(30, seed=9)
    write_split(tmp_path, "test", changed, labels)  # the same size, rewritten in place (mtimes not trusted)
    np.testing.assert_array_equal(load_idx_dataset("mnist", tmp_path)["test"][0], changed)


def test_pixels_convert_one_by_one_whatever_their_position():
    """images_to_tensor's elementwise ops give every byte value the same bits at every position (vector lanes and
    tails alike): what lets a client's test rows be copied from the converted pool (edgefl.data.pools)."""
    from edgefl.data.federated import IMAGE_MEAN, IMAGE_STD, images_to_tensor

    values = np.arange(256, dtype=np.uint8)
    for shift in range(67):  # every byte value at every offset modulo 64 (and odd lengths)
        images = np.resize(np.roll(values, shift), (3, 28, 28)).copy()
        images.setflags(write=False)  # a read-only input (a shared decoded file) is fine
        x = images_to_tensor(images)
        one = torch.from_numpy(images.copy()).to(torch.float32).div_(255.0).sub_(IMAGE_MEAN).div_(IMAGE_STD)
        assert x.shape == (3, 1, 28, 28) and torch.equal(x[:, 0], one)
        table = torch.from_numpy(values.copy()).to(torch.float32).div_(255.0).sub_(IMAGE_MEAN).div_(IMAGE_STD)
        assert torch.equal(x.reshape(-1), table[torch.from_numpy(images.astype(np.int64)).reshape(-1)])


def test_missing_directory_files_and_halves_are_clear_errors(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load_idx_dataset("mnist", tmp_path / "nope")
    with pytest.raises(DataError, match=r"has no MNIST files: expected t10k-images-idx3-ubyte\(\.gz\)"):
        load_idx_dataset("mnist", tmp_path)
    images, labels = fake_images(10)
    nested = tmp_path / "MNIST" / "raw"
    nested.mkdir(parents=True)
    write_split(nested, "test", images, labels)
    with pytest.raises(DataError, match="use that directory instead"):
        load_idx_dataset("mnist", tmp_path)
    (nested / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(DataError, match="needs both files"):
        load_idx_dataset("mnist", nested)
    with pytest.raises(DataError, match="unknown IDX dataset"):
        load_idx_dataset("cifar10", nested)


def test_label_count_mismatch_is_an_error(tmp_path):
    images, labels = fake_images(10)
    write_split(tmp_path, "test", images, labels[:9])
    with pytest.raises(DataError, match="one label per image"):
        load_idx_dataset("kmnist", tmp_path)


@needs_mnist
def test_real_mnist_t10k_loads_with_verified_md5():
    for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
        path = MNIST_DIR / name
        if path.is_file():
            assert hashlib.md5(path.read_bytes()).hexdigest() == KNOWN_MD5["mnist"][name]
    loaded = load_idx_dataset("mnist", MNIST_DIR, verify_md5=True)
    images, labels = loaded["test"]
    assert images.shape == (10000, 28, 28) and images.dtype == np.uint8
    assert labels.dtype == np.int64 and labels.min() == 0 and labels.max() == 9
    assert np.bincount(labels).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    assert 30 < images.mean() < 40  # MNIST's mean pixel is 0.1325 * 255 = 33.8 on t10k


# ---------------------------------------------------------------- Synthetic(alpha, beta)


def test_synthetic_shapes_sizes_and_labels():
    clients = synthetic_alpha_beta(25, 1.0, 1.0, np.random.default_rng(3))
    assert len(clients) == 25
    sizes = [len(y) for _, y in clients]
    assert all(50 <= n <= 1000 for n in sizes)
    assert len(set(sizes)) > 5  # log-normal sizes differ
    for x, y in clients:
        assert x.dtype == np.float32 and x.shape == (len(y), 60)
        assert y.dtype == np.int64 and y.min() >= 0 and y.max() < 10
    fixed = synthetic_alpha_beta(3, 0.5, 0.5, np.random.default_rng(0), dim=7, num_classes=4, samples_per_client=11)
    assert [x.shape for x, _ in fixed] == [(11, 7)] * 3
    assert all(y.max() < 4 for _, y in fixed)
    uncapped = synthetic_alpha_beta(200, 1.0, 1.0, np.random.default_rng(1), max_samples=None)
    assert max(len(y) for _, y in uncapped) > 1000  # LogNormal(4, 2) has a heavy tail


def test_synthetic_is_deterministic_and_seed_dependent():
    a = synthetic_alpha_beta(5, 1.0, 1.0, np.random.default_rng(7))
    b = synthetic_alpha_beta(5, 1.0, 1.0, np.random.default_rng(7))
    c = synthetic_alpha_beta(5, 1.0, 1.0, np.random.default_rng(8))
    for (xa, ya), (xb, yb) in zip(a, b):
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya, yb)
    assert any(len(ya) != len(yc) or not np.array_equal(xa, xc) for (xa, ya), (xc, yc) in zip(a, c))


def test_synthetic_input_covariance_is_diag_j_pow_minus_1_2():
    ((x, _),) = synthetic_alpha_beta(1, 1.0, 1.0, np.random.default_rng(0), samples_per_client=20000)
    variances = x.astype(np.float64).var(axis=0)
    expected = np.arange(1, 61) ** -1.2
    np.testing.assert_allclose(variances, expected, rtol=0.05)


def test_synthetic_beta_spreads_client_input_means():
    def spread(beta):
        clients = synthetic_alpha_beta(40, 0.0, beta, np.random.default_rng(0), samples_per_client=200)
        return np.std([x.mean() for x, _ in clients])

    assert spread(0.0) < 0.3 < 2.0 < spread(5.0)  # v_k ~ N(B_k, 1) averaged over 60 dims


def test_synthetic_rejects_negative_scales():
    with pytest.raises(DataError, match="alpha"):
        synthetic_alpha_beta(2, -1.0, 1.0, np.random.default_rng(0))


# ---------------------------------------------------------------- partitioning


def test_largest_remainder_sums_exactly():
    assert largest_remainder(10, np.array([1, 1, 1])).tolist() == [4, 3, 3]
    assert largest_remainder(7, np.array([0, 2, 5])).tolist() == [0, 2, 5]
    assert largest_remainder(5, np.array([0.1, 0.45, 0.45])).tolist() == [1, 2, 2]  # 0.5 beats 0.25
    assert largest_remainder(0, np.array([1, 2])).tolist() == [0, 0]


def test_zipf_sizes_equal_at_sigma_zero():
    assert zipf_sizes(60000, 30, 0.0).tolist() == [2000] * 30
    assert zipf_sizes(10, 3, 0.0).tolist() == [4, 3, 3]


@pytest.mark.parametrize("sigma, first, last", [(0.3, 4075, 1469), (0.5, 6260, 1143), (0.7, 9210, 852)])
def test_zipf_sizes_match_drdm_paper(sigma, first, last):
    sizes = zipf_sizes(60000, 30, sigma)
    assert sizes.sum() == 60000
    assert sizes[0] == first and sizes[-1] == last
    assert np.all(np.diff(sizes) <= 0)
    exact = 60000 * np.arange(1, 31) ** -sigma / np.sum(np.arange(1, 31) ** -sigma)
    assert np.all(np.abs(sizes - exact) < 1)


def balanced_labels(per_class: int, num_classes: int = 10) -> np.ndarray:
    return np.repeat(np.arange(num_classes), per_class)


def check_partition(parts, sizes, n):
    assert [len(p) for p in parts] == list(sizes)
    everything = np.concatenate(parts)
    assert len(np.unique(everything)) == len(everything)  # disjoint
    assert everything.min() >= 0 and everything.max() < n


def test_dirichlet_partition_uniform_mix_at_alpha_inf():
    labels = balanced_labels(600)
    sizes = zipf_sizes(len(labels), 10, 0.0)
    parts = dirichlet_partition(labels, sizes, float("inf"), np.random.default_rng(0), 10)
    check_partition(parts, sizes, len(labels))
    for part in parts:
        shares = np.bincount(labels[part], minlength=10) / len(part)
        assert np.all(np.abs(shares - 0.1) < 0.04)


def test_dirichlet_partition_concentrated_at_small_alpha():
    labels = balanced_labels(600)
    sizes = zipf_sizes(len(labels), 30, 0.0)
    parts = dirichlet_partition(labels, sizes, 0.05, np.random.default_rng(1), 10)
    check_partition(parts, sizes, len(labels))
    dominant = [np.bincount(labels[p], minlength=10).max() / len(p) for p in parts]
    assert np.median(dominant) > 0.8
    uniform = dirichlet_partition(labels, sizes, float("inf"), np.random.default_rng(1), 10)
    assert max(np.bincount(labels[p], minlength=10).max() / len(p) for p in uniform) < 0.3


def test_dirichlet_partition_alpha_zero_gives_one_class_when_pools_allow():
    labels = balanced_labels(100)
    sizes = np.full(20, 50)
    parts = dirichlet_partition(labels, sizes, 0.0, np.random.default_rng(2), 10)
    check_partition(parts, sizes, len(labels))
    assert all(len(np.unique(labels[p])) == 1 for p in parts)


def test_dirichlet_partition_spreads_shortfall_when_a_pool_runs_dry():
    # drdm.md: at alpha = 0.1, sigma = 0.7 client 1 needs more than one class holds.
    labels = balanced_labels(100)
    sizes = zipf_sizes(len(labels), 10, 0.7)
    assert sizes[0] > 100
    for seed in range(5):
        parts = dirichlet_partition(labels, sizes, 0.1, np.random.default_rng(seed), 10)
        check_partition(parts, sizes, len(labels))
    # the whole pool used: every index exactly once
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(len(labels)))


@settings(max_examples=40, deadline=None)
@given(
    num_clients=st.integers(1, 12),
    per_class=st.integers(1, 40),
    alpha=st.sampled_from([0.0, 0.01, 0.3, 1.0, 100.0, float("inf")]),
    sigma=st.sampled_from([0.0, 0.5, 1.5]),
    used=st.floats(0.1, 1.0),
    seed=st.integers(0, 2**16),
)
def test_dirichlet_partition_is_exact_and_disjoint(num_clients, per_class, alpha, sigma, used, seed):
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.repeat(np.arange(10), per_class + rng.integers(0, 5, 10)))
    sizes = zipf_sizes(int(used * len(labels)), num_clients, sigma)
    parts = dirichlet_partition(labels, sizes, alpha, rng, 10)
    check_partition(parts, sizes, len(labels))


def test_dirichlet_partition_rejects_oversized_request():
    with pytest.raises(DataError, match="the pool has 20"):
        dirichlet_partition(balanced_labels(2), np.array([15, 10]), 1.0, np.random.default_rng(0), 10)


def test_stratified_split_keeps_class_proportions():
    labels = np.repeat(np.arange(4), [100, 200, 300, 400])
    train, test = stratified_split(labels, 0.2, np.random.default_rng(0))
    assert len(test) == 200 and len(train) == 800
    assert len(np.intersect1d(train, test)) == 0
    assert np.bincount(labels[test]).tolist() == [20, 40, 60, 80]
    with pytest.raises(DataError, match="test_fraction"):
        stratified_split(labels, 1.0, np.random.default_rng(0))


def test_client_test_set_follows_the_training_class_mix():
    test_labels = balanced_labels(50)
    hist = np.array([30, 10, 0, 0, 60, 0, 0, 0, 0, 0])
    idx = client_test_indices(hist, test_labels, 40, np.random.default_rng(0))
    assert len(idx) == 40
    assert np.bincount(test_labels[idx], minlength=10).tolist() == [12, 4, 0, 0, 24, 0, 0, 0, 0, 0]
    assert len(np.unique(idx)) == 40  # without replacement when the pools allow


def test_client_test_set_reuses_images_only_for_a_short_pool():
    test_labels = np.array([0] * 3 + [1] * 100)
    idx = client_test_indices(np.array([1, 1]), test_labels, 20, np.random.default_rng(0))
    counts = np.bincount(test_labels[idx], minlength=2)
    assert counts.tolist() == [10, 10]
    class0 = idx[test_labels[idx] == 0]
    assert set(class0.tolist()) == {0, 1, 2}  # the whole short pool, then repeats
    class1 = idx[test_labels[idx] == 1]
    assert len(np.unique(class1)) == 10


def test_client_test_set_drops_classes_missing_from_the_test_pool():
    test_labels = np.array([1] * 50 + [2] * 50)
    idx = client_test_indices(np.array([5, 5, 10]), test_labels, 9, np.random.default_rng(0))
    assert np.bincount(test_labels[idx], minlength=3).tolist() == [0, 3, 6]


# ---------------------------------------------------------------- federated data sets


@pytest.fixture(scope="module")
def mnist_fd() -> FederatedData:
    if MNIST_DIR is None:
        pytest.skip("MNIST t10k not found in ../shared/datasets/mnist or $EDGEFL_MNIST_DIR")
    return build_federated_data("mnist", 30, seed=0, dir=MNIST_DIR, dirichlet_alpha=0.3, zipf_sigma=0.5)


def test_mnist_federated_layout(mnist_fd):
    fd = mnist_fd
    assert fd.num_clients == 30 and fd.num_classes == 10 and fd.input_shape == (1, 28, 28)
    assert "MNIST-10k" in fd.source
    assert fd.train_x.dtype == torch.float32 and fd.train_y.dtype == torch.int64
    assert fd.train_x.shape == (8000, 1, 28, 28) and fd.train_y.shape == (8000,)
    assert fd.train_sizes.tolist() == zipf_sizes(8000, 30, 0.5).tolist()
    assert fd.train_offsets[0] == 0 and fd.train_offsets[-1] == 8000
    # normalised pixels: 0 -> -0.1307/0.3081, 255 -> (1-0.1307)/0.3081
    assert fd.train_x.min().item() == pytest.approx(-0.1307 / 0.3081, abs=1e-5)
    assert fd.train_x.max().item() == pytest.approx((1 - 0.1307) / 0.3081, abs=1e-5)
    # test sizes proportional to training sizes, from a 2000-image test pool
    expected = np.maximum(np.floor(2000 * fd.train_sizes / 8000 + 0.5), 1)
    assert fd.test_sizes.tolist() == expected.astype(int).tolist()
    x, y = fd.client_train(3)
    assert x.shape[0] == fd.train_sizes[3] and torch.equal(y, fd.train_y[fd.train_offsets[3] : fd.train_offsets[4]])
    hist = fd.class_histograms()
    assert hist.shape == (30, 10) and hist.sum(axis=1).tolist() == fd.train_sizes.tolist()
    assert fd.global_test_x.shape == (2000, 1, 28, 28)
    summary = fd.summary()
    assert summary["train_total"] == 8000 and summary["classes_per_client"]["min"] >= 1


def test_mnist_train_and_test_pools_are_disjoint(mnist_fd):
    train = {row.numpy().tobytes() for row in mnist_fd.train_x.flatten(1)}
    test = {row.numpy().tobytes() for row in mnist_fd.global_test_x.flatten(1)}
    assert len(train) == 8000  # no image twice in training (MNIST t10k has no exact duplicates)
    assert not train & test


def test_mnist_client_test_sets_are_rows_of_the_test_pool(mnist_fd):
    rows = torch.from_numpy(mnist_fd.test_pool_rows)  # what the evaluation reads (edgefl.metrics.test_per_sample)
    assert torch.equal(mnist_fd.test_x, mnist_fd.global_test_x[rows])
    assert torch.equal(mnist_fd.test_y, mnist_fd.global_test_y[rows])


def test_pooled_test_rows_are_gathered_only_when_read():
    """MNIST-10k's clients' test rows (15,000, drawn from a pool of 2,000) are rows of the pool: a run that evaluates
    on the pool (edgefl.metrics) never makes them; read, they are those rows, converted as the pool was."""
    from edgefl.runner import Simulation

    from conftest import make_scenario

    if MNIST_DIR is None:
        pytest.skip("MNIST t10k not found in ../shared/datasets/mnist or $EDGEFL_MNIST_DIR")
    data = {"name": "mnist", "dir": str(MNIST_DIR), "num_clients": 30, "dirichlet_alpha": 0.1, "test_per_client": 500}
    sim = Simulation(make_scenario("drdm", data=data, rounds=2, clients_per_round=5))
    sim.run(progress=False)
    fd = sim.data
    assert fd.__dict__["_test_x"] is None  # never made: the evaluation read the pool
    rows = torch.from_numpy(fd.test_pool_rows)
    assert fd.test_x.shape == (15_000, 1, 28, 28) and torch.equal(fd.test_x, fd.global_test_x[rows])
    assert fd.__dict__["_test_x"] is not None  # kept once made
    with pytest.raises(ValueError, match="test_x may be None only"):
        FederatedData("x", 10, (1, 28, 28), fd.train_x, fd.train_y, fd.train_offsets, None, fd.test_y, fd.test_offsets)


def test_mnist_client_test_sets_follow_training_mix(mnist_fd):
    fd = mnist_fd
    train_hist = fd.class_histograms()
    for i in range(fd.num_clients):
        _, y = fd.client_test(i)
        test_hist = np.bincount(y.numpy(), minlength=10)
        expected = largest_remainder(int(fd.test_sizes[i]), train_hist[i])
        assert test_hist.tolist() == expected.tolist()


def test_mnist_uniform_partition_is_balanced():
    if MNIST_DIR is None:
        pytest.skip("MNIST t10k not found")
    fd = build_federated_data("mnist", 30, seed=1, dir=MNIST_DIR)
    assert fd.train_sizes.tolist() == [267] * 20 + [266] * 10
    assert fd.summary()["test_size"]["median"] == 67  # round(2000 / 30)
    shares = fd.class_histograms() / fd.train_sizes[:, None]
    assert np.all((shares > 0.03) & (shares < 0.2))


def test_build_is_deterministic_and_seed_dependent():
    if MNIST_DIR is None:
        pytest.skip("MNIST t10k not found")
    kwargs = dict(dir=MNIST_DIR, dirichlet_alpha=0.5, zipf_sigma=0.3, max_train_samples=3000)
    a = build_federated_data("mnist", 10, seed=5, **kwargs)
    b = build_federated_data("mnist", 10, seed=5, **kwargs)
    c = build_federated_data("mnist", 10, seed=6, **kwargs)
    for field in ("train_x", "train_y", "test_x", "test_y"):
        assert torch.equal(getattr(a, field), getattr(b, field))
    assert np.array_equal(a.train_offsets, b.train_offsets) and np.array_equal(a.test_offsets, b.test_offsets)
    assert not torch.equal(a.train_y, c.train_y)
    assert a.train_offsets[-1] == 3000
    # test_per_client draws from its own stream: the training partition does not move
    d = build_federated_data("mnist", 10, seed=5, test_per_client=25, **kwargs)
    assert torch.equal(a.train_x, d.train_x) and d.test_sizes.tolist() == [25] * 10


def test_build_uses_train_split_when_present(tmp_path):
    train_images, train_labels = fake_images(300, seed=1)
    test_images, test_labels = fake_images(100, seed=2)
    write_split(tmp_path, "train", train_images, train_labels)
    write_split(tmp_path, "test", test_images, test_labels)
    fd = build_federated_data("kmnist", 6, seed=0, dir=tmp_path, test_per_client=20)
    assert fd.train_offsets[-1] == 300 and fd.global_test_x.shape[0] == 100
    assert fd.test_sizes.tolist() == [20] * 6
    assert "-10k" not in fd.source and "train split" in fd.source


def test_synthetic_federated_split():
    fd = build_federated_data("synthetic", 20, seed=0)
    assert fd.input_shape == (60,) and fd.num_classes == 10 and fd.num_clients == 20
    assert fd.train_x.shape[1:] == (60,) and fd.train_x.dtype == torch.float32
    total = fd.train_sizes + fd.test_sizes
    assert np.all(total >= 50) and np.all(total <= 1000)
    assert fd.train_sizes.tolist() == np.floor(0.9 * total).astype(int).tolist()
    assert np.all(fd.test_sizes >= 1)
    again = build_federated_data("synthetic", 20, seed=0)
    assert torch.equal(fd.train_x, again.train_x) and torch.equal(fd.test_y, again.test_y)
    with pytest.raises(DataError, match="data.dirichlet_alpha: not a key of data.name = 'synthetic'"):
        build_federated_data("synthetic", 20, seed=0, dirichlet_alpha=0.1)  # an image set's key
    small = build_federated_data("synthetic", 3, seed=0, samples_per_client=5, synthetic_dim=8, synthetic_classes=3)
    assert small.train_sizes.tolist() == [4, 4, 4] and small.test_sizes.tolist() == [1, 1, 1]
    assert small.input_shape == (8,) and int(small.train_y.max()) < 3


def test_build_errors(tmp_path):
    with pytest.raises(DataError) as info:
        build_federated_data("cifar", 10, seed=0)
    assert all(name in str(info.value) for name in ("synthetic", "mnist", "fashion_mnist", "kmnist"))
    with pytest.raises(DataError, match="does not exist"):
        build_federated_data("mnist", 10, seed=0, dir=tmp_path / "missing")
    with pytest.raises(DataError, match="data.dir is not set"):
        build_federated_data("fashion_mnist", 10, seed=0)
    with pytest.raises(DataError, match="has no Kuzushiji-MNIST files"):
        build_federated_data("kmnist", 10, seed=0, dir=tmp_path)
    images, labels = fake_images(40)
    write_split(tmp_path, "test", images, labels)
    with pytest.raises(DataError, match="gets no training data"):
        build_federated_data("mnist", 40, seed=0, dir=tmp_path)
    assert issubclass(DataError, ValueError)


@pytest.mark.parametrize("chunk", [1, 7, 1 << 22])
def test_class_histograms_count_each_clients_own_labels(monkeypatch, chunk):
    """One bincount over (client, class) pairs, a few clients at a time, counts what a bincount per client counts,
    clients without samples included (``chunk``: samples a bincount takes)."""
    import edgefl.data.federated as federated

    monkeypatch.setattr(federated, "HISTOGRAM_SAMPLES", chunk)
    rng = np.random.default_rng(0)
    for clients, classes in [(1, 2), (9, 3), (400, 10), (50, 62)]:
        sizes = rng.integers(0, 40, clients)
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        labels = rng.integers(0, classes, offsets[-1])
        expected = [np.bincount(labels[a:b], minlength=classes) for a, b in zip(offsets[:-1], offsets[1:])]
        assert np.array_equal(federated._histograms(labels, offsets, classes), np.array(expected))
    with pytest.raises(ValueError, match="expected 0 to 2"):
        federated._histograms(np.array([0, 3]), np.array([0, 2]), 3)
