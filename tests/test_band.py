"""edgefl.sim.band.SharedBand (FDMA processor sharing) against a plain event-by-event calculation: its buffers
grow past their first capacity, several uploads end at once, an upload is cut in the middle, a later upload
brings a longer rate table."""

import numpy as np
import pytest
import simpy

from edgefl.sim.band import SharedBand


def reference_ends(starts, bits, rates, cut):
    """Each upload's end (s) under processor sharing, one Python float at a time: upload i sends at
    rates[i][n - 1] while n uploads share the band; ``cut`` = (i, t): upload i stops at t (no end). Also returns
    the most uploads that shared the band at once."""
    ends, left, now, active, most = {}, list(map(float, bits)), 0.0, [], 0
    pending = sorted(range(len(starts)), key=lambda i: (starts[i], i))
    while pending or active:
        n = len(active)
        finish = {i: now + left[i] / rates[i][n - 1] for i in active}
        candidates = [min(finish.values(), default=np.inf), starts[pending[0]] if pending else np.inf]
        if cut[0] in active:
            candidates.append(cut[1])
        t = min(candidates)
        for i in active:
            left[i] -= rates[i][n - 1] * (t - now)
        now = t
        done = [i for i in active if finish[i] <= t * (1 + 1e-12)]
        for i in done:
            ends[i] = now
        active = [i for i in active if i not in done and not (i == cut[0] and t == cut[1])]
        while pending and starts[pending[0]] <= now:
            active.append(pending.pop(0))
        most = max(most, len(active))
    return ends, most


def test_many_uploads_with_simultaneous_ends_a_cut_and_a_longer_table_match_the_reference():
    rng = np.random.default_rng(3)
    m = 40
    starts = np.sort(rng.uniform(0.1, 0.15, m))  # they pile up: the buffers grow past 8, 16, 32
    bits = rng.uniform(2e4, 1e5, m)
    gain = rng.exponential(1.0, m)
    starts[0], bits[0] = 0.0, 1e4  # alone on the band with a table of one entry; the next brings a longer one
    starts[10:14], bits[10:14], gain[10:14] = starts[10], bits[10], gain[10]  # four alike start together: end together
    bits[25] = 1e6  # cut in the middle (still sending 10 ms after its start)
    cut = (25, float(starts[25]) + 0.01)

    def rates_of(i):
        n = np.arange(1, (1 if i == 0 else m) + 1)
        return 1e6 / n * np.log2(1 + 10.0 * gain[i] * n)  # B/n, with the noise of B/n

    env = simpy.Environment()
    band = SharedBand(env)
    ends, order = {}, []

    def upload(i):
        yield env.timeout(float(starts[i]))
        flow = band.transmit(i, float(bits[i]), rates_of(i))
        try:
            yield flow.done
            ends[i] = env.now
            order.append(i)
        except simpy.Interrupt:
            band.cancel(flow)

    procs = [env.process(upload(i)) for i in range(m)]

    def cutter():
        yield env.timeout(cut[1])
        procs[cut[0]].interrupt()

    env.process(cutter())
    env.run()

    expected, most = reference_ends(starts.tolist(), bits.tolist(), [rates_of(i).tolist() for i in range(m)], cut)
    assert most > 32
    assert set(ends) == set(expected) == set(range(m)) - {cut[0]}
    for i in ends:
        assert ends[i] == pytest.approx(expected[i], rel=1e-9), i
    together = [i for i in order if i in (10, 11, 12, 13)]
    assert together == [10, 11, 12, 13]  # ended at one instant, in the order they started
    assert len({ends[i] for i in together}) == 1
    assert band.flows == []
