"""Scenario dicts written with an algorithm's own keys beside the common ones, moved into the algorithm's
own table (`[algorithm.<name>]`, as edgefl.scenario requires since algorithm keys moved to their tables)."""

from __future__ import annotations

import copy


def with_own_table(scenario: dict) -> dict:
    """A copy of ``scenario`` whose [algorithm] keeps the common keys (edgefl.scenario.AlgorithmSection) and
    holds every other key in [algorithm.<name>]."""
    from edgefl.scenario import AlgorithmSection

    out = copy.deepcopy(scenario)
    algorithm = out["algorithm"]
    own = {
        k: algorithm.pop(k)
        for k in list(algorithm)
        if k not in AlgorithmSection.model_fields and k != algorithm["name"]
    }
    if own:
        algorithm.setdefault(algorithm["name"], {}).update(own)
    return out
