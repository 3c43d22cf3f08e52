"""`edgefl run SCENARIO --set algorithm.name=X` on every committed scenario for the algorithms of group "asynchronous_and_hierarchical"
(tests/algorithm_runs.py: one round each; the groups are files of their own so that the suite's workers share
them out)."""

from algorithm_runs import runs_of_group

test_every_committed_scenario_runs_the_algorithm_where_it_fits = runs_of_group("asynchronous_and_hierarchical")
