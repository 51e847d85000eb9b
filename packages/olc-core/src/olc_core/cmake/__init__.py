"""CMake support shipped with olc-core: ``OlcFamily.cmake``.

scikit-build-core puts this folder on ``CMAKE_MODULE_PATH`` through
olc-core's ``cmake.module`` entry point, so a kernel family's
``CMakeLists.txt`` only says ``include(OlcFamily)``.
"""
