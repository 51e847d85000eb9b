// Throughput of the vmath functions: ns per element over a 4096-float buffer
// in L1, inputs uniform in [-8, 8] (log/log1p: [0.01, 8]).
//   g++ -O2 -std=c++17 -mavx512f -mavx512bw -mavx512vl -mavx512dq bench_vmath.cc && ./a.out
#include <immintrin.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "../vmath_avx512.h"

template <class F>
double bench(F f, const std::vector<float>& x, std::vector<float>& y) {
  const size_t n = x.size();
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < 200; ++it)
      for (size_t i = 0; i < n; i += 16) _mm512_storeu_ps(&y[i], f(_mm512_loadu_ps(&x[i])));
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::nano>(t1 - t0).count() / (200.0 * n));
  }
  return best;
}

int main() {
  const size_t n = 4096;
  std::vector<float> x(n), xp(n), y(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = -8.0f + 16.0f * static_cast<float>((i * 2654435761u) % n) / n;
    xp[i] = 0.01f + 8.0f * static_cast<float>((i * 2654435761u) % n) / n;
  }
#define B(NAME, IN) std::printf("%-10s %.3f ns/elem\n", #NAME, bench([](__m512 v) { return olc_v512_##NAME(v); }, IN, y))
  B(exp, x); B(expm1, x); B(log, xp); B(log1p, xp); B(tanh, x); B(sigmoid, x); B(erf, x);
  B(sin, x); B(cos, x); B(softplus, x); B(gelu_erf, x); B(gelu_tanh, x);
  return 0;
}
