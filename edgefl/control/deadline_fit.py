"""``deadline_fit``: each selected device runs as many local steps as fit in the deadline, at most τ.

With a deadline (``network.deadline_s``, per phase), the static controller gives every device τ
steps and the deadline cuts the slow ones: their work and upload are lost, their energy is spent.
Here the server plans each device's step budget from what it knows at the start of the round
(the mean channel, the device's CPU, the work of its last phase; Observation):

    t_comm,i = D_i / r_down,i + S_i / r_up,i + P_i · t_access          (s)
    t_step,i = B · c_i / f_i                                            (s; B samples of c_i cycles)
    τ_i      = min(τ, floor((margin · T − t_comm,i − t_other,i) / t_step,i))

D_i, S_i: bits down and up; P_i the promotions its M_i messages need (none for a message asked for
in the radio's tail: estimate.promotion_s); r_up,i the rate over the uplink share a device gets when
the m selected devices share the band equally (FDMA or TDMA; the whole band when dedicated), at the
device's nominal power; t_other,i the phase's other compute (evaluations). A device that fits fewer
than ``min_steps`` is not sampled this round (it would only spend energy). Stragglers and fading are
not foreseen: ``margin`` < 1 leaves room for them.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from edgefl.control.base import Controller, ControlParams, Observation, RoundPlan
from edgefl.control.estimate import download_s, equal_share, promotion_s, uplink_rate_bps


class DeadlineFit(Controller):
    name = "deadline_fit"
    changes_learning = True

    class Params(ControlParams):
        margin: float = Field(
            0.9, gt=0, le=1, description="Plan for this fraction of the deadline (room for stragglers and fading)."
        )
        min_steps: int = Field(1, ge=0, description="A device that fits fewer steps is not sampled this round.")

    @classmethod
    def check_scenario(cls, scenario) -> None:
        if scenario.network.deadline_s is None:
            raise ValueError('control.name = "deadline_fit" fits the local steps into network.deadline_s: set it')

    def plan(self, obs: Observation) -> RoundPlan:
        ctx, work, limits = self.ctx, obs.work, self.ctx.devices
        net = ctx.network
        step_s = ctx.batch_size * limits.train_cycles_per_sample / limits.cpu_hz_max
        other_s = (
            np.maximum(work.cycles - work.steps * ctx.batch_size * limits.train_cycles_per_sample, 0.0)
            / limits.cpu_hz_max
        )
        with np.errstate(divide="ignore"):
            up_s = work.upload_bits / uplink_rate_bps(ctx, obs, limits.tx_power_w_max, equal_share(ctx))
            comm_s = (
                download_s(ctx, obs, work.download_bits, ctx.clients_per_round)
                + up_s
                + promotion_s(ctx, obs, work.messages)
            )
        budget_s = self.params.margin * net.deadline_s - comm_s - other_s
        steps = np.clip(np.floor(np.maximum(budget_s, 0.0) / step_s), 0, ctx.local_steps)
        steps = np.where(np.isfinite(steps), steps, 0.0)
        return RoundPlan(steps=steps, participants=steps >= max(self.params.min_steps, 1))
