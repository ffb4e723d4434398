"""GPU figures through NVML (pynvml, package nvidia-ml-py), with a clean "no NVML" state.

`NvmlReader.read()` returns one dict per GPU in the heartbeat's shape, or None when NVML is not
usable here (no library, no driver: a laptop or CI). The first failure is logged once and the
reader stops trying, so a machine without a GPU costs nothing per sample.
"""

from __future__ import annotations

import contextlib
import logging
from types import ModuleType
from typing import Any

import pynvml

log = logging.getLogger("gpu_agent.nvml")


class NvmlReader:
    def __init__(self, library: ModuleType | Any = pynvml) -> None:
        # The library is a parameter so the "NVML present but broken" path can be tested
        # on machines that have a driver.
        self._nvml = library
        self._state: str | None = None  # None: not tried yet; "ok"; "none"
        self.error = ""

    @property
    def available(self) -> bool:
        if self._state is None:
            self._init()
        return self._state == "ok"

    def _init(self) -> None:
        try:
            self._nvml.nvmlInit()
        except self._nvml.NVMLError as exc:
            self._state = "none"
            self.error = f"NVML unavailable: {exc}"
            log.info("%s; GPU figures will be reported with gpu_source 'none'", self.error)
            return
        self._state = "ok"

    def read(self) -> list[dict[str, Any]] | None:
        if not self.available:
            return None
        nvml = self._nvml
        try:
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as exc:
            log.warning("NVML device count failed: %s", exc)
            return None
        return [self._device(nvml, index) for index in range(count)]

    @staticmethod
    def _device(nvml: Any, index: int) -> dict[str, Any]:
        # Each figure separately: a GPU that does not report power (some SKUs, MIG) still
        # reports the rest.
        handle = nvml.nvmlDeviceGetHandleByIndex(index)

        def get(fn: Any, *args: Any) -> Any:
            try:
                return fn(handle, *args)
            except nvml.NVMLError:
                return None

        name = get(nvml.nvmlDeviceGetName)
        util = get(nvml.nvmlDeviceGetUtilizationRates)
        memory = get(nvml.nvmlDeviceGetMemoryInfo)
        power_mw = get(nvml.nvmlDeviceGetPowerUsage)
        temp = get(nvml.nvmlDeviceGetTemperature, nvml.NVML_TEMPERATURE_GPU)
        clock = get(nvml.nvmlDeviceGetClockInfo, nvml.NVML_CLOCK_SM)
        return {
            "index": index,
            "name": name.decode() if isinstance(name, bytes) else name,
            "util": None if util is None else util.gpu / 100.0,
            "mem_used_bytes": None if memory is None else int(memory.used),
            "mem_total_bytes": None if memory is None else int(memory.total),
            "power_w": None if power_mw is None else power_mw / 1000.0,
            "temp_c": None if temp is None else float(temp),
            "sm_clock_mhz": clock,
        }

    def close(self) -> None:
        if self._state == "ok":
            with contextlib.suppress(self._nvml.NVMLError):
                self._nvml.nvmlShutdown()
            self._state = None
