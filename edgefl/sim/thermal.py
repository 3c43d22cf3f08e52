"""``thermal``: a device heats up while it computes and throttles its CPU (a component, the worked
example of docs/architecture.md, "Adding a physical process").

Each device is a lumped RC node (energy/thermal.py): C_th·dT/dt = P − (T − T_ambient)/R_th, with P
the computing power κ·f³ + P_static at the frequency the CPU runs at while it computes, 0 otherwise.
Above ``throttle_c`` the CPU runs at ``throttle_factor``·f (f: the scenario's or the controller's
frequency) until T falls below ``resume_c``. A threshold crossing is a SimPy timeout scheduled from
the closed form (the time to reach it under the current power), re-planned whenever the power
changes; a crossing in the middle of a computation changes the CPU's frequency there
(``core.set_cpu_hz``): the rest is re-timed, each segment charged at its own frequency.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import ConfigDict, Field, model_validator

from edgefl.numeric_keys import NumbersOnly
from edgefl.sim.component import Component
from energy.thermal import compute_power_w, temperature_c, time_to_temperature_s


class ThermalParams(NumbersOnly):
    """``[[process]] name = "thermal"``: every device a lumped RC thermal node that throttles its CPU."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    ambient_c: float = Field(25.0, ge=-40, le=60, description="Ambient temperature (°C); a device starts at it.")
    thermal_resistance_k_per_w: float = Field(
        10.0, gt=0, le=1000, description="Thermal resistance R_th from the device to the ambient (K/W)."
    )
    thermal_capacitance_j_per_k: float = Field(
        5.0, gt=0, le=1e6, description="Heat capacity C_th of the device (J/K); time constant R_th·C_th."
    )
    throttle_c: float = Field(
        45.0, ge=-40, le=150, description="The CPU throttles when the device reaches this temperature (°C)."
    )
    resume_c: float = Field(
        40.0,
        ge=-40,
        le=150,
        description="A throttled CPU runs at full frequency again when "
        "the device cools to this temperature (°C); ambient_c <= resume_c < throttle_c.",
    )
    throttle_factor: float = Field(
        0.5,
        gt=0,
        le=1,
        description="A throttled CPU runs at this fraction of its frequency (the scenario's or the controller's).",
    )

    @model_validator(mode="after")
    def _ordered(self):
        if not self.resume_c < self.throttle_c:
            raise ValueError(
                f"resume_c = {self.resume_c:g} must be below throttle_c = {self.throttle_c:g} (°C): the CPU "
                "throttles at throttle_c and resumes once cooled to resume_c"
            )
        if not self.ambient_c <= self.resume_c:
            raise ValueError(
                f"resume_c = {self.resume_c:g} must be at least ambient_c = {self.ambient_c:g} (°C): a "
                "device never cools below the ambient, so its CPU would stay throttled"
            )
        return self


class Thermal(Component):
    changes_cpu_rate = True
    Params = ThermalParams
    may_change_participation = False  # it changes how long computing takes, never who computes

    @classmethod
    def from_scenario(cls, params, network, population, seed: int) -> "Thermal":
        return cls(population, **params.model_dump())

    def __init__(
        self,
        population,
        ambient_c: float = 25.0,
        thermal_resistance_k_per_w: float = 10.0,
        thermal_capacitance_j_per_k: float = 5.0,
        throttle_c: float = 45.0,
        resume_c: float = 40.0,
        throttle_factor: float = 0.5,
    ):
        if not (ambient_c <= resume_c < throttle_c):
            raise ValueError(
                f"thermal: expected ambient_c <= resume_c < throttle_c, got {ambient_c}, {resume_c}, {throttle_c}"
            )
        if not (0 < throttle_factor <= 1) or thermal_resistance_k_per_w <= 0 or thermal_capacitance_j_per_k <= 0:
            raise ValueError(
                "thermal: expected 0 < throttle_factor <= 1 and positive thermal resistance and capacitance"
            )
        self.ambient_c, self.throttle_c, self.resume_c = ambient_c, throttle_c, resume_c
        self.r, self.c, self.factor = thermal_resistance_k_per_w, thermal_capacitance_j_per_k, throttle_factor
        n = population.num_clients
        self.kappa, self.static_power_w = population.kappa.tolist(), population.static_power_w.tolist()
        self.temp_c = [ambient_c] * n  # at since_s[client]
        self.since_s = [0.0] * n
        self.power_w = [0.0] * n  # the heat it dissipates now
        self.throttled = [False] * n
        self.throttled_s = np.zeros(n)  # time spent throttled, in all (for a report)
        self._version = [0] * n

    exposes = {"temperature_c": "each device's temperature now (°C)"}

    def device_value(self, name: str) -> np.ndarray:
        return self.temperatures_c()

    def temperatures_c(self) -> np.ndarray:
        """Every device's temperature (°C) now."""
        for client in range(len(self.temp_c)):
            self._advance(client)
        return np.array(self.temp_c)

    def _advance(self, client: int) -> None:
        now = self.core.env.now
        elapsed = now - self.since_s[client]
        if elapsed > 0:
            self.temp_c[client] = temperature_c(
                elapsed, self.temp_c[client], self.ambient_c, self.power_w[client], self.r, self.c
            )
            if self.throttled[client]:
                self.throttled_s[client] += elapsed
        self.since_s[client] = now

    def _heat(self, client: int, computing: bool) -> None:
        """The device's power changes now (it starts or stops computing, or its CPU's frequency changed)."""
        self._advance(client)
        self.power_w[client] = (
            compute_power_w(self.core.cpu_hz_of(client), self.kappa[client], self.static_power_w[client])
            if computing
            else 0.0
        )
        self._plan_crossing(client)

    def _plan_crossing(self, client: int) -> None:
        self._version[client] += 1
        target = self.resume_c if self.throttled[client] else self.throttle_c
        wait_s = time_to_temperature_s(
            target, self.temp_c[client], self.ambient_c, self.power_w[client], self.r, self.c
        )
        if math.isfinite(wait_s):
            self.core.env.timeout(wait_s, (client, self._version[client])).callbacks.append(self._crossed)

    def _crossed(self, event) -> None:
        client, version = event.value
        if version != self._version[client]:
            return  # superseded: the power changed since it was planned
        self._advance(client)
        self.throttled[client] = throttled = not self.throttled[client]
        hz = self.core.knob_cpu_hz(client)
        self.core.set_cpu_hz(client, hz * self.factor if throttled else hz)
        self._heat(client, self.power_w[client] > 0)

    def compute_start(self, client: int) -> None:
        self._heat(client, True)

    def compute_end(self, client: int) -> None:
        self._heat(client, False)
