// The AVX2 int8-activation MatMulNBits kernels: vpmaddubsw + vpmaddwd dot
// products (see nbits_i8_avx2.inc). Compiled with the AVX2 flags.
#include "nbits_i8_avx2.inc"
