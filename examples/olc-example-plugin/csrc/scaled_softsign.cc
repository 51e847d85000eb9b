// The ScaledSoftsign kernel: attribute validation in create(), input
// validation before the output is allocated in run(), and the element loop
// split into ranges through the core executor (the kernel never makes
// threads of its own).
#include "scaled_softsign.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>

namespace olc_example {
namespace {

const olc_core_api* g_api = nullptr;
// Minimum elements per parallel range; listed by `olc info`, overridable
// through olc-core's tuning registry.
olc_tuning_param* g_grain = nullptr;

constexpr int64_t kDefaultGrain = 16384;

struct State {
  float alpha;
};

struct RangeArgs {
  const float* x;
  float* y;
  float alpha;
};

// y = alpha * x / (1 + |x|); the limit at +-inf is +-alpha (the plain
// formula would give inf/inf = NaN). NaN stays NaN. Branch-free, so the
// compiler vectorizes it.
void compute_range(void* user, int64_t begin, int64_t end) {
  const RangeArgs* a = static_cast<const RangeArgs*>(user);
  const float* x = a->x;
  float* y = a->y;
  const float alpha = a->alpha;
  for (int64_t i = begin; i < end; ++i) {
    const float v = x[i];
    const float ax = std::fabs(v);
    const float s = std::isinf(v) ? std::copysign(1.0f, v) : v / (1.0f + ax);
    y[i] = alpha * s;
  }
}

void write_error(char* error, size_t size, const char* msg) {
  if (error != nullptr && size > 0) std::snprintf(error, size, "%s", msg);
}

void* create(const olc_core_api* api, const olc_node_info* node, char* error, size_t error_size) {
  char msg[256];
  if (node->n_inputs != 1 || node->n_outputs != 1) {
    std::snprintf(msg, sizeof msg, "ScaledSoftsign takes 1 input and 1 output, node has %d and %d",
                  node->n_inputs, node->n_outputs);
    write_error(error, error_size, msg);
    return nullptr;
  }
  if (node->input_dtypes[0] != OLC_DTYPE_FLOAT) {
    std::snprintf(msg, sizeof msg, "ScaledSoftsign supports float32 only, input has ONNX type %d",
                  node->input_dtypes[0]);
    write_error(error, error_size, msg);
    return nullptr;
  }
  double alpha = 1.0;
  for (int32_t i = 0; i < node->n_attributes; ++i) {
    const olc_attribute& a = node->attributes[i];
    if (std::strcmp(a.name, "alpha") != 0) {
      std::snprintf(msg, sizeof msg, "ScaledSoftsign has no attribute '%s' (only alpha)", a.name);
      write_error(error, error_size, msg);
      return nullptr;
    }
    if (a.type != OLC_ATTR_FLOAT) {
      write_error(error, error_size, "ScaledSoftsign attribute alpha must be a float");
      return nullptr;
    }
    alpha = a.f;
  }
  if (!std::isfinite(alpha)) {
    write_error(error, error_size, "ScaledSoftsign attribute alpha must be finite");
    return nullptr;
  }
  State* s = new (std::nothrow) State{static_cast<float>(alpha)};
  if (s == nullptr) write_error(error, error_size, "out of memory");
  return s;
}

int32_t run(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* inputs, int32_t n_outputs) {
  const State* s = static_cast<const State*>(state);
  if (n_inputs != 1 || n_outputs != 1) return g_api->set_error(ctx, "expected 1 input and 1 output");
  const olc_tensor& x = inputs[0];
  if (x.dtype != OLC_DTYPE_FLOAT) return g_api->set_error(ctx, "input must be float32");
  const int64_t n = olc_element_count(&x);
  if (n < 0) return g_api->set_error(ctx, "negative dimension in input shape, or input too large");
  if (n > 0 && x.data == nullptr) return g_api->set_error(ctx, "input has no data");

  void* out = g_api->allocate_output(ctx, 0, OLC_DTYPE_FLOAT, x.ndim, x.shape);
  if (out == nullptr && n > 0) return OLC_ERROR;  // allocate_output has set the error
  if (n == 0) return OLC_OK;

  RangeArgs args{static_cast<const float*>(x.data), static_cast<float*>(out), s->alpha};
  int64_t grain = g_grain != nullptr ? g_api->tuning_read_int(g_grain) : kDefaultGrain;
  if (grain < 1) grain = 1;
  g_api->parallel_for(ctx, n, grain, 0, compute_range, &args);
  return OLC_OK;
}

void destroy(void* state) { delete static_cast<State*>(state); }

}  // namespace

void scaled_softsign_init(const olc_core_api* api) {
  g_api = api;
  g_grain = api->tuning_declare_int("olc_example", "ScaledSoftsign", "scalar", OLC_DTYPE_FLOAT, "grain",
                                    kDefaultGrain);
}

// Element i is read before it is written, so the output may reuse the input.
const olc_kernel_vtable kScaledSoftsignVtable = {
    OLC_ABI_VERSION, OLC_KERNEL_INPLACE_INPUT0, "olc_example::ScaledSoftsign", create, run, destroy,
};

}  // namespace olc_example
