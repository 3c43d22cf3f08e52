"""The data set registry: ``data.name`` in a scenario -> the :class:`~edgefl.data.federated.DataParams`
subclass that declares its keys and builds it.

A family's names are the values of its ``name`` Literal; :data:`FAMILIES` lists the classes, and
the registry is derived from them, so a name is written once. To add a data set: subclass
``DataParams`` (fields with types, defaults, bounds, descriptions; ``build(seed)``) and add the
class here. The scenario validates ``[data]`` against the class, ``docs/scenarios.md`` lists its
keys, and the runner calls ``build``.

Data sets of one's own (docs/extending.md): ``data.name = "package.module:Class"`` names any
``DataParams`` subclass on the Python path, and installed packages register names under the
entry-point group ``edgefl.datasets``; :func:`get` resolves both, the scenario validates their
keys like a built-in's.
"""

from __future__ import annotations

import typing

from pydantic import ValidationError

from edgefl.data.cifar import Cifar10Data, Cifar100Data
from edgefl.data.errors import DataError
from edgefl.data.federated import DataParams, FederatedData
from edgefl.data.images import ImageData
from edgefl.data.leaf import FemnistData, ShakespeareData
from edgefl.data.npz import NpzData
from edgefl.data.priority import ImagePriorityData, SyntheticPriorityData
from edgefl.data.regression import LowRankMatrixData, SparseRegressionData
from edgefl.data.synthetic import SyntheticData
from plugin_registry import Registry, UnknownPlugin, subclass_of

FAMILIES: tuple[type[DataParams], ...] = (
    SyntheticData,
    ImageData,  # mnist, fashion_mnist, kmnist
    Cifar10Data,  # the field's benchmarks in their published formats (docs/datasets.md)
    Cifar100Data,
    FemnistData,
    ShakespeareData,
    NpzData,  # one .npz file per client
    # prioritized FL (priority.py) and statistical recovery (regression.py)
    SyntheticPriorityData,
    ImagePriorityData,
    SparseRegressionData,
    LowRankMatrixData,
)


def family_names(cls: type[DataParams]) -> tuple[str, ...]:
    """The ``data.name`` values a family serves: the arguments of its ``name`` Literal."""
    return typing.get_args(cls.model_fields["name"].annotation)


REGISTRY: dict[str, type[DataParams]] = {name: cls for cls in FAMILIES for name in family_names(cls)}
DATASET_NAMES: tuple[str, ...] = tuple(REGISTRY)
DEFAULT_DATASET = "synthetic"  # a [data] section without a name


DATA_SETS = Registry.of("data.name", REGISTRY, subclass_of(DataParams))
ENTRY_POINT_GROUP = DATA_SETS.group  # installed plug-ins: name = "package.module:Class"


def names() -> list[str]:
    """The built-in data sets and the installed plug-ins."""
    return DATA_SETS.names()


def unknown_name_message(name: object) -> str:
    return DATA_SETS.unknown_message(name)


def plugin_class(name: str) -> type[DataParams]:
    """The DataParams subclass of a plug-in: an installed entry point or ``"package.module:Class"``
    (DataError saying what is wrong otherwise)."""
    if not isinstance(name, str):
        raise DataError(f'data.name: expected a text (a data set\'s name or "package.module:Class"), got {name!r}')
    if not is_plugin(name):
        raise DataError(f"data.name: {unknown_name_message(name)}")
    return get(name)


def is_plugin(name: object) -> bool:
    """Whether ``name`` is not a built-in but looks like a plug-in (an entry point or "module:Class")."""
    return DATA_SETS.is_plugin(name)


def get(name: str) -> type[DataParams]:
    """The params class of ``name``: a built-in, an installed plug-in or ``"package.module:Class"``
    (DataError with the known names: the registry's UnknownPlugin, as the data package's user error)."""
    try:
        return DATA_SETS.get(name)
    except UnknownPlugin as exc:
        raise DataError(f"data.name: {exc}") from None


def data_params(name: str, num_clients: int, **keys) -> DataParams:
    """Validated keys of data set ``name``; a bad or unknown key raises DataError naming it."""
    cls = get(name)
    try:
        return cls(name=name, num_clients=num_clients, **keys)
    except ValidationError as exc:
        lines = []
        for item in exc.errors():
            path = "data." + ".".join(str(p) for p in item["loc"]) if item["loc"] else "data"
            if item["type"] == "extra_forbidden":
                lines.append(f"{path}: not a key of data.name = {name!r}; its keys: {', '.join(cls.model_fields)}")
            elif item["type"] == "missing":
                lines.append(f"{path} is not set (required for data.name = {name!r})")
            else:
                lines.append(f"{path}: {item['msg'].removeprefix('Value error, ')}")
        raise DataError("\n".join(lines)) from None


def build_federated_data(name: str, num_clients: int, seed: int, **keys) -> FederatedData:
    """Build data set ``name`` from its keys (see its params class); the same keys and seed give
    identical tensors. Shorthand for ``data_params(name, num_clients, **keys).build(seed)``."""
    return data_params(name, num_clients, **keys).build(seed)
