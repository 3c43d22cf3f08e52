"""A run's typed parts, built from its scenario once and in one straight line (:func:`build_parts`): the data, the
model, the network, the devices, the components, the pricer, the algorithm, the controller and the compressor.
Nothing below the runner reads the scenario again: the engine, the checks before a run (edgefl.feasibility), the
controller and its observer read these parts; each plug-in registry (algorithms, controllers, components,
compressors) is consulted here, once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel

import algorithms
from edgefl.compression import Compressor, build_compressor
from edgefl.control import ControlContext, Controller, DeviceLimits
from edgefl.control.observe import Observer
from edgefl.models import build_model
from edgefl.physical import NetworkParams, Population, build_population, network_params
from edgefl.plugins import faults_named
from edgefl.selection import Selection
from edgefl.sim import IdealPricer, SimPyPricer
from edgefl.sim.backhaul import Backhaul
from edgefl.sim.component import Component
from edgefl.sim.components import default_components
from edgefl.sim.devices import DeviceState
from edgefl.sim.processes import build_processes

if TYPE_CHECKING:
    from edgefl.data.federated import FederatedData
    from edgefl.models import Model
    from edgefl.scenario import AlgorithmSection, Scenario


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

    seed: int  # run.seed: every random stream derives from it
    engine: str  # run.engine: simpy | ideal
    rounds: int  # run.rounds
    data: FederatedData
    model: Model
    network: NetworkParams
    population: Population  # the devices as the scenario built them (never written) ...
    devices: DeviceState  # ... and as they are now (a controller's knobs, mobility: edgefl.sim.devices)
    components: list[Component]  # the engine's, built-ins then [[process]] (none on the ideal engine)
    pricer: SimPyPricer | IdealPricer
    algorithm: AlgorithmPart
    compressor: Compressor | None  # None: updates sent as they are
    controller: Controller | None  # None: the static controller (the scenario's knobs)
    observer: Observer | None  # what the controller sees each round (None with the static controller)
    selection: Selection | None  # the client selection policy (None: uniform, the algorithm samples)


def build_pricer(
    s: Scenario, model
) -> tuple[NetworkParams, Population, DeviceState, list[Component], SimPyPricer | IdealPricer]:
    """A run's network, devices (as built, and their state as the run goes on), components and pricer, built
    from its scenario (their one home: a run and a sweep's re-pricing build them alike): the SimPy pricer that
    co-simulates time and energy, or the ideal engine's, which charges nothing. ``model``'s FLOPs per sample
    set the devices' compute cycles."""
    network = network_params(s.network)
    population = build_population(
        s.network, s.devices, s.data.num_clients, model.train_flops_per_sample, model.eval_flops_per_sample, s.run.seed
    )
    devices = DeviceState.of(population)
    if s.run.engine != "simpy":
        return network, population, devices, [], IdealPricer(s.data.num_clients)
    with faults_named():  # a plug-in component's constructor: its exception is a PluginError
        processes = build_processes(s.process, network, population, s.run.seed)
    backhaul = s.backhaul
    if backhaul is not None:  # edge servers and a cloud (edgefl.sim.backhaul)
        links = [Backhaul(backhaul.rate_mbps * 1e6, backhaul.latency_ms * 1e-3, backhaul.energy_j_per_bit)]
    else:
        links = []
    components = [*default_components(network, population, s.run.seed), *links, *processes]  # [[process]]: last
    pricer = SimPyPricer(network, population, s.run.seed, components=components, devices=devices)
    return network, population, devices, components, pricer


def control_context(s: Scenario, model, network: NetworkParams, population: Population, stream: int) -> ControlContext:
    """What a controller or a selection policy knows of the run (its own random stream: ``stream``)."""
    a = s.algorithm
    return ControlContext(
        num_clients=population.num_clients,
        clients_per_round=a.clients_per_round,
        local_steps=a.local_steps,
        batch_size=a.batch_size,
        model_bits=float(model.dim * network.bits_per_param),
        network=network,
        devices=DeviceLimits.of(population),
        rng=np.random.default_rng(np.random.SeedSequence([s.run.seed, stream])),
    )


def build_observer(
    s: Scenario, ctx: ControlContext, network: NetworkParams, pricer, channel_error_db: float
) -> Observer:
    return Observer(
        ctx,
        pricer,
        network.header_bits,
        channel_error_db,
        np.random.default_rng(np.random.SeedSequence([s.run.seed, 0xE57])),
    )


def build_controller(
    s: Scenario, model, network: NetworkParams, population: Population, pricer
) -> tuple[Controller | None, Observer | None]:
    """The scenario's controller and its observer (None, None for the static controller: the scenario's knobs,
    nothing observed)."""
    if s.control.name == "static":
        return None, None
    ctx = control_context(s, model, network, population, 0xC011)
    controller = s.control.plugin_class()(ctx, s.control.params())
    return controller, build_observer(s, ctx, network, pricer, s.control.channel_error_db)


def build_selection(
    s: Scenario, model, network: NetworkParams, population: Population, pricer, observer: Observer | None
) -> Selection | None:
    """The scenario's client selection policy behind ``Context.sample`` (docs/selection.md), seeing what the
    controller's observer sees (one of its own without a controller); None for "uniform": the algorithm
    samples as it always has."""
    if s.selection.name == "uniform":
        return None
    ctx = control_context(s, model, network, population, 0x5E1EC7)
    with faults_named():  # a plug-in policy's constructor: its exception is a PluginError
        policy = s.selection.plugin_class()(ctx, s.selection.params())
    # without a controller, control.channel_error_db does not apply (resolved.py): the exact mean channel
    return Selection(policy, observer if observer is not None else build_observer(s, ctx, network, pricer, 0.0))


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
    network, population, devices, components, pricer = build_pricer(s, model)
    algorithm = AlgorithmPart.of(s.algorithm)
    compressor = build_compressor(s.compression, s.data.num_clients, seed, network.bits_per_param)
    controller, observer = build_controller(s, model, network, population, pricer)
    selection = build_selection(s, model, network, population, pricer, observer)
    return RunParts(
        seed=seed,
        engine=s.run.engine,
        rounds=s.run.rounds,
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
    )
