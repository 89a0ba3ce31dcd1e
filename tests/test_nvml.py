import math
import sys

import pytest

from tests.fakes_profiler import FakeNvmlDevice
from workbench.measure.nvml import NvmlSampler, Sample, cuda_uuid_to_nvml, reason_names, summarize, uuid_of_pci_bus


def s(sm_mhz, reasons=0, temp=50.0):
    return Sample(0.0, sm_mhz * 1e6, 3201e6, 400.0, temp, reasons)


def test_summary_min_median_union_and_flag():
    out = summarize([s(1980), s(1755, 0x4), s(1980, 0x1, temp=60)], calibration_sm_clock_hz=1.98e9)
    assert out.sm_clock_min_hz == 1755e6 and out.sm_clock_median_hz == 1980e6
    assert out.clock_reasons == "gpu_idle,sw_power_cap"
    assert out.throttled is True and out.temperature_max_c == 60


def test_idle_and_app_clocks_are_not_throttling():
    out = summarize([s(1980, 0x1 | 0x2)], calibration_sm_clock_hz=1.98e9)
    assert out.throttled is False and out.clock_reasons == "gpu_idle,applications_clocks_setting"


def test_clock_drop_below_90_percent_of_calibration():
    assert summarize([s(1700)], calibration_sm_clock_hz=1.98e9).throttled is True
    assert summarize([s(1800)], calibration_sm_clock_hz=1.98e9).throttled is False
    assert summarize([s(1000)]).throttled is False  # no calibration clock: reasons only


def test_reason_names_unknown_bits():
    assert reason_names(0x8 | 0x10000) == ["hw_slowdown", "0x10000"]


def test_uuid_format():
    raw = bytes(range(16))
    assert cuda_uuid_to_nvml(raw) == "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"


def test_a_uuid_cut_at_a_zero_byte_is_looked_up_by_pci_bus():
    cut = bytes.fromhex("1f80cd844e1615b7b3")  # what CuPy gave on an H200 whose UUID has a zero 10th byte
    assert cuda_uuid_to_nvml(cut) == ""

    class FakeNvml:
        def nvmlInit(self):
            pass

        def nvmlDeviceGetHandleByPciBusId(self, bus):
            if bus != "0000:19:00.0":
                raise LookupError(bus)
            return "h"

        def nvmlDeviceGetUUID(self, handle):
            return b"GPU-1f80cd84-4e16-15b7-b300-7d204c014c26"

    assert uuid_of_pci_bus("0000:19:00.0", FakeNvml()) == "GPU-1f80cd84-4e16-15b7-b300-7d204c014c26"
    assert uuid_of_pci_bus("0000:20:00.0", FakeNvml()) == ""


def test_sampler_with_fake_device():
    sampler = NvmlSampler(device=FakeNvmlDevice(sm_mhz=1500, reasons=0x20), interval_s=0.001)
    with sampler, sampler.window(calibration_sm_clock_hz=1.98e9) as w:
        pass
    assert w.summary.n_samples >= 1
    assert w.summary.throttled is True and "sw_thermal_slowdown" in w.summary.clock_reasons
    assert w.summary.columns()["sm_clock_min_hz"] == 1500e6


def test_nvml_absent_run_goes_on(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    sampler = NvmlSampler()
    with sampler, sampler.window() as w:
        pass
    assert not sampler.enabled and "NVML unavailable" in sampler.warning
    cols = w.summary.columns()
    assert math.isnan(cols["sm_clock_min_hz"]) and cols["clock_reasons"] == "" and cols["throttled"] is None


def test_read_errors_do_not_stop_sampling():
    class Flaky:
        def read(self):
            raise RuntimeError("nvml hiccup")

    sampler = NvmlSampler(device=Flaky(), interval_s=0.001)
    with sampler, sampler.window() as w:
        pass
    assert w.summary.n_samples == 0 and "hiccup" in sampler.warning


@pytest.mark.parametrize("mask", [0x4, 0x8, 0x40, 0x80])
def test_slowdown_reasons_flag(mask):
    assert summarize([s(1980, mask)]).throttled is True
