// LSTM and com.microsoft DynamicQuantizeLSTM vtables: attributes validated and constant weights packed at
// create(); per call the input projection of every step as one GEMM, then
// per step the recurrent product and the fused gate math.
#ifndef OLC_MATMUL_LSTM_ADAPTER_H_
#define OLC_MATMUL_LSTM_ADAPTER_H_

#include "olc/kernel_abi.h"

namespace olc_mm {
void set_lstm_api(const olc_core_api* api);
const olc_kernel_vtable* lstm_vtable();
const olc_kernel_vtable* dynamic_quantize_lstm_vtable();
}  // namespace olc_mm

#endif  // OLC_MATMUL_LSTM_ADAPTER_H_
