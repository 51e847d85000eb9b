"""olc-core: the runtime of the olc kernel families.

Public surface: :class:`Session`, :func:`registered_kernels`, :class:`KernelRegistration`,
:data:`hookimpl`, SIMD detection (:func:`simd_level`, :func:`cpu_features`, :func:`simd_cap`),
:mod:`olc_core.tuning`, :func:`get_include`, the graph-pass records (:class:`GraphPass`,
:class:`GraphPassContext`, :class:`Rewrite`, :func:`graph_passes`) and the exceptions.
"""

from __future__ import annotations

import os

from . import _native, tuning
from .errors import DispatchConflictError, InvalidModelError, NoKernelError, OlcError
from .graph_passes import FUSED_DOMAIN, GraphPass, GraphPassContext, Rewrite
from .hookspecs import ENTRY_POINT_GROUP, hookimpl
from .registration import KernelRegistration
from .registry import (
    graph_passes,
    load_extension,
    plugin_load_errors,
    plugins,
    register_plugin,
    registered_kernels,
    unregister_plugin,
)
from .session import NodeArg, NodeInfo, PlanEntry, ProfileRecord, Session
from .simd import SIMD_LEVELS, cpu_features, detected_simd_level, simd_cap, simd_level
from .threads import default_thread_count

_native._set_error_type(OlcError)

__version__ = "0.1.0"
ABI_VERSION: int = _native.ABI_VERSION


def get_include() -> str:
    """The folder holding ``olc/kernel_abi.h`` and ``olc/python_api.h``, for building families."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")


def get_cmake_dir() -> str:
    """The folder holding ``OlcFamily.cmake``, for CMake builds outside scikit-build-core."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "cmake")


__all__ = [
    "ABI_VERSION",
    "ENTRY_POINT_GROUP",
    "FUSED_DOMAIN",
    "SIMD_LEVELS",
    "DispatchConflictError",
    "GraphPass",
    "GraphPassContext",
    "InvalidModelError",
    "KernelRegistration",
    "NoKernelError",
    "NodeArg",
    "NodeInfo",
    "OlcError",
    "PlanEntry",
    "ProfileRecord",
    "Rewrite",
    "Session",
    "cpu_features",
    "default_thread_count",
    "detected_simd_level",
    "get_cmake_dir",
    "get_include",
    "graph_passes",
    "hookimpl",
    "load_extension",
    "plugin_load_errors",
    "plugins",
    "register_plugin",
    "registered_kernels",
    "simd_cap",
    "simd_level",
    "tuning",
    "unregister_plugin",
]
