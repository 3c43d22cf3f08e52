"""``min_energy``: each phase, the CPU frequency f_i, transmit power p_i and FDMA band share b_i that
minimise the phase's total energy subject to the deadline — the per-round problem of Yang et al.,
"Energy efficient federated learning over wireless communication networks", IEEE TWC 2021 (Sec. III),
solved by :func:`edgefl.control.energy_solver.solve_min_energy` (docs/control.md says which parts are
the paper's closed forms and which are ours).

For every client of the phase (the work is known: the algorithm has said what it downloads, computes
and uploads), the time it has for compute + upload is

    T_i = margin · T − D_i / r_down,i − M_i · t_access                   (s)

(T: network.deadline_s; the download and the access latencies do not depend on the knobs). With
network.access = "dedicated" every device has its own band (b_i = 1, only f_i and p_i are chosen);
with "fdma" the shares sum to 1. The server plans at the mean channel (Observation): with fading a
transmission can take longer than planned, and ``margin`` < 1 leaves room. A device that cannot meet
its time even at full resources runs at f_max and p_max (and the deadline may cut it).
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from edgefl.control.base import Allocation, Controller, ControlParams, Observation, Work
from edgefl.control.energy_solver import RateModel, RoundProblem, solve_min_energy
from edgefl.control.estimate import download_s, promotion_s


class MinEnergy(Controller):
    name = "min_energy"

    class Params(ControlParams):
        margin: float = Field(
            0.99, gt=0, le=1, description="Plan for this fraction of the deadline (room for fading and rounding)."
        )

    @classmethod
    def check_scenario(cls, scenario) -> None:
        if scenario.network.deadline_s is None:
            raise ValueError('control.name = "min_energy" minimises energy subject to network.deadline_s: set it')
        if scenario.network.access == "tdma":
            raise ValueError(
                'control.name = "min_energy" allocates band shares (FDMA) or powers on dedicated '
                'bands; network.access = "tdma" is not supported'
            )

    def allocate(self, obs: Observation, work: Work) -> Allocation:
        ctx, limits, net = self.ctx, self.ctx.devices, self.ctx.network
        c = work.clients
        receivers = int(np.count_nonzero(work.download_bits[c]))
        budget_s = (
            self.params.margin * net.deadline_s
            - download_s(ctx, obs, work.download_bits, receivers)[c]
            - promotion_s(ctx, obs, work.messages)[c]
        )
        rate_model = RateModel(
            bandwidth_hz=net.bandwidth_hz,
            rate=net.rate,
            efficiency=net.efficiency,
            snr_gap_db=net.snr_gap_db,
            max_spectral_efficiency=net.max_spectral_efficiency,
            mcs_snr_db=net.mcs_snr_db,
            mcs_efficiency=net.mcs_efficiency,
            modulation_cap_bits_per_hz=net.uplink_max_bits_per_hz,
            overhead_fraction=net.overhead_fraction,
        )
        # The solver's power is the drawn transmit power p / eta (its energy is (p + P_circuit) t): with a power
        # amplifier of efficiency eta, the SNR per W drawn is eta times the SNR per W radiated, the bounds are
        # p / eta, and the radiated power is eta times the solver's.
        eta = np.asarray(limits.pa_efficiency)

        def problem(rows: np.ndarray) -> RoundProblem:
            i = c[rows]
            return RoundProblem(
                cycles=work.cycles[i],
                upload_bits=work.upload_bits[i],
                time_budget_s=budget_s[rows],
                kappa=limits.kappa[i],
                static_power_w=limits.static_power_w[i],
                f_min_hz=limits.cpu_hz_min[i],
                f_max_hz=limits.cpu_hz_max[i],
                snr_per_w=obs.uplink_snr_per_w[i] * eta[i],
                noise_scales_with_band=obs.noise_scales_with_band[i],
                p_min_w=limits.tx_power_w_min[i] / eta[i],
                p_max_w=limits.tx_power_w_max[i] / eta[i],
                circuit_power_w=limits.circuit_power_w[i],
                rate_model=rate_model,
                tail_power_w=np.where(work.download_bits[i] > 0, limits.tail_power_w[i], 0.0),
                tail_s=limits.tail_s[i],
                tail_gap_s=np.zeros(len(i)),
            )  # an upload asked for in the tail starts at once

        cpu_hz, power_w = limits.cpu_hz_max.copy(), limits.tx_power_w_max.copy()
        share = np.zeros(ctx.num_clients)
        if net.access == "fdma":
            solutions = [(np.arange(len(c)), solve_min_energy(problem(np.arange(len(c)))))]
        else:  # a band of its own each: one device at a time, all of its band
            solutions = [(np.array([k]), solve_min_energy(problem(np.array([k])))) for k in range(len(c))]
        for rows, solution in solutions:
            cpu_hz[c[rows]] = solution.cpu_hz
            power_w[c[rows]] = np.clip(
                solution.tx_power_w * eta[c[rows]], limits.tx_power_w_min[c[rows]], limits.tx_power_w_max[c[rows]]
            )  # radiated (clip: rounding of / eta * eta)
            share[c[rows]] = solution.band_share
        return Allocation(cpu_hz=cpu_hz, tx_power_w=power_w, band_share=share if net.access == "fdma" else None)
