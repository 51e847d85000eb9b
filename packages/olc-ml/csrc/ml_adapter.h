// The family's kernels as olc-core sees them: each group of adapters fills
// the op -> vtable table once, at module init.
#ifndef OLC_ML_ML_ADAPTER_H_
#define OLC_ML_ML_ADAPTER_H_

#include <map>
#include <string>

#include "olc/kernel_abi.h"

namespace olc_ml {

using VtableTable = std::map<std::string, const olc_kernel_vtable*>;

// Each takes the core API table (kept for run time: executor, outputs,
// tuning) and adds its operators' vtables.
void register_tree_kernels(const olc_core_api* api, VtableTable* table);
void register_linear_kernels(const olc_core_api* api, VtableTable* table);
void register_preprocess_kernels(const olc_core_api* api, VtableTable* table);

}  // namespace olc_ml

#endif  // OLC_ML_ML_ADAPTER_H_
