// LSTM, GRU, RNN and com.microsoft DynamicQuantizeLSTM vtables on one
// recurrent driver: attributes validated and constant weights packed (the
// quantized ones dequantized first) at create(); per call the input
// projection of every step as one GEMM, then per step the recurrent
// product and the fused gate math of the op.
#ifndef OLC_MATMUL_RNN_ADAPTER_H_
#define OLC_MATMUL_RNN_ADAPTER_H_

#include "olc/kernel_abi.h"

namespace olc_mm {
void set_recurrent_api(const olc_core_api* api);
const olc_kernel_vtable* lstm_vtable();
const olc_kernel_vtable* gru_vtable();
const olc_kernel_vtable* rnn_vtable();
const olc_kernel_vtable* dynamic_quantize_lstm_vtable();
}  // namespace olc_mm

#endif  // OLC_MATMUL_RNN_ADAPTER_H_
