"""ClientStore's vectorised get/set against a dense [N, d] reference."""

import numpy as np
import pytest
import torch

from algorithms.state import ClientStore


def test_random_reads_and_writes_match_a_dense_table():
    rng = np.random.default_rng(0)
    N, d = 300, 5
    store, dense = ClientStore(N, d), torch.zeros(N, d)
    for _ in range(100):
        clients = rng.choice(N, size=int(rng.integers(1, 30)), replace=False)
        rows = torch.randn(len(clients), d)
        store.set(clients, rows)
        dense[clients] = rows
        asked = rng.choice(N, size=25)  # with repeats, written or not
        assert torch.equal(store.get(asked), dense[asked])
        assert torch.allclose(store.sum(), dense.sum(dim=0), atol=1e-4)
        assert torch.allclose(store.mean(), dense.mean(dim=0), atol=1e-6)
    assert len(store) == int((dense != 0).any(dim=1).sum())


def test_storage_grows_with_written_clients_only():
    store = ClientStore(10_000, 100)
    assert store.nbytes() == 100 * 8
    store.set(np.arange(50, 60), torch.ones(10, 100))
    assert store.nbytes() == 10 * 100 * 4 + 100 * 8
    store.set(np.arange(0, 20), torch.ones(20, 100))  # 20 new rows: the table grows to at least 30
    assert len(store) == 30 and store.nbytes() <= 2 * 30 * 100 * 4 + 100 * 8
    assert torch.equal(store.get([55, 5, 9999]), torch.tensor([[1.0] * 100, [1.0] * 100, [0.0] * 100]))


def test_duplicate_ids_in_one_set_are_an_error():
    store = ClientStore(5, 2)
    with pytest.raises(ValueError, match="duplicate"):
        store.set([1, 1], torch.ones(2, 2))
    with pytest.raises(IndexError):
        store.get([7])


def test_rows_read_are_copies_and_the_sum_follows_each_write():
    store = ClientStore(4, 3)
    store.set([0, 1, 2, 3], torch.arange(12.0).reshape(4, 3))
    rows = store.get([3, 1])  # every client written: read in one gather
    rows += 100.0
    assert torch.equal(store.get([3, 1]), torch.tensor([[9.0, 10.0, 11.0], [3.0, 4.0, 5.0]]))
    assert torch.equal(store.sum(), torch.tensor([18.0, 22.0, 26.0]))
    store.set([2], torch.tensor([[1.0, 1.0, 1.0]]))  # a write after a sum: summed again
    assert torch.equal(store.sum(), torch.tensor([13.0, 16.0, 19.0]))
    assert torch.equal(store.mean(), torch.tensor([13.0, 16.0, 19.0]) / 4)
