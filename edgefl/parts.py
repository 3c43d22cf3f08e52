"""A run's typed parts, built from its scenario once and in one straight line (:func:`build_run`): the checks
before any work (memory, feasibility), the data, the model, the network, the devices, the components, the pricer,
the algorithm, the controller, the selection policy and the compressor (:func:`build_parts`), then the executor,
the engine and the algorithm's context. This module is the only reader of the scenario: each builder is handed its
own section (benchmarks/scenario_walk.py prints the walk); the runner, the engine, the controller and its observer
read these parts; each plug-in registry (algorithms, controllers, components, compressors) is consulted here, once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from pydantic import BaseModel

import algorithms
from algorithms.base import Context
from edgefl.compression import Compressor, build_compressor
from edgefl.control import ControlContext, Controller, DeviceLimits
from edgefl.control.observe import Observer
from edgefl.control.steering import steering
from edgefl.deployment import NetworkParams, Population, build_population, network_params
from edgefl.device import resolve_device
from edgefl.executor import Executor
from edgefl.feasibility import Keys, check_feasible
from edgefl.memory import check_memory
from edgefl.models import build_model
from edgefl.plugins import faults_named
from edgefl.selection import NoPolicy, Selection
from edgefl.sim import Engine, IdealPricer, SimPyPricer
from edgefl.sim.backhaul import Backhaul
from edgefl.sim.component import Component
from edgefl.sim.components import default_components
from edgefl.sim.devices import DeviceState
from edgefl.sim.processes import build_processes

if TYPE_CHECKING:
    from edgefl.data.federated import FederatedData
    from edgefl.models import Model
    from edgefl.scenario import AlgorithmSection, ControlSection, Scenario
    from edgefl.scenario.sections import (
        BackhaulSection,
        DevicesSection,
        NetworkSection,
        ProcessSection,
        RunSection,
        SelectionSection,
    )


@dataclass(frozen=True)
class AlgorithmPart:
    """The run's algorithm: its class and own hyperparameters ([algorithm.<name>]), and the common keys."""

    name: str
    cls: type
    hp: BaseModel  # its Params, validated
    local_steps: int  # τ
    clients_per_round: int  # m
    lr: float  # η
    batch_size: int  # B
    over_selection: float  # select ceil(m (1 + x)), aggregate the first m

    @classmethod
    def of(cls, section: AlgorithmSection) -> AlgorithmPart:
        return cls(
            name=section.name,
            cls=algorithms.get(section.name),
            hp=section.hyperparams(),
            local_steps=section.local_steps,
            clients_per_round=section.clients_per_round,
            lr=section.lr,
            batch_size=section.batch_size,
            over_selection=section.over_selection,
        )


@dataclass
class RunParts:
    """Everything a run is built from (see the module's docstring)."""

    run: RunSection  # the [run] section: its seed (every random stream derives from it), engine, rounds, evaluation,
    # stop_at and checkpoints (the round loop's and the recorder's)
    described: dict  # what the run is of, as summary.json states it (:func:`described`)
    data: FederatedData
    model: Model
    network: NetworkParams
    population: Population  # the devices as the scenario built them (never written) ...
    devices: DeviceState  # ... and as they are now (a controller's knobs, mobility: edgefl.sim.devices)
    components: list[Component]  # the engine's, built-ins then [[process]] (none on the ideal engine)
    pricer: SimPyPricer | IdealPricer
    algorithm: AlgorithmPart
    compressor: Compressor  # Compressor itself ("none"): updates sent as they are
    controller: Controller  # Controller itself ("static"): the scenario's knobs
    observer: Observer  # what the server observes each round (the controller's and the selection policy's)
    selection: NoPolicy  # the client selection policy (NoPolicy, "uniform": the algorithm samples)
    history: list[dict]  # the metrics.csv rows so far (the runner's record; the observer's history)
    edge_servers: bool  # servers at the edges aggregate apart from a cloud: several cells, or a [backhaul]


def pricer_of(
    s: Scenario, model, record_events: bool = True
) -> tuple[NetworkParams, Population, DeviceState, list[Component], SimPyPricer | IdealPricer]:
    """:func:`build_pricer` of ``s``'s sections (a run and a sweep's re-pricing build them alike; the re-pricing
    keeps no event log: ``record_events=False``)."""
    return build_pricer(
        s.network, s.devices, s.process, s.backhaul, s.data.num_clients, s.run.seed, s.run.engine, model, record_events
    )


def build_pricer(
    net: NetworkSection,
    dev: DevicesSection,
    process: list[ProcessSection],
    backhaul: BackhaulSection | None,
    num_clients: int,
    seed: int,
    engine: str,
    model,
    record_events: bool = True,
) -> tuple[NetworkParams, Population, DeviceState, list[Component], SimPyPricer | IdealPricer]:
    """A run's network, devices (as built, and their state as the run goes on), components and pricer, built
    from the [network], [devices], [[process]] and [backhaul] sections (their one home): the SimPy pricer that
    co-simulates time and energy, or the ideal engine's (``engine`` != "simpy"), which charges nothing.
    ``model``'s FLOPs per sample set the devices' compute cycles."""
    network = network_params(net)
    population = build_population(
        net, dev, num_clients, model.train_flops_per_sample, model.eval_flops_per_sample, seed
    )
    devices = DeviceState.of(population)
    if engine != "simpy":
        return network, population, devices, [], IdealPricer(num_clients)
    with faults_named():  # a plug-in component's constructor: its exception is a PluginError
        processes = build_processes(process, network, population, seed)
    if backhaul is not None:  # edge servers and a cloud (edgefl.sim.backhaul)
        links = [Backhaul(backhaul.rate_mbps * 1e6, backhaul.latency_ms * 1e-3, backhaul.energy_j_per_bit)]
    else:
        links = []
    components = [*default_components(network, population, seed), *links, *processes]  # [[process]]: last
    pricer = SimPyPricer(network, population, seed, components=components, devices=devices, record_events=record_events)
    return network, population, devices, components, pricer


def control_context(
    a: AlgorithmSection, seed: int, model, network: NetworkParams, population: Population, stream: int
) -> ControlContext:
    """What a controller or a selection policy knows of the run (its own random stream: ``stream``)."""
    return ControlContext(
        num_clients=population.num_clients,
        clients_per_round=a.clients_per_round,
        local_steps=a.local_steps,
        batch_size=a.batch_size,
        model_bits=float(model.dim * network.bits_per_param),
        network=network,
        devices=DeviceLimits.of(population),
        rng=np.random.default_rng(np.random.SeedSequence([seed, stream])),
    )


def build_controller(
    control: ControlSection, ctx: ControlContext, seed: int, network: NetworkParams, pricer, history: list[dict]
) -> tuple[Controller, Observer]:
    """The [control] section's controller (the static one: the base Controller, the scenario's knobs) and what
    the server observes for it and a selection policy (``history``: the metrics rows so far); ``ctx``: what it
    knows of the run (:func:`control_context`)."""
    # with the static controller, control.channel_error_db does not apply (resolved.py): the exact mean channel
    error_db = 0.0 if control.name == "static" else control.channel_error_db
    observer = Observer(
        ctx,
        pricer,
        network.header_bits,
        error_db,
        np.random.default_rng(np.random.SeedSequence([seed, 0xE57])),
        history,
    )
    return control.plugin_class()(ctx, control.params()), observer


def build_selection(selection: SelectionSection, ctx: ControlContext, observer: Observer) -> NoPolicy:
    """The [selection] section's client selection policy behind ``Context.sample`` (docs/selection.md), seeing
    what the ``observer`` sees; "uniform": NoPolicy, the algorithm samples as it always has."""
    if selection.name == "uniform":
        return NoPolicy()
    with faults_named():  # a plug-in policy's constructor: its exception is a PluginError
        policy = selection.plugin_class()(ctx, selection.params())
    return Selection(policy, observer)


def build_parts(s: Scenario) -> RunParts:
    """The scenario turned into its run's parts: data and model (seeded), network, devices, components and
    pricer, the algorithm, the compressor, the controller and its observer."""
    data = s.data.build(s.run.seed)  # s.data: the data set's validated params (edgefl.data.registry)
    model = build_model(
        s.model.name, data.input_shape, data.num_classes, s.run.seed, hidden=s.model.hidden, keys=s.model.keys()
    )
    return parts_of(s, data, model)


def parts_of(s: Scenario, data: FederatedData, model: Model) -> RunParts:
    """The parts of ``s``'s run with its ``data`` and ``model`` built (:func:`build_parts`)."""
    seed = s.run.seed
    network, population, devices, components, pricer = pricer_of(s, model)
    algorithm = AlgorithmPart.of(s.algorithm)
    compressor = build_compressor(s.compression, s.data.num_clients, seed, network.bits_per_param)
    history: list[dict] = []
    controller, observer = build_controller(
        s.control,
        control_context(s.algorithm, seed, model, network, population, 0xC011),
        seed,
        network,
        pricer,
        history,
    )
    selection = build_selection(
        s.selection, control_context(s.algorithm, seed, model, network, population, 0x5E1EC7), observer
    )
    return RunParts(
        run=s.run,
        described=described(s),
        data=data,
        model=model,
        network=network,
        population=population,
        devices=devices,
        components=components,
        pricer=pricer,
        algorithm=algorithm,
        compressor=compressor,
        controller=controller,
        observer=observer,
        selection=selection,
        history=history,
        edge_servers=population.cells is not None or s.backhaul is not None,
    )


def described(s: Scenario) -> dict:
    """What a run is of, as summary.json states it first: the algorithm, the rounds, the seed, the engine and
    executor, the controller, the selection policy (where not uniform), the compression, the clients, the model."""
    return {
        "algorithm": s.algorithm.name,
        "rounds": s.run.rounds,
        "seed": s.run.seed,
        "engine": s.run.engine,
        "executor": s.run.executor,
        "control": s.control.name,
        **({"selection": s.selection.name} if s.selection.name != "uniform" else {}),
        "compression": s.compression.model_dump(exclude_none=True),
        "num_clients": s.data.num_clients,
        "model": s.model.name,
    }


@dataclass
class Run:
    """A run ready to go: its parts (:func:`build_parts`) and what trains and times it on them: the executor,
    the engine, the algorithm's context and the algorithm itself."""

    parts: RunParts
    executor: Executor
    engine: Engine
    context: Context
    algorithm: object  # the algorithm's instance (algorithms.base.Algorithm)


def build_run(s: Scenario, record_trace: bool = False) -> Run:
    """The scenario's run, checked and built in one walk: a run too large for this machine or meaningless (at
    the pricer's mean rates) is an error now, before any work (edgefl.memory, edgefl.feasibility); then its
    parts, executor, engine and algorithm. The runner reads nothing else of the scenario to build it."""
    check_memory(s.data, s.model, s.algorithm)
    if s.run.threads:
        torch.set_num_threads(s.run.threads)
    parts = build_parts(s)
    check_feasible(parts, Keys(s.network, s.devices, s.model, s.backhaul))  # the messages name keys and values
    pinned = s.run.executor in ("vmap", "threads")  # a path named
    executor = Executor(
        parts.model,
        parts.data,
        parts.algorithm.batch_size,
        parts.run.seed,
        "loop" if s.run.executor == "loop" else "batched",
        device=resolve_device(s.run.device),
        strategy=s.run.executor if pinned else None,
        measure=s.run.executor == "fastest",
    )
    engine = Engine(
        executor,
        parts.pricer,
        parts.network.header_bits,
        record_trace,
        compressor=parts.compressor,
        steering=steering(parts.controller, parts.observer, parts.pricer, executor.batch_size),
        selection=parts.selection,
    )
    context = algorithm_context(parts)
    return Run(parts, executor, engine, context, parts.algorithm.cls(context))


def algorithm_context(parts: RunParts) -> Context:
    """What the algorithm knows of the run (algorithms.base.Context), with its own random stream."""
    a, model, data, population = parts.algorithm, parts.model, parts.data, parts.population
    return Context(
        num_clients=population.num_clients,
        dim=model.dim,
        init_params=model.init_params(),
        train_sizes=np.asarray(data.train_sizes),
        local_steps=a.local_steps,
        clients_per_round=a.clients_per_round,
        lr=a.lr,
        batch_size=a.batch_size,
        over_selection=a.over_selection,
        bits_per_param=parts.network.bits_per_param,
        rng=np.random.default_rng(np.random.SeedSequence([parts.run.seed, 0xA160])),
        hp=a.hp,
        client_roles=data.client_roles,
        client_cells=None if population.cells is None else population.cells.serving.copy(),
        edge_servers=parts.edge_servers,
        param_layout=[(n, tuple(sh)) for n, sh in zip(model.names, model.shapes)],
        selector=parts.selection.selector,  # None (NoPolicy): the algorithm samples uniformly, with its own stream
    )
