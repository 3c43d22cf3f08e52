"""Data layer: IDX loaders, the Synthetic(alpha, beta) generator, partitioning, federated data sets.

Errors a user can fix (missing files, bad checksums, impossible sizes) raise :class:`DataError`.
"""

from edgefl.data.errors import DataError
from edgefl.data.federated import DATASET_NAMES, FederatedData, build_federated_data
from edgefl.data.idx import KNOWN_MD5, load_idx_dataset, read_idx
from edgefl.data.partition import (
    client_test_indices,
    dirichlet_partition,
    largest_remainder,
    stratified_sample,
    stratified_split,
    zipf_sizes,
)
from edgefl.data.synthetic import synthetic_alpha_beta

__all__ = [
    "DATASET_NAMES",
    "DataError",
    "FederatedData",
    "KNOWN_MD5",
    "build_federated_data",
    "client_test_indices",
    "dirichlet_partition",
    "largest_remainder",
    "load_idx_dataset",
    "read_idx",
    "stratified_sample",
    "stratified_split",
    "synthetic_alpha_beta",
    "zipf_sizes",
]
