"""What FedAsync and FedBuff share: the weight of a stale update, and a server that keeps ``concurrency``
clients training from its current model and hands over each upload that gets through (Xie, Koyejo, Gupta
2019; Nguyen et al. 2022). The engine decides when uploads arrive (the Dispatch and NextArrival ops)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from algorithms.base import Algorithm, HyperParams
from algorithms.ops import Dispatch, NextArrival, Train, sgd_step

STALENESS_FUNCTIONS = ("constant", "polynomial", "hinge")


def staleness_weight(kind: str, staleness: int, a: float, b: float) -> float:
    """Weight of an update ``staleness`` server updates old (Xie, Koyejo, Gupta 2019, FedAsync §5):
    constant 1; polynomial (1 + s)^−a (a = 1/2: FedBuff's and FedScale's 1/√(1 + s)); hinge 1 for
    s ≤ b, else 1 / (a (s − b) + 1)."""
    if kind == "constant":
        return 1.0
    if kind == "polynomial":
        return float((1.0 + staleness) ** -a)
    if kind == "hinge":
        return 1.0 if staleness <= b else 1.0 / (a * (staleness - b) + 1.0)
    raise ValueError(f"unknown staleness function {kind!r} (known: {', '.join(STALENESS_FUNCTIONS)})")


def staleness_metrics(applied: list[int]) -> dict[str, float]:
    """metrics.csv's staleness_mean and staleness_max of the updates a server update applied (NaN: none)."""
    if not applied:
        return {"staleness_mean": float("nan"), "staleness_max": float("nan")}
    return {"staleness_mean": sum(applied) / len(applied), "staleness_max": float(max(applied))}


def check_asynchronous(name: str, scenario, concurrency: int) -> None:
    """What an asynchronous server cannot run with: ValueError naming the key (edgefl's scenario loader
    reports it as a scenario error)."""
    if scenario.algorithm.over_selection > 0:
        raise ValueError(
            f"algorithm.over_selection = {scenario.algorithm.over_selection:g}: {name} is asynchronous, it has no "
            "round for the first m uploads to close; set algorithm.over_selection = 0 (its concurrency keeps "
            "clients busy instead)"
        )
    if scenario.control.name not in ("static", "deadline_fit"):
        raise ValueError(
            f'control.name = "{scenario.control.name}" plans synchronous rounds; with the asynchronous {name} '
            'use control.name = "static" or "deadline_fit"'
        )
    if concurrency > scenario.data.num_clients:
        raise ValueError(
            f"algorithm.{name}.concurrency = {concurrency} is more than the {scenario.data.num_clients} clients "
            f"(data.num_clients): lower it"
        )


class AsynchronousParams(HyperParams):
    concurrency: int | None = Field(
        None, ge=1, le=10_000_000, description="C, clients training at once; unset: algorithm.clients_per_round."
    )
    staleness: Literal["constant", "polynomial", "hinge"] = Field(
        "polynomial",
        description="The weight of an update s server updates old: polynomial (1 + s)^-a, constant 1, hinge "
        "(1 if s <= b else 1/(a(s-b)+1)).",
    )
    a: float = Field(
        0.5, ge=0, le=100, description="Exponent of the polynomial (1/2: 1/sqrt(1 + s)), slope of the hinge."
    )
    b: int = Field(4, ge=0, le=1_000_000, description="Staleness up to which the hinge weighs 1.")


class AsynchronousServer(Algorithm):
    """One round is one server update; clients run on across rounds. Free slots are filled with idle clients
    (sampled among the online ones, from the current model) when the server is about to wait, once every upload
    that has arrived by then is handled."""

    asynchronous = True

    def __init__(self, ctx):
        super().__init__(ctx)
        self.x = ctx.init_params.clone()
        self.in_flight: set[int] = set()  # clients training now
        self.failed: set[int] = set()  # clients whose chain did not get through in this round: not sampled again in it
        self.waiting = True  # the last arrival was the last of its instant: the server waits next
        self.applied: list[int] = []  # staleness of the updates the last round applied

    @classmethod
    def check_scenario(cls, scenario) -> None:
        hp = scenario.algorithm.hyperparams()
        check_asynchronous(cls.name, scenario, hp.concurrency or scenario.algorithm.clients_per_round)

    def next_update(self, r: int):
        """The ops until the next upload that gets through (its Arrival), keeping the slots filled; None when
        nobody trains and nobody can start."""
        ctx, concurrency = self.ctx, self.hp.concurrency or self.ctx.clients_per_round
        while True:
            if self.waiting and len(self.in_flight) < concurrency:  # fill the free slots with idle clients, from x_r
                new = ctx.sample_idle(concurrency - len(self.in_flight), self.in_flight | self.failed)
                if len(new):
                    train = Train(new, self.x, ctx.local_steps, sgd_step, shared={"lr": ctx.lr})
                    yield Dispatch(train, r, ctx.model_bits, ctx.model_bits, concurrency)
                    self.in_flight.update(new.tolist())
            arrival = yield NextArrival()
            if arrival is None:
                return None
            self.in_flight.discard(arrival.client)
            self.waiting = not arrival.more_now
            if arrival.arrived:
                return arrival
            self.failed.add(arrival.client)  # (offline, cut, lost, empty battery: it may fail again at once)

    @property
    def model(self):
        return self.x
