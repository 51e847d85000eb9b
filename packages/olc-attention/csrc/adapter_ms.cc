// Adapters of the com.microsoft operators.
#include <vector>

#include "adapter_util.h"

namespace olc_attn {

void ms_ops(std::vector<OpEntry>* out) { (void)out; }

}  // namespace olc_attn
