// The AVX2 int8-activation MatMulNBits kernels with AVX-VNNI dot products
// (VEX vpdpbusd; see nbits_i8_avx2.inc). Compiled with -mavxvnni; entered
// only when cpu_features() reports AVX-VNNI.
#define OLC_NBI8_AVXVNNI 1
#include "nbits_i8_avx2.inc"
