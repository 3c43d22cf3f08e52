"""edgefl: a co-simulator for federated learning over wireless edge networks.

Algorithms (``algorithms/``) describe rounds as operations; the engine (``edgefl.sim``)
runs their numerics and charges every operation in time and energy using the physical
models in ``channel/`` and ``energy/``.
"""

__version__ = "0.1.0"

# The Python API (edgefl/api.py, docs/python-api.md), imported on first use: `import edgefl` stays cheap
# (the CLI sets torch's thread policy before torch is loaded).
API = ("Result", "load_scenario", "optimal_tau", "run", "sweep")


def __getattr__(name: str):
    if name in API:
        from edgefl import api

        return getattr(api, name)
    raise AttributeError(f"module 'edgefl' has no attribute {name!r}")


__all__ = ["__version__", *API]
