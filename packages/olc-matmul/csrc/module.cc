// The olc_matmul._ext module: imports olc-core's API table at init and
// hands out one kernel vtable capsule per operator.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>

#include "adapter_util.h"
#include "conv_adapter.h"
#include "einsum_adapter.h"
#include "float_adapter.h"
#include "int_adapter.h"
#include "nbits_adapter.h"
#include "qconv_adapter.h"
#include "rnn_adapter.h"
#include "gemm_driver.h"
#include "olc/python_api.h"

namespace py = pybind11;

namespace olc_mm {
namespace {
const olc_core_api* g_core = nullptr;
}
const olc_core_api* core_api() { return g_core; }
void set_core_api(const olc_core_api* api) { g_core = api; }
namespace avx512 {
double fma_peak_gflops(int64_t iters);
}
namespace avx2 {
double fma_peak_gflops(int64_t iters);
}
}  // namespace olc_mm

PYBIND11_MODULE(_ext, m) {
  m.doc() = "olc matmul kernels (Gemm, MatMul, Einsum, Conv, LSTM, GRU, RNN, ...): vtables for olc-core";
  try {
    py::module_::import("olc_core._native");
  } catch (py::error_already_set& e) {
    throw py::import_error(std::string("olc_matmul: cannot import olc-core's native module olc_core._native: ") +
                           e.what());
  }
  const olc_core_api* api = olc_import_core_api();
  if (!api) throw py::error_already_set();
  if (api->api_size < offsetof(olc_core_api, record_usage_detail) + sizeof(api->record_usage_detail)) {
    throw py::import_error("olc_matmul: the installed olc-core API table is too small (api_size " +
                           std::to_string(api->api_size) + "); upgrade olc-core");
  }
  olc_mm::set_core_api(api);
  olc_mm::set_float_api(api);
  olc_mm::set_int_api(api);
  olc_mm::set_nbits_api(api);
  olc_mm::set_einsum_api(api);
  olc_mm::set_conv_api(api);
  olc_mm::set_qconv_api(api);
  olc_mm::set_recurrent_api(api);
  // The defaults this host's caches give (float32 at the level in force),
  // declared now so that `olc info` lists them before any session exists;
  // kernels declare the same keys with the same defaults when created.
  {
    const char* isa = olc_mm::select_kernels(api).isa_name;
    const olc_mm::GemmTuning t = olc_mm::default_gemm_tuning(OLC_DTYPE_FLOAT);
    for (const char* kernel : {"MatMul", "Gemm"}) {
      api->tuning_declare_int("olc_matmul", kernel, isa, OLC_DTYPE_FLOAT, "kc", t.kc);
      api->tuning_declare_int("olc_matmul", kernel, isa, OLC_DTYPE_FLOAT, "nc", t.nc);
    }
    api->tuning_declare_int("olc_matmul", "Conv", isa, OLC_DTYPE_FLOAT, "stream_min_bytes",
                            olc_mm::conv_stream_min_bytes(olc_mm::cache_info()));
    api->tuning_declare_int("olc_matmul", "Conv", isa, OLC_DTYPE_FLOAT, "gemv_split_min_bytes",
                            olc_mm::conv_gemv_split_min_bytes(olc_mm::cache_info()));
  }

  m.def(
      "vtable",
      [](const std::string& op) {
        const olc_kernel_vtable* vt = nullptr;
        if (op == "Gemm") vt = olc_mm::gemm_vtable();
        else if (op == "MatMul") vt = olc_mm::matmul_vtable();
        else if (op == "MatMulInteger") vt = olc_mm::matmul_integer_vtable();
        else if (op == "QLinearMatMul") vt = olc_mm::qlinear_matmul_vtable();
        else if (op == "MatMulNBits") vt = olc_mm::matmul_nbits_vtable();
        else if (op == "FusedMatMul") vt = olc_mm::fused_matmul_vtable();
        else if (op == "MatMulAdd") vt = olc_mm::matmul_add_vtable();
        else if (op == "MatMulIntegerToFloat") vt = olc_mm::matmul_integer_to_float_vtable();
        else if (op == "DynamicQuantizeMatMul") vt = olc_mm::dynamic_quantize_matmul_vtable();
        else if (op == "Einsum") vt = olc_mm::einsum_vtable();
        else if (op == "Conv") vt = olc_mm::conv_vtable();
        else if (op == "FusedConv") vt = olc_mm::fused_conv_vtable();
        else if (op == "ConvTranspose") vt = olc_mm::conv_transpose_vtable();
        else if (op == "QLinearConv") vt = olc_mm::qlinear_conv_vtable();
        else if (op == "ConvInteger") vt = olc_mm::conv_integer_vtable();
        else if (op == "LSTM") vt = olc_mm::lstm_vtable();
        else if (op == "GRU") vt = olc_mm::gru_vtable();
        else if (op == "RNN") vt = olc_mm::rnn_vtable();
        else if (op == "DynamicQuantizeLSTM") vt = olc_mm::dynamic_quantize_lstm_vtable();
        if (!vt) throw py::key_error("olc_matmul has no kernel for op " + op);
        return py::reinterpret_steal<py::object>(olc_kernel_capsule(vt));
      },
      py::arg("op_type"), "The kernel vtable capsule of op_type (a KernelRegistration factory).");
  m.def("prepacked_bytes", &olc_mm::packed_bytes_live, "Bytes held by live packed constant weights.");
  m.def(
      "cache_info",
      []() {
        const olc_mm::CacheInfo& c = olc_mm::cache_info();
        py::dict d;
        d["l1d_bytes"] = c.l1d;
        d["l1d_sharers"] = c.l1d_sharers;
        d["l2_bytes"] = c.l2;
        d["l2_sharers"] = c.l2_sharers;
        d["l3_bytes"] = c.l3;
        d["l3_sharers"] = c.l3_sharers;
        return d;
      },
      "CPU 0's data caches, which the GEMM blocking and Conv streaming derive from (the core API's "
      "data_cache_bytes, from sysfs; 0: unknown).");
  m.def(
      "gemm_blocking",
      [](int64_t l1d, int l1d_sharers, int64_t l2, int l2_sharers, bool float64) {
        olc_mm::CacheInfo c;
        c.l1d = l1d;
        c.l1d_sharers = l1d_sharers;
        c.l2 = l2;
        c.l2_sharers = l2_sharers;
        const olc_mm::GemmTuning t = olc_mm::gemm_tuning_for_caches(c, float64 ? OLC_DTYPE_DOUBLE : OLC_DTYPE_FLOAT);
        return py::make_tuple(t.kc, t.nc);
      },
      py::arg("l1d"), py::arg("l1d_sharers"), py::arg("l2"), py::arg("l2_sharers"), py::arg("float64") = false,
      "(kc, nc) the GEMM defaults take for these caches (bytes, logical CPUs sharing each).");
  m.def(
      "conv_stream_min_bytes",
      [](int64_t l3) {
        olc_mm::CacheInfo c;
        c.l3 = l3;
        return olc_mm::conv_stream_min_bytes(c);
      },
      py::arg("l3"), "The Conv stream_min_bytes default for an L3 of l3 bytes (0: unknown).");
  m.def(
      "conv_gemv_split_min_bytes",
      [](int64_t l2) {
        olc_mm::CacheInfo c;
        c.l2 = l2;
        return olc_mm::conv_gemv_split_min_bytes(c);
      },
      py::arg("l2"), "The Conv gemv_split_min_bytes default for an L2 of l2 bytes (0: unknown).");
  m.def(
      "fma_peak_gflops",
      [](int64_t iters, const std::string& isa) {
        const uint64_t f = olc_mm::core_api()->cpu_features();
        if (isa == "avx512") {
          if (!(f & OLC_CPU_AVX512F)) return 0.0;
          py::gil_scoped_release nogil;
          return olc_mm::avx512::fma_peak_gflops(iters);
        }
        if (isa == "avx2") {
          if (!(f & OLC_CPU_AVX2) || !(f & OLC_CPU_FMA)) return 0.0;
          py::gil_scoped_release nogil;
          return olc_mm::avx2::fma_peak_gflops(iters);
        }
        throw py::value_error("fma_peak_gflops: isa must be 'avx512' or 'avx2', got '" + isa + "'");
      },
      py::arg("iters") = 20000000, py::arg("isa") = "avx512",
      "Single-thread float32 FMA peak in GFLOP/s of the given ISA (avx512: zmm, avx2: ymm), measured "
      "(0 where cpu_features() lacks it).");
}
