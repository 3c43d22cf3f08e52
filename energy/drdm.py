"""Total energy of the DRDM paper (eq. 18), the closed form the ledger reduces to."""

from __future__ import annotations

import numpy as np

from arraychecks import out, require_nonnegative


def drdm_total_energy_j(
    rounds,
    local_steps,
    processing_energy_per_step_j,
    transmission_energy_per_round_j,
    *,
    num_participants: int | None = None,
):
    """E = S · τ · Σ_i E_i^p + S · Σ_i E_i^t   [J]   (DRDM paper, eq. 18).

    S = rounds (to reach the target), τ = local steps per round, E_i^p = processing
    energy per local step [J], E_i^t = transmission energy per round [J]; the sums run
    over the participants of a round. The two energies are arrays over participants
    (summed) or scalars (taken as the sum, or as one participant's value when
    ``num_participants`` is given, which multiplies it by that count). ``rounds`` and
    ``local_steps`` may be arrays of the same shape (e.g. S(τ) over a τ grid).
    """
    rounds = require_nonnegative(rounds, "rounds")
    local_steps = require_nonnegative(local_steps, "local_steps")
    e_p = require_nonnegative(processing_energy_per_step_j, "processing_energy_per_step_j")
    e_t = require_nonnegative(transmission_energy_per_round_j, "transmission_energy_per_round_j")
    if num_participants is not None:
        m = int(num_participants)
        e_p = np.broadcast_to(e_p, (m,))
        e_t = np.broadcast_to(e_t, (m,))
    return out(rounds * local_steps * e_p.sum() + rounds * e_t.sum())
