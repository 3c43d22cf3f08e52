"""edgefl: a co-simulator for federated learning over wireless edge networks.

Algorithms (``algorithms/``) describe rounds as operations; the engine (``edgefl.sim``)
runs their numerics and charges every operation in time and energy using the physical
models in ``channel/`` and ``energy/``.
"""

__version__ = "0.1.0"
