// com.example ScaledSoftsign: y = alpha * x / (1 + |x|), float32.
#ifndef OLC_EXAMPLE_SCALED_SOFTSIGN_H_
#define OLC_EXAMPLE_SCALED_SOFTSIGN_H_

#include "olc/kernel_abi.h"

namespace olc_example {

// Set once at module init, before any vtable is handed out.
void scaled_softsign_init(const olc_core_api* api);

extern const olc_kernel_vtable kScaledSoftsignVtable;

}  // namespace olc_example

#endif  // OLC_EXAMPLE_SCALED_SOFTSIGN_H_
