// One SST string-kernel layer, its input dropout and its masked mean, forward and
// backward as plain functions (string_kernel_pooled_cpu.cpp): the pooled layer node
// (torch.ops.knn_sk_cpu.pooled) wraps them in autograd, and the classifier's
// whole-batch loss (classifier_cpu.cpp) calls them directly, once per half batch.
#pragma once

#include <ATen/ATen.h>

#include <utility>
#include <vector>

namespace knn {

// An optional tensor of the layer: absent ones are 0-element tensors (torch's C++
// autograd.Function cannot take undefined tensor inputs).
inline bool given(const at::Tensor& t) { return t.defined() && t.numel() > 0; }

// The layer's trained tensors (weight_h, decay, decay_bias, highway_bias may be absent).
struct PooledParams {
  at::Tensor weight, weight_h, decay, decay_bias, highway_bias;
};

// The dropout masks (undefined when not drawn) and the (T, B) padding mask: never
// differentiated.
struct PooledMasks {
  at::Tensor in_mask, x_mask, h_mask, mask;
};

struct PooledFlags {
  int64_t n, act;
  bool mult, norm, out_sum, highway, carry_is_input, onednn;
};

// What the backward reads: the masked input x̃, the projections, the scan's states, the
// lengths max(1, L), and the forward's tensors.
struct PooledSaved {
  at::Tensor xt, proj, gate_bias, c0, h0, mask_f, c_all, h_all, lam_all, lengths;
  PooledParams p;
  PooledMasks m;

  // As the autograd node saves them; m.mask is left out (the backward reads mask_f).
  std::vector<at::Tensor> list() const;
  static PooledSaved from_list(const std::vector<at::Tensor>& s);
};

struct PooledGrads {
  at::Tensor dx, weight, weight_h, decay, decay_bias, highway_bias;
};

// (h (T, B, d), z (B, d)) for x (T, B, d_in); fills *saved for pooled_backward.
std::pair<at::Tensor, at::Tensor> pooled_forward(const at::Tensor& x, const PooledParams& p,
                                                 const PooledMasks& m, const PooledFlags& f,
                                                 PooledSaved* saved);

// Gradients from dL/dh (T, B, d) and dL/dz (B, d), either undefined when none reaches
// it; dx only when need_x. Absent parameters get undefined gradients.
PooledGrads pooled_backward(const PooledSaved& s, const PooledFlags& f, const at::Tensor& d_h,
                            const at::Tensor& d_z, bool need_x);

}  // namespace knn
