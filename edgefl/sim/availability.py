"""Device availability: which devices are online, as SimPy processes on the run's environment.

- ``markov``: each device alternates online and offline periods, exponentially distributed with
  means ``mean_on_s`` and ``mean_off_s`` (a two-state continuous-time Markov chain); it starts in
  its stationary state, online with probability on / (on + off), so the long-run fraction of time
  online (the duty cycle) is on / (on + off) from the start.
- ``trace``: each device is online exactly in its listed intervals [start_s, end_s) (a CSV
  ``client,start_s,end_s``, in the spirit of FedScale's device traces), offline otherwise.

A device that goes offline while it works in a phase is interrupted: the energy it spent counts,
its upload does not arrive (status ``offline``). Processes live on the run's one environment, so
they advance while phases run and while the server waits for enough devices.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import simpy


def online_share(mean_on_s: float, mean_off_s: float) -> float:
    """The stationary probability that a Markov on/off device is online, on / (on + off) (periods in s)."""
    return mean_on_s / (mean_on_s + mean_off_s)


class Availability:
    def __init__(
        self,
        env: simpy.Environment,
        num_clients: int,
        rng: np.random.Generator,
        mode: str,
        mean_on_s: float = 1.0,
        mean_off_s: float = 1.0,
        intervals: dict[int, list[tuple[float, float]]] | None = None,
        on_offline: Callable[[int], None] | None = None,
    ):
        self.env = env
        self.mode = mode
        self.online = np.ones(num_clients, dtype=bool)
        self.on_offline = on_offline
        self._changed = env.event()
        if mode == "markov":
            self.online = rng.random(num_clients) < online_share(mean_on_s, mean_off_s)
            for c in range(num_clients):
                env.process(self._markov(c, rng, mean_on_s, mean_off_s))
        elif mode == "trace":
            intervals = intervals or {}
            self.online[:] = False
            for c in range(num_clients):
                env.process(self._trace(c, sorted(intervals.get(c, []))))
        elif mode != "always":
            raise ValueError(f"unknown availability {mode!r}; expected always, markov or trace")

    @property
    def changed(self) -> simpy.Event:
        """Succeeds at the next change of any device's state."""
        return self._changed

    def _set(self, client: int, online: bool) -> None:
        if self.online[client] == online:
            return
        self.online[client] = online
        if not online and self.on_offline is not None:
            self.on_offline(client)
        changed, self._changed = self._changed, self.env.event()
        changed.succeed()

    def _markov(self, client: int, rng: np.random.Generator, mean_on_s: float, mean_off_s: float):
        while True:
            yield self.env.timeout(rng.exponential(mean_on_s if self.online[client] else mean_off_s))
            self._set(client, not self.online[client])

    def _trace(self, client: int, intervals: list[tuple[float, float]]):
        for start_s, end_s in intervals:
            if start_s > self.env.now:
                yield self.env.timeout(start_s - self.env.now)
            if end_s > self.env.now:
                self._set(client, True)
                yield self.env.timeout(end_s - self.env.now)
            self._set(client, False)
