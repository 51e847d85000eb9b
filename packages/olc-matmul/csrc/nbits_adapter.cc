// com.microsoft MatMulNBits: Y[..., N] = A[..., K] x dequant(B)^T (+ bias),
// B blockwise quantized to 2, 4 or 8 bits: B [N, k_blocks, blob_size]
// uint8, scales [N * k_blocks], zero points packed uint8 [N * ceil(k_blocks
// * bits / 8)] or float [N * k_blocks] (default 2^(bits - 1)), g_idx
// unsupported.
//   w[n, k] = (q[n, k] - zp[n, k / block]) * scale[n, k / block]
// accuracy_level 0 to 3, float32 activations: small M, a GEMV per
// activation row that dequantizes inside the dot product; larger M, each
// task dequantizes one K block of its columns into the float32
// microkernel's panel layout and runs the register-blocked kernel over all
// rows; the whole weight matrix is never expanded. accuracy_level 4: A is
// quantized to int8 per block and the products are integer
// (nbits_i8_driver.cc).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "adapter_util.h"
#include "gemm_driver.h"
#include "nbits_adapter.h"
#include "nbits_i8_driver.h"
#include "scratch.h"

namespace olc_mm {
namespace {

const olc_core_api* g_api = nullptr;

struct QuantParams {
  std::vector<float> scales;  // [N * kb]
  std::vector<float> zp;      // [N * kb], dequantized zero points
  std::vector<float> sz;      // scales * zp
  std::vector<float> nzs;     // -scales * zp
};

struct NbState {
  int64_t K, N, bits, bs, kb, blob, zp_bytes_per_row;
  int32_t a_type;
  int32_t zp_type;  // OLC_DTYPE_UNDEFINED: absent
  bool has_bias;
  KernelSet ks;
  int64_t gemv_max_m;
  // Precomputed from constant scales / zero points.
  bool quant_const = false;
  const void* const_scales = nullptr;
  const void* const_zp = nullptr;
  QuantParams qp;
  // accuracy_level 4: int8 activations; with a constant B (and constant
  // scales and zero points) the weights are packed once, here.
  bool int8 = false;
  NbI8Kernels i8{};
  NbZp zmode = NbZp::kDefault;
  std::shared_ptr<PackedB> i8pack;
  NbI8Weights i8w{};
  const void* const_b = nullptr;
  std::string detail_gemv, detail_gemm, detail_i8;
};

float to_f32(int32_t dtype, const void* p, int64_t i) {
  switch (dtype) {
    case OLC_DTYPE_FLOAT: return static_cast<const float*>(p)[i];
    case OLC_DTYPE_FLOAT16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case OLC_DTYPE_BFLOAT16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    default: return 0.0f;
  }
}

void build_quant(const NbState& st, const void* scales, const void* zp, QuantParams* qp) {
  const int64_t nkb = st.N * st.kb;
  qp->scales.resize(nkb);
  qp->zp.resize(nkb);
  qp->sz.resize(nkb);
  qp->nzs.resize(nkb);
  const float def = static_cast<float>(1 << (st.bits - 1));
  for (int64_t n = 0; n < st.N; ++n)
    for (int64_t b = 0; b < st.kb; ++b) {
      const int64_t i = n * st.kb + b;
      const float s = to_f32(st.a_type, scales, i);
      float z = def;
      if (zp && st.zp_type == OLC_DTYPE_UINT8) {
        // Packed like B: 8 / bits values per byte, low bits first.
        const uint8_t* zr = static_cast<const uint8_t*>(zp) + n * st.zp_bytes_per_row;
        const int64_t per = 8 / st.bits;
        z = static_cast<float>((zr[b / per] >> (st.bits * (b % per))) & ((1 << st.bits) - 1));
      } else if (zp) {
        z = to_f32(st.zp_type, zp, i);
      }
      qp->scales[i] = s;
      qp->zp[i] = z;
      qp->sz[i] = s * z;
      qp->nzs[i] = -(s * z);
    }
}

bool is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

void* nb_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t esize) {
  AttrReader ar{node, error, esize};
  if (!ar.check_known({"K", "N", "bits", "block_size", "accuracy_level"})) return nullptr;
  auto st = std::make_unique<NbState>();
  st->K = ar.get_int("K", -1);
  st->N = ar.get_int("N", -1);
  st->bits = ar.get_int("bits", 4);
  st->bs = ar.get_int("block_size", -1);
  const int64_t acc = ar.get_int("accuracy_level", 0);
  if (!ar.ok) return nullptr;
  if (st->K <= 0 || st->N <= 0)
    return fail_create(error, esize, "attributes K and N are required and must be positive, got K=%lld N=%lld",
                       (long long)st->K, (long long)st->N);
  if (st->bits != 2 && st->bits != 4 && st->bits != 8)
    return fail_create(error, esize, "unsupported bits=%lld (2, 4 and 8 are supported)", (long long)st->bits);
  if (!is_pow2(st->bs) || st->bs < 16 || st->bs > 256)
    return fail_create(error, esize, "block_size must be a power of two from 16 to 256, got %lld", (long long)st->bs);
  if (acc < 0 || acc > 4) return fail_create(error, esize, "accuracy_level must be 0 to 4, got %lld", (long long)acc);
  if (node->n_inputs < 3) return fail_create(error, esize, "expects at least 3 inputs, got %d", node->n_inputs);
  if (node->n_inputs > 4 && node->input_dtypes[4] != OLC_DTYPE_UNDEFINED)
    return fail_create(error, esize, "g_idx (input 4) is not supported");
  st->a_type = node->input_dtypes[0];
  if (st->a_type != OLC_DTYPE_FLOAT && st->a_type != OLC_DTYPE_FLOAT16 && st->a_type != OLC_DTYPE_BFLOAT16)
    return fail_create(error, esize, "A must be float32, float16 or bfloat16, got %s", olc_dtype_name(st->a_type));
  if (node->input_dtypes[1] != OLC_DTYPE_UINT8)
    return fail_create(error, esize, "B must be uint8, got %s", olc_dtype_name(node->input_dtypes[1]));
  if (node->input_dtypes[2] != st->a_type)
    return fail_create(error, esize, "scales must have A's type %s, got %s", olc_dtype_name(st->a_type),
                       olc_dtype_name(node->input_dtypes[2]));
  st->zp_type = node->n_inputs > 3 ? node->input_dtypes[3] : OLC_DTYPE_UNDEFINED;
  if (st->zp_type != OLC_DTYPE_UNDEFINED && st->zp_type != OLC_DTYPE_UINT8 && st->zp_type != st->a_type)
    return fail_create(error, esize, "zero_points must be uint8 or A's type, got %s", olc_dtype_name(st->zp_type));
  st->has_bias = node->n_inputs > 5 && node->input_dtypes[5] != OLC_DTYPE_UNDEFINED;
  if (st->has_bias && node->input_dtypes[5] != st->a_type)
    return fail_create(error, esize, "bias must have A's type");
  st->kb = st->K / st->bs + (st->K % st->bs != 0);  // ceil without K + bs - 1 (K may be INT64_MAX)
  st->blob = st->bs * st->bits / 8;
  // Every count derived from K and N (B's bytes N * k_blocks * blob, the
  // scales, the zero points) must fit in int64: a model may declare any K, N.
  int64_t scale_count = 0, b_bytes = 0;
  if (__builtin_mul_overflow(st->N, st->kb, &scale_count) || __builtin_mul_overflow(scale_count, st->blob, &b_bytes))
    return fail_create(error, esize, "K=%lld and N=%lld are too large: B would hold more than 2^63 bytes",
                       (long long)st->K, (long long)st->N);
  st->zp_bytes_per_row = (st->kb * st->bits + 7) / 8;
  st->ks = select_kernels(api);
  st->gemv_max_m = 4;
  // accuracy_level is the lowest precision A may be computed in: 1 to 3
  // (float32, float16, bfloat16) run in float32, 4 quantizes A to int8.
  st->int8 = acc == 4;
  st->zmode = st->zp_type == OLC_DTYPE_UNDEFINED ? NbZp::kDefault
              : st->zp_type == OLC_DTYPE_UINT8  ? NbZp::kUint8
                                                : NbZp::kFloat;
  if (st->int8) {
    // use_vnni = 0 takes the vpmaddubsw kernels on a VNNI machine (tests).
    const olc_tuning_param* vnni =
        api->tuning_declare_int("olc_matmul", "MatMulNBits", "default", OLC_DTYPE_UNDEFINED, "use_vnni", 1);
    st->i8 = select_nbits_i8(api, api->tuning_read_int(vnni) != 0);
  }
  // Constant scales and zero points: dequantization parameters once.
  const olc_tensor* c = node->input_constants;
  if (c && c[2].data && (st->zp_type == OLC_DTYPE_UNDEFINED || c[3].data)) {
    const int64_t ns = olc_element_count(&c[2]);
    const int64_t nz = st->zp_type == OLC_DTYPE_UNDEFINED ? -1 : olc_element_count(&c[3]);
    const int64_t want_z = st->zp_type == OLC_DTYPE_UINT8 ? st->N * st->zp_bytes_per_row : st->N * st->kb;
    if (ns != st->N * st->kb)
      return fail_create(error, esize, "scales has %lld elements, expected N * k_blocks = %lld", (long long)ns,
                         (long long)(st->N * st->kb));
    if (nz >= 0 && nz != want_z)
      return fail_create(error, esize, "zero_points has %lld elements, expected %lld", (long long)nz, (long long)want_z);
    build_quant(*st, c[2].data, st->zp_type == OLC_DTYPE_UNDEFINED ? nullptr : c[3].data, &st->qp);
    st->quant_const = true;
    st->const_scales = c[2].data;
    st->const_zp = st->zp_type == OLC_DTYPE_UNDEFINED ? nullptr : c[3].data;
  }
  std::string pack_note;
  if (st->int8 && st->quant_const && c[1].data && c[1].dtype == OLC_DTYPE_UINT8 &&
      olc_element_count(&c[1]) == st->N * st->kb * st->blob) {
    st->i8pack = make_packed(PackLayout::kNBits, nbits_i8_packed_bytes(static_cast<int>(st->bits), st->bs, st->kb,
                                                                       st->N, st->zmode));
    if (st->i8pack) {
      nbits_i8_pack(static_cast<int>(st->bits), st->bs, st->kb, st->N, static_cast<const uint8_t*>(c[1].data),
                    st->qp.scales.data(), st->zmode, st->qp.zp.data(), st->qp.nzs.data(), st->i8pack->data,
                    &st->i8w);
      st->const_b = c[1].data;
      if (OLC_API_HAS(api, report_prepacked))
        api->report_prepacked(node, st->i8pack.get(), static_cast<int64_t>(st->i8pack->bytes));
      char buf[64];
      std::snprintf(buf, sizeof buf, " prepacked-B %.1f KiB", st->i8pack->bytes / 1024.0);
      pack_note = buf;
    }
  }
  const std::string base = std::string(st->ks.isa_name) + " " + std::to_string(st->bits) + "-bit block " +
                           std::to_string(st->bs);
  st->detail_gemv = base + " gemv";
  st->detail_gemm = base + " gemm";
  st->detail_i8 = std::string(st->i8.name ? st->i8.name : "") + " " + std::to_string(st->bits) + "-bit block " +
                  std::to_string(st->bs) + " int8" + pack_note;
  return st.release();
}

void nb_destroy(void* s) { delete static_cast<NbState*>(s); }

thread_local Scratch t_nb_b, t_nb_a;

struct GemvJob {
  const NbState* st;
  NbGemv p;
  int64_t chunk;
};

void gemv_range(void* user, int64_t begin, int64_t end) {
  const GemvJob& j = *static_cast<const GemvJob*>(user);
  const int64_t n0 = begin * j.chunk, n1 = std::min(j.st->N, end * j.chunk);
  if (n0 < n1) j.st->ks.isa->nbits_gemv(&j.p, n0, n1);
}

struct GemmJob {
  const NbState* st;
  const uint8_t* B;
  const QuantParams* qp;
  const float* Apk;  // A packed: per MR rows, K x MR (k-major)
  const float* bias;
  float* Y;        // [M, N] float32
  int64_t M;
  int64_t nstep;
  std::atomic<bool>* failed;
};

void gemm_range(void* user, int64_t begin, int64_t end) {
  const GemmJob& job = *static_cast<const GemmJob*>(user);
  const NbState& st = *job.st;
  const IsaKernels* isa = st.ks.isa;
  const int MR = isa->mr_f32, NR = isa->nr_f32;
  const int64_t KC = std::max<int64_t>(st.bs, 256);
  const int64_t NC = std::max<int64_t>(NR, 256 / NR * NR);  // dequantized block KC x NC stays in L2
  float* bp = static_cast<float*>(t_nb_b.get(sizeof(float) * KC * NC));
  if (!bp) {
    job.failed->store(true);
    return;
  }
  Epi<float> ep{1.0f, 1.0f, nullptr, 0, 1};
  for (int64_t t = begin; t < end; ++t) {
    const int64_t n0 = t * job.nstep, n1 = std::min(st.N, n0 + job.nstep);
    for (int64_t nc0 = n0; nc0 < n1; nc0 += NC) {
      const int64_t nc = std::min(NC, n1 - nc0);
      const int64_t panels = (nc + NR - 1) / NR;
      for (int64_t k0 = 0; k0 < st.K; k0 += KC) {
        const int64_t kc = std::min(KC, st.K - k0);
        const int flags = (k0 == 0 ? kFirst : 0) | (k0 + kc == st.K ? kLast : 0);
        NbDequant dq{static_cast<int>(st.bits), st.bs, st.kb, st.blob, job.B, job.qp->scales.data(),
                     job.qp->nzs.data(), nc0, nc, k0, kc, NR, bp};
        isa->nbits_dequant(&dq);
        for (int64_t m = 0; m < job.M; m += MR) {
          const int mr = static_cast<int>(std::min<int64_t>(MR, job.M - m));
          const float* ap = job.Apk + (m / MR) * st.K * MR + k0 * MR;
          for (int64_t j = 0; j < panels; ++j) {
            const int nr = static_cast<int>(std::min<int64_t>(NR, nc - j * NR));
            ep.bias = job.bias ? job.bias + nc0 + j * NR : nullptr;
            isa->uk_f32(kc, ap, bp + j * kc * NR, NR, job.Y + m * st.N + nc0 + j * NR, st.N, mr, nr, flags, &ep);
          }
        }
      }
    }
  }
}

int32_t nb_run(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* in, int32_t n_outputs) {
  const NbState* st = static_cast<const NbState*>(state);
  if (n_inputs < 3 || n_outputs != 1) return fail_run(ctx, "expects 3 to 6 inputs and 1 output");
  auto present = [&](int i) { return i < n_inputs && in[i].dtype != OLC_DTYPE_UNDEFINED ? &in[i] : nullptr; };
  for (int i = 0; i < n_inputs; ++i) {
    if (!present(i)) continue;
    const int64_t n = olc_element_count(&in[i]);
    if (n < 0) return fail_run(ctx, "input %d has a negative dimension or too many elements", i);
    if (n > 0 && !in[i].data) return fail_run(ctx, "input %d has no data", i);
  }
  if (present(4)) return fail_run(ctx, "g_idx (input 4) is not supported");
  const olc_tensor& a = in[0];
  const olc_tensor& b = in[1];
  const olc_tensor& sc = in[2];
  const olc_tensor* zp = present(3);
  const olc_tensor* bias = present(5);
  if (a.dtype != st->a_type) return fail_run(ctx, "A has type %s, expected %s", olc_dtype_name(a.dtype), olc_dtype_name(st->a_type));
  if (a.ndim < 1 || a.shape[a.ndim - 1] != st->K)
    return fail_run(ctx, "A %s: the last dimension must be K = %lld", shape_str(a).c_str(), (long long)st->K);
  const bool b_ok = b.dtype == OLC_DTYPE_UINT8 &&
                    ((b.ndim == 3 && b.shape[0] == st->N && b.shape[1] == st->kb && b.shape[2] == st->blob) ||
                     (b.ndim == 2 && b.shape[0] == st->N && b.shape[1] == st->kb * st->blob));
  if (!b_ok)
    return fail_run(ctx, "B %s must be uint8 [N, k_blocks, blob_size] = [%lld, %lld, %lld]", shape_str(b).c_str(),
                    (long long)st->N, (long long)st->kb, (long long)st->blob);
  if (sc.dtype != st->a_type || olc_element_count(&sc) != st->N * st->kb)
    return fail_run(ctx, "scales %s must hold N * k_blocks = %lld values of A's type", shape_str(sc).c_str(),
                    (long long)(st->N * st->kb));
  if (zp) {
    const int64_t want = zp->dtype == OLC_DTYPE_UINT8 ? st->N * st->zp_bytes_per_row : st->N * st->kb;
    if (zp->dtype != st->zp_type || olc_element_count(zp) != want)
      return fail_run(ctx, "zero_points %s (%s) must hold %lld values (%s)", shape_str(*zp).c_str(),
                      olc_dtype_name(zp->dtype), (long long)want,
                      zp->dtype == OLC_DTYPE_UINT8 ? "N * ceil(k_blocks * bits / 8) packed" : "N * k_blocks");
  }
  if (bias && (bias->dtype != st->a_type || olc_element_count(bias) != st->N))
    return fail_run(ctx, "bias %s must hold N = %lld values of A's type", shape_str(*bias).c_str(), (long long)st->N);
  std::vector<int64_t> out_shape(a.shape, a.shape + a.ndim);
  out_shape.back() = st->N;
  int64_t M = 1;
  for (int32_t d = 0; d + 1 < a.ndim; ++d) M *= a.shape[d];
  void* y = g_api->allocate_output(ctx, 0, st->a_type, a.ndim, out_shape.data());
  if (!y && M * st->N > 0) return OLC_ERROR;
  const bool gemv = M <= st->gemv_max_m;
  g_api->record_usage_detail(ctx, (st->int8 ? st->detail_i8 : gemv ? st->detail_gemv : st->detail_gemm).c_str());
  if (M == 0) return OLC_OK;

  QuantParams local;
  const QuantParams* qp = &st->qp;
  if (!st->quant_const || sc.data != st->const_scales || (zp ? zp->data : nullptr) != st->const_zp) {
    build_quant(*st, sc.data, zp ? zp->data : nullptr, &local);
    qp = &local;
  }
  const bool f32 = st->a_type == OLC_DTYPE_FLOAT;
  std::vector<float> a32, y32, bias32;
  const float* A = static_cast<const float*>(a.data);
  if (!f32) {
    a32.resize(M * st->K);
    for (int64_t i = 0; i < M * st->K; ++i) a32[i] = to_f32(st->a_type, a.data, i);
    A = a32.data();
    y32.resize(M * st->N);
  }
  float* Y = f32 ? static_cast<float*>(y) : y32.data();
  const float* bias_p = nullptr;
  if (bias) {
    if (f32) bias_p = static_cast<const float*>(bias->data);
    else {
      bias32.resize(st->N);
      for (int64_t i = 0; i < st->N; ++i) bias32[i] = to_f32(st->a_type, bias->data, i);
      bias_p = bias32.data();
    }
  }
  const int64_t threads = g_api->concurrency(ctx);
  const uint8_t* B = static_cast<const uint8_t*>(b.data);
  if (st->int8) {
    const NbI8Weights* w = &st->i8w;
    std::unique_ptr<void, void (*)(void*)> buf(nullptr, &std::free);
    NbI8Weights local_w;
    if (!st->i8pack || b.data != st->const_b || qp != &st->qp) {
      // Weights fed at run time: packed for this run.
      const size_t bytes = nbits_i8_packed_bytes(static_cast<int>(st->bits), st->bs, st->kb, st->N, st->zmode);
      buf.reset(std::aligned_alloc(64, (bytes + 63) & ~size_t(63)));
      if (!buf) return fail_run(ctx, "out of memory for the packed weights");
      nbits_i8_pack(static_cast<int>(st->bits), st->bs, st->kb, st->N, B, qp->scales.data(), st->zmode,
                    qp->zp.data(), qp->nzs.data(), buf.get(), &local_w);
      w = &local_w;
    }
    if (!nbits_i8_run(g_api, ctx, st->i8, *w, st->K, st->N, A, M, bias_p, Y))
      return fail_run(ctx, "out of memory for the quantized activations");
  } else if (gemv) {
    const IsaKernels* isa = st->ks.isa;
    const int chunk = isa->nbits_chunk(static_cast<int>(st->bits), st->bs);
    const int64_t kpad = st->kb * st->bs;
    std::vector<float> ap(kpad), asum(st->kb);
    for (int64_t m = 0; m < M; ++m) {
      const float* arow = A + m * st->K;
      for (int64_t bk = 0; bk < st->kb; ++bk) {
        float s = 0;
        for (int64_t k = bk * st->bs; k < std::min(st->K, (bk + 1) * st->bs); ++k) s += arow[k];
        asum[bk] = s;
      }
      // Per span of f * chunk lanes: the k = 0 mod f values, then 1 mod f, ...
      const int64_t f = 8 / st->bits, span = f * chunk;
      for (int64_t base = 0; base < kpad; base += span)
        for (int64_t j = 0; j < f; ++j)
          for (int i = 0; i < chunk; ++i) {
            const int64_t k = base + f * i + j;
            ap[base + j * chunk + i] = k < st->K ? arow[k] : 0.0f;
          }
      GemvJob job{st, {}, 64};
      job.p.bits = static_cast<int>(st->bits);
      job.p.chunk = chunk;
      job.p.bs = st->bs;
      job.p.kb = st->kb;
      job.p.blob = st->blob;
      job.p.B = B;
      job.p.scales = qp->scales.data();
      job.p.sz = qp->sz.data();
      job.p.a = ap.data();
      job.p.asum = asum.data();
      job.p.bias = bias_p;
      job.p.y = Y + m * st->N;
      const int64_t nchunks = (st->N + job.chunk - 1) / job.chunk;
      if (threads > 1 && st->N * st->K >= (1 << 15)) g_api->parallel_for(ctx, nchunks, 1, 0, &gemv_range, &job);
      else gemv_range(&job, 0, nchunks);
    }
  } else {
    const int NR = st->ks.isa->nr_f32;
    const int64_t bn = (st->N + NR - 1) / NR;
    // Column tasks: each dequantizes only its own columns. More tasks than
    // threads keeps the pieces balanced.
    const int64_t tasks = std::min<int64_t>(bn, threads > 1 ? threads * 4 : 1);
    const int MR = st->ks.isa->mr_f32;
    const int64_t mblocks = (M + MR - 1) / MR;
    std::vector<float> apk(static_cast<size_t>(mblocks * MR * st->K));
    for (int64_t mb = 0; mb < mblocks; ++mb) {
      float* d = apk.data() + mb * st->K * MR;
      const int mr = static_cast<int>(std::min<int64_t>(MR, M - mb * MR));
      for (int i = 0; i < mr; ++i) {
        const float* src = A + (mb * MR + i) * st->K;
        for (int64_t k = 0; k < st->K; ++k) d[k * MR + i] = src[k];
      }
    }
    std::atomic<bool> failed{false};
    GemmJob job{st, B, qp, apk.data(), bias_p, Y, M, (bn + tasks - 1) / tasks * NR, &failed};
    const int64_t nt = (st->N + job.nstep - 1) / job.nstep;
    if (threads > 1 && nt > 1) g_api->parallel_for(ctx, nt, 1, 0, &gemm_range, &job);
    else gemm_range(&job, 0, nt);
    if (failed.load()) return fail_run(ctx, "out of memory for the dequantization buffers");
  }
  if (!f32) {
    uint16_t* o = static_cast<uint16_t*>(y);
    for (int64_t i = 0; i < M * st->N; ++i)
      o[i] = st->a_type == OLC_DTYPE_FLOAT16 ? f32_to_f16(y32[i]) : f32_to_bf16(y32[i]);
  }
  return OLC_OK;
}

const olc_kernel_vtable kNB = {OLC_ABI_VERSION, 0, "olc_matmul::MatMulNBits", guarded_create<nb_create>,
                               guarded_run<nb_run>, nb_destroy};

}  // namespace

void set_nbits_api(const olc_core_api* api) { g_api = api; }
const olc_kernel_vtable* matmul_nbits_vtable() { return &kNB; }

}  // namespace olc_mm
