/*
 * olc kernel ABI: the C contract between olc-core (the runtime) and kernel
 * families (native extension modules shipped in their own wheels).
 *
 * - olc-core publishes one `olc_core_api` table in a PyCapsule named
 *   OLC_CORE_API_CAPSULE. A family imports it once at module init with
 *   olc_import_core_api() (olc/python_api.h) and never links against core.
 * - A family exports one `olc_kernel_vtable` per kernel, each in a PyCapsule
 *   named OLC_KERNEL_VTABLE_CAPSULE; its Python plugin hands the capsule to a
 *   KernelRegistration as the factory.
 *
 * Versioning: OLC_ABI_VERSION changes when a struct layout or a slot's
 * meaning changes (consumers built for another version are refused with a
 * clear import error). New slots are only ever appended to olc_core_api;
 * `api_size` tells a consumer which slots exist. Retired slots stay in place.
 * Element types are only ever appended to olc_dtype, with their ONNX codes;
 * that needs no version change: a kernel only receives the types its
 * registration claims, so a family built against an older header never
 * sees a code it does not know.
 *
 * Header is plain C99 so that any toolchain can build a plugin.
 */
#ifndef OLC_KERNEL_ABI_H_
#define OLC_KERNEL_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OLC_ABI_VERSION 1u
#define OLC_CORE_API_CAPSULE "olc_core._native._C_API"
#define OLC_KERNEL_VTABLE_CAPSULE "olc.kernel_vtable"

/* Element types: the codes of onnx.TensorProto.DataType. */
enum olc_dtype {
  OLC_DTYPE_UNDEFINED = 0,
  OLC_DTYPE_FLOAT = 1,
  OLC_DTYPE_UINT8 = 2,
  OLC_DTYPE_INT8 = 3,
  OLC_DTYPE_UINT16 = 4,
  OLC_DTYPE_INT16 = 5,
  OLC_DTYPE_INT32 = 6,
  OLC_DTYPE_INT64 = 7,
  OLC_DTYPE_STRING = 8, /* never reaches a native kernel */
  OLC_DTYPE_BOOL = 9,   /* one byte per element, 0 or 1 */
  OLC_DTYPE_FLOAT16 = 10,
  OLC_DTYPE_DOUBLE = 11,
  OLC_DTYPE_UINT32 = 12,
  OLC_DTYPE_UINT64 = 13,
  OLC_DTYPE_BFLOAT16 = 16,
  /* float8 (opset 19+), one byte each. FN: no infinities, NaN is S.1111.111;
   * FNUZ: no infinities and no -0, the single NaN is 0x80. */
  OLC_DTYPE_FLOAT8E4M3FN = 17,
  OLC_DTYPE_FLOAT8E4M3FNUZ = 18,
  OLC_DTYPE_FLOAT8E5M2 = 19,
  OLC_DTYPE_FLOAT8E5M2FNUZ = 20,
  /* 4-bit integers (opset 21+), unpacked: one element per byte, the value
   * in the low 4 bits (two's complement for INT4) and the high 4 bits zero,
   * as numpy holds ml_dtypes' uint4/int4. A kernel writing them must keep
   * the high bits zero; ONNX's packed pairs exist only in serialized tensors. */
  OLC_DTYPE_UINT4 = 21,
  OLC_DTYPE_INT4 = 22
};

/* SIMD levels, ordered: a kernel may use every level <= simd_level(). */
enum olc_simd_level {
  OLC_SIMD_SCALAR = 0,
  OLC_SIMD_AVX2 = 1,   /* AVX2 + FMA + F16C */
  OLC_SIMD_AVX512 = 2  /* AVX-512 F, BW, VL, DQ */
};

/* Bits of cpu_features(); extensions beyond the levels above. The capped
 * view: features above the OLC_SIMD cap are reported as absent. */
enum olc_cpu_feature {
  OLC_CPU_SSE2 = 1ull << 0,
  OLC_CPU_SSE3 = 1ull << 1,
  OLC_CPU_SSSE3 = 1ull << 2,
  OLC_CPU_SSE41 = 1ull << 3,
  OLC_CPU_SSE42 = 1ull << 4,
  OLC_CPU_AVX = 1ull << 5,
  OLC_CPU_AVX2 = 1ull << 6,
  OLC_CPU_FMA = 1ull << 7,
  OLC_CPU_F16C = 1ull << 8,
  OLC_CPU_AVX512F = 1ull << 9,
  OLC_CPU_AVX512BW = 1ull << 10,
  OLC_CPU_AVX512VL = 1ull << 11,
  OLC_CPU_AVX512DQ = 1ull << 12,
  OLC_CPU_AVX512_BF16 = 1ull << 13,
  OLC_CPU_AVX512_FP16 = 1ull << 14,
  OLC_CPU_AVX512_VNNI = 1ull << 15,
  OLC_CPU_AMX_TILE = 1ull << 16,
  OLC_CPU_AMX_INT8 = 1ull << 17,
  OLC_CPU_AMX_BF16 = 1ull << 18,
  /* VEX-encoded VNNI (vpdpbusd on xmm/ymm): Alder Lake and later client
   * CPUs, Sapphire Rapids, Zen 5. An AVX2-level extension: it stays visible
   * under an avx2 cap. */
  OLC_CPU_AVX_VNNI = 1ull << 19
};

/* Header-only helpers (not part of the binary interface). */

/* Element size in bytes of a dtype a native kernel can see; 0 otherwise. */
static inline size_t olc_dtype_size(int32_t dtype) {
  switch (dtype) {
    case OLC_DTYPE_BOOL:
    case OLC_DTYPE_INT8:
    case OLC_DTYPE_UINT8:
    case OLC_DTYPE_FLOAT8E4M3FN:
    case OLC_DTYPE_FLOAT8E4M3FNUZ:
    case OLC_DTYPE_FLOAT8E5M2:
    case OLC_DTYPE_FLOAT8E5M2FNUZ:
    case OLC_DTYPE_UINT4:
    case OLC_DTYPE_INT4: return 1;
    case OLC_DTYPE_INT16:
    case OLC_DTYPE_UINT16:
    case OLC_DTYPE_FLOAT16:
    case OLC_DTYPE_BFLOAT16: return 2;
    case OLC_DTYPE_FLOAT:
    case OLC_DTYPE_INT32:
    case OLC_DTYPE_UINT32: return 4;
    case OLC_DTYPE_DOUBLE:
    case OLC_DTYPE_INT64:
    case OLC_DTYPE_UINT64: return 8;
    default: return 0;
  }
}

/* The name olc uses for a dtype in messages and registrations. */
static inline const char* olc_dtype_name(int32_t dtype) {
  switch (dtype) {
    case OLC_DTYPE_FLOAT: return "float32";
    case OLC_DTYPE_UINT8: return "uint8";
    case OLC_DTYPE_INT8: return "int8";
    case OLC_DTYPE_UINT16: return "uint16";
    case OLC_DTYPE_INT16: return "int16";
    case OLC_DTYPE_INT32: return "int32";
    case OLC_DTYPE_INT64: return "int64";
    case OLC_DTYPE_STRING: return "string";
    case OLC_DTYPE_BOOL: return "bool";
    case OLC_DTYPE_FLOAT16: return "float16";
    case OLC_DTYPE_DOUBLE: return "float64";
    case OLC_DTYPE_UINT32: return "uint32";
    case OLC_DTYPE_UINT64: return "uint64";
    case OLC_DTYPE_BFLOAT16: return "bfloat16";
    case OLC_DTYPE_FLOAT8E4M3FN: return "float8e4m3fn";
    case OLC_DTYPE_FLOAT8E4M3FNUZ: return "float8e4m3fnuz";
    case OLC_DTYPE_FLOAT8E5M2: return "float8e5m2";
    case OLC_DTYPE_FLOAT8E5M2FNUZ: return "float8e5m2fnuz";
    case OLC_DTYPE_UINT4: return "uint4";
    case OLC_DTYPE_INT4: return "int4";
    default: return "undefined";
  }
}

/* Return codes of olc_kernel_vtable.run. */
#define OLC_OK 0
#define OLC_ERROR 1

/* A dense, C-contiguous tensor view. `data` may be NULL only when the
 * tensor has zero elements. Inputs must be treated as read-only. */
typedef struct olc_tensor {
  int32_t dtype;
  int32_t ndim;
  const int64_t* shape;
  void* data;
} olc_tensor;

/* Header-only helper: the number of elements of a view, or -1 when a
 * dimension is negative or the count overflows int64. */
static inline int64_t olc_element_count(const olc_tensor* t) {
  int64_t n = 1;
  for (int32_t d = 0; d < t->ndim; ++d) {
    const int64_t dim = t->shape[d];
    if (dim < 0 || (dim != 0 && n > INT64_MAX / dim)) return -1;
    n *= dim;
  }
  return n;
}

/* ONNX AttributeProto.AttributeType codes used in olc_attribute.type. */
enum olc_attribute_type {
  OLC_ATTR_FLOAT = 1,
  OLC_ATTR_INT = 2,
  OLC_ATTR_STRING = 3,
  OLC_ATTR_FLOATS = 6,
  OLC_ATTR_INTS = 7
};

typedef struct olc_attribute {
  const char* name;
  int32_t type;         /* olc_attribute_type */
  int64_t i;            /* OLC_ATTR_INT */
  double f;             /* OLC_ATTR_FLOAT */
  const char* s;        /* OLC_ATTR_STRING, NUL-terminated */
  int64_t count;        /* OLC_ATTR_FLOATS / OLC_ATTR_INTS */
  const int64_t* ints;  /* OLC_ATTR_INTS */
  const double* floats; /* OLC_ATTR_FLOATS */
} olc_attribute;

/* What a kernel is created from: the node, its resolved opset and the
 * inferred element types. Valid only during create(). */
typedef struct olc_node_info {
  const char* name;
  const char* domain; /* "ai.onnx" for the default domain */
  const char* op_type;
  int64_t opset;      /* opset version of `domain` imported by the model */
  int32_t n_inputs;   /* including absent optional inputs */
  const int32_t* input_dtypes;  /* OLC_DTYPE_UNDEFINED for an absent input */
  const int32_t* input_ranks;   /* -1 when not known */
  int32_t n_outputs;
  const int32_t* output_dtypes; /* OLC_DTYPE_UNDEFINED when not inferred */
  int32_t n_attributes;
  const olc_attribute* attributes; /* only those set on the node */
  /* Per input: the value when it is a constant of the model (an initializer
   * that no feed can replace), else a view with data == NULL. Constant data
   * stays valid and unchanged for the life of the kernel, so create() may
   * pre-pack it or keep pointers into it. */
  const olc_tensor* input_constants;
} olc_node_info;

/* Opaque per-call state given to run(): executor, output slots, errors. */
typedef struct olc_context olc_context;

/* A tuning parameter handle; reading it is one atomic load. */
typedef struct olc_tuning_param olc_tuning_param;

/* A range [begin, end) of work submitted to parallel_for. */
typedef void (*olc_range_fn)(void* user, int64_t begin, int64_t end);

typedef struct olc_core_api {
  /* slot 0 */ uint32_t abi_version;
  /* slot 1 */ uint32_t api_size; /* sizeof(olc_core_api) as built by core */

  /* CPU: the detected level capped by OLC_SIMD. */
  int32_t (*simd_level)(void);
  uint64_t (*cpu_features)(void);

  /* Executor. Splits [0, n) into ranges of at least `grain` items and runs
   * fn on them, on at most `max_participants` threads including the caller
   * (<= 0: as many as the session admits). Serial when ctx is NULL, when the
   * session has one thread, or when called from inside a parallel region.
   * Returns after every range has run. */
  void (*parallel_for)(olc_context* ctx, int64_t n, int64_t grain,
                       int32_t max_participants, olc_range_fn fn, void* user);
  /* How many threads parallel_for may use for this context (>= 1). */
  int32_t (*concurrency)(olc_context* ctx);

  /* Allocates output `index` (64-byte aligned, uninitialised) and returns
   * its data; NULL on failure (the error is already set). Call once per
   * output, after validation, before writing. */
  void* (*allocate_output)(olc_context* ctx, int32_t index, int32_t dtype,
                           int32_t ndim, const int64_t* shape);

  /* Records the reason a run failed; returns OLC_ERROR for convenience. The
   * runtime prefixes the node name and op type. */
  int32_t (*set_error)(olc_context* ctx, const char* message);

  /* Tuning registry. declare_* registers a parameter under (library,
   * kernel, implementation, dtype) with its portable default (the first
   * declaration wins) and returns a stable handle; read_* is one atomic
   * load, safe in the hot path. */
  olc_tuning_param* (*tuning_declare_int)(const char* library,
                                          const char* kernel,
                                          const char* implementation,
                                          int32_t dtype, const char* name,
                                          int64_t default_value);
  int64_t (*tuning_read_int)(const olc_tuning_param* param);
  olc_tuning_param* (*tuning_declare_float)(const char* library,
                                            const char* kernel,
                                            const char* implementation,
                                            int32_t dtype, const char* name,
                                            double default_value);
  double (*tuning_read_float)(const olc_tuning_param* param);

  /* Appends detail (for example the ISA variant chosen) to the usage record
   * of this run when recording is on; no-op otherwise. */
  void (*record_usage_detail)(olc_context* ctx, const char* detail);

  /* --- Appended slots: check api_size before use (OLC_API_HAS). --- */

  /* From create() only: the kernel holds `bytes` of data prepared from
   * constant inputs (packed weights). `key` names the buffer: kernels that
   * share one buffer report the same key, and a session counts it once.
   * The session shows the figure per node and in total. */
  void (*report_prepacked)(const olc_node_info* node, const void* key, int64_t bytes);

  /* Makes output `index` a view of input `input`: the same bytes, read with
   * the shape (ndim, shape), which must hold as many elements as the input;
   * the dtype is the input's. Called instead of allocate_output, at most
   * once per output. No data is copied. The runtime keeps the input's
   * storage alive while any view of it lives, never lets a kernel write
   * through a view of a feed or an initializer, and refuses in-place reuse
   * (OLC_KERNEL_INPLACE_INPUT0) of storage that a live view still reads.
   * Returns OLC_OK, or OLC_ERROR after setting the error. */
  int32_t (*view_output)(olc_context* ctx, int32_t index, int32_t input,
                         int32_t ndim, const int64_t* shape);

  /* The data (or unified) cache of level `level` (1, 2 or 3) that CPU 0
   * sees, as the OS reports it (Linux sysfs, read once): its size in bytes,
   * and in *shared_by (when not NULL) how many logical CPUs share it.
   * Returns 0 (and *shared_by = 1) where the OS does not say. Families derive
   * their cache-dependent defaults (streaming thresholds, blocking) from it,
   * so that they follow the host rather than the CPU they were tuned on;
   * `olc info` shows the same values. */
  int64_t (*data_cache_bytes)(int32_t level, int32_t* shared_by);
} olc_core_api;

/* Whether the core API table `api` has the slot `field` (appended slots are
 * absent from an older olc-core). */
#define OLC_API_HAS(api, field) \
  ((api)->api_size >= offsetof(olc_core_api, field) + sizeof((api)->field))

/* Kernel flags. */
/* Output 0 may be written into input 0's buffer when the runtime owns that
 * buffer, it is dead after this node, and dtype and element count match.
 * Only valid for kernels that read element i before writing element i. */
#define OLC_KERNEL_INPLACE_INPUT0 (1u << 0)

typedef struct olc_kernel_vtable {
  uint32_t abi_version; /* OLC_ABI_VERSION the family was built with */
  uint32_t flags;
  const char* name;     /* library-qualified, e.g. "olc_elementwise::Abs" */

  /* Validates attributes and types and builds the immutable kernel state.
   * On failure returns NULL and writes a reason into error (NUL-terminated,
   * at most error_size bytes). */
  void* (*create)(const olc_core_api* api, const olc_node_info* node,
                  char* error, size_t error_size);

  /* Runs the kernel. Must not modify the state (runs may be concurrent).
   * Validates inputs before allocating or writing any output. Returns
   * OLC_OK, or OLC_ERROR after set_error(). */
  int32_t (*run)(const void* state, olc_context* ctx, int32_t n_inputs,
                 const olc_tensor* inputs, int32_t n_outputs);

  void (*destroy)(void* state);
} olc_kernel_vtable;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* OLC_KERNEL_ABI_H_ */
