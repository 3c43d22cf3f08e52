"""``uniform``: k distinct clients uniformly at random among those online: what ``Context.sample`` does without
a policy (McMahan et al., AISTATS 2017). With ``[selection] name = "uniform"`` (or no [selection]) the run's
selection is the null object :class:`~edgefl.selection.base.NoPolicy`, not this class: the algorithm samples with
its own stream, as it always has (outputs unchanged); this class is what a plug-in policy can start from."""

from __future__ import annotations

import numpy as np

from edgefl.selection.base import Policy, SelectionView


class Uniform(Policy):
    name = "uniform"

    def select(self, view: SelectionView, k: int) -> np.ndarray:
        ids = np.flatnonzero(view.online)
        return np.sort(self.rng.choice(ids, size=min(k, len(ids)), replace=False))
