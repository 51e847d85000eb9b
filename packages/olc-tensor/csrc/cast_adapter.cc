// Cast and CastLike between every fixed-width type olc moves natively.
//
// Conversion rules (every one defined; no C++ undefined behaviour):
// - integer -> integer: modular (the low bits of the two's complement
//   value), never through floating point;
// - float -> integer: truncation toward zero, saturating at the target's
//   limits; NaN gives 0;
// - anything -> bool: value != 0 (NaN is true); bool -> anything: 0 or 1;
// - -> float16 / bfloat16: one rounding to nearest even from the exact
//   source value (float64 and 64-bit integers included), overflow gives
//   infinity, NaN stays NaN (quiet);
// - -> float32 / float64: the IEEE conversion (round to nearest even);
// - -> float8 (opset 19+): one rounding to nearest even from the exact
//   source value; out of range (and +-inf) gives +-max with saturate=1,
//   else +-inf (E5M2) or NaN (fp8_convert.h has the table);
// - float8 -> anything: exact widening to float32, then the rules above.
// float32 <-> float16 / bfloat16 run on the highest SIMD level available;
// every level gives the same bits.
#include <algorithm>
#include <limits>
#include <memory>
#include <type_traits>

#include "cast_kernels.h"
#include "common.h"
#include "fp_convert.h"
#include "fp8_convert.h"
#include "registry.h"

namespace olc_tn {
namespace {

struct F16 {
  uint16_t v;
};
struct BF16 {
  uint16_t v;
};
struct Bool {
  uint8_t v;
};
template <int32_t Code>
struct F8 {
  static constexpr int32_t code = Code;
  uint8_t v;
};
template <class T>
struct is_f8_t : std::false_type {};
template <int32_t Code>
struct is_f8_t<F8<Code>> : std::true_type {};

template <class T>
constexpr bool is_int_v = std::is_integral<T>::value;

// Saturating truncation of a double into integer type D; NaN -> 0.
template <class D>
D sat_int(double v) {
  if (!(v == v)) return 0;
  constexpr double lo = static_cast<double>(std::numeric_limits<D>::min());  // 0 or -2^(b-1): exact
  constexpr double hi = std::is_signed<D>::value ? -lo : 2.0 * (static_cast<double>(std::numeric_limits<D>::max() / 2) + 1.0);
  if (v <= lo) return std::numeric_limits<D>::min();
  if (v >= hi) return std::numeric_limits<D>::max();
  return static_cast<D>(v);
}

// A 64-bit integer to float16/bfloat16 in one rounding.
template <class S>
double int_exact_for_narrow(S s, int bits) {
  if constexpr (std::is_signed<S>::value) {
    const uint64_t mag = s < 0 ? 0 - static_cast<uint64_t>(s) : static_cast<uint64_t>(s);
    const double m = u64_round_bits(mag, bits);
    return s < 0 ? -m : m;
  } else {
    return u64_round_bits(static_cast<uint64_t>(s), bits);
  }
}

template <class D, class S>
D conv(S s) {
  if constexpr (std::is_same<S, F16>::value) {
    if constexpr (std::is_same<D, F16>::value) return s;
    else return conv<D>(f16_to_f32(s.v));
  } else if constexpr (std::is_same<S, BF16>::value) {
    if constexpr (std::is_same<D, BF16>::value) return s;
    else return conv<D>(bf16_to_f32(s.v));
  } else if constexpr (std::is_same<S, Bool>::value) {
    return conv<D>(static_cast<uint8_t>(s.v != 0));
  } else if constexpr (std::is_same<D, Bool>::value) {
    return Bool{static_cast<uint8_t>(s != 0)};
  } else if constexpr (std::is_same<D, F16>::value) {
    if constexpr (std::is_same<S, float>::value) return F16{f32_to_f16(s)};
    else if constexpr (std::is_same<S, double>::value) return F16{f64_to_f16(s)};
    else if constexpr (sizeof(S) == 8) return F16{f64_to_f16(int_exact_for_narrow(s, 11))};
    else return F16{f64_to_f16(static_cast<double>(s))};
  } else if constexpr (std::is_same<D, BF16>::value) {
    if constexpr (std::is_same<S, float>::value) return BF16{f32_to_bf16(s)};
    else if constexpr (std::is_same<S, double>::value) return BF16{f64_to_bf16(s)};
    else if constexpr (sizeof(S) == 8) return BF16{f64_to_bf16(int_exact_for_narrow(s, 8))};
    else return BF16{f64_to_bf16(static_cast<double>(s))};
  } else if constexpr (is_int_v<D>) {
    if constexpr (is_int_v<S>) {
      // Modular: through the unsigned type of the target's width.
      using U = typename std::make_unsigned<D>::type;
      return static_cast<D>(static_cast<U>(s));
    } else {
      return sat_int<D>(static_cast<double>(s));
    }
  } else {
    return static_cast<D>(s);  // float32/float64 targets: IEEE round to nearest
  }
}

// Anything -> float8 (code C); float8 sources decode through their table.
template <class S, int32_t C, bool Saturate>
void conv_loop_to_f8(const void* src, void* dst, int64_t n) {
  const S* s = static_cast<const S*>(src);
  uint8_t* d = static_cast<uint8_t*>(dst);
  if constexpr (is_f8_t<S>::value) {
    const float* t = f8_table<S::code>();
    for (int64_t i = 0; i < n; ++i) d[i] = f64_to_f8<C, Saturate>(t[s[i].v]);
  } else {
    // conv<double> is exact for every source but 64-bit integers beyond
    // 2^53, which are far out of float8 range anyway.
    for (int64_t i = 0; i < n; ++i) d[i] = f64_to_f8<C, Saturate>(conv<double>(s[i]));
  }
}

template <class S, class D>
void conv_loop(const void* src, void* dst, int64_t n) {
  if constexpr (is_f8_t<S>::value) {
    // float8 -> anything else: exact float32 from the table, then as float32.
    const float* t = f8_table<S::code>();
    const uint8_t* s = static_cast<const uint8_t*>(src);
    D* d = static_cast<D*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = conv<D>(t[s[i]]);
  } else if constexpr (std::is_same<S, Bool>::value && std::is_arithmetic<D>::value) {
    // bool -> number: a plain loop the compiler vectorizes.
    const uint8_t* s = static_cast<const uint8_t*>(src);
    D* d = static_cast<D*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = static_cast<D>(s[i] != 0);
  } else if constexpr (std::is_same<D, Bool>::value && std::is_arithmetic<S>::value) {
    const S* s = static_cast<const S*>(src);
    uint8_t* d = static_cast<uint8_t*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = static_cast<uint8_t>(s[i] != 0);
  } else {
    const S* s = static_cast<const S*>(src);
    D* d = static_cast<D*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = conv<D>(s[i]);
  }
}

template <class S, int32_t C>
ConvertFn to_f8(bool saturate) {
  return saturate ? &conv_loop_to_f8<S, C, true> : &conv_loop_to_f8<S, C, false>;
}

template <class S>
ConvertFn pick_dst(int32_t dst, bool saturate) {
  switch (dst) {
    case OLC_DTYPE_FLOAT8E4M3FN: return to_f8<S, OLC_DTYPE_FLOAT8E4M3FN>(saturate);
    case OLC_DTYPE_FLOAT8E4M3FNUZ: return to_f8<S, OLC_DTYPE_FLOAT8E4M3FNUZ>(saturate);
    case OLC_DTYPE_FLOAT8E5M2: return to_f8<S, OLC_DTYPE_FLOAT8E5M2>(saturate);
    case OLC_DTYPE_FLOAT8E5M2FNUZ: return to_f8<S, OLC_DTYPE_FLOAT8E5M2FNUZ>(saturate);
    default: break;
  }
  switch (dst) {
    case OLC_DTYPE_FLOAT: return &conv_loop<S, float>;
    case OLC_DTYPE_DOUBLE: return &conv_loop<S, double>;
    case OLC_DTYPE_FLOAT16: return &conv_loop<S, F16>;
    case OLC_DTYPE_BFLOAT16: return &conv_loop<S, BF16>;
    case OLC_DTYPE_BOOL: return &conv_loop<S, Bool>;
    case OLC_DTYPE_INT8: return &conv_loop<S, int8_t>;
    case OLC_DTYPE_INT16: return &conv_loop<S, int16_t>;
    case OLC_DTYPE_INT32: return &conv_loop<S, int32_t>;
    case OLC_DTYPE_INT64: return &conv_loop<S, int64_t>;
    case OLC_DTYPE_UINT8: return &conv_loop<S, uint8_t>;
    case OLC_DTYPE_UINT16: return &conv_loop<S, uint16_t>;
    case OLC_DTYPE_UINT32: return &conv_loop<S, uint32_t>;
    case OLC_DTYPE_UINT64: return &conv_loop<S, uint64_t>;
    default: return nullptr;
  }
}

ConvertFn generic_convert(int32_t src, int32_t dst, bool saturate) {
  switch (src) {
    case OLC_DTYPE_FLOAT: return pick_dst<float>(dst, saturate);
    case OLC_DTYPE_DOUBLE: return pick_dst<double>(dst, saturate);
    case OLC_DTYPE_FLOAT16: return pick_dst<F16>(dst, saturate);
    case OLC_DTYPE_BFLOAT16: return pick_dst<BF16>(dst, saturate);
    case OLC_DTYPE_BOOL: return pick_dst<Bool>(dst, saturate);
    case OLC_DTYPE_INT8: return pick_dst<int8_t>(dst, saturate);
    case OLC_DTYPE_INT16: return pick_dst<int16_t>(dst, saturate);
    case OLC_DTYPE_INT32: return pick_dst<int32_t>(dst, saturate);
    case OLC_DTYPE_INT64: return pick_dst<int64_t>(dst, saturate);
    case OLC_DTYPE_UINT8: return pick_dst<uint8_t>(dst, saturate);
    case OLC_DTYPE_UINT16: return pick_dst<uint16_t>(dst, saturate);
    case OLC_DTYPE_UINT32: return pick_dst<uint32_t>(dst, saturate);
    case OLC_DTYPE_UINT64: return pick_dst<uint64_t>(dst, saturate);
    case OLC_DTYPE_FLOAT8E4M3FN: return pick_dst<F8<OLC_DTYPE_FLOAT8E4M3FN>>(dst, saturate);
    case OLC_DTYPE_FLOAT8E4M3FNUZ: return pick_dst<F8<OLC_DTYPE_FLOAT8E4M3FNUZ>>(dst, saturate);
    case OLC_DTYPE_FLOAT8E5M2: return pick_dst<F8<OLC_DTYPE_FLOAT8E5M2>>(dst, saturate);
    case OLC_DTYPE_FLOAT8E5M2FNUZ: return pick_dst<F8<OLC_DTYPE_FLOAT8E5M2FNUZ>>(dst, saturate);
    default: return nullptr;
  }
}

void copy_convert(const void* src, void* dst, int64_t n) { (void)src, (void)dst, (void)n; }  // marker: same type

struct Choice {
  ConvertFn fn;
  const char* isa;
  ConvertFn stream = nullptr;  // non-temporal variant for large serial runs
};

Choice choose(int32_t src, int32_t dst, bool saturate) {
  if (src == dst) return {&copy_convert, "copy"};
  if (is_f8(src) || is_f8(dst)) return {generic_convert(src, dst, saturate), "generic"};
  const int32_t level = g_api->simd_level();
  const uint64_t feats = g_api->cpu_features();
  const bool f32_f16 = src == OLC_DTYPE_FLOAT && dst == OLC_DTYPE_FLOAT16;
  const bool f16_f32 = src == OLC_DTYPE_FLOAT16 && dst == OLC_DTYPE_FLOAT;
  const bool f32_bf16 = src == OLC_DTYPE_FLOAT && dst == OLC_DTYPE_BFLOAT16;
  const bool bf16_f32 = src == OLC_DTYPE_BFLOAT16 && dst == OLC_DTYPE_FLOAT;
  if (f32_f16 || f16_f32 || f32_bf16 || bf16_f32) {
    if (level >= OLC_SIMD_AVX512) {
      // Tuning switch (default on) so the plain AVX-512 bfloat16 path can be
      // chosen, and tested, on CPUs with AVX512_BF16.
      static const olc_tuning_param* use_bf16_isa =
          g_api->tuning_declare_int(kLibrary, "Cast", "avx512_bf16", OLC_DTYPE_FLOAT, "enabled", 1);
      if (f32_bf16 && (feats & OLC_CPU_AVX512_BF16) && g_api->tuning_read_int(use_bf16_isa) != 0)
        return {&avx512bf16::f32_to_bf16, "avx512_bf16", &avx512bf16::f32_to_bf16_stream};
      if (f32_bf16) return {&avx512::f32_to_bf16, "avx512", &avx512::f32_to_bf16_stream};
      if (f32_f16) return {&avx512::f32_to_f16, "avx512", &avx512::f32_to_f16_stream};
      return {f32_f16 ? &avx512::f32_to_f16 : f16_f32 ? &avx512::f16_to_f32 : f32_bf16 ? &avx512::f32_to_bf16
                                                                                        : &avx512::bf16_to_f32,
              "avx512"};
    }
    if (level >= OLC_SIMD_AVX2)
      return {f32_f16 ? &avx2::f32_to_f16 : f16_f32 ? &avx2::f16_to_f32 : f32_bf16 ? &avx2::f32_to_bf16
                                                                                  : &avx2::bf16_to_f32,
              "avx2"};
    return {f32_f16 ? &scalar::f32_to_f16 : f16_f32 ? &scalar::f16_to_f32 : f32_bf16 ? &scalar::f32_to_bf16
                                                                                  : &scalar::bf16_to_f32,
            "scalar"};
  }
  if (src == OLC_DTYPE_FLOAT && dst == OLC_DTYPE_INT32) {
    if (level >= OLC_SIMD_AVX512) return {&avx512::f32_to_i32, "avx512"};
    if (level >= OLC_SIMD_AVX2) return {&avx2::f32_to_i32, "avx2"};
  }
  if (src == OLC_DTYPE_FLOAT && level >= OLC_SIMD_AVX512) {
    switch (dst) {
      case OLC_DTYPE_INT64: return {&avx512::f32_to_i64, "avx512"};
      case OLC_DTYPE_INT8: return {&avx512::f32_to_i8, "avx512"};
      case OLC_DTYPE_UINT8: return {&avx512::f32_to_u8, "avx512"};
      case OLC_DTYPE_INT16: return {&avx512::f32_to_i16, "avx512"};
      case OLC_DTYPE_UINT16: return {&avx512::f32_to_u16, "avx512"};
      case OLC_DTYPE_UINT32: return {&avx512::f32_to_u32, "avx512"};
      case OLC_DTYPE_BOOL: return {&avx512::f32_to_bool, "avx512"};
      default: break;
    }
  }
  if (src == OLC_DTYPE_DOUBLE && dst == OLC_DTYPE_INT32 && level >= OLC_SIMD_AVX512)
    return {&avx512::f64_to_i32, "avx512"};
  return {generic_convert(src, dst, saturate), "generic"};
}

class Cast final : public Kernel {
 public:
  int32_t src, dst;
  Choice c;
  bool like;  // CastLike: a second input gives the target type
  const olc_tuning_param* par_min;
  const olc_tuning_param* block;
  const olc_tuning_param* stream_min;
  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in != (like ? 2 : 1) || n_out != 1)
      return fail(ctx, "expects %d input(s) and 1 output, got %d and %d", like ? 2 : 1, n_in, n_out);
    const olc_tensor& x = in[0];
    if (x.dtype != src)
      return fail(ctx, "input 0 has type %s, the kernel was created for %s", olc_dtype_name(x.dtype),
                  olc_dtype_name(src));
    if (like && in[1].dtype != dst)
      return fail(ctx, "input 1 has type %s, the kernel was created for %s", olc_dtype_name(in[1].dtype),
                  olc_dtype_name(dst));
    const int64_t n = checked_count(x);
    if (n < 0) return fail(ctx, "input 0 has a negative dimension, too many elements or no data");
    char* y = static_cast<char*>(g_api->allocate_output(ctx, 0, dst, x.ndim, x.shape));
    if (!y && n > 0) return OLC_ERROR;
    if (n == 0) {
      g_api->record_usage_detail(ctx, c.isa);
      return OLC_OK;
    }
    const int64_t ss = static_cast<int64_t>(olc_dtype_size(src)), ds = static_cast<int64_t>(olc_dtype_size(dst));
    const char* xs = static_cast<const char*>(x.data);
    if (c.fn == &copy_convert) {
      g_api->record_usage_detail(ctx, c.isa);
      parallel_copy(ctx, y, xs, n * ss, g_api->tuning_read_int(par_min));
      return OLC_OK;
    }
    // Blocks of a multiple of 64 elements keep every block's output aligned.
    int64_t blk = g_api->tuning_read_int(block);
    blk = std::max<int64_t>(64, blk / 64 * 64);
    const int64_t nblocks = (n + blk - 1) / blk;
    const int64_t pmin = g_api->tuning_read_int(par_min);
    const bool serial = n * (ss + ds) < pmin || g_api->concurrency(ctx) <= 1 || nblocks <= 1;
    // Outputs far larger than the caches: non-temporal stores skip the
    // write-allocate reads (4M float32 -> float16 on the 2-core Zen 4: one
    // thread 683 -> 366 us, two threads about 520 -> 330 us).
    ConvertFn use = c.fn;
    const char* detail = c.isa;
    if (c.stream) {
      const int64_t smin = g_api->tuning_read_int(stream_min);
      if (smin > 0 && n * ds >= smin) {
        use = c.stream;
        detail = std::strcmp(c.isa, "avx512_bf16") == 0 ? "avx512_bf16,stream" : "avx512,stream";
      }
    }
    g_api->record_usage_detail(ctx, detail);
    if (serial) {
      use(xs, y, n);
      return OLC_OK;
    }
    par_for(ctx, nblocks, 1, n * (ss + ds), pmin, [&](int64_t b, int64_t e) {
      const int64_t lo = b * blk, hi = std::min(n, e * blk);
      use(xs + lo * ss, y + lo * ds, hi - lo);
    });
    return OLC_OK;
  }
};

Kernel* make(const olc_node_info* node, bool like, std::string* error) {
  static const char* const kAttrs[] = {"to", "saturate", "round_mode", nullptr};
  static const char* const kLikeAttrs[] = {"saturate", "round_mode", nullptr};
  if (!check_attr_names(node, like ? kLikeAttrs : kAttrs, error)) return nullptr;
  if (node->n_inputs != (like ? 2 : 1)) {
    *error = strf("expects %d input(s), got %d", like ? 2 : 1, node->n_inputs);
    return nullptr;
  }
  auto k = std::make_unique<Cast>();
  k->like = like;
  k->src = node->input_dtypes[0];
  if (like) {
    k->dst = node->input_dtypes[1];
  } else {
    const olc_attribute* to = find_attr(node, "to");
    if (!to || to->type != OLC_ATTR_INT) {
      *error = "attribute 'to' (an int element type) is required";
      return nullptr;
    }
    if (to->i < 0 || to->i > 1000 || !movable(static_cast<int32_t>(to->i))) {
      *error = strf("attribute 'to' = %lld is not a type this kernel converts to", (long long)to->i);
      return nullptr;
    }
    k->dst = static_cast<int32_t>(to->i);
  }
  int64_t saturate = 1;
  if (!attr_int(node, "saturate", 1, &saturate, error)) return nullptr;
  if (saturate != 0 && saturate != 1) {
    *error = strf("attribute 'saturate' must be 0 or 1, got %lld", (long long)saturate);
    return nullptr;
  }
  // 'saturate' only changes conversions to float8 types; float8 types
  // exist from opset 19 (the registrations never offer them earlier).
  if ((is_f8(k->src) || is_f8(k->dst)) && node->opset < 19) {
    *error = strf("float8 types need opset 19 or later, the model imports %lld", (long long)node->opset);
    return nullptr;
  }
  if (!movable(k->src) || !movable(k->dst)) {
    *error = strf("unsupported conversion %s -> %s", olc_dtype_name(k->src), olc_dtype_name(k->dst));
    return nullptr;
  }
  if (node->output_dtypes[0] != OLC_DTYPE_UNDEFINED && node->output_dtypes[0] != k->dst) {
    *error = strf("output type %s does not match the target type %s", olc_dtype_name(node->output_dtypes[0]),
                  olc_dtype_name(k->dst));
    return nullptr;
  }
  k->c = choose(k->src, k->dst, saturate != 0);
  if (!k->c.fn) {
    *error = strf("unsupported conversion %s -> %s", olc_dtype_name(k->src), olc_dtype_name(k->dst));
    return nullptr;
  }
  const char* kname = like ? "CastLike" : "Cast";
  k->par_min = g_api->tuning_declare_int(kLibrary, kname, k->c.isa, k->src, "parallel_min_bytes", 256 << 10);
  k->block = g_api->tuning_declare_int(kLibrary, kname, k->c.isa, k->src, "block_elements", 32768);
  k->stream_min = g_api->tuning_declare_int(kLibrary, kname, k->c.isa, k->src, "stream_min_bytes", 4 << 20);
  return k.release();
}

}  // namespace

Kernel* make_cast(const olc_node_info* node, std::string* error) { return make(node, false, error); }
Kernel* make_cast_like(const olc_node_info* node, std::string* error) { return make(node, true, error); }

std::string cast_isa_name(int32_t src, int32_t dst) {
  const Choice c = choose(src, dst, true);
  return c.fn ? c.isa : "none";
}

}  // namespace olc_tn
