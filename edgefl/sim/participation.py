"""Whether the network can decide who takes part in a round (a sweep may re-price a trace only where it cannot)."""

from __future__ import annotations

from edgefl.deployment import NetworkParams


def can_change_participation(
    network: NetworkParams, availability: str = "always", p_fail: float = 0.0, over_selection: float = 0.0
) -> bool:
    """Whether the network can decide who takes part in a round: a deadline can cut a client off,
    a packet error (``outage_snr_db``) or an MCS outage can lose a message (except with block
    fading, where outage blocks are waited out), devices can be offline or fail, over-selection keeps
    the first uploads to arrive, over-the-air computation schedules by the channel and adds its noise to what
    the server learns from. When it cannot,
    the learning trajectory does not depend on the channel, and re-pricing a recorded op trace on
    another channel is exact."""
    mcs_outage = network.rate == "mcs" and not network.block_fading
    return (
        network.deadline_s is not None
        or network.outage_snr_db is not None
        or mcs_outage
        or availability != "always"
        or p_fail > 0
        or over_selection > 0
        or network.uplink == "aircomp"
    )
