"""What the server observes for its controller: :class:`Observation` and each phase's :class:`Work`.

The channel a controller sees is the mean one (no fading), with an optional log-normal estimation
error: each round every device's mean uplink SNR and download rate are multiplied by
10^(e/10), e ~ Normal(0, channel_error_db²) dB, drawn from the observer's own stream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from edgefl.control.base import ControlContext, Observation, Work

if TYPE_CHECKING:  # the engine imports this module: no runtime import of edgefl.sim here
    from edgefl.sim.activities import PhaseRecord


def nominal_work(ctx: ControlContext, header_bits: float) -> Work:
    """A round's work before any was seen: one model down, ``local_steps`` steps, one model up."""
    n = ctx.num_clients
    steps = np.full(n, float(ctx.local_steps))
    return Work(
        download_bits=np.full(n, ctx.model_bits + header_bits),
        cycles=steps * ctx.batch_size * ctx.devices.train_cycles_per_sample,
        upload_bits=np.full(n, ctx.model_bits + header_bits),
        steps=steps,
        messages=np.full(n, 2.0),
    )


def phase_work(ctx: ControlContext, phase: "PhaseRecord", batch_size: int) -> Work:
    """The work of a phase's chains, per device (zeros for devices without one)."""
    n = ctx.num_clients
    down, up, cycles, steps, messages = (np.zeros(n) for _ in range(5))
    per_sample = {"train": ctx.devices.train_cycles_per_sample, "eval": ctx.devices.eval_cycles_per_sample}
    for client, chain in phase.chains.items():
        for a in chain:
            if a.kind == "download":
                down[client] += a.bits
                messages[client] += 1
            elif a.kind == "upload":
                up[client] += a.bits
                messages[client] += 1
            else:
                cycles[client] += a.samples * per_sample[a.work][client]
                if a.work == "train" and a.label == "train":
                    steps[client] += a.samples / batch_size
    return Work(down, cycles, up, steps, messages, clients=np.array(sorted(phase.chains), dtype=np.int64))


class Observer:
    """Builds a controller's observations from the pricer (SimPy) and the run's history."""

    def __init__(
        self,
        ctx: ControlContext,
        pricer,
        header_bits: float,
        channel_error_db: float,
        rng: np.random.Generator,
        history: list[dict] | None = None,
    ):
        self.ctx, self.pricer = ctx, pricer
        self.channel_error_db, self.rng = channel_error_db, rng
        # the metrics rows so far: the runner's record (edgefl.runner.RunRecord.rows), which it appends to
        self.history: list[dict] = [] if history is None else history
        self.last_work = nominal_work(ctx, header_bits)  # each device's last phase with training
        self._error: tuple[int, np.ndarray] | None = None  # (round, factor per device)

    def observe(self, round_: int, online: np.ndarray | None) -> Observation:
        pricer, n = self.pricer, self.ctx.num_clients
        snr_per_w, scales, down_bps = pricer.channel_state()
        factor = self._estimation_error(round_)
        levels = pricer.battery_levels()
        return Observation(
            round=round_,
            now_s=pricer.now,
            online=np.ones(n, dtype=bool) if online is None else online.copy(),
            uplink_snr_per_w=snr_per_w * factor,
            noise_scales_with_band=scales,
            downlink_rate_bps=down_bps * factor,
            battery_j=levels,
            energy_j=pricer.ledger.client_totals(),
            history=self.history,
            work=self.last_work,
            radio_connected_until_s=pricer.radio_connected_until_s(),
        )

    def remember(self, work: Work) -> None:
        """A phase's work: devices that trained in it keep it as their 'last work'."""
        trained = work.clients[work.steps[work.clients] > 0]
        if len(trained):
            last = self.last_work
            for name in ("download_bits", "cycles", "upload_bits", "steps", "messages"):
                getattr(last, name)[trained] = getattr(work, name)[trained]

    def _estimation_error(self, round_: int) -> np.ndarray:
        if self.channel_error_db == 0:
            return np.ones(self.ctx.num_clients)
        if self._error is None or self._error[0] != round_:  # one draw per device per round
            error_db = self.rng.normal(0.0, self.channel_error_db, self.ctx.num_clients)
            self._error = (round_, 10 ** (error_db / 10))
        return self._error[1]
