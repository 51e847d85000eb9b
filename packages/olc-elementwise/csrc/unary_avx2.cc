// AVX2 + FMA + F16C level: float32, float16 and bfloat16 computed 8 lanes
// at a time in f32, 4 vectors per iteration (the long-chain functions as two
// interleaved pairs: vrun's apply4). The tail goes through a small
// stack buffer with the same vector code (no over-read, results identical
// to the body). float64, integer and BOOL ops use the generic loops
// compiled for this ISA.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "olc/kernel_abi.h"
#include "unary_common.h"
#include "vmath_shim_avx2.h"

namespace olc_ew {
namespace avx2 {

#include "unary_elem.inc"

using olc_ew_vm::vm_cos;
using olc_ew_vm::vm_erf;
using olc_ew_vm::vm_exp;
using olc_ew_vm::vm_expm1;
using olc_ew_vm::vm_log;
using olc_ew_vm::vm_gelu;
using olc_ew_vm::vm_gelu_tanh;
using olc_ew_vm::vm_softplus;
using olc_ew_vm::vm_sigmoid;
using olc_ew_vm::vm_sin;
using olc_ew_vm::vm_tanh;
using olc_ew_vm::vm_mish;
using olc_ew_vm::vm_tan;
using olc_ew_vm::vm_asin;
using olc_ew_vm::vm_acos;
using olc_ew_vm::vm_atan;
using olc_ew_vm::vm_sinh;
using olc_ew_vm::vm_cosh;
using olc_ew_vm::vm_asinh;
using olc_ew_vm::vm_acosh;
using olc_ew_vm::vm_atanh;

// ---- loads and stores: 8 elements as one __m256 of f32 ----

struct LF32 {
  using T = float;
  static __m256 load(const T* p) { return _mm256_loadu_ps(p); }
  static void store(T* p, __m256 v) { _mm256_storeu_ps(p, v); }
  static void stream(T* p, __m256 v) { _mm256_stream_ps(p, v); }
};

struct LF16 {
  using T = uint16_t;
  static __m256 load(const T* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static __m128i pack(__m256 v) { return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static void store(T* p, __m256 v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), pack(v)); }
  static void stream(T* p, __m256 v) { _mm_stream_si128(reinterpret_cast<__m128i*>(p), pack(v)); }
};

struct LBF16 {
  using T = uint16_t;
  static __m256 load(const T* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
  // Round to nearest even; NaN keeps its top bits and is made quiet.
  static __m128i pack(__m256 v) {
    const __m256i x = _mm256_castps_si256(v);
    const __m256i hi = _mm256_srli_epi32(x, 16);
    const __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
    const __m256i q = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    const __m256i s = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_castsi256_ps(q), nan));
    return _mm_packus_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  }
  static void store(T* p, __m256 v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), pack(v)); }
  static void stream(T* p, __m256 v) { _mm_stream_si128(reinterpret_cast<__m128i*>(p), pack(v)); }
};

// ---- vector ops (same evaluation order as unary_elem.inc) ----

static inline __m256 vset(float v) { return _mm256_set1_ps(v); }
static inline __m256 vsignmask() { return _mm256_set1_ps(-0.0f); }
static inline __m256 vgt0(__m256 x) { return _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ); }

struct VAbs { explicit VAbs(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return _mm256_andnot_ps(vsignmask(), x); } };
struct VNeg { explicit VNeg(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return _mm256_xor_ps(x, vsignmask()); } };
struct VExp { explicit VExp(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return vm_exp(x); }
  void pair(__m256* a, __m256* b) const { olc_ew_vm::vm_exp_x2(a, b); } };
struct VLog { explicit VLog(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return vm_log(x); }
  void pair(__m256* a, __m256* b) const { olc_ew_vm::vm_log_x2(a, b); } };
struct VSqrt { explicit VSqrt(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return _mm256_sqrt_ps(x); } };
struct VReciprocal { explicit VReciprocal(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return _mm256_div_ps(vset(1.f), x); } };
struct VSigmoid { explicit VSigmoid(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return vm_sigmoid(x); }
  void pair(__m256* a, __m256* b) const { olc_ew_vm::vm_sigmoid_x2(a, b); } };
struct VTanh { explicit VTanh(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return vm_tanh(x); }
  void pair(__m256* a, __m256* b) const { olc_ew_vm::vm_tanh_x2(a, b); } };
struct VErf { explicit VErf(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return vm_erf(x); }
  void pair(__m256* a, __m256* b) const { olc_ew_vm::vm_erf_x2(a, b); } };
struct VSin { explicit VSin(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return vm_sin(x); } };
struct VCos { explicit VCos(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return vm_cos(x); } };
struct VFloor { explicit VFloor(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return _mm256_round_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); } };
struct VCeil { explicit VCeil(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return _mm256_round_ps(x, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC); } };
struct VRound { explicit VRound(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); } };
// max(0, x) returns x for NaN; + 0 turns -0 into +0.
struct VRelu { explicit VRelu(const UnaryParams*) {}
  __m256 operator()(__m256 x) const {
    const __m256 z = _mm256_setzero_ps();
    return _mm256_add_ps(_mm256_max_ps(z, x), z);
  } };
struct VHardSigmoid {
  __m256 a, b;
  explicit VHardSigmoid(const UnaryParams* p) : a(vset(p->alpha)), b(vset(p->beta)) {}
  __m256 operator()(__m256 x) const {
    const __m256 t = _mm256_add_ps(_mm256_mul_ps(x, a), b);
    return _mm256_max_ps(_mm256_setzero_ps(), _mm256_min_ps(vset(1.f), t));
  } };
struct VLeakyRelu {
  __m256 a;
  explicit VLeakyRelu(const UnaryParams* p) : a(vset(p->alpha)) {}
  __m256 operator()(__m256 x) const { return _mm256_mul_ps(x, _mm256_blendv_ps(a, vset(1.f), vgt0(x))); } };
struct VElu {
  __m256 a;
  explicit VElu(const UnaryParams* p) : a(vset(p->alpha)) {}
  __m256 operator()(__m256 x) const { return _mm256_blendv_ps(_mm256_mul_ps(a, vm_expm1(x)), x, vgt0(x)); } };
struct VSelu {
  __m256 a, g;
  explicit VSelu(const UnaryParams* p) : a(vset(p->alpha)), g(vset(p->gamma)) {}
  __m256 operator()(__m256 x) const {
    return _mm256_mul_ps(_mm256_blendv_ps(_mm256_mul_ps(a, vm_expm1(x)), x, vgt0(x)), g);
  } };
struct VSoftplus { explicit VSoftplus(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return vm_softplus(x); } };
struct VGelu { explicit VGelu(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return vm_gelu(x); } };
struct VGeluTanh { explicit VGeluTanh(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return vm_gelu_tanh(x); } };
struct VSign { explicit VSign(const UnaryParams*) {}
  __m256 operator()(__m256 x) const {
    const __m256 z = _mm256_setzero_ps();
    __m256 r = _mm256_and_ps(vgt0(x), vset(1.f));
    r = _mm256_blendv_ps(r, vset(-1.f), _mm256_cmp_ps(x, z, _CMP_LT_OQ));
    return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  } };

struct VMish { explicit VMish(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return vm_mish(x); } };
struct VTan { explicit VTan(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return vm_tan(x); } };
struct VAsin { explicit VAsin(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return vm_asin(x); }
  void pair(__m256* a, __m256* b) const { olc_ew_vm::vm_asin_x2(a, b); } };
struct VAcos { explicit VAcos(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return vm_acos(x); }
  void pair(__m256* a, __m256* b) const { olc_ew_vm::vm_acos_x2(a, b); } };
struct VAtan { explicit VAtan(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return vm_atan(x); }
  void pair(__m256* a, __m256* b) const { olc_ew_vm::vm_atan_x2(a, b); } };
struct VSinh { explicit VSinh(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return vm_sinh(x); } };
struct VCosh { explicit VCosh(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return vm_cosh(x); } };
struct VAsinh { explicit VAsinh(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return vm_asinh(x); } };
struct VAcosh { explicit VAcosh(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return vm_acosh(x); } };
struct VAtanh { explicit VAtanh(const UnaryParams*) {}
  __m256 operator()(__m256 x) const { return vm_atanh(x); } };
// Same evaluation order as EHardSwish / ESoftsign / ... in unary_elem.inc.
struct VHardSwish { explicit VHardSwish(const UnaryParams*) {}
  __m256 operator()(__m256 x) const {
    const __m256 t = _mm256_mul_ps(_mm256_add_ps(x, vset(3.f)), vset(1.f / 6.f));
    const __m256 h = _mm256_max_ps(_mm256_setzero_ps(), _mm256_min_ps(vset(1.f), t));
    return _mm256_mul_ps(_mm256_max_ps(x, vset(-3.f)), h);
  } };
struct VSoftsign { explicit VSoftsign(const UnaryParams*) {}
  __m256 operator()(__m256 x) const {
    const __m256 xc = _mm256_max_ps(vset(-0x1p30f), _mm256_min_ps(vset(0x1p30f), x));
    return _mm256_div_ps(xc, _mm256_add_ps(vset(1.f), _mm256_andnot_ps(vsignmask(), xc)));
  } };
struct VCelu {
  __m256 a;
  explicit VCelu(const UnaryParams* p) : a(vset(p->alpha)) {}
  __m256 operator()(__m256 x) const {
    return _mm256_blendv_ps(_mm256_mul_ps(a, vm_expm1(_mm256_div_ps(x, a))), x, vgt0(x));
  } };
struct VThresholdedRelu {
  __m256 a;
  explicit VThresholdedRelu(const UnaryParams* p) : a(vset(p->alpha)) {}
  __m256 operator()(__m256 x) const {
    return _mm256_blendv_ps(x, _mm256_setzero_ps(), _mm256_cmp_ps(x, a, _CMP_LE_OQ));
  } };
struct VShrink {
  __m256 l, nl, b;
  explicit VShrink(const UnaryParams* p) : l(vset(p->alpha)), nl(vset(-p->alpha)), b(vset(p->beta)) {}
  __m256 operator()(__m256 x) const {
    const __m256 mid = _mm256_blendv_ps(_mm256_setzero_ps(), _mm256_sub_ps(x, b), _mm256_cmp_ps(x, l, _CMP_GT_OQ));
    return _mm256_blendv_ps(_mm256_add_ps(x, b), mid, _mm256_cmp_ps(x, nl, _CMP_GE_OQ));
  } };

// ---- driver ----

// Four vectors through op: as two interleaved pairs where the functor has
// a paired form (pair(&a, &b), the long-chain functions), else one by one.
template <class V, class = void> struct HasPair : std::false_type {};
template <class V> struct HasPair<V, std::void_t<decltype(&V::pair)>> : std::true_type {};

template <class V>
static inline void apply4(const V& op, __m256 (&v)[4]) {
  if constexpr (HasPair<V>::value) {
    op.pair(&v[0], &v[1]);
    op.pair(&v[2], &v[3]);
  } else {
    for (int k = 0; k < 4; ++k) v[k] = op(v[k]);
  }
}

template <class L, class V>
static void vrun(const void* xv, void* yv, int64_t n, const UnaryParams* p) {
  using T = typename L::T;
  const V op(p);
  const T* x = static_cast<const T*>(xv);
  T* y = static_cast<T*>(yv);
  int64_t i = 0;
  if (p->stream && (reinterpret_cast<uintptr_t>(y) & 63) == 0) {
    for (; i + 32 <= n; i += 32) {
      __m256 v[4] = {L::load(x + i), L::load(x + i + 8), L::load(x + i + 16), L::load(x + i + 24)};
      apply4(op, v);
      for (int k = 0; k < 4; ++k) L::stream(y + i + 8 * k, v[k]);
    }
    _mm_sfence();
  }
  for (; i + 32 <= n; i += 32) {
    __m256 v[4] = {L::load(x + i), L::load(x + i + 8), L::load(x + i + 16), L::load(x + i + 24)};
    apply4(op, v);
    for (int k = 0; k < 4; ++k) L::store(y + i + 8 * k, v[k]);
  }
  for (; i + 8 <= n; i += 8) L::store(y + i, op(L::load(x + i)));
  if (i < n) {
    const size_t bytes = static_cast<size_t>(n - i) * sizeof(T);
    alignas(32) T bx[8] = {};
    alignas(32) T by[8];
    std::memcpy(bx, x + i, bytes);
    L::store(by, op(L::load(bx)));
    std::memcpy(y + i, by, bytes);
  }
}

template <class V>
static UnaryFn vec_for(int32_t dtype) {
  switch (dtype) {
    case OLC_DTYPE_FLOAT: return &vrun<LF32, V>;
    case OLC_DTYPE_FLOAT16: return &vrun<LF16, V>;
    case OLC_DTYPE_BFLOAT16: return &vrun<LBF16, V>;
    default: return nullptr;
  }
}

static UnaryFn select_vector(Op op, int32_t dtype) {
  switch (op) {
    case Op::Abs: return vec_for<VAbs>(dtype);
    case Op::Neg: return vec_for<VNeg>(dtype);
    case Op::Exp: return vec_for<VExp>(dtype);
    case Op::Log: return vec_for<VLog>(dtype);
    case Op::Sqrt: return vec_for<VSqrt>(dtype);
    case Op::Reciprocal: return vec_for<VReciprocal>(dtype);
    case Op::Sigmoid: return vec_for<VSigmoid>(dtype);
    case Op::HardSigmoid: return vec_for<VHardSigmoid>(dtype);
    case Op::Tanh: return vec_for<VTanh>(dtype);
    case Op::Relu: return vec_for<VRelu>(dtype);
    case Op::LeakyRelu: return vec_for<VLeakyRelu>(dtype);
    case Op::Elu: return vec_for<VElu>(dtype);
    case Op::Selu: return vec_for<VSelu>(dtype);
    case Op::Softplus: return vec_for<VSoftplus>(dtype);
    case Op::Gelu: return vec_for<VGelu>(dtype);
    case Op::GeluTanh: return vec_for<VGeluTanh>(dtype);
    case Op::Erf: return vec_for<VErf>(dtype);
    case Op::Floor: return vec_for<VFloor>(dtype);
    case Op::Ceil: return vec_for<VCeil>(dtype);
    case Op::Round: return vec_for<VRound>(dtype);
    case Op::Sign: return vec_for<VSign>(dtype);
    case Op::Sin: return vec_for<VSin>(dtype);
    case Op::Cos: return vec_for<VCos>(dtype);
    case Op::HardSwish: return vec_for<VHardSwish>(dtype);
    case Op::Mish: return vec_for<VMish>(dtype);
    case Op::Softsign: return vec_for<VSoftsign>(dtype);
    case Op::Celu: return vec_for<VCelu>(dtype);
    case Op::ThresholdedRelu: return vec_for<VThresholdedRelu>(dtype);
    case Op::Shrink: return vec_for<VShrink>(dtype);
    case Op::Tan: return vec_for<VTan>(dtype);
    case Op::Asin: return vec_for<VAsin>(dtype);
    case Op::Acos: return vec_for<VAcos>(dtype);
    case Op::Atan: return vec_for<VAtan>(dtype);
    case Op::Sinh: return vec_for<VSinh>(dtype);
    case Op::Cosh: return vec_for<VCosh>(dtype);
    case Op::Asinh: return vec_for<VAsinh>(dtype);
    case Op::Acosh: return vec_for<VAcosh>(dtype);
    case Op::Atanh: return vec_for<VAtanh>(dtype);
    default: return nullptr;
  }
}

UnaryFn select(Op op, int32_t dtype) {
  UnaryFn f = select_vector(op, dtype);
  return f ? f : select_generic(op, dtype);
}

}  // namespace avx2
}  // namespace olc_ew
