"""Data sets of writers: every writer (a LEAF user: a FEMNIST writer, a Shakespeare speaking role; an npz file
of one's own) has its own samples, and often its own test samples.

``data.partition``:
  - ``"natural"`` (the default): one client per writer, with the writer's own samples, so sizes and class mixes
    are the data's own. ``data.num_clients`` writers are used: all of them when it equals their number, else a
    random subset drawn with the run's seed (partition stream), kept in the files' order. A writer's test set is
    its own test samples (LEAF's test/ folder, an npz file's ``x_test``/``y_test``); a writer without any gets
    the last 10 % of its samples (the first floor(0.9 n) train, at least 1 tests), as LEAF's by-sample split.
  - ``"dirichlet"`` / ``"iid"``: the writers' samples pooled (training samples into the train pool, test samples
    into the test pool) and split among ``data.num_clients`` clients as any pool (``edgefl/data/pools.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from edgefl.data.errors import DataError
from edgefl.data.federated import FederatedData, assemble_clients, own_split, seed_streams
from edgefl.data.pools import PoolKeys, Pools, federate_pools


@dataclass
class Writer:
    """One writer's samples as read: inputs float32 [n, *input_shape], labels int64 [n]; its own test samples
    when the files hold them (None otherwise)."""

    name: str
    x: np.ndarray
    y: np.ndarray
    origin: str  # the file it was read from, for messages
    x_test: np.ndarray | None = None
    y_test: np.ndarray | None = None

    def split(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(train x, train y, test x, test y): its own test samples, else its last 10 % (at least 1)."""
        if self.x_test is not None and self.y_test is not None:
            return self.x, self.y, self.x_test, self.y_test
        if len(self.y) < 2:
            raise DataError(
                f"writer {self.name!r} of '{self.origin}' has {len(self.y)} sample(s) and no test samples: a client "
                "needs at least one sample to train and one to test; remove the writer or give it test samples"
            )
        return own_split(self.x, self.y)


@dataclass
class Writers:
    """What a writer data set's files hold: its writers in the files' order, and the test samples of writers that
    have no training samples (LEAF's by-user split), which only the pooled partitions use."""

    writers: list[Writer]
    description: str  # e.g. "FEMNIST (LEAF JSON in '/data/femnist/data')"
    num_classes: int
    input_shape: tuple[int, ...]
    test_only: list[Writer] = field(default_factory=list)
    to_tensor_note: str = ""  # how inputs are encoded, for the source line
    no_test_hint: str = ""  # why a writer may lack test samples and what to do, for the natural partition's error
    unit: str = "writers"  # what a writer is called in the source line: "writers", "speaking roles", "files"


class WriterKeys(PoolKeys):
    """Keys of the data sets of writers (see the module's docstring)."""

    partition: Literal["natural", "dirichlet", "iid"] = Field(  # type: ignore[assignment]
        "natural",
        description='"natural": one client per writer of the files (data.num_clients of them); "dirichlet" or '
        '"iid": the writers\' samples pooled and split as a pool.',
    )

    @model_validator(mode="after")
    def _natural_takes_no_pool_keys(self):
        if self.partition != "natural":
            return self
        for key, value, default in (
            ("dirichlet_alpha", self.dirichlet_alpha, math.inf),
            ("zipf_sigma", self.zipf_sigma, 0.0),
            ("test_per_client", self.test_per_client, None),
            ("max_train_samples", self.max_train_samples, None),
        ):
            if value != default:
                raise ValueError(
                    f'data.{key} = {value} with data.partition = "natural": the natural partition keeps each '
                    f'writer\'s own samples; {key} applies to partition = "dirichlet" or "iid"'
                )
        return self

    def read_writers(self) -> Writers:  # pragma: no cover - interface
        """The writers of the files (DataError naming the file and field for malformed files)."""
        raise NotImplementedError

    def build(self, seed: int) -> FederatedData:
        import torch

        _, subsample_rng, partition_rng, test_rng = (np.random.default_rng(s) for s in seed_streams(seed))
        found = self.read_writers()
        if self.partition == "natural":
            chosen = choose_writers(found, self.num_clients, partition_rng)
            kwargs = assemble_clients(natural_clients(chosen, found))
            count = f"all {len(chosen)}" if len(chosen) == len(found.writers) else f"{len(chosen)} (drawn at random)"
            own = sum(w.x_test is not None for w in chosen)
            tests = {len(chosen): "their own test samples", 0: "their last 10 % of samples"}.get(
                own, f"{own} on their own test samples, {len(chosen) - own} on their last 10 %"
            )
            kwargs["source"] = (
                f"{found.description}: {count} of {len(found.writers)} {found.unit}, one client each (natural "
                f"partition), tested on {tests}{found.to_tensor_note}"
            )
        else:
            pools = writer_pools(found)
            kwargs = federate_pools(
                pools, self, found.num_classes, torch.from_numpy, subsample_rng, partition_rng, test_rng
            )
        return FederatedData(name=self.name, num_classes=found.num_classes, input_shape=found.input_shape, **kwargs)


def choose_writers(found: Writers, num_clients: int, rng: np.random.Generator) -> list[Writer]:
    """``num_clients`` of the writers: all when they are as many, else a random subset in the files' order."""
    count = len(found.writers)
    if num_clients > count:
        raise DataError(
            f"data.num_clients = {num_clients} but {found.description} holds {count} writer(s): the natural "
            f"partition gives one client per writer; set data.num_clients to at most {count}, or use "
            'data.partition = "dirichlet" or "iid" to split the pooled samples among more clients'
        )
    if num_clients == count:
        return found.writers
    return [found.writers[i] for i in np.sort(rng.choice(count, size=num_clients, replace=False))]


def natural_clients(
    chosen: list[Writer], found: Writers
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """The chosen writers' (train x, train y, test x, test y); DataError for a writer that cannot be a client."""
    clients = []
    for writer in chosen:
        client = writer.split()
        if len(client[1]) == 0:
            raise DataError(
                f"writer {writer.name!r} of '{writer.origin}' has no training samples: every client of the "
                "natural partition needs at least one; remove the writer from the files"
            )
        if len(client[3]) == 0:
            raise DataError(f"writer {writer.name!r} of '{writer.origin}' has no test samples{found.no_test_hint}")
        clients.append(client)
    return clients


def writer_pools(found: Writers) -> Pools:
    """Every writer's training samples as the train pool and its test samples (its own, else its last 10 %, and
    those of the writers with test samples only) as the test pool."""
    parts = [w.split() for w in found.writers]
    test_x = [p[2] for p in parts] + [w.x for w in found.test_only]
    test_y = [p[3] for p in parts] + [w.y for w in found.test_only]
    return Pools(
        np.concatenate([p[0] for p in parts]),
        np.concatenate([p[1] for p in parts]),
        np.concatenate(test_x),
        np.concatenate(test_y),
        f"{found.description}: the samples of its {len(found.writers)} {found.unit} pooled{found.to_tensor_note}",
    )
