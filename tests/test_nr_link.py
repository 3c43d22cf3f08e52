"""NR links (issue 31 item 4): the NR PUSCH MCS table and NR framing overhead (network.standard = "nr")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from channel import check_mcs_table
from channel.mcs import (
    CQI_EFFICIENCY,
    CQI_SNR_DB,
    NR_PUSCH_EFFICIENCY,
    NR_PUSCH_MCS,
    NR_PUSCH_SNR_DB,
    nr_overhead_fraction,
)
from edgefl.cli import main
from edgefl.deployment import network_params
from edgefl.scenario import scenario_from_dict

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "scenarios" / "quickstart.toml"


def test_the_nr_table_is_ts_38_214_table_1():
    """Spectral efficiency = Q_m x R / 1024 of TS 38.214 Table 5.1.3.1-1, rounded to 4 decimals as the table prints."""
    hand = {0: 2 * 120, 9: 2 * 679, 10: 4 * 340, 16: 4 * 658, 18: 6 * 466, 28: 6 * 948}
    for mcs, bits in hand.items():
        assert NR_PUSCH_EFFICIENCY[NR_PUSCH_MCS.index(mcs)] == pytest.approx(bits / 1024, abs=5e-5)
    assert 17 not in NR_PUSCH_MCS and len(NR_PUSCH_MCS) == 28  # 4 x 658 > 6 x 438: MCS 17 is never better
    check_mcs_table(NR_PUSCH_SNR_DB, NR_PUSCH_EFFICIENCY)  # both increase


def test_nr_framing_overhead_by_hand():
    # 14 symbols per slot in 15 kHz x 1 ms per Hz: 14/15 resource elements per s per Hz; 13 data symbols of 14
    assert nr_overhead_fraction(14, 1) == pytest.approx(1 - 13 / 15)
    assert nr_overhead_fraction(12, 2) == pytest.approx(1 - 10 / 15)
    with pytest.raises(ValueError):
        nr_overhead_fraction(4, 4)


def test_standard_nr_uses_the_table_and_the_framing_in_the_rate():
    net = network_params(
        scenario_from_dict({"network": {"rate": "mcs", "standard": "nr", "overhead_fraction": 0.1}}).network
    )
    assert net.mcs_snr_db == NR_PUSCH_SNR_DB and net.mcs_efficiency == NR_PUSCH_EFFICIENCY
    # 10 dB reaches MCS 14 (9.31 dB), not MCS 15 (10.26 dB): 2.1602 bit/s/Hz, then (1 - 0.1)(13/15)
    rate = float(net.rate_bps(1e6, 10.0, "up"))
    assert rate == pytest.approx(1e6 * 2.1602 * 0.9 * 13 / 15)
    lte = network_params(scenario_from_dict({"network": {"rate": "mcs"}}).network)
    assert lte.mcs_snr_db == CQI_SNR_DB and lte.mcs_efficiency == CQI_EFFICIENCY and lte.overhead_fraction == 0.0
    # below the lowest NR entry (-1.01 dB) the block is in outage
    assert float(net.rate_bps(1e6, 10 ** (-0.12), "up")) == 0.0
    assert np.isfinite(float(net.rate_bps(1e6, 1.0, "up")))


def test_a_run_on_nr_links(tmp_path):
    out = tmp_path / "nr"
    sets = ["run.rounds=1", "network.rate=mcs", "network.standard=nr", "network.nr_dmrs_symbols=2"]
    assert (
        main(["run", str(QUICK), "--out", str(out), "--no-plots", "-q", *[a for k in sets for a in ("--set", k)]]) == 0
    )


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("network.standard", "5g", "network.standard"),
        ("network.nr_pusch_symbols", "15", "network.nr_pusch_symbols: Input should be less than or equal to 14"),
        ("network.nr_pusch_symbols", "nan", "network.nr_pusch_symbols"),
        ("network.nr_dmrs_symbols", "-1", "network.nr_dmrs_symbols: Input should be greater than or equal to 1"),
        ("network.nr_dmrs_symbols", "inf", "network.nr_dmrs_symbols"),
        ("network.nr_dmrs_symbols", "1e300", "network.nr_dmrs_symbols"),
    ],
)
def test_bad_nr_values_exit_2_naming_the_key(key, value, message, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["run", str(QUICK), "--out", str(out), "--no-plots", "-q", "--set", f"{key}={value}"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and not out.exists(), err


def test_dmrs_must_leave_data_symbols(tmp_path, capsys):
    out = tmp_path / "out"
    sets = ["network.nr_pusch_symbols=3", "network.nr_dmrs_symbols=3"]
    code = main(["run", str(QUICK), "--out", str(out), "--no-plots", "-q", *[a for k in sets for a in ("--set", k)]])
    assert code == 2 and "must be fewer than network.nr_pusch_symbols" in capsys.readouterr().err
