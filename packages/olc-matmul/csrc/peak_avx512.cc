// FMA peak microbenchmark (AVX-512): 24 independent zmm FMA chains in one
// assembly loop, timed by the thread's CPU clock. Reports float32 GFLOP/s of
// the calling thread.
#include <time.h>

#include <cstdint>

namespace olc_mm {
namespace avx512 {

namespace {
// The calling thread's CPU time: time the OS gives other processes on this
// core drops out, so a busy machine does not lower the peak.
double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
}  // namespace

double fma_peak_gflops(int64_t iters) {
  if (iters <= 0) return 0.0;
  int64_t n = iters;
  const double t0 = thread_cpu_seconds();
  __asm__ volatile(
      "vxorps %%zmm0, %%zmm0, %%zmm0\n\t"
      "vxorps %%zmm1, %%zmm1, %%zmm1\n\t"
      "vxorps %%zmm2, %%zmm2, %%zmm2\n\t"
      "vxorps %%zmm3, %%zmm3, %%zmm3\n\t"
      "vxorps %%zmm4, %%zmm4, %%zmm4\n\t"
      "vxorps %%zmm5, %%zmm5, %%zmm5\n\t"
      "vxorps %%zmm6, %%zmm6, %%zmm6\n\t"
      "vxorps %%zmm7, %%zmm7, %%zmm7\n\t"
      "vxorps %%zmm8, %%zmm8, %%zmm8\n\t"
      "vxorps %%zmm9, %%zmm9, %%zmm9\n\t"
      "vxorps %%zmm10, %%zmm10, %%zmm10\n\t"
      "vxorps %%zmm11, %%zmm11, %%zmm11\n\t"
      "vxorps %%zmm12, %%zmm12, %%zmm12\n\t"
      "vxorps %%zmm13, %%zmm13, %%zmm13\n\t"
      "vxorps %%zmm14, %%zmm14, %%zmm14\n\t"
      "vxorps %%zmm15, %%zmm15, %%zmm15\n\t"
      "vxorps %%zmm16, %%zmm16, %%zmm16\n\t"
      "vxorps %%zmm17, %%zmm17, %%zmm17\n\t"
      "vxorps %%zmm18, %%zmm18, %%zmm18\n\t"
      "vxorps %%zmm19, %%zmm19, %%zmm19\n\t"
      "vxorps %%zmm20, %%zmm20, %%zmm20\n\t"
      "vxorps %%zmm21, %%zmm21, %%zmm21\n\t"
      "vxorps %%zmm22, %%zmm22, %%zmm22\n\t"
      "vxorps %%zmm23, %%zmm23, %%zmm23\n\t"
      "vxorps %%zmm30, %%zmm30, %%zmm30\n\t"
      "vxorps %%zmm31, %%zmm31, %%zmm31\n\t"
      "1:\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm0\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm1\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm2\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm3\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm4\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm5\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm6\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm7\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm8\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm9\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm10\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm11\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm12\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm13\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm14\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm15\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm16\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm17\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm18\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm19\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm20\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm21\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm22\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm23\n\t"
      "dec %0\n\t"
      "jnz 1b\n\t"
      : "+r"(n)
      :
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm30", "xmm31", "cc");
  const double sec = thread_cpu_seconds() - t0;
  return sec > 0 ? (2.0 * 16 * 24 * static_cast<double>(iters)) / sec * 1e-9 : 0.0;
}

}  // namespace avx512
}  // namespace olc_mm
