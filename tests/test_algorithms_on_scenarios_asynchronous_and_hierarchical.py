"""`edgefl run SCENARIO --set algorithm.name=X` on every committed scenario for the algorithms of group "asynchronous_and_hierarchical"
(tests/algorithm_runs.py: one round each; the groups are files of their own so that the suite's workers share
them out)."""

from __future__ import annotations

import pytest
from algorithm_runs import GROUPS, SCENARIOS, assert_one_round_runs


@pytest.mark.parametrize("name", GROUPS["asynchronous_and_hierarchical"])
@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_every_committed_scenario_runs_the_algorithm_where_it_fits(path, name):
    assert_one_round_runs(path, name)
