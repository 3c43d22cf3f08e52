"""A phase's physics, vectorised: every activity's duration, rate table and loss, in numpy at once.

The SimPy processes (:mod:`edgefl.sim.pricer`) only order events in time; what each event lasts
is computed here before the phase starts, for all clients together: one fading draw, one rate
computation for every transmission (for FDMA, every upload's rate at every possible number of
sharers B/1 .. B/n, so the band never calls the physics while it runs), compute times per
(client, samples). Formulas live in ``channel/`` and ``energy/``.
"""

from __future__ import annotations

import functools
import weakref
from operator import attrgetter

import numpy as np

from arraychecks import require_nonnegative_float
from channel import db_to_linear, fading_power_gain, noise_power_w
from channel.link import moved_fields, snr_from_link
from edgefl.deployment import NetworkParams, Population
from edgefl.errors import UserError
from edgefl.sim.activities import Activity, PhaseRecord
from edgefl.sim.devices import DeviceState
from edgefl.sim.mobility import MovedLinks
from energy import compute_time_s

COMPUTE, DOWNLOAD, UPLOAD = range(3)
KIND_CODE = {"compute": COMPUTE, "download": DOWNLOAD, "upload": UPLOAD}


class Step:
    """One activity of one client's chain with its physics resolved. (A plain class: a phase makes
    one per activity, and the optional fields below are class-level defaults, set only where used; the fields every
    step sets are slots, the optional ones go to its ``__dict__`` where set: made 20 % faster, benchmarks [5].)"""

    __slots__ = ("kind", "activity", "duration_s", "bits", "cycles", "__dict__")

    lost = False  # every attempt failed (outage or packet error): sent, charged, not received
    rates_bps: list[float] | None = None  # FDMA upload: rate with n sharers at rates_bps[n - 1]
    attempts = 1  # transmissions of the message (ARQ), all within duration_s
    # FDMA upload with retransmissions or failures: per attempt (rates if it succeeds, rates if it
    # fails, fails with n sharers at [n - 1]); decided when the attempt starts, on the share it holds.
    fdma_attempts: list[tuple[list[float], list[float], list[bool]]] | None = None
    cycles_per_s = 0.0  # compute slowed down by a straggler factor: the effective speed (0: f)
    block_rates: "BlockRates | None" = None  # FDMA upload with block fading: rates of block k

    def __init__(self, kind: int, activity: Activity, duration_s: float, bits: float, cycles: float):
        self.kind = kind  # COMPUTE | DOWNLOAD | UPLOAD
        self.activity = activity
        self.duration_s = duration_s  # compute, download, dedicated or TDMA upload: the time it takes
        self.bits = bits
        self.cycles = cycles  # compute only


class BlockRates:
    """An FDMA upload's rates under block fading: ``block_rates(k)`` is the rate with n sharers (at
    [n - 1]) during its k-th coherence block, each block with its own draw (0 in an outage block)."""

    def __init__(
        self,
        physics: "PhasePhysics",
        shares: np.ndarray,
        mean_by_share: np.ndarray,
        first_gain: float,
        rng: np.random.Generator,
    ):
        self.physics, self.shares, self.mean, self.rng = physics, shares, mean_by_share, rng
        self.first_gain = first_gain

    def __call__(self, block: int) -> list[float]:
        net = self.physics.net
        gain = (
            self.first_gain
            if block == 0
            else float(fading_power_gain(net.fading, self.rng, size=1, rician_k=net.rician_k)[0])
        )
        return self.physics._rate(self.shares, faded(self.mean, gain), "up").tolist()


_BUDGET_NAMES = (
    "tx_power_w",
    "path_loss_db",
    "noise_figure_db",
    "shadowing_db",
    "n0_dbm_per_hz",
    "interference_w_per_hz",
)
_BUDGET_FIELDS = attrgetter(*_BUDGET_NAMES)


class MeanSnr:
    """Every client's mean linear SNR over a bandwidth, as ``Link.snr_linear(B, 1.0)`` gives it,
    for all clients at once (one array per bandwidth, cached)."""

    def __init__(self, links):
        self.links = links
        self._by_bandwidth: dict[float, np.ndarray] = {}
        self._by_share: dict[tuple[float, int], np.ndarray] = {}  # (band, sharers) -> every client's shares (shared)
        configured = np.array([lk.mode == "snr" for lk in links], dtype=bool)
        self.scales_with_band = ~configured  # a link budget: noise N0·B, so the SNR falls as 1/B
        self._snr_idx = np.flatnonzero(configured)
        self._budget_idx = np.flatnonzero(~configured)
        self._snr_db = np.array([links[i].snr_db for i in self._snr_idx], dtype=np.float64)
        # the budget links' fields, one pass over the links (rebuilt at every server update of a moving population:
        # benchmarks [8])
        fields = np.array([_BUDGET_FIELDS(links[i]) for i in self._budget_idx.tolist()], dtype=np.float64).reshape(
            -1, len(_BUDGET_NAMES)
        )
        self._budget = {name: fields[:, k].copy() for k, name in enumerate(_BUDGET_NAMES)}
        self._source = self._budget  # the budget fields of the links these were built from (before any move)
        # the budget links' noise N0·B·NF per bandwidth or (band, sharers) (_noise_w): a move keeps their noise
        # figures and N0 (moved_fields sets neither), so every moved copy shares it (benchmarks [8])
        self._noise: dict[float | tuple[float, int], np.ndarray] = {}
        self._filled_fields: dict[tuple[str, float], np.ndarray] = {}  # (:meth:`_filled`; shared as _noise is)

    def moved(self, links: MovedLinks) -> "MeanSnr":
        """The MeanSnr of ``links``, the links this one was built from moved (edgefl.sim.mobility.MovedLinks): their
        budget fields as arrays, with what a move sets (channel.link.moved_fields, the rule ``Link.moved`` follows) at
        the moved links' path losses and power, without building and reading every moved link (a moving population's
        links change at every server update: benchmarks [8])."""
        moved = object.__new__(type(self))  # (copy.copy's shallow copy, without its reduce protocol: every move)
        moved.__dict__.update(self.__dict__)
        moved.links, moved._by_bandwidth, moved._by_share, moved._moved = links, {}, {}, True
        idx, source = self._budget_idx, self._source
        # every link a budget: the moved path losses are theirs as they are (in client order), not a copy
        loss_db = links.path_loss_db if not len(self._snr_idx) else links.path_loss_db[idx]
        sets = moved_fields(links.power_w(source["tx_power_w"]), loss_db)
        # (the source's fields, with those a move sets: in the source's order; one number for every link as an array;
        # an array's ndim read, not np.ndim's, which takes microseconds on a Python float)
        moved._budget = {**source}
        for name, value in sets.items():
            moved._budget[name] = value if isinstance(value, np.ndarray) and value.ndim else self._filled(name, value)
        return moved

    def _filled(self, name: str, value) -> np.ndarray:
        """A budget field that a move sets to one number for every link (no interference, the base station's power),
        as an array [Nb] (read-only): the same array for every move to that number (a moving population moves at
        every server update: benchmarks [8])."""
        value = require_nonnegative_float(value, name) if name == "tx_power_w" else float(value)  # (see _budget_snr)
        return _kept(self._filled_fields, (name, value), lambda: _read_only(np.full(len(self._budget_idx), value)))

    _moved = False  # made by :meth:`moved` (anew at every move of a moving population): see :meth:`_few`

    def _few(self, clients: np.ndarray) -> bool:
        """Whether to compute the ``clients``' mean SNRs alone (:meth:`of`, :meth:`shared`) rather than every client's:
        on moved links, every one a budget (a client's row among them is its own), when few clients are asked. A moving
        population's mean SNRs are made anew at every server update of an asynchronous run, which plans one client
        (benchmarks [8]: every client's, 50 clients at 10 shares, was a fifth of a plan); an unmoved population's are
        made once and kept. The same numbers either way: each entry comes from its own fields alone."""
        return self._moved and not len(self._snr_idx) and FEW_ROWS * len(clients) <= len(self.links)

    def of(self, bandwidth_hz: float, clients: np.ndarray) -> np.ndarray:
        """The ``clients``' mean SNR over ``bandwidth_hz``: ``self(bandwidth_hz)[clients]``, computed for those
        clients alone where few are asked of moved links (:meth:`_few`)."""
        if bandwidth_hz not in self._by_bandwidth and self._few(clients):
            rows = _rows(clients)
            b = {name: column[rows] for name, column in self._budget.items()}
            return self._budget_snr(b, bandwidth_hz, self._noise_w(bandwidth_hz)[rows])
        return self(bandwidth_hz)[clients]

    def __call__(self, bandwidth_hz: float, interference: bool = True) -> np.ndarray:
        """Every client's mean SNR over ``bandwidth_hz`` (cached); ``interference`` False: as if the links had
        none (their SNR, where the SINR is the default)."""
        if not interference:
            return self._snr(bandwidth_hz, {**self._budget, "interference_w_per_hz": np.zeros(len(self._budget_idx))})
        cached = self._by_bandwidth.get(bandwidth_hz)
        if cached is None:
            cached = self._by_bandwidth[bandwidth_hz] = self._snr(bandwidth_hz, self._budget)
        return cached

    def _snr(self, bandwidth_hz: float, b: dict[str, np.ndarray]) -> np.ndarray:
        if not len(self._snr_idx):  # every link a budget: theirs are every client's, in order (a moving population's
            return self._budget_snr(b, bandwidth_hz, self._noise_w(bandwidth_hz))  # links after each move, [8])
        snr = np.empty(len(self.links))
        snr[self._snr_idx] = np.asarray(db_to_linear(self._snr_db)) * 1.0  # (it does not depend on the bandwidth)
        if len(self._budget_idx):
            snr[self._budget_idx] = self._budget_snr(b, bandwidth_hz, self._noise_w(bandwidth_hz))
        return snr

    @staticmethod
    def _budget_snr(b: dict[str, np.ndarray], bandwidth_hz, noise_w: np.ndarray | None) -> np.ndarray:
        """The budget links' mean SNR from their fields ``b`` (arrays that broadcast against ``bandwidth_hz``) over
        ``bandwidth_hz`` (channel.link.snr_from_link); ``noise_w``: their noise over it, where kept (:meth:`_noise_w`).
        Their transmit powers were checked (>= 0): the links' when built (channel.Link), a move's by :meth:`_filled`."""
        return snr_from_link(
            b["tx_power_w"],
            b["path_loss_db"],
            bandwidth_hz,
            b["noise_figure_db"],
            b["shadowing_db"],
            b["n0_dbm_per_hz"],
            b["interference_w_per_hz"],
            noise_w,
            power_checked=True,
        )

    def _noise_w(self, bandwidth_hz: float, sharers: int | None = None) -> np.ndarray:
        """The budget links' noise N0·B·NF [W] (channel.link.noise_power_w) over ``bandwidth_hz`` [Nb], or with
        ``sharers`` over each of its shares B/1 .. B/sharers [Nb, sharers] (:meth:`shared`): the same for the links
        before and after any move, made once (the one-client plan after every move of a moving population:
        benchmarks [8])."""
        key = bandwidth_hz if sharers is None else (bandwidth_hz, sharers)
        return _kept(self._noise, key, lambda: self._made_noise_w(bandwidth_hz, sharers))

    def _made_noise_w(self, bandwidth_hz: float, sharers: int | None) -> np.ndarray:
        nf, n0 = self._source["noise_figure_db"], self._source["n0_dbm_per_hz"]
        if sharers is None:
            return np.asarray(noise_power_w(bandwidth_hz, nf, n0))
        return np.asarray(noise_power_w(_shares(bandwidth_hz, sharers)[None, :], nf[:, None], n0[:, None]))

    def shared(self, bandwidth_hz: float, sharers: int, clients: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The shares B/1 .. B/sharers [F] and the ``clients``' mean SNR at each [len(clients), F]: only the
        clients asked for (a table of every client at every share would be N x F, e.g. 8 GB for 10^6 devices and
        1,000 sharers), each entry the same number as in a table of all clients. Where that table is small (at most
        SHARED_TABLE_CELLS entries), it is made once (per band and number of sharers) and the clients' rows read
        from it: an FDMA phase's planning asked for it anew at every phase (benchmarks [3])."""
        if len(self.links) * sharers > SHARED_TABLE_CELLS:
            return self._shared(bandwidth_hz, sharers, clients)
        if (bandwidth_hz, sharers) not in self._by_share and self._few(clients):  # (the clients' rows alone)
            rows = _rows(clients)
            b = {name: column[rows, None] for name, column in self._budget.items()}
            noise_w = self._noise_w(bandwidth_hz, sharers)[rows]
            return _shares(bandwidth_hz, sharers), self._budget_snr(b, _shares(bandwidth_hz, sharers)[None, :], noise_w)
        every = _kept(
            self._by_share,
            (bandwidth_hz, sharers),
            lambda: self._shared(bandwidth_hz, sharers, np.arange(len(self.links)), True)[1],
        )
        return _shares(bandwidth_hz, sharers), every[clients]

    def _shared(
        self, bandwidth_hz: float, sharers: int, clients: np.ndarray, every: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`shared`, computed for ``clients`` (``every``: all of them, the budget links' noise kept:
        :meth:`_noise_w`)."""
        shares = _shares(bandwidth_hz, sharers)
        if every and not len(self._snr_idx):  # every link a budget: the table is theirs, rows in client order (the
            # columns as they are, no look-up: a moving population's table is made anew after each move, [8])
            b = {name: column[:, None] for name, column in self._budget.items()}
            return shares, self._budget_snr(b, shares[None, :], self._noise_w(bandwidth_hz, sharers))
        table = np.empty((len(clients), sharers))
        configured = ~self.scales_with_band[clients]
        if configured.any():  # a configured SNR does not depend on the bandwidth
            snr_db = self._snr_db[np.searchsorted(self._snr_idx, clients[configured])]
            table[configured] = (np.asarray(db_to_linear(snr_db)) * 1.0)[:, None]
        if not configured.all():  # every budget client at every share in one call
            rows = np.searchsorted(self._budget_idx, clients[~configured])
            b = {name: column[rows][:, None] for name, column in self._budget.items()}
            noise_w = self._noise_w(bandwidth_hz, sharers) if every else None
            table[~configured] = self._budget_snr(b, shares[None, :], noise_w)
        return shares, table

    def instantaneous(self, bandwidth_hz: float, clients: np.ndarray, gains: np.ndarray) -> np.ndarray:
        """SNR with fading gains, as ``Link.snr_linear(B, gain)`` gives it."""
        return faded(self(float(bandwidth_hz))[clients], gains)


SHARED_TABLE_CELLS = 1 << 16  # MeanSnr.shared: every client's mean SNR at every share kept up to this many entries
FEW_ROWS = 4  # MeanSnr._few: moved links' SNRs computed for the clients asked alone when at most 1 / FEW_ROWS of them
# MeanSnr's memos (by band, sharers, a moved field's number) hold at most this many entries: a run asks for a few
MEMO_ENTRIES = 64


def _rows(clients: np.ndarray) -> np.ndarray | slice:
    """``clients`` as an index of arrays in client order: one client as a slice (a view, the same numbers: indexing
    with an array costs ~1 us, 7 of them in each mean SNR of a dispatched chain's plan, benchmarks [8])."""
    if len(clients) == 1:
        client = int(clients[0])
        return slice(client, client + 1)
    return clients


def _kept(memo: dict, key, make):
    """``memo[key]``, made by ``make()`` where missing (the memo cleared first when it holds MEMO_ENTRIES)."""
    value = memo.get(key)
    if value is None:
        if len(memo) >= MEMO_ENTRIES:
            memo.clear()
        value = memo[key] = make()
    return value


def _read_only(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


@functools.lru_cache(maxsize=64)
def _shares(bandwidth_hz: float, sharers: int) -> np.ndarray:
    """The FDMA shares B/1 .. B/sharers (Hz) of a band: the same for every phase with as many sharers (a dispatched
    chain's one-client phase asks at each start: benchmarks [8]), made once, read-only."""
    shares = bandwidth_hz / np.arange(1, sharers + 1)
    shares.setflags(write=False)
    return shares


def faded(mean: np.ndarray, gains: np.ndarray | float) -> np.ndarray:
    """``mean * gains``, with 0 where an infinite mean SNR (B = 0) meets a zero gain: no signal."""
    if not np.count_nonzero(np.isinf(mean)):  # (count_nonzero: a fifth of any()'s cost, a Python wrapper)
        return mean * gains
    with np.errstate(invalid="ignore"):
        snr = mean * gains
    return np.where(np.isnan(snr), 0.0, snr)


def _gains_of(gains: np.ndarray | None, rows: list[int], attempts: int) -> np.ndarray:
    """The fading gains [len(rows), attempts] of a phase's transmissions ``rows``; None: no fading, every gain 1. Rows
    evenly spaced (each client's download and upload: every other row), or one row, are a slice of the gains, not a copy
    (a list as an index costs ~10 us a call: benchmarks [3]); the same numbers (nobody writes them)."""
    if gains is None:
        return np.ones((len(rows), attempts))
    if len(rows) == 1:  # (a dispatched chain's one message of a kind: benchmarks [8])
        return gains[rows[0] : rows[0] + 1]
    if len(rows) > 1 and (step := rows[1] - rows[0]) > 0 and rows == list(range(rows[0], rows[-1] + 1, step)):
        return gains[rows[0] : rows[-1] + 1 : step]
    return gains[rows]


def _with_list(rates: np.ndarray) -> tuple[np.ndarray, list | None]:
    return rates, (rates.tolist() if (rates > 0).all() else None)


class _Layout:
    """What planning a phase takes from its record alone, in the plan's order (the clients', then each one's chain):
    every activity, its kind's code and bits, each client's span of them, and where the computations, downloads and
    uploads are (their index among the activities and, for a message, its fading gain's). The same for every pricer
    that plans the phase: a sweep re-prices one training's trace on each of its channel points (benchmarks [5])."""

    __slots__ = (
        "clients",
        "chains",
        "activities",
        "kinds",
        "bits",
        "zeros",
        "spans",
        "compute",
        "compute_keys",
        "down",
        "up",
    )

    def __init__(self, phase: PhaseRecord, clients: list[int]):
        self.clients, self.chains = list(clients), phase.chains
        activities: list[Activity] = []
        kinds: list[int] = []
        self.spans: list[tuple[int, int, int]] = []  # (client, first, end) of its activities
        self.compute: list[tuple[int, int]] = []  # (client, index)
        self.down: list[tuple[int, int, int]] = []  # (client, index, index of its fading gain)
        self.up: list[tuple[int, int, int]] = []
        radio = 0
        for c in clients:
            first = len(activities)
            for a in phase.chains[c]:
                kind = KIND_CODE[a.kind]
                if kind == COMPUTE:
                    self.compute.append((c, len(activities)))
                else:
                    (self.down if kind == DOWNLOAD else self.up).append((c, len(activities), radio))
                    radio += 1
                activities.append(a)
                kinds.append(kind)
            self.spans.append((c, first, len(activities)))
        self.activities, self.kinds = activities, kinds
        self.bits = [a.bits for a in activities]
        self.zeros = [0.0] * len(activities)
        # each computation's (client, samples, work): what PhasePhysics._compute remembers its cycles and time by
        self.compute_keys = [(c, activities[k].samples, activities[k].work) for c, k in self.compute]


# id(phase) -> its layout, while the phase lives (a trace records what happened: its phases' chains do not change once
# priced; a layout is made again for other clients or another chains dict)
_LAYOUTS: dict[int, _Layout] = {}


def _layout(phase: PhaseRecord, clients: list[int]) -> _Layout:
    """The phase's :class:`_Layout` for ``clients`` (made once per phase and kept while the phase lives)."""
    key = id(phase)
    layout = _LAYOUTS.get(key)
    if layout is None or layout.chains is not phase.chains or layout.clients != clients:
        if layout is None:
            weakref.finalize(phase, _LAYOUTS.pop, key, None)
        layout = _LAYOUTS[key] = _Layout(phase, clients)
    return layout


class PhasePhysics:
    """Resolves a phase's activities into :class:`Step` s for one network and population."""

    def __init__(
        self,
        network: NetworkParams,
        population: Population,
        rng: np.random.Generator,
        devices: DeviceState | None = None,
    ):
        self.net = network
        self.pop = population
        self.devices = DeviceState.of(population) if devices is None else devices  # CPU, power, links now
        self.rng = rng
        # every client's mean SNR over a band (a callable of the band in Hz; read by edgefl.feasibility too)
        self.mean_up_snr = MeanSnr(self.devices.uplink)
        self.mean_down_snr = MeanSnr(self.devices.downlink)
        self._compute_cache: dict[tuple, tuple[float, float]] = {}
        # Without fading, a client's rate over a band is the same in every phase: computed once for
        # all clients (per bandwidth, or per number of FDMA sharers) and looked up (_rates_without_fading).
        self._rates_at_mean: dict = {}
        self.band_share: np.ndarray | None = None  # FDMA: a controller's fixed share of the band per client

    def resources_changed(self, band_share: np.ndarray | None = None) -> None:
        """A controller changed the knobs (CPU frequencies, transmit powers, FDMA band shares) for the
        next phase: forget what depended on them."""
        self.band_share = None if band_share is None else np.asarray(band_share, dtype=np.float64)
        self._compute_cache.clear()
        self.links_changed()

    def mean_channel(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every client's mean uplink SNR per W of transmit power over the whole uplink band, whether
        it scales as 1/band (a link budget), and its mean download rate (bit/s) over the downlink band
        (no fading: what a base station knows)."""
        net, power_w = self.net, self.devices.tx_power_w
        snr = self.mean_up_snr(net.bandwidth_hz)
        with np.errstate(divide="ignore", invalid="ignore"):
            per_w = np.where(power_w > 0, snr / power_w, 0.0)
        down = self._rates_without_fading("down", net.downlink_bandwidth_hz, net.downlink_bandwidth_hz)[0]
        return per_w, self.mean_up_snr.scales_with_band.copy(), np.array(down, dtype=np.float64)

    def nominal_seconds(self, steps: list[Step]) -> list[float]:
        """Each step's duration as planned: an FDMA upload's airtime alone on the band (it depends on
        the others' timing; a first coherence block in outage counts one block)."""
        return [
            step.duration_s
            if step.rates_bps is None
            else float(step.bits / step.rates_bps[0])
            if step.rates_bps[0] > 0
            else self.net.coherence_s  # type: ignore[misc]  # an outage block: block fading, so coherence_s is set
            for step in steps
        ]

    def links_changed(self) -> None:
        """The devices' links changed (mobility, transmit powers): forget every cached SNR and rate."""
        self.mean_up_snr, self.mean_down_snr = MeanSnr(self.devices.uplink), MeanSnr(self.devices.downlink)
        self._rates_at_mean = {}

    def links_moved(self) -> None:
        """The devices moved (their links are edgefl.sim.mobility.MovedLinks of those the mean SNRs were built from):
        :meth:`links_changed`, its mean SNRs from arrays (:meth:`MeanSnr.moved`)."""
        devices = self.devices
        assert isinstance(devices.uplink, MovedLinks) and isinstance(devices.downlink, MovedLinks)
        self.mean_up_snr = self.mean_up_snr.moved(devices.uplink)
        self.mean_down_snr = self.mean_down_snr.moved(devices.downlink)
        self._rates_at_mean = {}

    def plan(self, phase: PhaseRecord, clients: list[int]) -> dict[int, list[Step]]:
        """Each client's chain as steps. One pass sorts the activities by kind; the physics is
        then one vectorised computation per kind."""
        net = self.net
        fdma = net.access == "fdma"
        layout = _layout(phase, clients)
        steps = list(map(Step, layout.kinds, layout.activities, layout.zeros, layout.bits, layout.zeros))
        plans = {c: steps[first:end] for c, first, end in layout.spans}
        compute = [(c, steps[k]) for c, k in layout.compute]
        down = [(c, steps[k], gain) for c, k, gain in layout.down]  # (client, step, index of its fading gain)
        up = [(c, steps[k], gain) for c, k, gain in layout.up]
        radio = len(down) + len(up)
        # Fading gains drawn up front in a fixed order (client, activity, attempt): the draws do
        # not depend on simulated timing, so a trace re-priced on another channel sees the same
        # sequence of random numbers as a full co-simulation on that channel.
        attempts = 1 + net.max_retransmissions
        gains = None  # no fading: every gain 1 (no draw; _gains_of makes them where read)
        if radio and str(net.fading).lower() != "none":
            gains = np.atleast_1d(
                fading_power_gain(net.fading, self.rng, size=radio * attempts, rician_k=net.rician_k)
            ).reshape(radio, attempts)
        if compute:
            self._plan_compute(compute, layout.compute_keys)
        if down:
            self._plan_downloads(down, gains)
        if up and (not fdma or self.band_share is not None):  # a band of its own (or its allocated share)
            self._plan_timed(
                up,
                "up",
                net.bandwidth_hz,
                net.bandwidth_hz,
                gains,
                fixed_rate=net.outage_snr_db is not None,
                share=self.band_share if fdma else None,
            )
        if up and fdma and self.band_share is None:
            self._plan_shared(up, gains, max(len(up), phase.sharers or 0))
        return plans

    def _plan_downloads(self, down: list, gains: np.ndarray | None) -> None:
        """Downloads by ``network.downlink`` mode: broadcast, each receiver at its own rate over the
        downlink band; multicast, one transmission per message size at the weakest receiver's rate;
        unicast, the base station's power and band split equally among the phase's n receivers (each
        gets B/n at P/n: the same SNR, 1/n of the band)."""
        net = self.net
        band_hz = net.downlink_bandwidth_hz
        if net.downlink == "unicast":
            self._plan_timed(down, "down", band_hz / len(down), band_hz, gains, fixed_rate=False)
        elif net.downlink == "multicast":
            sizes = np.array([step.bits for _, step, _ in down], dtype=np.float64)
            self._plan_timed(
                down, "down", band_hz, band_hz, gains, fixed_rate=False, groups=np.unique(sizes, return_inverse=True)[1]
            )
        else:
            self._plan_timed(down, "down", band_hz, band_hz, gains, fixed_rate=False)

    def _plan_timed(
        self,
        messages: list,
        link: str,
        bandwidth_hz: float,
        snr_bandwidth_hz: float,
        gains: np.ndarray | None,
        fixed_rate: bool,
        groups: np.ndarray | None = None,
        share: np.ndarray | None = None,
    ) -> None:
        """Airtime, attempts and loss of messages sent over a band of their own (downloads, dedicated
        and TDMA uploads). Adaptive rate (fixed_rate False): each attempt at the rate of its draw; an
        attempt in outage (rate 0, mcs only) fails after the airtime at the mean SNR's rate. With
        ``coherence_s`` and fading, a message sees a new draw per block instead, outage blocks carry
        nothing, and nothing fails. Fixed rate (a packet-error threshold): every attempt at the rate of
        the mean SNR, failing when its instantaneous SNR is below the threshold (Chen et al. 2021).
        ``groups`` (multicast): messages of one group are one transmission, every attempt at the
        lowest rate among its receivers. ``link``: "up" or "down"; the mean SNR is taken over
        ``snr_bandwidth_hz``, the rate over ``bandwidth_hz``. ``share`` [N] (FDMA with a controller's
        allocation): each message over share·bandwidth_hz, its SNR over that share."""
        net = self.net
        if net.fading == "none" and not fixed_rate and groups is None and share is None:
            _, rate_of_client = self._rates_without_fading(link, bandwidth_hz, snr_bandwidth_hz)
            if rate_of_client is not None:  # no gain, no outage: every message at its client's rate
                for c, step, _ in messages:
                    step.duration_s = step.bits / rate_of_client[c]
                return
        clients = np.array([c for c, _, _ in messages], dtype=np.int64)
        bits = np.array([step.bits for _, step, _ in messages], dtype=np.float64)
        g = _gains_of(gains, [k for _, _, k in messages], 1 + net.max_retransmissions)  # [M, attempts]
        attempts = g.shape[1]
        mean = (self.mean_up_snr if link == "up" else self.mean_down_snr).of(snr_bandwidth_hz, clients)
        band: float | np.ndarray = bandwidth_hz  # Hz: one number, or one per message [M]
        attempt_band: float | np.ndarray = bandwidth_hz  # Hz: against [M, attempts]
        if share is not None:
            band_of_message = bandwidth_hz * share[clients]
            with np.errstate(divide="ignore"):
                mean = np.where(
                    self.mean_up_snr.scales_with_band[clients], mean * (snr_bandwidth_hz / band_of_message), mean
                )
            band, attempt_band = band_of_message, band_of_message[:, None]
        if fixed_rate:
            nominal = self.nominal_rate(band, mean, link)
            fails = mean[:, None] * g < db_to_linear(net.outage_snr_db)
            failing = np.count_nonzero(fails)
            per_attempt = np.broadcast_to((bits / nominal)[:, None], g.shape)
        elif net.block_fading:
            airtime = self._block_fading_airtime(bits, mean, band, g[:, 0], link)
            for (_, step, _), seconds in zip(messages, airtime.tolist()):
                step.duration_s = seconds
            return
        else:
            if net.fading == "none" and share is None:  # every gain is 1: the rate only depends on the client
                rate = self._rates_without_fading(link, bandwidth_hz, snr_bandwidth_hz)[0][clients][:, None]
            else:
                rate = self._rate(attempt_band, faded(mean[:, None], g), link)
            nominal = None
            if groups is not None:  # the weakest receiver of each group sets its rate
                nominal = self.nominal_rate(band, mean, link)
                for group in np.unique(groups):
                    rows = groups == group
                    rate[rows] = rate[rows].min(axis=0)
                    nominal[rows] = nominal[rows].min()
            fails = rate == 0
            failing = np.count_nonzero(fails)  # (once: read again below)
            if not failing:  # (no rate is 0: no division by zero to silence; errstate costs ~us)
                per_attempt = bits[:, None] / rate
            else:
                with np.errstate(divide="ignore"):
                    per_attempt = bits[:, None] / rate
                nominal = self.nominal_rate(band, mean, link) if nominal is None else nominal
                per_attempt = np.where(fails, (bits / nominal)[:, None], per_attempt)
        if not failing:  # the usual case: every message gets through at its first attempt
            for (_, step, _), seconds in zip(messages, per_attempt[:, 0].tolist()):
                step.duration_s = seconds
            return
        ok = np.broadcast_to(~fails, (len(messages), attempts))  # without fading, fails is [M, 1]
        used = np.where(ok.any(axis=1), ok.argmax(axis=1) + 1, attempts)  # attempts until the first success
        taken = np.arange(attempts)[None, :] < used[:, None]
        airtime = np.where(taken, per_attempt, 0.0).sum(axis=1)
        lost = np.logical_not(ok.any(axis=1))
        for (_, step, _), seconds, n, flag in zip(messages, airtime.tolist(), used.tolist(), lost.tolist()):
            step.duration_s, step.attempts, step.lost = seconds, n, flag

    def _block_fading_airtime(
        self, bits: np.ndarray, mean: np.ndarray, bandwidth_hz: float | np.ndarray, first_gain: np.ndarray, link: str
    ) -> np.ndarray:
        """Airtime of messages cut into coherence blocks, each block at the rate of its own draw:
        a block of coherence_s seconds carries rate(g_k) * coherence_s bits (0 in outage); the last
        one carries what is left. New draws (in message order, block after block) only for the
        messages still sending."""
        net = self.net
        block_s = net.coherence_s
        assert block_s is not None  # called for block fading only
        remaining, airtime = bits.copy(), np.zeros(len(bits))
        active = np.flatnonzero(bits > 0)
        gain = first_gain[active]
        for _ in range(1_000_000):
            if not len(active):
                return airtime
            band = bandwidth_hz if np.ndim(bandwidth_hz) == 0 else np.asarray(bandwidth_hz)[active]
            rate = self._rate(band, faded(mean[active], gain), link)
            capacity = rate * block_s
            last = capacity >= remaining[active]
            done = active[last]
            with np.errstate(divide="ignore", invalid="ignore"):
                airtime[done] += remaining[done] / rate[last]
            airtime[active[~last]] += block_s
            remaining[active[~last]] -= capacity[~last]
            active = active[~last]
            gain = np.atleast_1d(fading_power_gain(net.fading, self.rng, size=len(active), rician_k=net.rician_k))
        raise UserError(
            "block fading: messages still sending after 1,000,000 coherence blocks of "
            "network.coherence_s: raise network.coherence_s, or give the links a higher rate (SNR, band)"
        )

    def _plan_shared(self, up: list, gains: np.ndarray | None, n: int) -> None:
        """FDMA uploads: each upload's rate at every number of sharers B/1 .. B/n (n: the uploads in the
        phase, or more where chains of other phases run at the same time: PhaseRecord.sharers), per attempt. Adaptive rate: the rates of the attempt's draw; an attempt fails when its
        rate is 0 (mcs outage) on the share it holds when it starts, and is then sent at the mean SNR's
        rate. Fixed rate: the mean SNR's rates; fails below the packet-error threshold on its share."""
        net = self.net
        clients = np.array([c for c, _, _ in up], dtype=np.int64)
        if net.fading == "none" and net.outage_snr_db is None:
            _, rows = self._shared_rates_without_fading(n, clients)
            if rows is not None:  # no gain, no outage: every upload at its client's rates
                for (_, step, _), row in zip(up, rows):
                    step.rates_bps = row
                return
        g = _gains_of(gains, [k for _, _, k in up], 1 + net.max_retransmissions)  # [U, attempts]
        shares, mean = self.mean_up_snr.shared(net.bandwidth_hz, n, clients)  # [sharers], [U, sharers]
        if net.block_fading and net.outage_snr_db is None:
            # Block fading: the band re-plans at every block end; block k's rates come from the
            # upload's own stream (spawned in upload order), so draws do not depend on timing.
            streams = self.rng.spawn(len(up))
            for (_, step, _), first_gain, row, stream in zip(up, g[:, 0].tolist(), mean, streams):
                step.block_rates = BlockRates(self, shares, row, first_gain, stream)
                step.rates_bps = step.block_rates(0)
            return
        if net.outage_snr_db is not None:
            nominal = self.nominal_rate(shares[None, :], mean, "up")  # [U, sharers]
            fails = mean[:, None, :] * g[:, :, None] < db_to_linear(net.outage_snr_db)  # [U, attempts, sharers]
            rates = np.broadcast_to(nominal[:, None, :], fails.shape)
        else:
            if net.fading == "none":  # every gain is 1
                rates = np.repeat(self._shared_rates_without_fading(n, clients)[0][:, None, :], g.shape[1], axis=1)
            else:
                rates = self._rate(shares[None, None, :], faded(mean[:, None, :], g[:, :, None]), "up")
            fails = rates == 0
            nominal = None  # needed only if an attempt fails
        # The usual case: every upload gets through at its first attempt, on whatever share it holds (the attempts after
        # it are never sent: whether they would fail does not matter; a dispatched chain's upload has 3 of them, where
        # one in 7 would fail, benchmarks [8]).
        if not np.count_nonzero(fails[:, 0]):
            # each upload's row of one array (U lists of U floats were O(U^2) Python floats a phase: 1,000 uploads)
            for (_, step, _), table in zip(up, np.ascontiguousarray(rates[:, 0, :])):
                step.rates_bps = table
            return
        if nominal is None:  # a failed attempt is sent at the mean SNR's rates
            nominal = self.nominal_rate(shares[None, :], mean, "up")  # [U, sharers]
            rates = np.where(fails, nominal[:, None, :], rates)
        for (_, step, _), ok_rates, fail_flags, nominal_rates in zip(
            up, rates.tolist(), fails.tolist(), nominal.tolist()
        ):
            step.fdma_attempts = [(ok, nominal_rates, flags) for ok, flags in zip(ok_rates, fail_flags)]
            step.rates_bps = ok_rates[0]

    def nominal_rate(self, bandwidth_hz, mean_snr: np.ndarray, link: str) -> np.ndarray:
        """The rate at the mean SNR (fixed-rate transmission, or a failed attempt's airtime); with mcs
        a mean SNR below the table is sent at its lowest entry (the most robust scheme)."""
        rate = self._rate(bandwidth_hz, mean_snr, link)
        if self.net.rate == "mcs":
            lowest = np.full(np.shape(mean_snr), db_to_linear(self.net.mcs_snr_db[0]))  # the lowest entry's SNR
            rate = np.where(rate == 0, self._rate(bandwidth_hz, lowest, link), rate)
        return rate

    def _rates_without_fading(self, link: str, bandwidth_hz: float, snr_bandwidth_hz: float):
        """Every client's rate over ``bandwidth_hz`` at its mean SNR over ``snr_bandwidth_hz`` on the
        ``link`` ("up" or "down"). Without fading it is the same in every phase: computed once for
        all clients. Returns the array, and the same rates as a list when none is 0 (no message can
        be in outage), for plain look-ups per message."""
        key = (link, bandwidth_hz, snr_bandwidth_hz)
        if key not in self._rates_at_mean:
            mean = (self.mean_up_snr if link == "up" else self.mean_down_snr)(snr_bandwidth_hz)
            self._rates_at_mean[key] = _with_list(self._rate(bandwidth_hz, mean, link))
        return self._rates_at_mean[key]

    def _shared_rates_without_fading(self, sharers: int, clients: np.ndarray):
        """The ``clients``' uplink rates with n = 1 .. ``sharers`` FDMA sharers [len(clients), sharers], at their
        mean SNR over their share (no fading); with the rows as lists when none is 0, as
        :meth:`_rates_without_fading`. Computed for the phase's uploads only (a table of every client would be
        N x sharers)."""
        shares, mean = self.mean_up_snr.shared(self.net.bandwidth_hz, sharers, clients)
        return _with_list(self._rate(shares[None, :], mean, "up"))

    def _rate(self, bandwidth_hz, snr: np.ndarray, link: str) -> np.ndarray:
        """The rate (bit/s) of the ``link`` ("up" or "down"): NetworkParams.rate_bps."""
        return self.net.rate_bps(bandwidth_hz, snr, link)

    def _plan_compute(self, compute: list, keys: list[tuple]) -> None:
        """Cycles and time of compute steps at the CPU's frequency (a straggler's factor: the Stragglers component);
        ``keys``: each one's (client, samples, work), as :meth:`_compute` remembers them."""
        try:  # (a run repeats the same computations: every one known after its first rounds, read in one pass)
            known = list(map(self._compute_cache.__getitem__, keys))
        except KeyError:
            known = self._compute([(c, s.activity) for c, s in compute])
        for (_, step), (cycles, seconds) in zip(compute, known):
            step.cycles, step.duration_s = cycles, seconds

    def _compute(self, work: list[tuple[int, Activity]]) -> list[tuple[float, float]]:
        """(cycles, seconds) of each (client, compute activity); remembered per (client, samples,
        work), since a run repeats the same computations round after round."""
        cache = self._compute_cache
        keys = [(c, a.samples, a.work) for c, a in work]
        known = [cache.get(k) for k in keys]
        if None not in known:  # (a run repeats the same computations: every one known after its first rounds)
            return known  # type: ignore[return-value]
        missing = [k for k in dict.fromkeys(keys) if k not in cache]
        if missing:
            pop = self.pop
            c = np.array([k[0] for k in missing], dtype=np.int64)
            train = np.array([k[2] == "train" for k in missing], dtype=bool)
            per_sample = np.where(train, pop.train_cycles_per_sample[c], pop.eval_cycles_per_sample[c])
            cycles = np.array([k[1] for k in missing], dtype=np.float64) * per_sample
            seconds = np.asarray(compute_time_s(cycles, self.devices.cpu_hz[c]))
            self._compute_cache.update(zip(missing, zip(cycles.tolist(), seconds.tolist())))
        return [self._compute_cache[k] for k in keys]
