"""edgefl.sim.band.SharedBand (FDMA processor sharing) against a plain event-by-event calculation: its buffers
grow past their first capacity, several uploads end at once, an upload is cut in the middle, a later upload
brings a longer rate table."""

import numpy as np
import pytest
import simpy

from edgefl.sim.band import SharedBand


def reference_ends(starts, bits, rates, cut, coherence_s=np.inf, factor=None):
    """Each upload's end (s) under processor sharing, one Python float at a time: upload i sends at
    rates[i][n - 1] while n uploads share the band, times ``factor(i, k)`` in its k-th block of ``coherence_s``
    seconds from its start (``factor`` None or returning None for i: no blocks); ``cut`` = (i, t): upload i stops
    at t (no end). Also returns the most uploads that shared the band at once."""
    ends, left, now, active, most = {}, list(map(float, bits)), 0.0, [], 0
    faded = {i for i in range(len(starts)) if factor is not None and factor(i, 0) is not None}
    block = dict.fromkeys(faded, 0)
    pending = sorted(range(len(starts)), key=lambda i: (starts[i], i))

    def rate(i, n):
        return rates[i][n - 1] * (factor(i, block[i]) if i in faded else 1.0)

    while pending or active:
        n = len(active)
        finish = {i: now + left[i] / rate(i, n) if rate(i, n) > 0 else np.inf for i in active}  # 0: an outage block
        block_end = {i: starts[i] + (block[i] + 1) * coherence_s for i in active if i in faded}
        candidates = [min(finish.values(), default=np.inf), starts[pending[0]] if pending else np.inf]
        candidates += list(block_end.values()) + ([cut[1]] if cut[0] in active else [])
        t = min(candidates)
        for i in active:
            left[i] -= rate(i, n) * (t - now)
        now = t
        done = [i for i in active if finish[i] <= t * (1 + 1e-12)]
        for i in done:
            ends[i] = now
        for i in block_end:
            if i not in done and block_end[i] <= t * (1 + 1e-12):
                block[i] += 1
        active = [i for i in active if i not in done and not (i == cut[0] and t == cut[1])]
        while pending and starts[pending[0]] <= now:
            active.append(pending.pop(0))
        most = max(most, len(active))
    return ends, most


def run_band(starts, bits, rates_of, cut, coherence_s=None, block_rates_of=lambda i: None):
    """The uploads on a SharedBand in SimPy (upload i cut at ``cut``); their ends (s) and the order they ended in."""
    env = simpy.Environment()
    band = SharedBand(env, coherence_s)
    ends, order = {}, []

    def upload(i):
        yield env.timeout(float(starts[i]))
        flow = band.transmit(i, float(bits[i]), rates_of(i), block_rates_of(i))
        try:
            yield flow.done
            ends[i] = env.now
            order.append(i)
        except simpy.Interrupt:
            band.cancel(flow)

    procs = [env.process(upload(i)) for i in range(len(starts))]

    def cutter():
        yield env.timeout(cut[1])
        procs[cut[0]].interrupt()

    env.process(cutter())
    env.run()
    assert band.flows == []
    return ends, order


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

    ends, order = run_band(starts, bits, rates_of, cut)

    expected, most = reference_ends(starts.tolist(), bits.tolist(), [rates_of(i).tolist() for i in range(m)], cut)
    assert most > 32
    assert set(ends) == set(expected) == set(range(m)) - {cut[0]}
    for i in ends:
        assert ends[i] == pytest.approx(expected[i], rel=1e-9), i
    together = [i for i in order if i in (10, 11, 12, 13)]
    assert together == [10, 11, 12, 13]  # ended at one instant, in the order they started
    assert len({ends[i] for i in together}) == 1


def test_block_fading_uploads_among_others_re_plan_at_their_block_ends_as_the_reference():
    # Every other upload has block fading (its rates x 1 in even blocks, x 0.3 in odd ones, 0 in its third:
    # an outage block carries nothing); the others one draw. Uploads end and one is cut between them.
    rng = np.random.default_rng(5)
    m, coherence_s = 30, 0.02
    starts = np.sort(rng.uniform(0.0, 0.1, m))
    bits = rng.uniform(3e4, 1.5e5, m)
    gain = rng.exponential(1.0, m)
    bits[7] = 1e6
    cut = (7, float(starts[7]) + 0.05)

    def rates_of(i):
        n = np.arange(1, m + 1)
        return 1e6 / n * np.log2(1 + 10.0 * gain[i] * n)

    def factor(i, k):
        return None if i % 2 else (0.0 if k == 3 else 1.0 if k % 2 == 0 else 0.3)

    def block_rates_of(i):
        return None if i % 2 else (lambda k: (rates_of(i) * factor(i, k)).tolist())

    ends, _ = run_band(starts, bits, rates_of, cut, coherence_s, block_rates_of)
    expected, most = reference_ends(
        starts.tolist(), bits.tolist(), [rates_of(i).tolist() for i in range(m)], cut, coherence_s, factor
    )
    assert most > 8
    assert set(ends) == set(expected) == set(range(m)) - {cut[0]}
    for i in ends:
        assert ends[i] == pytest.approx(expected[i], rel=1e-9), i
    assert max(ends[i] - starts[i] for i in ends if i % 2 == 0) > 4 * coherence_s  # past the outage block
