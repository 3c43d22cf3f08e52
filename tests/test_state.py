import numpy as np
import pytest
import torch

from algorithms.state import ClientStore


def test_unwritten_rows_read_zero_and_mean_counts_all_clients():
    store = ClientStore(num_clients=4, dim=3)
    assert torch.equal(store.get([0, 3]), torch.zeros(2, 3))
    store.set([1, 2], torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]]))
    assert torch.allclose(store.mean(), torch.tensor([1.0, 1.0, 1.0]))
    store.set([1], torch.tensor([[5.0, 6.0, 7.0]]))  # overwrite updates the running sum
    assert torch.allclose(store.sum(), torch.tensor([8.0, 8.0, 8.0]))
    assert len(store) == 2


def test_memory_grows_with_clients_touched_not_with_n():
    store = ClientStore(num_clients=10_000, dim=1000)
    store.set(np.arange(10), torch.ones(10, 1000))
    assert store.nbytes() < 10 * 1000 * 4 + 1000 * 8 + 1


def test_bad_shapes_and_ids_raise():
    store = ClientStore(num_clients=2, dim=2)
    with pytest.raises(ValueError):
        store.set([0], torch.ones(2, 2))
    with pytest.raises(IndexError):
        store.set([5], torch.ones(1, 2))
