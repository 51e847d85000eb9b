"""What olc-core ships for building kernel families: headers and OlcFamily.cmake."""

from __future__ import annotations

import os
from importlib import metadata

import olc_core


def test_headers_are_shipped():
    inc = olc_core.get_include()
    assert os.path.isfile(os.path.join(inc, "olc", "kernel_abi.h"))
    assert os.path.isfile(os.path.join(inc, "olc", "python_api.h"))


def test_cmake_module_is_shipped_next_to_the_headers():
    cmake_dir = olc_core.get_cmake_dir()
    module = os.path.join(cmake_dir, "OlcFamily.cmake")
    assert os.path.isfile(module)
    # The module locates the headers relative to itself.
    assert os.path.samefile(os.path.join(cmake_dir, os.pardir, "include"), olc_core.get_include())
    with open(module, encoding="utf-8") as f:
        text = f.read()
    assert "function(olc_add_kernel_extension" in text


def test_cmake_module_entry_point_names_the_cmake_folder():
    # scikit-build-core adds the folder of each "cmake.module" entry point to
    # CMAKE_MODULE_PATH; families rely on it for include(OlcFamily).
    eps = [ep for ep in metadata.entry_points(group="cmake.module") if ep.name == "olc_core"]
    assert len(eps) == 1
    module = eps[0].load()
    assert os.path.samefile(os.path.dirname(module.__file__), olc_core.get_cmake_dir())
