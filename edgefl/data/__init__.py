"""Data layer: IDX loaders, the Synthetic(alpha, beta) generator, the field's benchmarks from their published files
(CIFAR binary, LEAF JSON, per-client npz: docs/datasets.md), partitioning, federated data sets.

Each data set family declares its ``[data]`` keys once, as a :class:`DataParams` subclass with a
``build(seed)``; :data:`REGISTRY` maps ``data.name`` to it (``edgefl/data/registry.py``).
Errors a user can fix (missing files, bad checksums, impossible sizes) raise :class:`DataError`.
"""

from edgefl.data.errors import DataError
from edgefl.data.federated import DataParams, FederatedData
from edgefl.data.idx import KNOWN_MD5, load_idx_dataset, read_idx
from edgefl.data.partition import (
    client_test_indices,
    dirichlet_partition,
    largest_remainder,
    stratified_sample,
    stratified_split,
    zipf_sizes,
)
from edgefl.data.registry import DATASET_NAMES, DEFAULT_DATASET, REGISTRY, build_federated_data, data_params, names
from edgefl.data.synthetic import synthetic_alpha_beta

__all__ = [
    "DATASET_NAMES",
    "DEFAULT_DATASET",
    "DataError",
    "DataParams",
    "FederatedData",
    "KNOWN_MD5",
    "REGISTRY",
    "build_federated_data",
    "client_test_indices",
    "data_params",
    "dirichlet_partition",
    "largest_remainder",
    "load_idx_dataset",
    "names",
    "read_idx",
    "stratified_sample",
    "stratified_split",
    "synthetic_alpha_beta",
    "zipf_sizes",
]
