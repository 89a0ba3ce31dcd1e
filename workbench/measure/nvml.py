"""NVML sampling during a measured point: SM/memory clocks, power, temperature and clock-event reasons.

`pynvml` (from nvidia-ml-py) is imported lazily. Without it (or without a driver) the sampler is disabled: the
run goes on, the clock columns stay empty (NaN / "" / <NA>) and `NvmlSampler.warning` says why, once.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any

# Clock-event reason bits (nvml.h, nvmlClocksEventReason*). Idle, application-clock and display-clock settings are
# reasons the clock is where it is, not a slowdown.
REASON_NAMES: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
NOT_SLOWDOWN = frozenset({"gpu_idle", "applications_clocks_setting", "display_clock_setting"})
CLOCK_DROP_FRACTION = 0.9  # an SM clock below 90% of the calibration clock counts as throttled


def reason_names(mask: int) -> list[str]:
    """The names of the reason bits set in `mask` (unknown bits as hex)."""
    names = [name for bit, name in REASON_NAMES.items() if mask & bit]
    unknown = mask & ~sum(REASON_NAMES)
    if unknown:
        names.append(f"0x{unknown:x}")
    return names


@dataclass(frozen=True)
class Sample:
    t: float
    sm_clock_hz: float
    mem_clock_hz: float
    power_w: float
    temperature_c: float
    reasons: int
    pids: tuple[int, ...] = ()  # compute processes on the GPU (nvmlDeviceGetComputeRunningProcesses), ours included


@dataclass(frozen=True)
class ClockSummary:
    """Per-point NVML figures, in the measurement columns' units."""

    sm_clock_min_hz: float = float("nan")
    sm_clock_median_hz: float = float("nan")
    mem_clock_median_hz: float = float("nan")
    power_median_w: float = float("nan")
    temperature_max_c: float = float("nan")
    clock_reasons: str = ""
    throttled: bool | None = None  # None: unknown (no NVML)
    other_processes: str = ""  # pids of other compute processes seen on the GPU during the point, "" if none
    n_samples: int = 0

    def columns(self) -> dict[str, Any]:
        return {
            "sm_clock_min_hz": self.sm_clock_min_hz,
            "sm_clock_median_hz": self.sm_clock_median_hz,
            "mem_clock_median_hz": self.mem_clock_median_hz,
            "power_median_w": self.power_median_w,
            "temperature_max_c": self.temperature_max_c,
            "clock_reasons": self.clock_reasons,
            "throttled": self.throttled,
            "other_processes": self.other_processes,
        }


def other_pids(pids: set[int], own_pid: int | None = None) -> list[int]:
    """The compute processes that are not this one. In a container NVML reports host pids, so when our pid is not
    among them one of them is taken to be ours: others exist only if there are at least two."""
    own = os.getpid() if own_pid is None else own_pid
    if own in pids:
        return sorted(pids - {own})
    return sorted(pids) if len(pids) >= 2 else []


def summarize(samples: list[Sample], calibration_sm_clock_hz: float = float("nan")) -> ClockSummary:
    """Min/median SM clock, the union of reasons (names), and the throttled flag, over one point's samples."""
    if not samples:
        return ClockSummary()
    mask = 0
    for s in samples:
        mask |= s.reasons
    names = reason_names(mask)
    sm = [s.sm_clock_hz for s in samples]
    slowdown = any(n not in NOT_SLOWDOWN for n in names)
    clock_drop = calibration_sm_clock_hz == calibration_sm_clock_hz and min(sm) < (
        CLOCK_DROP_FRACTION * calibration_sm_clock_hz
    )
    others = other_pids({p for s in samples for p in s.pids})
    return ClockSummary(
        sm_clock_min_hz=min(sm),
        sm_clock_median_hz=statistics.median(sm),
        mem_clock_median_hz=statistics.median(s.mem_clock_hz for s in samples),
        power_median_w=statistics.median(s.power_w for s in samples),
        temperature_max_c=max(s.temperature_c for s in samples),
        clock_reasons=",".join(names),
        throttled=bool(slowdown or clock_drop),
        other_processes=",".join(map(str, others)),
        n_samples=len(samples),
    )


def cuda_uuid_to_nvml(uuid: bytes | str) -> str:
    """CUDA's 16-byte device UUID as NVML's string form, 'GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx'; "" when the
    bytes are not 16 (CuPy hands the char[16] cut at its first zero byte: GPU-1f80cd84-4e16-15b7-b300-… came as 9)."""
    if isinstance(uuid, str):
        return uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
    h = bytes(uuid).hex()
    if len(h) != 32:
        return ""
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def uuid_of_pci_bus(bus_id: str, nvml: Any = None) -> str:
    """NVML's UUID of the device at PCI `bus_id` ('0000:19:00.0', CUDA's form); "" when NVML cannot say."""
    try:
        if nvml is None:
            import pynvml as nvml  # lazy: nvidia-ml-py
        nvml.nvmlInit()
        uuid = nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByPciBusId(bus_id))
    except Exception:  # no NVML, or no device at that bus: the caller records no UUID
        return ""
    return uuid.decode() if isinstance(uuid, bytes) else str(uuid)


class NvmlDevice:
    """A thin reader over one NVML device handle (the boundary tests replace with a fake)."""

    def __init__(self, uuid: str | None = None, index: int = 0) -> None:
        import pynvml  # lazy: nvidia-ml-py

        self._nv = pynvml
        pynvml.nvmlInit()
        if uuid:
            self.handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
        else:
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        get = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        self._reasons = get or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
        self._pids: tuple[int, ...] = ()
        self._pids_t = -1.0

    def pids(self, max_age_s: float = 0.02) -> tuple[int, ...]:
        """Pids of the compute processes on the GPU, read at most every `max_age_s` ("" on an NVML error)."""
        now = time.perf_counter()
        if now - self._pids_t >= max_age_s:
            try:
                procs = self._nv.nvmlDeviceGetComputeRunningProcesses(self.handle)
                self._pids = tuple(sorted({int(p.pid) for p in procs}))
            except Exception:  # not supported on this driver / in this container: nothing recorded
                self._pids = ()
            self._pids_t = now
        return self._pids

    def read(self) -> Sample:
        nv, h = self._nv, self.handle
        return Sample(
            t=time.perf_counter(),
            sm_clock_hz=nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM) * 1e6,
            mem_clock_hz=nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM) * 1e6,
            power_w=nv.nvmlDeviceGetPowerUsage(h) / 1e3,
            temperature_c=float(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
            reasons=int(self._reasons(h)),
            pids=self.pids(),
        )

    def driver_version(self) -> str:
        v = self._nv.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)

    def max_sm_clock_hz(self) -> float:
        return self._nv.nvmlDeviceGetMaxClockInfo(self.handle, self._nv.NVML_CLOCK_SM) * 1e6


@dataclass
class NvmlSampler:
    """Samples a device every `interval_s` on a background thread; `window()` brackets one point.

    Use as a context manager around a sweep, and `with sampler.window() as w:` around each point; `w.summary`
    holds the point's ClockSummary afterwards.
    """

    uuid: str | None = None
    interval_s: float = 0.005
    device: Any = None  # an NvmlDevice, or a fake with .read()
    warning: str = ""
    _samples: list[Sample] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        return self.device is not None

    def open(self) -> NvmlSampler:
        if self.device is None and not self.warning:
            try:
                self.device = NvmlDevice(self.uuid)
            except Exception as exc:  # ImportError, NVMLError_LibraryNotFound, driver errors
                self.warning = f"NVML unavailable ({type(exc).__name__}: {exc}); clock columns left empty"
                self.device = None
        if self.device is not None and self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=1.0)
            self._thread = None

    def __enter__(self) -> NvmlSampler:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read(self) -> None:
        try:
            sample = self.device.read()
        except Exception as exc:  # a transient NVML error must not stop the measurement
            if not self.warning:
                self.warning = f"NVML read failed ({type(exc).__name__}: {exc})"
            return
        with self._lock:
            self._samples.append(sample)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._read()

    def window(self, calibration_sm_clock_hz: float = float("nan")) -> _Window:
        return _Window(self, calibration_sm_clock_hz)


class _Window:
    def __init__(self, sampler: NvmlSampler, calibration_sm_clock_hz: float) -> None:
        self.sampler = sampler
        self.calibration_sm_clock_hz = calibration_sm_clock_hz
        self.summary = ClockSummary()
        self.samples: list[Sample] = []

    def __enter__(self) -> _Window:
        s = self.sampler
        if s.enabled:
            with s._lock:
                s._samples.clear()
        return self

    def __exit__(self, *exc: object) -> None:
        s = self.sampler
        if not s.enabled:
            return
        s._read()  # at least one sample per point, however short
        with s._lock:
            self.samples = list(s._samples)
            s._samples.clear()
        self.summary = summarize(self.samples, self.calibration_sm_clock_hz)
