"""Shared by the benchmark scripts: a one-line description of the machine."""

from __future__ import annotations

import os
import platform

import numpy as np


def machine() -> str:
    """CPU model, core count, Python and numpy versions."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"numpy {np.__version__}")
