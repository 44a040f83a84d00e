// One SST string-kernel layer, its input dropout and its masked mean, forward and
// backward as plain functions (string_kernel_pooled_cpu.cpp): the pooled layer node
// (torch.ops.knn_sk_cpu.pooled) wraps them in autograd, and the classifier's
// whole-batch loss (classifier_cpu.cpp) calls them directly, once per half batch.
//
// A layer's arguments come in three kinds: its parameters (PooledParams), its dropout
// masks (PooledMasks) and its flags (PooledFlags). Each struct's `fields` names its
// fields in one order, the only place that order is written: the loss node reads its
// flat per-layer lists by it (unpack, pack), and knn_sk_cpu::classifier_layout gives
// the names to Python (knn.ops.pooled), which packs those lists by them. The pooled
// node's schema uses the same names for its arguments.
#pragma once

#include <ATen/ATen.h>

#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace knn {

// An optional tensor of the layer: absent ones are 0-element tensors (torch's C++
// autograd.Function cannot take undefined tensor inputs).
inline bool given(const at::Tensor& t) { return t.defined() && t.numel() > 0; }

// The layer's trained tensors (weight_h, decay, decay_bias, highway_bias may be absent).
struct PooledParams {
  at::Tensor weight, weight_h, decay, decay_bias, highway_bias;

  template <class Self, class Visit>
  static void fields(Self& p, Visit&& visit) {
    visit("weight", p.weight);
    visit("weight_h", p.weight_h);
    visit("decay", p.decay);
    visit("decay_bias", p.decay_bias);
    visit("highway_bias", p.highway_bias);
  }
};

// The dropout masks (undefined when not drawn) and the (T, B) padding mask: never
// differentiated.
struct PooledMasks {
  at::Tensor in_mask, x_mask, h_mask, mask;

  // The layer's own masks; `mask`, the batch's padding, is one for every layer.
  template <class Self, class Visit>
  static void fields(Self& m, Visit&& visit) {
    visit("in_mask", m.in_mask);
    visit("x_mask", m.x_mask);
    visit("h_mask", m.h_mask);
  }
};

struct PooledFlags {
  int64_t n, act;
  bool mult, norm, out_sum, highway, carry_is_input, onednn;

  // The layer's flags: the scan's (knn.ops.recurrence.op_flags), then carry_is_input;
  // `onednn` is one choice for every layer.
  template <class Self, class Visit>
  static void fields(Self& f, Visit&& visit) {
    visit("n", f.n);
    visit("mult", f.mult);
    visit("norm", f.norm);
    visit("out_sum", f.out_sum);
    visit("act", f.act);
    visit("highway", f.highway);
    visit("carry_is_input", f.carry_is_input);
  }
};

// The names of a kind's fields, in order.
template <class Fields>
std::vector<std::string> field_names() {
  Fields any{};
  std::vector<std::string> names;
  Fields::fields(any, [&](const char* name, auto&) { names.emplace_back(name); });
  return names;
}

template <class Fields>
size_t field_count() {
  static const size_t count = field_names<Fields>().size();
  return count;
}

// Layer `layer`'s fields from a flat list of field_count<Fields>() entries per layer.
template <class Fields, class List>
Fields unpack(const List& list, size_t layer) {
  Fields out{};
  size_t i = layer * field_count<Fields>();
  Fields::fields(out, [&](const char*, auto& field) {
    field = static_cast<std::decay_t<decltype(field)>>(list[i++]);
  });
  return out;
}

// Writes `value` as layer `layer`'s entries of a flat list (unpack's inverse).
template <class Fields, class List>
void pack(const Fields& value, List& list, size_t layer) {
  size_t i = layer * field_count<Fields>();
  Fields::fields(value, [&](const char*, const auto& field) { list[i++] = field; });
}

// What the backward reads: the masked input x̃, the projections, the scan's states, the
// lengths max(1, L), and the forward's tensors.
struct PooledSaved {
  at::Tensor xt, proj, gate_bias, c0, h0, mask_f, c_all, h_all, lam_all, lengths;
  PooledParams p;
  PooledMasks m;

  // Each tensor above once, in one order (m.mask is left out: the backward reads mask_f);
  // list() and from_list() both walk it.
  template <class Self, class Visit>
  static void tensors(Self& s, Visit&& visit) {
    for (auto* t : {&s.xt, &s.proj, &s.gate_bias, &s.c0, &s.h0, &s.mask_f, &s.c_all, &s.h_all,
                    &s.lam_all, &s.lengths})
      visit(*t);
    PooledParams::fields(s.p, [&](const char*, auto& t) { visit(t); });
    PooledMasks::fields(s.m, [&](const char*, auto& t) { visit(t); });
  }

  // As the autograd node saves them.
  std::vector<at::Tensor> list() const;
  static PooledSaved from_list(const std::vector<at::Tensor>& s);
};

// dL/dx (undefined unless asked for) and dL/d of each parameter (undefined for absent ones).
struct PooledGrads {
  at::Tensor dx;
  PooledParams params;
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
