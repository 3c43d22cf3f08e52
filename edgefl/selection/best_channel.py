"""``best_channel``: the k online clients with the highest mean uplink SNR (at their nominal transmit power,
over the whole band, as the base station knows it: no fading; ``[control] channel_error_db`` adds an
estimation error when a controller runs too). Ties go to the lower client id. The channel-aware scheduling
baseline of e.g. Amiri et al., "Convergence of update aware device scheduling for federated learning at the
wireless edge", IEEE TWC 2021 (its "best channel" scheduler)."""

from __future__ import annotations

import numpy as np

from edgefl.selection.base import Policy, SelectionView, first_k


class BestChannel(Policy):
    name = "best_channel"

    def select(self, view: SelectionView, k: int) -> np.ndarray:
        snr = view.obs.uplink_snr_per_w * self.ctx.devices.tx_power_w_max  # mean SNR (linear) at nominal power
        return first_k(np.argsort(-snr, kind="stable"), view.online, k)
