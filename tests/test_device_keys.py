"""Each device parameter is declared once, as its [devices] pydantic field: device classes, the population's
per-device arrays and the controllers' device limits derive from it (docs/architecture.md, "Adding a device key")."""

from __future__ import annotations

import re
from dataclasses import fields

import numpy as np
import pytest

from edgefl.control import DeviceLimits
from edgefl.deployment import DeviceArrays, PerDevice, build_population, per_device_keys
from edgefl.scenario import DeviceClass, DevicesSection, ScenarioError, scenario_from_dict
from edgefl.scenario_doc import _constraints

# The arrays that combine several keys with the model (devices.cycles_per_flop, cycles_per_sample).
COMPUTE_ARRAYS = {"train_cycles_per_sample", "eval_cycles_per_sample"}


def test_every_per_device_key_is_a_class_key_with_its_bounds_and_description():
    keys = per_device_keys(DevicesSection)
    assert "cpu_ghz" in keys and "slowdown" not in keys and "classes" not in keys
    assert list(DeviceClass.model_fields) == ["name", "share", *keys]
    for key in keys:
        base, own = DevicesSection.model_fields[key], DeviceClass.model_fields[key]
        assert own.default is None, key  # unset: the base value
        assert own.description == base.description, key
        assert _constraints(own) == _constraints(base), key


def test_every_marked_array_is_a_population_array_and_every_array_is_filled():
    arrays = {marker.si for marker in per_device_keys(DevicesSection).values() if marker.si}
    assert arrays | COMPUTE_ARRAYS == {f.name for f in fields(DeviceArrays)}
    s = scenario_from_dict({"devices": {"classes": [{"name": "fast", "share": 0.5, "cpu_ghz": 2.0}]}})
    pop = build_population(s.network, s.devices, 8, 100.0, 30.0, seed=0)
    for f in fields(DeviceArrays):
        values = getattr(pop, f.name)
        assert values.shape == (8,) and not np.isnan(values).any(), f.name


def test_a_class_value_reaches_its_devices_in_si_units_and_unset_bounds_follow_it():
    s = scenario_from_dict(
        {
            "devices": {
                "cpu_ghz": 1.0,
                "tx_power_dbm": 23.0,
                "idle_power_w": 0.02,
                "classes": [
                    {"name": "phone", "share": 0.25, "cpu_ghz": 2.5, "tx_power_dbm": 20.0, "battery_j": 500.0},
                    {"name": "sensor", "share": 0.25, "promotion_power_w": 1.2, "cycles_per_sample": 3e6},
                ],
            }
        }
    )
    pop = build_population(s.network, s.devices, 8, 100.0, 30.0, seed=0)
    phone = np.array([c == "phone" for c in pop.device_class])
    sensor = np.array([c == "sensor" for c in pop.device_class])
    assert phone.sum() == 2 and sensor.sum() == 2
    assert np.allclose(pop.cpu_hz[phone], 2.5e9) and np.allclose(pop.cpu_hz[~phone], 1e9)
    assert np.allclose(pop.cpu_hz_min, pop.cpu_hz / 10)  # unset: a tenth of each device's own frequency
    assert np.allclose(pop.tx_power_w[phone], 0.1, rtol=1e-3) and np.allclose(pop.tx_power_w[~phone], 0.1995, rtol=1e-3)
    assert np.allclose(pop.tx_power_w_min, pop.tx_power_w / 1000)  # unset: 30 dB below
    assert np.allclose(pop.battery_j[phone], 500.0) and np.isinf(pop.battery_j[~phone]).all()  # unset: mains
    assert np.allclose(pop.promotion_power_w[sensor], 1.2) and np.allclose(pop.promotion_power_w[~sensor], 0.02)
    assert np.allclose(pop.train_cycles_per_sample[sensor], 3e6) and np.allclose(
        pop.eval_cycles_per_sample[sensor], 1e6
    )
    assert np.allclose(pop.train_cycles_per_sample[~sensor], 100.0) and np.allclose(
        pop.eval_cycles_per_sample[~sensor], 30.0
    )


def test_device_limits_are_a_copy_of_the_population_arrays():
    s = scenario_from_dict({"devices": {"cpu_ghz": 2.0, "cpu_ghz_min": 0.5}})
    pop = build_population(s.network, s.devices, 3, 100.0, 30.0, seed=0)
    limits = DeviceLimits.of(pop)
    assert np.array_equal(limits.cpu_hz_max, pop.cpu_hz) and np.array_equal(limits.cpu_hz_min, np.full(3, 5e8))
    assert np.array_equal(limits.tx_power_w_max, pop.tx_power_w)
    pop.cpu_hz[:] = 1e9  # the engine sets a knob: what the server knows of the device does not change
    assert np.array_equal(limits.cpu_hz_max, np.full(3, 2e9))


@pytest.mark.parametrize(
    "classes, expected",
    [
        (
            [{"name": "a", "share": 0.5, "cpu_ghz": 500}],
            "devices.classes.0.cpu_ghz: Input should be less than or equal to 100",
        ),
        ([{"name": "a", "share": 0.5, "cpu_gz": 5}], "devices.classes.0.cpu_gz: unknown key (did you mean 'cpu_ghz'?)"),
        ([{"name": "a", "share": 0.5, "slowdown": "none"}], "devices.classes.0.slowdown: unknown key"),
    ],
)
def test_a_bad_class_key_names_its_path(classes, expected):
    with pytest.raises(ScenarioError, match=re.escape(expected)):
        scenario_from_dict({"devices": {"classes": classes}})


def test_a_marker_without_an_array_is_combined_by_build_population():
    keys = per_device_keys(DevicesSection)
    assert {k for k, m in keys.items() if m.si is None} == {"cycles_per_flop", "cycles_per_sample"}
    assert PerDevice("x").to_si(np.array([1.0]), {}) == np.array([1.0])  # the default: same units
