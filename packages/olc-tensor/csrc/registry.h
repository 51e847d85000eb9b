// Operator name -> kernel factory, and the vtables handed to olc-core.
#ifndef OLC_TENSOR_REGISTRY_H_
#define OLC_TENSOR_REGISTRY_H_

#include <string>
#include <utility>
#include <vector>

#include "common.h"

namespace olc_tn {

Kernel* make_transpose(const olc_node_info* node, std::string* error);
Kernel* make_gather(const olc_node_info* node, std::string* error);
Kernel* make_gather_elements(const olc_node_info* node, std::string* error);
Kernel* make_concat(const olc_node_info* node, std::string* error);
Kernel* make_split(const olc_node_info* node, std::string* error);
Kernel* make_slice(const olc_node_info* node, std::string* error);
Kernel* make_expand(const olc_node_info* node, std::string* error);
Kernel* make_tile(const olc_node_info* node, std::string* error);
Kernel* make_cast(const olc_node_info* node, std::string* error);
Kernel* make_cast_like(const olc_node_info* node, std::string* error);
Kernel* make_reduce_sum(const olc_node_info* node, std::string* error);
Kernel* make_reduce_mean(const olc_node_info* node, std::string* error);
Kernel* make_reduce_max(const olc_node_info* node, std::string* error);
Kernel* make_reduce_min(const olc_node_info* node, std::string* error);
Kernel* make_argmax(const olc_node_info* node, std::string* error);
Kernel* make_argmin(const olc_node_info* node, std::string* error);
Kernel* make_scatter_nd(const olc_node_info* node, std::string* error);
Kernel* make_nonzero(const olc_node_info* node, std::string* error);
Kernel* make_topk(const olc_node_info* node, std::string* error);
Kernel* make_pad(const olc_node_info* node, std::string* error);
Kernel* make_reduce_prod(const olc_node_info* node, std::string* error);
Kernel* make_reduce_l1(const olc_node_info* node, std::string* error);
Kernel* make_reduce_l2(const olc_node_info* node, std::string* error);
Kernel* make_reduce_log_sum_exp(const olc_node_info* node, std::string* error);
Kernel* make_reduce_sum_square(const olc_node_info* node, std::string* error);
Kernel* make_cumsum(const olc_node_info* node, std::string* error);
Kernel* make_gather_nd(const olc_node_info* node, std::string* error);
Kernel* make_scatter_elements(const olc_node_info* node, std::string* error);
Kernel* make_one_hot(const olc_node_info* node, std::string* error);
Kernel* make_constant_of_shape(const olc_node_info* node, std::string* error);
Kernel* make_range(const olc_node_info* node, std::string* error);
Kernel* make_eye_like(const olc_node_info* node, std::string* error);
Kernel* make_trilu(const olc_node_info* node, std::string* error);
Kernel* make_depth_to_space(const olc_node_info* node, std::string* error);
Kernel* make_space_to_depth(const olc_node_info* node, std::string* error);
Kernel* make_quantize_linear(const olc_node_info* node, std::string* error);
Kernel* make_dequantize_linear(const olc_node_info* node, std::string* error);
Kernel* make_dynamic_quantize_linear(const olc_node_info* node, std::string* error);
Kernel* make_max_pool(const olc_node_info* node, std::string* error);
Kernel* make_average_pool(const olc_node_info* node, std::string* error);
Kernel* make_lp_pool(const olc_node_info* node, std::string* error);
Kernel* make_global_max_pool(const olc_node_info* node, std::string* error);
Kernel* make_global_average_pool(const olc_node_info* node, std::string* error);
Kernel* make_global_lp_pool(const olc_node_info* node, std::string* error);
Kernel* make_resize(const olc_node_info* node, std::string* error);
Kernel* make_upsample(const olc_node_info* node, std::string* error);
Kernel* make_roi_align(const olc_node_info* node, std::string* error);
Kernel* make_max_roi_pool(const olc_node_info* node, std::string* error);
Kernel* make_grid_sample(const olc_node_info* node, std::string* error);
Kernel* make_col2im(const olc_node_info* node, std::string* error);
Kernel* make_max_unpool(const olc_node_info* node, std::string* error);

std::vector<std::pair<std::string, Factory>> factories();

// Builds the vtables; called once at module init after g_api is set.
void register_all();
const olc_kernel_vtable* vtable_of(const std::string& op);
std::vector<std::string> op_names();

}  // namespace olc_tn

#endif  // OLC_TENSOR_REGISTRY_H_
