// What the adapters share (cm_adapter.cc: creation, the normalizations and
// activations; cm_adapter_ops.cc: the other operators): the kernel state
// made at creation and the run context. Compiled without ISA flags.
#ifndef OLC_CONTRIB_MICROSOFT_CM_ADAPTER_STATE_H_
#define OLC_CONTRIB_MICROSOFT_CM_ADAPTER_STATE_H_

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "cm_common.h"
#include "olc/kernel_abi.h"

namespace olc_cm {

extern const olc_core_api* g_api;
constexpr const char* kLibrary = "olc_contrib_microsoft";
constexpr int kMaxInputs = 15;

enum class Op {
  SkipLN, SkipSLN, BiasGelu, FastGelu, QuickGelu, Gelu, BiasAdd,
  EmbedLN, BiasSoftmax, CDist, GatherBQ, MoE, QMoE
};

// The immutable state of one node's kernel, validated at creation.
struct KernelState {
  Op op;
  const char* name;
  bool naive = false;
  int32_t n_inputs = 0;
  int32_t in_dtype[kMaxInputs] = {};  // the type each input must have at run (UNDEFINED: absent)
  bool present[kMaxInputs] = {};
  bool want[4] = {false, false, false, false};  // outputs to produce
  int32_t dtype = OLC_DTYPE_UNDEFINED;          // the float type T (GatherBlockQuantized: its output)
  int dt = kF32;                                // dtype as a Storage index
  // SkipLayerNormalization family, EmbedLayerNormalization, QuickGelu
  float epsilon = 1e-12f;
  float alpha = 1.702f;
  // BiasSoftmax
  int64_t axis = 1;
  int64_t inner_broadcast = -1;  // the required attribute; -1 until set
  // CDist: metric, and B packed at creation when it is a constant
  bool euclidean = false;
  bool b_packed = false;
  int64_t b_rows = 0, b_cols = 0;
  int cdist_nv = 1;
  std::vector<unsigned char> packed_b;  // panels
  std::vector<unsigned char> b_ss;      // squared norms, padded to whole panels
  // GatherBlockQuantized
  int64_t gather_axis = 0, quantize_axis = 1, block_size = 128, bits = 4;
  int qfmt = kQP4;
  int32_t default_zp = 0;
  // MoE, QMoE
  int64_t moe_k = 1;
  int64_t normalize_routing = 0;
  MoeAct moe_act{kMoeRelu, kMoeSeparate, 1.0f, 0.0f, 0.0f};
  int64_t fc_bits[3] = {4, 4, 4};  // QMoE: FC1, FC2, FC3
  int64_t moe_block_size = 0;      // QMoE: 0 = one scale per row
  // optimized kernels and their scheduling
  const IsaKernels* k = nullptr;
  const char* isa = "naive";
  const olc_tuning_param* parallel_min_elements = nullptr;
  const olc_tuning_param* grain_elements = nullptr;
  const olc_tuning_param* direct_max_rows = nullptr;
};

// Run context: formats the error of this run.
struct Ctx {
  const KernelState* st;
  olc_context* ctx;
  char msg[512];
  int32_t err(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return g_api->set_error(ctx, msg);
  }
};

std::string shape_str(int32_t ndim, const int64_t* shape);
const char* input_name(Op op, int i);
bool same_shape(const olc_tensor& a, const olc_tensor& b);
// Product of shape[begin, end) (0 <= begin <= end <= ndim).
int64_t dims_product(const olc_tensor& t, int32_t begin, int32_t end);
// A float parameter as float32: its own data for float32, else a converted copy.
const float* param_f32(const KernelState* st, const olc_tensor& p, std::vector<float>* buf);
// Work of `n` elements is split over the executor when it reaches the
// node's parallel_min_elements and the session has more than one thread.
bool go_parallel(const KernelState* st, olc_context* ctx, int64_t n);

// The runs of cm_adapter_ops.cc.
int32_t run_embed(Ctx& c, const olc_tensor* in, int32_t n_inputs);
int32_t run_bias_softmax(Ctx& c, const olc_tensor* in, int32_t n_inputs);
int32_t run_cdist(Ctx& c, const olc_tensor* in, int32_t n_inputs);
int32_t run_gather_bq(Ctx& c, const olc_tensor* in, int32_t n_inputs);
int32_t run_moe(Ctx& c, const olc_tensor* in, int32_t n_inputs);
// CDist's creation step: packs a constant B (returns false with error set).
bool cdist_prepare(KernelState* st, const olc_node_info* node, char* error, size_t es);

}  // namespace olc_cm

#endif  // OLC_CONTRIB_MICROSOFT_CM_ADAPTER_STATE_H_
