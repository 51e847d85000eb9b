"""The default size of a session's thread pool: the physical cores this process may use."""

from __future__ import annotations

import functools
import os


@functools.cache
def default_thread_count() -> int:
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)
    cores = set()
    for cpu in cpus:
        base = f"/sys/devices/system/cpu/cpu{cpu}/topology"
        try:
            with open(f"{base}/core_id") as f:
                core = f.read().strip()
            with open(f"{base}/physical_package_id") as f:
                package = f.read().strip()
        except OSError:
            # No topology information: count logical CPUs.
            return max(1, len(cpus))
        cores.add((package, core))
    return max(1, len(cores))
