// The portable GEMM driver: plan (algorithm, blocking, 2-D thread
// partition), packing, and the calls into one level's microkernels.
#ifndef OLC_MATMUL_GEMM_DRIVER_H_
#define OLC_MATMUL_GEMM_DRIVER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mm_common.h"
#include "olc/kernel_abi.h"

namespace olc_mm {

// The kernels a node uses, chosen once at create() from the capped level.
struct KernelSet {
  const IsaKernels* isa;  // float kernels
  const char* isa_name;
  UKernelBf16 uk_bf16;    // NULL: bfloat16 runs through float32 panels
  int mr_bf16, nr_bf16;
  bool amx_bf16;          // AMX tiles for the full 32 x 32 blocks of a bfloat16 GEMM
};
KernelSet select_kernels(const olc_core_api* api);

// Layouts of packed B.
enum class PackLayout : int32_t {
  kF32 = 1,   // float32 panels (float32, float16 and bfloat16 inputs)
  kF64 = 2,   // float64 panels
  kBf16 = 3,  // bfloat16 k-pair panels for vdpbf16ps
  kInt = 4,   // integer group panels (MatMulInteger, QLinearMatMul)
  kNBits = 5, // MatMulNBits weights in the kernel's block layout
  kQ8Rows = 6, // int8 codes in panels of nr columns, K rows each (a quantized LSTM R)
};

// B (one or more matrices) packed into the microkernel layout: per matrix,
// ceil(N / nr) panels, each K (or K pairs) x nr, zero padded.
struct PackedB {
  PackLayout layout;
  int nr;
  int64_t K, N, nmat;
  int64_t panel_stride;  // elements between panels
  int64_t mat_stride;    // elements between matrices
  size_t bytes;
  void* data;
  PackedB() = default;
  PackedB(const PackedB&) = delete;
  PackedB& operator=(const PackedB&) = delete;
  ~PackedB();
};

// A problem: C[M, N] = alpha * op(A) * op(B) + beta * bias, nbatch times.
// dtype is the element type of A, B and C (float32, float64, float16 or
// bfloat16); bias, when present, is in the compute type (float32 for all but
// float64) with strides (bias_rs, bias_cs) of the [M, N] broadcast.
struct GemmDesc {
  int32_t dtype;
  int64_t M, N, K;
  bool transA, transB;
  int64_t lda, ldb, ldc;
  double alpha, beta;
  const void* bias;
  int64_t bias_rs, bias_cs;
};

struct GemmBatch {
  int64_t n;
  const void* const* a;  // n pointers
  const void* const* b;  // n pointers (unused with packed B)
  const int64_t* b_mat;  // with packed B: the packed matrix of each entry
  void* const* c;        // n pointers
  const PackedB* packed; // NULL: B is packed at run time
};

struct GemmTuning {
  int64_t parallel_min_macs;
  int64_t kc, nc;
  int64_t split_k_min;
  int64_t gemv_max;  // M or N up to this: the GEMV family (B not prepacked)
  int64_t direct_b_max_mblocks;
  int64_t direct_a;  // 1: a row-major float32/float64 A is read in place, not packed
  // Prepacked B walked panel by panel while a task's K block of A (bytes)
  // is at most this (it must stay in L2 across the panels), else row block
  // by row block.
  int64_t panel_walk_max_a = 256 << 10;
};
// Data cache sizes of CPU 0 as Linux reports them (sysfs), with the number
// of logical CPUs sharing each; 0 where unknown (then fixed defaults).
struct CacheInfo {
  int64_t l1d = 0, l2 = 0, l3 = 0;
  int l1d_sharers = 1, l2_sharers = 1, l3_sharers = 1;
};
const CacheInfo& cache_info();

// Defaults for element type dtype, the blocking derived from the caches
// (of this host; of the given ones).
GemmTuning default_gemm_tuning(int32_t dtype);
GemmTuning gemm_tuning_for_caches(const CacheInfo& caches, int32_t dtype);

// Packs B (nmat matrices of [K, N], or [N, K] when transB, consecutive with
// stride mat_elems) for the kernel set. Returns NULL on allocation failure.
std::shared_ptr<PackedB> pack_b_constant(const KernelSet& ks, int32_t dtype, const void* B, bool transB,
                                         int64_t K, int64_t N, int64_t nmat);

// Runs the batch; returns a short description of the path taken.
const char* gemm_run(const olc_core_api* api, olc_context* ctx, const KernelSet& ks, const GemmTuning& tun,
                     const GemmDesc& d, const GemmBatch& b);

// An empty PackedB of `bytes` (64-byte aligned, counted in
// packed_bytes_live()); NULL on allocation failure.
std::shared_ptr<PackedB> make_packed(PackLayout layout, size_t bytes);

// Total bytes held by live PackedB objects.
int64_t packed_bytes_live();

}  // namespace olc_mm

#endif  // OLC_MATMUL_GEMM_DRIVER_H_
