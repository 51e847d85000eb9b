"""The plugin hooks olc-core calls. Families and third parties implement them.

A plugin is a module (or object) registered under the entry-point group
``olc.kernels``; it implements the hooks below, decorated with
:data:`olc_core.hookimpl`. Hooks are called with keyword arguments.
"""

from __future__ import annotations

from collections.abc import Sequence

import pluggy

from .registration import KernelRegistration

PROJECT_NAME = "olc"
ENTRY_POINT_GROUP = "olc.kernels"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def olc_register_kernels() -> Sequence[KernelRegistration]:
    """Return the kernels this plugin provides.

    Called once per process when the dispatch table is first built. Every
    returned record joins the dispatch table; a conflict between records of
    equal priority covering the same operator, opset and types is an error
    that names both kernels.
    """
    raise NotImplementedError
