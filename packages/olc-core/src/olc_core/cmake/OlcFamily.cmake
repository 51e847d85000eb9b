# The build settings every olc kernel family shares, shipped in the olc-core
# wheel. A family's CMakeLists.txt:
#
#   cmake_minimum_required(VERSION 3.18)
#   project(my_family LANGUAGES CXX)
#   include(OlcFamily)
#   olc_add_kernel_extension(_ext PACKAGE my_family SOURCES csrc/module.cc csrc/k_avx512.cc)
#   set_source_files_properties(csrc/k_avx512.cc PROPERTIES COMPILE_OPTIONS "${OLC_AVX512_FLAGS}")
#
# scikit-build-core finds this file through olc-core's "cmake.module" entry
# point (olc-core must be a build requirement). Any other CMake run adds
# olc_core.get_cmake_dir() to CMAKE_MODULE_PATH.

include_guard(GLOBAL)

set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE Release)
endif()

find_package(Python REQUIRED COMPONENTS Interpreter Development.Module)
# Before pybind11: it would otherwise turn on -flto, which may merge an
# AVX-512 copy of an inline function into code that must run anywhere.
set(CMAKE_INTERPROCEDURAL_OPTIMIZATION OFF)
find_package(pybind11 CONFIG REQUIRED)

# The kernel ABI headers sit next to this file in the olc-core package.
get_filename_component(_olc_core_include "${CMAKE_CURRENT_LIST_DIR}/../include" ABSOLUTE)
set(OLC_CORE_INCLUDE "${_olc_core_include}" CACHE PATH "Folder holding olc/kernel_abi.h")
if(NOT EXISTS "${OLC_CORE_INCLUDE}/olc/kernel_abi.h")
  message(FATAL_ERROR "olc/kernel_abi.h not found under OLC_CORE_INCLUDE=${OLC_CORE_INCLUDE}")
endif()

# OLC_SANITIZE: OFF; ON or "address" (AddressSanitizer + UBSan); "thread"
# (ThreadSanitizer, which cannot be combined with ASan). OLC_SANITIZE_FLAGS
# holds the matching -fsanitize= flag for targets a family adds itself.
set(OLC_SANITIZE OFF CACHE STRING "OFF, ON/address (ASan + UBSan) or thread (TSan)")
if(OLC_SANITIZE STREQUAL "thread")
  set(OLC_SANITIZE_FLAGS "-fsanitize=thread")
elseif(OLC_SANITIZE STREQUAL "address" OR OLC_SANITIZE)
  set(OLC_SANITIZE_FLAGS "-fsanitize=address,undefined")
else()
  set(OLC_SANITIZE_FLAGS "")
endif()

# Per-file ISA flags for the SIMD variants. The AVX-512 set is the one every
# AVX-512 level of olc_core.simd_level() guarantees; FMA and the float16
# conversions come with AVX-512F itself. Extensions (BF16, VNNI, FP16) are
# added per file and entered only when cpu_features() reports them.
set(OLC_AVX2_FLAGS "-mavx2;-mfma;-mf16c")
set(OLC_AVX512_FLAGS "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq")

# olc_add_kernel_extension(<target> PACKAGE <python package> SOURCES <files>...)
# A pybind11 module installed into <python package>, with the family's csrc/
# and the kernel ABI headers on its include path.
function(olc_add_kernel_extension target)
  cmake_parse_arguments(ARG "" "PACKAGE" "SOURCES" ${ARGN})
  if(NOT ARG_PACKAGE OR NOT ARG_SOURCES)
    message(FATAL_ERROR "olc_add_kernel_extension(${target}) needs PACKAGE and SOURCES")
  endif()
  pybind11_add_module(${target} ${ARG_SOURCES})
  target_include_directories(${target} PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}/csrc" "${OLC_CORE_INCLUDE}")
  # -Wno-maybe-uninitialized: GCC 12 false positives on _mm*_undefined_*
  # inside intrinsics headers.
  target_compile_options(${target} PRIVATE -O3 -Wall -Wextra -Wno-unused-parameter -Wno-maybe-uninitialized)
  if(OLC_SANITIZE_FLAGS)
    # -O1 after the -O3 above: instrumented -O3 builds of the large template
    # kernels take ten times longer to compile (mm_avx512.cc with ASan + UBSan:
    # 343 s at -O3, 29 s at -O1) and find no more; -O1 is what ASan suggests.
    target_compile_options(${target} PRIVATE ${OLC_SANITIZE_FLAGS} -O1 -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE ${OLC_SANITIZE_FLAGS})
  endif()
  install(TARGETS ${target} LIBRARY DESTINATION ${ARG_PACKAGE})
endfunction()
