"""The field's data sets in their published formats, from small files written here byte by byte: CIFAR-10/100
binary records, LEAF's JSON (FEMNIST, Shakespeare) with the natural partition, and a folder of per-client npz
files; malformed files are errors naming the file and the field; each format runs end to end."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from edgefl.cli import main
from edgefl.data import DataError, build_federated_data, data_params
from edgefl.data.cifar import FORMATS, read_cifar_records
from edgefl.data.leaf import ALL_LETTERS
from edgefl.memory import estimate_bytes
from edgefl.scenario import ScenarioError, load_scenario

# --- CIFAR ---------------------------------------------------------------------------------------


def cifar_records(labels: list[tuple[int, ...]], rng: np.random.Generator) -> tuple[bytes, np.ndarray]:
    """Records <label byte(s)><3072 pixel bytes> and their pixel bytes [n, 3072]."""
    pixels = rng.integers(0, 256, (len(labels), 3072), dtype=np.uint8)
    head = np.array(labels, dtype=np.uint8).reshape(len(labels), -1)
    return np.concatenate([head, pixels], axis=1).tobytes(), pixels


def write_cifar10(folder: Path, per_file: int = 20, train: bool = True, seed: int = 0) -> dict[str, np.ndarray]:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    names = ([f"data_batch_{i}.bin" for i in range(1, 6)] if train else []) + ["test_batch.bin"]
    written = {}
    for name in names:
        raw, pixels = cifar_records([(i % 10,) for i in range(per_file)], rng)
        (folder / name).write_bytes(raw)
        written[name] = pixels
    return written


def write_cifar100(folder: Path, n_train: int = 60, n_test: int = 20) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    for name, n in (("train.bin", n_train), ("test.bin", n_test)):
        # fine label 5 i mod 100, coarse label its superclass stand-in i mod 20
        raw, _ = cifar_records([(i % 20, (5 * i) % 100) for i in range(n)], rng)
        (folder / name).write_bytes(raw)


def test_a_known_cifar_pixel_lands_at_its_channel_row_and_column(tmp_path):
    record = bytearray(3073)
    record[0] = 7  # label
    c, h, w = 1, 5, 30  # green, row 5, column 30: byte 1 + 1024 c + 32 h + w
    record[1 + 1024 * c + 32 * h + w] = 200
    record[1 + 1024 * 2 + 32 * 31 + 0] = 99  # blue, last row, first column
    path = tmp_path / "test_batch.bin"
    path.write_bytes(bytes(record) * 2)
    images, labels = read_cifar_records(path, FORMATS["cifar10"])
    assert images.shape == (2, 3, 32, 32) and labels.tolist() == [[7], [7]]
    assert images[0, 1, 5, 30] == 200 and images[0, 2, 31, 0] == 99
    assert int(images[0].sum()) == 299  # nothing else set


def test_cifar10_reads_every_batch_in_order_with_labels_and_channel_major_pixels(tmp_path):
    written = write_cifar10(tmp_path / "c10")
    images, labels = read_cifar_records(tmp_path / "c10" / "data_batch_3.bin", FORMATS["cifar10"])
    assert labels[:, 0].tolist() == [i % 10 for i in range(20)]
    expected = written["data_batch_3.bin"].reshape(20, 3, 32, 32)  # R plane, G plane, B plane, rows of 32
    assert np.array_equal(images, expected)
    data = build_federated_data("cifar10", 4, seed=3, dir=tmp_path / "c10")
    assert data.input_shape == (3, 32, 32) and data.num_classes == 10
    assert data.train_sizes.sum() == 100 and data.global_test_y.shape[0] == 20  # 5 x 20 train, 20 test
    # standardised per channel with the training pool's own statistics: mean 0, std 1 on it
    channels = data.train_x.transpose(0, 1).reshape(3, -1).double()
    assert torch.allclose(channels.mean(1), torch.zeros(3, dtype=torch.float64), atol=1e-5)
    assert torch.allclose(channels.std(1, unbiased=False), torch.ones(3, dtype=torch.float64), atol=1e-5)
    assert sorted(np.bincount(data.train_y.numpy(), minlength=10).tolist()) == [10] * 10


def test_cifar10_with_only_the_test_batch_splits_it(tmp_path):
    write_cifar10(tmp_path / "c10", per_file=50, train=False)
    data = build_federated_data("cifar10", 2, seed=0, dir=tmp_path / "c10")
    assert data.train_sizes.sum() == 40 and data.global_test_y.shape[0] == 10
    assert "test_batch.bin only" in data.source


def test_cifar100_fine_labels_by_default_and_coarse_on_request(tmp_path):
    write_cifar100(tmp_path / "c100")
    fine = build_federated_data("cifar100", 3, seed=0, dir=tmp_path / "c100", partition="iid")
    assert fine.num_classes == 100
    assert sorted(set(fine.global_test_y.tolist())) == sorted({(5 * i) % 100 for i in range(20)})
    coarse = build_federated_data("cifar100", 3, seed=0, dir=tmp_path / "c100", labels="coarse")
    assert coarse.num_classes == 20 and sorted(set(coarse.global_test_y.tolist())) == list(range(20))
    assert data_params("cifar100", 3, dir=tmp_path, labels="coarse").layout() == ((3, 32, 32), 20)


@pytest.mark.parametrize(
    "damage, expected",
    [
        ("truncate", "has 61459 bytes: expected a whole, non-zero number of 3073-byte CIFAR-10 records"),
        ("label", "record 3 (byte 9219): label 12 is not in 0..9"),
        (
            "missing_batch",
            "has data_batch_1.bin, data_batch_2.bin, data_batch_3.bin, data_batch_5.bin but not data_batch_4.bin",
        ),
        ("no_test", "has no test_batch.bin"),
    ],
)
def test_malformed_cifar_files_name_the_file_and_record(tmp_path, damage, expected):
    folder = tmp_path / "c10"
    write_cifar10(folder)
    if damage == "truncate":
        (folder / "data_batch_2.bin").write_bytes((folder / "data_batch_2.bin").read_bytes()[:-1])
    elif damage == "label":
        raw = bytearray((folder / "test_batch.bin").read_bytes())
        raw[3 * 3073] = 12
        (folder / "test_batch.bin").write_bytes(bytes(raw))
    elif damage == "missing_batch":
        (folder / "data_batch_4.bin").unlink()
    else:
        (folder / "test_batch.bin").unlink()
    with pytest.raises(DataError) as info:
        build_federated_data("cifar10", 2, seed=0, dir=folder)
    assert expected in str(info.value)
    if damage in ("truncate", "label"):
        assert str(folder) in str(info.value)


def test_cifar100_files_read_as_cifar10_are_refused(tmp_path):
    write_cifar100(tmp_path / "c100")
    (tmp_path / "c100" / "test_batch.bin").write_bytes((tmp_path / "c100" / "test.bin").read_bytes())
    with pytest.raises(DataError, match="CIFAR-100's are 3074 bytes"):
        build_federated_data("cifar10", 2, seed=0, dir=tmp_path / "c100")


# --- LEAF JSON -----------------------------------------------------------------------------------


def femnist_image(k: int) -> list[float]:
    """A 28 x 28 image, row by row, with one dark pixel at row k % 28, column (3 k) % 28."""
    x = [1.0] * 784
    x[28 * (k % 28) + (3 * k) % 28] = 0.25
    return x


def leaf_file(sizes: dict[str, int], sample, num_samples_offset: int = 0) -> dict:
    user_data = {}
    for u, n in sizes.items():
        xs, ys = zip(*(sample(u, k) for k in range(n))) if n else ((), ())
        user_data[u] = {"x": list(xs), "y": list(ys)}
    return {
        "users": list(sizes),
        "num_samples": [n + num_samples_offset for n in sizes.values()],
        "user_data": user_data,
    }


def femnist_sample(user: str, k: int):
    return femnist_image(k), (k + int(user[-1])) % 3 if user[-1].isdigit() else k % 3  # classes every test file has


def write_leaf(folder: Path, train_files: list[dict[str, int]], test_files: list[dict[str, int]] | None, sample, **kw):
    (folder / "train").mkdir(parents=True)
    for i, sizes in enumerate(train_files):
        (folder / "train" / f"all_data_{i}_niid_1_keep_0_train_9.json").write_text(json.dumps(leaf_file(sizes, sample)))
    if test_files is not None:
        (folder / "test").mkdir()
        for i, sizes in enumerate(test_files):
            (folder / "test" / f"all_data_{i}_niid_1_keep_0_test_9.json").write_text(
                json.dumps(leaf_file(sizes, sample, **kw))
            )


FEMNIST_TRAIN = [{"f0003_12": 9, "f0001_40": 5}, {"f0002_07": 14}]
FEMNIST_TEST = [{"f0003_12": 2, "f0001_40": 1}, {"f0002_07": 3}]


def test_femnist_natural_partition_gives_one_client_per_writer_with_the_files_sizes(tmp_path):
    write_leaf(tmp_path / "femnist", FEMNIST_TRAIN, FEMNIST_TEST, femnist_sample)
    data = build_federated_data("femnist", 3, seed=0, dir=tmp_path / "femnist")
    # clients = the writers in LEAF's order (sorted names): f0001_40, f0002_07, f0003_12
    assert data.train_sizes.tolist() == [5, 14, 9] and data.test_sizes.tolist() == [1, 3, 2]
    assert data.input_shape == (1, 28, 28) and data.num_classes == 62
    x, y = data.client_train(1)  # f0002_07, its samples in file order
    assert y.tolist() == [(k + 7) % 3 for k in range(14)]
    for k in (0, 13):  # the dark pixel of row-major index 28 h + w is at [0, h, w]
        h, w = k % 28, (3 * k) % 28
        assert x[k, 0, h, w] == 0.25 and float(x[k].sum()) == 783 + 0.25
    assert "all 3 of 3 writers" in data.source


def test_natural_partition_with_fewer_clients_draws_writers_and_keeps_their_sizes(tmp_path):
    sizes = {f"w{i:02d}": 2 + i for i in range(12)}
    write_leaf(tmp_path / "f", [sizes], [{u: 1 for u in sizes}], femnist_sample)
    a = build_federated_data("femnist", 5, seed=1, dir=tmp_path / "f")
    b = build_federated_data("femnist", 5, seed=1, dir=tmp_path / "f")
    assert a.train_sizes.tolist() == b.train_sizes.tolist()  # the seed fixes the draw
    assert len(set(a.train_sizes.tolist())) == 5 and set(a.train_sizes.tolist()) <= set(sizes.values())
    assert a.train_sizes.tolist() == sorted(a.train_sizes.tolist())  # the files' order is kept
    draws = {tuple(build_federated_data("femnist", 5, seed=s, dir=tmp_path / "f").train_sizes) for s in range(6)}
    assert len(draws) > 1  # another seed, another subset
    with pytest.raises(DataError, match=r"data.num_clients = 13 but FEMNIST .* holds 12 writer\(s\)"):
        build_federated_data("femnist", 13, seed=1, dir=tmp_path / "f")


def shakespeare_sample(user: str, k: int):
    text = ("O Romeo, Romeo! wherefore art thou Romeo? Deny thy father and refuse thy name; " + user) * 3
    return text[k : k + 80], text[k + 80]


def test_shakespeare_roles_are_clients_and_characters_are_leaf_indices(tmp_path):
    roles = {"JULIET": 12, "ROMEO": 6}
    # LEAF's Shakespeare test files overstate num_samples by 79: still read (the x and y lists are the data)
    write_leaf(tmp_path / "sh", [roles], [{u: 2 for u in roles}], shakespeare_sample, num_samples_offset=79)
    data = build_federated_data("shakespeare", 2, seed=0, dir=tmp_path / "sh")
    assert data.train_sizes.tolist() == [12, 6] and data.test_sizes.tolist() == [2, 2]
    assert data.input_shape == (80,) and data.num_classes == 80 == len(ALL_LETTERS)
    x, y = data.client_train(1)
    text, target = shakespeare_sample("ROMEO", 4)
    assert x.dtype == torch.float32 and x[4].tolist() == [float(ALL_LETTERS.index(c)) for c in text]
    assert int(y[4]) == ALL_LETTERS.index(target)
    one_hot = build_federated_data("shakespeare", 2, seed=0, dir=tmp_path / "sh", encoding="one_hot")
    assert one_hot.input_shape == (80, 80)
    assert torch.equal(one_hot.train_x.argmax(-1).float(), data.train_x) and one_hot.train_x.sum() == 18 * 80


def test_an_unsplit_leaf_folder_tests_each_writer_on_its_last_tenth(tmp_path):
    (tmp_path / "all_data").mkdir()
    (tmp_path / "all_data" / "all_data_0.json").write_text(json.dumps(leaf_file({"a": 20, "b": 10}, femnist_sample)))
    data = build_federated_data("femnist", 2, seed=0, dir=tmp_path / "all_data")
    assert data.train_sizes.tolist() == [18, 9] and data.test_sizes.tolist() == [2, 1]
    assert "tested on their last 10 % of samples" in data.source


def test_leaf_writers_pooled_by_dirichlet_serve_more_clients_than_writers(tmp_path):
    write_leaf(tmp_path / "femnist", FEMNIST_TRAIN, FEMNIST_TEST, femnist_sample)
    data = build_federated_data(
        "femnist", 7, seed=0, dir=tmp_path / "femnist", partition="dirichlet", dirichlet_alpha=0.5
    )
    assert data.num_clients == 7 and data.train_sizes.sum() == 28 and data.global_test_y.shape[0] == 6
    iid = build_federated_data("femnist", 4, seed=0, dir=tmp_path / "femnist", partition="iid")
    assert iid.train_sizes.tolist() == [7, 7, 7, 7]


def test_a_by_user_split_works_pooled_and_is_refused_by_the_natural_partition(tmp_path):
    # LEAF's -t user: writers wholly in train/ or in test/
    write_leaf(tmp_path / "f", [{"a": 6, "b": 4}], [{"c": 5}], femnist_sample)
    pooled = build_federated_data("femnist", 2, seed=0, dir=tmp_path / "f", partition="iid")
    assert pooled.train_sizes.sum() == 10 and pooled.global_test_y.shape[0] == 5
    with pytest.raises(DataError, match="writer 'a' of .* has no test samples in .*-t sample"):
        build_federated_data("femnist", 2, seed=0, dir=tmp_path / "f")


def _rewrite(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    "damage, expected",
    [
        ("json", r"line 1 column \d+: not valid JSON"),
        ("short_image", r"user_data\['f0002_07'\].x\[4\]: expected 784 numbers .*got a list of 783"),
        ("text_pixel", r"user_data\['f0002_07'\].x\[4\]: expected 784 numbers .*entry 10 is 'white'"),
        ("label", r"user_data\['f0002_07'\].y\[2\] = 62: expected a class label, an integer in 0..61"),
        ("float_label", r"user_data\['f0002_07'\].y\[2\] = 3.5"),
        ("lengths", r"user_data\['f0002_07'\]: x has 14 samples and y 13 labels"),
        ("no_user_data", r"expected a LEAF JSON object with \"user_data\""),
        ("twice", r"writer 'f0002_07' is in both"),
    ],
)
def test_malformed_femnist_files_name_the_file_and_field(tmp_path, damage, expected):
    write_leaf(tmp_path / "f", FEMNIST_TRAIN, FEMNIST_TEST, femnist_sample)
    path = tmp_path / "f" / "train" / "all_data_1_niid_1_keep_0_train_9.json"
    entry = lambda d: d["user_data"]["f0002_07"]  # noqa: E731
    if damage == "json":
        path.write_text(path.read_text()[:-2])
    elif damage == "short_image":
        _rewrite(path, lambda d: entry(d)["x"][4].pop())
    elif damage == "text_pixel":
        _rewrite(path, lambda d: entry(d)["x"][4].__setitem__(10, "white"))
    elif damage in ("label", "float_label"):
        _rewrite(path, lambda d: entry(d)["y"].__setitem__(2, 62 if damage == "label" else 3.5))
    elif damage == "lengths":
        _rewrite(path, lambda d: entry(d)["y"].pop())
    elif damage == "no_user_data":
        _rewrite(path, lambda d: d.pop("user_data"))
    else:
        (tmp_path / "f" / "train" / "again.json").write_text(path.read_text())
    with pytest.raises(DataError, match=expected) as info:
        build_federated_data("femnist", 3, seed=0, dir=tmp_path / "f")
    assert str(tmp_path / "f" / "train") in str(info.value)


def test_an_unknown_shakespeare_character_is_named_with_its_position(tmp_path):
    write_leaf(tmp_path / "sh", [{"ROLE": 3}], None, shakespeare_sample)
    path = next((tmp_path / "sh" / "train").glob("*.json"))
    _rewrite(path, lambda d: d["user_data"]["ROLE"]["x"].__setitem__(1, "é" + "a" * 79))
    with pytest.raises(DataError, match=r"user_data\['ROLE'\].x\[1\]\[0\] = 'é' is not one of LEAF's 80 characters"):
        build_federated_data("shakespeare", 1, seed=0, dir=tmp_path / "sh")
    _rewrite(path, lambda d: d["user_data"]["ROLE"]["x"].__setitem__(1, "a" * 79))
    with pytest.raises(DataError, match=r"x\[1\]: expected a text of 80 character\(s\), got a text of 79"):
        build_federated_data("shakespeare", 1, seed=0, dir=tmp_path / "sh")


def test_the_natural_partition_refuses_keys_of_the_pooled_ones(tmp_path):
    for key, value in (("dirichlet_alpha", 0.5), ("zipf_sigma", 1.0), ("test_per_client", 5), ("max_train_samples", 9)):
        with pytest.raises(DataError, match=f'data.{key} = {value} with data.partition = "natural"'):
            data_params("femnist", 3, dir=tmp_path, **{key: value})
    with pytest.raises(DataError, match='data.partition = "iid"'):
        data_params("cifar10", 3, dir=tmp_path, partition="iid", dirichlet_alpha=0.3)
    with pytest.raises(DataError, match="data.partition"):
        data_params("cifar10", 3, dir=tmp_path, partition="natural")  # CIFAR has no writers


# --- per-client npz --------------------------------------------------------------------------------


def write_npz_clients(folder: Path, sizes: list[int], test_sizes: list[int | None], dim: int = 5) -> None:
    folder.mkdir(parents=True)
    rng = np.random.default_rng(2)
    for i, (n, t) in enumerate(zip(sizes, test_sizes)):
        arrays = {"x": rng.normal(size=(n, dim)), "y": rng.integers(0, 4, n)}
        if t is not None:
            arrays.update(x_test=rng.normal(size=(t, dim)).astype(np.float32), y_test=np.full(t, 3, dtype=np.uint8))
        np.savez(folder / f"client_{i:03d}.npz", **arrays)


def test_npz_folder_gives_one_client_per_file_with_its_sizes(tmp_path):
    write_npz_clients(tmp_path / "own", [12, 30, 7], [4, None, 2])
    data = build_federated_data("federated_npz", 3, seed=0, dir=tmp_path / "own")
    assert data.train_sizes.tolist() == [12, 27, 7] and data.test_sizes.tolist() == [4, 3, 2]  # 30: 27 + 3
    assert data.input_shape == (5,) and data.num_classes == 4
    with np.load(tmp_path / "own" / "client_000.npz") as f:
        assert np.array_equal(data.client_train(0)[0].numpy(), f["x"].astype(np.float32))
        assert data.client_test(0)[1].tolist() == [3, 3, 3, 4 - 1]
    params = data_params("federated_npz", 3, dir=tmp_path / "own")
    assert params.layout() == ((5,), 4) and params.estimated_samples() == 12 + 4 + 30 + 7 + 2


@pytest.mark.parametrize(
    "arrays, expected",
    [
        ({"x": np.array([[1.0], "a"], dtype=object), "y": np.zeros(2, int)}, "x holds Python objects"),
        ({"x": np.zeros((2, 5)), "y": np.zeros(2, int), "w": np.zeros(2)}, "holds 'w': expected only the arrays"),
        ({"x": np.zeros((2, 4)), "y": np.zeros(2, int)}, "samples have shape [4], the first file's [5]"),
        ({"x": np.zeros((2, 5)), "y": np.zeros(3, int)}, "x has 2 samples and y 3"),
        ({"x": np.zeros((2, 5)), "y": np.array([0.0, 1.0])}, "y has dtype float64"),
        ({"x": np.zeros((2, 5)), "y": np.zeros(2, int), "x_test": np.zeros((1, 5))}, "only one of x_test and y_test"),
        ({"x": np.full((2, 5), np.nan), "y": np.zeros(2, int)}, "x[0] holds NaN or infinity"),
    ],
)
def test_malformed_npz_files_name_the_file_and_array(tmp_path, arrays, expected):
    write_npz_clients(tmp_path / "own", [6], [None])
    np.savez(tmp_path / "own" / "client_bad.npz", **arrays)
    with pytest.raises(DataError) as info:
        build_federated_data("federated_npz", 2, seed=0, dir=tmp_path / "own")
    assert expected in str(info.value) and "client_bad.npz" in str(info.value)


def test_a_file_that_is_no_npz_archive_is_named_without_advice_to_unpickle(tmp_path):
    write_npz_clients(tmp_path / "own", [6], [None])
    (tmp_path / "own" / "b.npz").write_bytes(b"not a zip")
    with pytest.raises(DataError, match=r"b.npz' is not an .npz archive") as info:
        build_federated_data("federated_npz", 2, seed=0, dir=tmp_path / "own")
    assert "pickle" not in str(info.value)
    np.save(tmp_path / "own" / "b.npy", np.zeros(3))
    (tmp_path / "own" / "b.npy").rename(tmp_path / "own" / "b.npz")
    with pytest.raises(DataError, match=r"b.npz' is a single .npy array"):
        build_federated_data("federated_npz", 2, seed=0, dir=tmp_path / "own")


def test_an_absent_folder_is_a_clear_error_for_every_file_format(tmp_path):
    for name, expected in (
        ("cifar10", "cifar-10-binary.tar.gz"),
        ("cifar100", "cifar-100-binary.tar.gz"),
        ("femnist", "preprocess.sh"),
        ("shakespeare", "preprocess.sh"),
        ("federated_npz", "one .npz file per client"),
    ):
        with pytest.raises(DataError, match=f"data.dir '.*nowhere' does not exist.*{expected}"):
            build_federated_data(name, 2, seed=0, dir=tmp_path / "nowhere")


# --- memory estimate ------------------------------------------------------------------------------


def test_the_memory_estimate_counts_the_new_data_sets(tmp_path):
    write_npz_clients(tmp_path / "own", [12, 30, 7], [4, None, 2])
    s = load_scenario(_scenario(tmp_path, "federated_npz", tmp_path / "own", 3, "linear"))
    assert estimate_bytes(s.data, s.model, s.algorithm)["data"] == 55 * (5 + 1) * 4
    s = load_scenario(_scenario(tmp_path, "cifar10", tmp_path, 3, "cnn"))
    assert estimate_bytes(s.data, s.model, s.algorithm)["data"] == 60_000 * (3 * 32 * 32 + 1) * 4
    s = load_scenario(_scenario(tmp_path, "shakespeare", tmp_path, 10, "linear", 'encoding = "one_hot"\n'))
    assert estimate_bytes(s.data, s.model, s.algorithm)["data"] == pytest.approx(
        10 * 4_226_158 / 1_129 * (80 * 80 + 1) * 4
    )


def test_a_model_that_does_not_fit_the_files_is_refused_when_the_scenario_loads(tmp_path):
    write_npz_clients(tmp_path / "own", [12, 30], [4, None])
    with pytest.raises(ScenarioError, match="the cnn needs square images"):
        load_scenario(_scenario(tmp_path, "federated_npz", tmp_path / "own", 2, "cnn"))


# --- end to end -----------------------------------------------------------------------------------


def _scenario(folder: Path, name: str, data_dir: Path, clients: int, model: str, extra: str = "") -> Path:
    path = folder / f"{name}.toml"
    path.write_text(
        f"""
[run]
seed = 1
rounds = 2
[data]
name = "{name}"
dir = "{data_dir}"
num_clients = {clients}
{extra}
[model]
name = "{model}"
[algorithm]
name = "fedavg"
local_steps = 2
clients_per_round = 2
batch_size = 4
[network]
snr_db = 10.0
"""
    )
    return path


CASES = {
    "cifar10": (lambda d: write_cifar10(d), 4, "cnn", ""),
    "cifar100": (lambda d: write_cifar100(d), 3, "linear", 'labels = "coarse"\npartition = "iid"\n'),
    "femnist": (lambda d: write_leaf(d, FEMNIST_TRAIN, FEMNIST_TEST, femnist_sample), 3, "cnn", ""),
    "shakespeare": (
        lambda d: write_leaf(d, [{"A": 9, "B": 5}], [{"A": 2, "B": 1}], shakespeare_sample),
        2,
        "linear",
        'encoding = "one_hot"\n',
    ),
    "federated_npz": (lambda d: write_npz_clients(d, [12, 30, 7], [4, None, 2]), 3, "mlp", ""),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_edgefl_runs_each_format_end_to_end(tmp_path, name):
    write, clients, model, extra = CASES[name]
    write(tmp_path / "data")
    out = tmp_path / "out"
    assert (
        main(
            [
                "run",
                str(_scenario(tmp_path, name, tmp_path / "data", clients, model, extra)),
                "--out",
                str(out),
                "--quiet",
                "--no-plots",
            ]
        )
        == 0
    )
    rows = (out / "metrics.csv").read_text().splitlines()
    assert len(rows) == 3
    header = rows[0].split(",")
    last = dict(zip(header, rows[-1].split(",")))
    assert math.isfinite(float(last["loss"])) and 0 <= float(last["acc_mean"]) <= 1


def test_a_malformed_file_exits_2_naming_it(tmp_path, capsys):
    write_cifar10(tmp_path / "data")
    bad = tmp_path / "data" / "data_batch_5.bin"
    bad.write_bytes(bad.read_bytes()[:100])
    out = tmp_path / "out"
    assert (
        main(["run", str(_scenario(tmp_path, "cifar10", tmp_path / "data", 4, "cnn")), "--out", str(out), "--quiet"])
        == 2
    )
    err = capsys.readouterr().err
    assert str(bad) in err and "3073-byte" in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize(
    "name, key",
    [("shakespeare", "sequence_length"), ("federated_npz", "num_classes"), ("cifar10", "test_fraction")],
)
@pytest.mark.parametrize("value", [math.nan, math.inf, 1e300, -1])
def test_new_numeric_keys_refuse_nan_inf_huge_and_negative_naming_the_key(tmp_path, name, key, value):
    with pytest.raises(DataError, match=f"data.{key}"):
        data_params(name, 2, dir=tmp_path, **{key: value})


@pytest.mark.parametrize(
    "name, key, value",
    [("cifar10", "partition", "natural"), ("cifar100", "labels", "medium"), ("shakespeare", "encoding", "utf8")],
)
def test_new_choice_keys_name_the_choices(tmp_path, name, key, value):
    with pytest.raises(DataError, match=f"data.{key}"):
        data_params(name, 2, dir=tmp_path, **{key: value})


def test_the_shakespeare_lstm_trains_on_speaking_roles_end_to_end(tmp_path):
    # LEAF's Shakespeare files as preprocess.sh writes them (-t sample): "users", "hierarchies" (the play of each
    # role), "num_samples" (overstated by 79 in the test files) and "user_data"; one client per speaking role.
    train = {"THE_TRAGEDY_OF_ROMEO_AND_JULIET_JULIET": 11, "THE_TRAGEDY_OF_ROMEO_AND_JULIET_ROMEO": 6, "HAMLET_X": 8}
    test = {"THE_TRAGEDY_OF_ROMEO_AND_JULIET_JULIET": 3, "THE_TRAGEDY_OF_ROMEO_AND_JULIET_ROMEO": 1, "HAMLET_X": 2}
    lines = {"JULIET": "O Romeo, Romeo! wherefore art thou Romeo? ", "ROMEO": "But soft! what light through yonder "}
    lines["X"] = "To be, or not to be: that is the question. "

    def sample(user: str, k: int):  # LEAF's: 80 characters of the role's text and the next one
        text = lines[user.rsplit("_", 1)[1]] * 4
        return text[k : k + 80], text[k + 80]

    for split, sizes, offset in (("train", train, 0), ("test", test, 79)):
        content = leaf_file(sizes, sample, num_samples_offset=offset)
        content["hierarchies"] = [u.rsplit("_", 1)[0] for u in sizes]
        (tmp_path / "sh" / split).mkdir(parents=True)
        (tmp_path / "sh" / split / f"all_data_niid_0_keep_0_{split}_9.json").write_text(json.dumps(content))
    extra = 'partition = "natural"\n[model.shakespeare_lstm]\nhidden = 12\n'
    path = _scenario(tmp_path, "shakespeare", tmp_path / "sh", 3, "shakespeare_lstm", extra)
    path.write_text(path.read_text().replace("clients_per_round = 2", "clients_per_round = 3"))
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--quiet", "--no-plots"]) == 0
    # clients = the speaking roles in LEAF's (sorted) order, with the files' sizes
    clients = [line.split(",") for line in (out / "clients.csv").read_text().splitlines()]
    columns = {name: [row[k] for row in clients[1:]] for k, name in enumerate(clients[0])}
    roles = sorted(train)
    assert columns["train_samples"] == [str(train[r]) for r in roles]
    assert columns["test_samples"] == [str(test[r]) for r in roles]
    summary = json.loads((out / "summary.json").read_text())
    lstm = (80 * 8) + 4 * 12 * (8 + 12 + 2) + 4 * 12 * (12 + 12 + 2) + 12 * 80 + 80  # two layers of 12, dense 80
    assert summary["model_parameters"] == lstm
    rows = [line.split(",") for line in (out / "metrics.csv").read_text().splitlines()]
    header, last = rows[0], [dict(zip(rows[0], r)) for r in rows[1:]]
    assert {"acc_mean", "acc_worst", "acc_std", "loss"} <= set(header) and len(last) == 2
    for row in last:
        assert math.isfinite(float(row["loss"])) and 0 <= float(row["acc_mean"]) <= 1
    assert float(last[0]["loss"]) != float(last[1]["loss"])  # the LSTM's weights moved: it trained
