// A string-kernel layer, its input dropout and its masked mean as one C++ autograd node
// (torch.ops.knn_sk_cpu.pooled), for the SST classifier's CPU path; Python calls it at
// one point, knn.ops.pooled.pooled_layer.
//
// The math, and the plain PyTorch composition this must equal bit for bit, are in
// knn/layers/string_kernel_pooled.py (pooled_layer_ref). Every op below is the one that
// composition runs, in the same order. Being C++ lets its products use the intra-op
// threads (cpu_parallel.h): the forward product in blocks of rows, dW beside dX.
//
//   forward   x̃ = (x ⊙ m_in) ⊙ m_x,  proj = x̃ Wᵀ,  h = scan(proj),  z = Σ_t h[t] / max(1, L)
//   backward  g = dL/dh + dL/dz / max(1, L),  d proj = scan backward of g,
//             dW = d projᵀ x̃,  dx = ((d proj W [+ d carry]) ⊙ m_x) ⊙ m_in
//
// The scan runs through the dispatcher (knn_sk_cpu::forward / ::backward of
// string_kernel_cpu.cpp), so profilers still see it as its own op.
#include "pooled_layer.h"

#include "cpu_gemm.h"
#include "cpu_parallel.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <vector>

namespace {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

using ScanForward = std::vector<Tensor>(Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor,
                                        Tensor, Tensor, int64_t, bool, bool, bool, int64_t, bool);
using ScanBackward = std::vector<Tensor>(Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor,
                                         Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor,
                                         Tensor, int64_t, bool, bool, bool, int64_t, bool);
using OneDNNLinear = Tensor(const Tensor&, const Tensor&, const std::optional<Tensor>&,
                            c10::string_view, torch::List<std::optional<at::Scalar>>,
                            std::optional<c10::string_view>);

// a (M, K) · w (N, K)ᵀ on the library knn.ops.linear.product picks (the caller passes which).
// aten's (mm's BLAS call, cpu_gemm.h) in blocks of rows, one per thread (cpu_parallel.h);
// each row is the same dot products as in one call.
Tensor product(const Tensor& a, const Tensor& w, bool onednn) {
  if (!onednn) return knn::blas_mm_in_row_blocks(a, w.t(), knn::kMinProductRows);
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mkldnn::_linear_pointwise", "")
                       .typed<OneDNNLinear>();
  return op.call(a, w, std::nullopt, "none", torch::List<std::optional<at::Scalar>>(), "");
}

// An undefined tensor as the scan ops take it: 0 elements.
Tensor or_empty(const Tensor& t, const Tensor& empty) { return knn::given(t) ? t : empty; }

}  // namespace

namespace knn {

std::vector<Tensor> PooledSaved::list() const {
  std::vector<Tensor> out;
  tensors(*this, [&](const Tensor& t) { out.push_back(t); });
  return out;
}

PooledSaved PooledSaved::from_list(const std::vector<Tensor>& s) {
  PooledSaved out;
  size_t i = 0;
  tensors(out, [&](Tensor& t) { t = s[i++]; });
  return out;
}

std::pair<Tensor, Tensor> pooled_forward(const Tensor& x, const PooledParams& p,
                                         const PooledMasks& m, const PooledFlags& f,
                                         PooledSaved* saved) {
  static auto scan = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("knn_sk_cpu::forward", "")
                         .typed<ScanForward>();
  const int64_t T = x.size(0), B = x.size(1), d_in = x.size(2);
  const bool gated = !given(p.decay);
  const int64_t K = f.n + gated + f.highway + (f.highway && !f.carry_is_input);
  const int64_t d = p.weight.size(0) / K;
  Tensor xt = m.in_mask.defined() ? x * m.in_mask : x;
  if (m.x_mask.defined()) xt = xt * m.x_mask;
  Tensor proj = product(xt.reshape({T * B, d_in}), p.weight, f.onednn).view({T, B, K, d});
  Tensor zeros = x.new_zeros({d});
  Tensor gate_bias = at::stack({given(p.decay_bias) ? p.decay_bias : zeros,
                                given(p.highway_bias) ? p.highway_bias : zeros});
  Tensor c0 = x.new_zeros({B, f.n, d}), h0 = x.new_zeros({B, d});
  Tensor empty = x.new_empty({0});
  Tensor mask_f = m.mask.to(x.scalar_type());
  std::vector<Tensor> r = scan.call(proj, f.carry_is_input ? xt : empty, or_empty(p.decay, empty),
                                    gate_bias, or_empty(p.weight_h, empty), c0, h0, mask_f,
                                    m.h_mask.defined() ? m.h_mask : empty, f.n, f.mult, f.norm,
                                    f.out_sum, f.act, f.highway);
  Tensor lengths = mask_f.unsqueeze(-1).sum(0).clamp_min(1.0);  // the 0/1 sums are exact
  Tensor z = r[0].sum(0) / lengths;  // h is 0 on padding, so this is the masked mean
  *saved = PooledSaved{xt, proj, gate_bias, c0, h0, mask_f, r[1], r[2], r[3], lengths, p, m};
  return {r[0], z};
}

PooledGrads pooled_backward(const PooledSaved& s, const PooledFlags& f, const Tensor& d_h,
                            const Tensor& d_z, bool need_x) {
  static auto scan = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("knn_sk_cpu::backward", "")
                         .typed<ScanBackward>();
  const int64_t T = s.xt.size(0), B = s.xt.size(1), d_in = s.xt.size(2);
  // dL/dh[t] over real steps: the next layer's share plus the mean's; the scan never
  // reads padded steps' gradients.
  Tensor g;
  if (d_z.defined()) {
    g = (d_z / s.lengths).expand({T, B, -1});
    if (d_h.defined()) g = d_h + g;
  } else {
    g = d_h.defined() ? d_h : at::zeros_like(s.proj.select(2, 0));
  }
  Tensor empty = s.xt.new_empty({0});
  std::vector<Tensor> r = scan.call(
      g.contiguous(), at::zeros_like(s.c0), at::zeros_like(s.h0), s.proj,
      f.carry_is_input ? s.xt : empty, or_empty(s.p.decay, empty), s.gate_bias,
      or_empty(s.p.weight_h, empty), s.c0, s.h0, s.mask_f,
      s.m.h_mask.defined() ? s.m.h_mask : empty, s.c_all, s.h_all, s.lam_all, f.n, f.mult,
      f.norm, f.out_sum, f.act, f.highway);
  const Tensor &d_proj = r[0], &d_carry = r[1], &d_decay = r[2], &d_bias = r[3], &d_wh = r[4];
  Tensor x2 = s.xt.reshape({T * B, d_in});
  Tensor dy = d_proj.view({T * B, -1});
  // dX = dY W and dW = dYᵀ X as autograd's mm backward computes them (its BLAS calls,
  // cpu_gemm.h); oneDNN as knn.ops.linear._onednn_grads does (dW as (Xᵀ dY)ᵀ, which
  // oneDNN reads in place). dW and dX are independent: one thread each
  // (cpu_parallel.h); dW alone (the first layer's input needs no gradient) in blocks of rows.
  PooledGrads out;
  parallel_tasks(need_x ? 2 : 1, [&](int64_t k) {
    if (k == 0)
      out.params.weight = f.onednn ? product(x2.t(), dy.t(), true).t().contiguous()
                            : blas_mm_in_row_blocks(dy.t(), x2, kMinProductRows);
    else
      out.dx = f.onednn ? product(dy, s.p.weight.t(), true) : blas_mm(dy, s.p.weight);
  });
  if (need_x) {
    Tensor dx = out.dx.view({T, B, d_in});
    if (f.carry_is_input) dx = dx + d_carry;
    if (s.m.x_mask.defined()) dx = dx * s.m.x_mask;
    if (s.m.in_mask.defined()) dx = dx * s.m.in_mask;
    out.dx = dx;
  }
  if (given(s.p.weight_h)) out.params.weight_h = d_wh;
  if (given(s.p.decay)) out.params.decay = d_decay;
  if (given(s.p.decay_bias)) out.params.decay_bias = d_bias.select(0, 0);
  if (given(s.p.highway_bias)) out.params.highway_bias = d_bias.select(0, 1);
  return out;
}

}  // namespace knn

namespace {

class PooledLayer : public torch::autograd::Function<PooledLayer> {
 public:
  // weight_h, decay, decay_bias, highway_bias: 0-element when the layer has none.
  static variable_list forward(AutogradContext* ctx, const Tensor& x, const Tensor& weight,
                               const Tensor& weight_h, const Tensor& decay,
                               const Tensor& decay_bias, const Tensor& highway_bias,
                               const knn::PooledMasks& m, knn::PooledFlags f) {
    knn::PooledSaved saved;
    auto [h, z] = knn::pooled_forward(
        x, knn::PooledParams{weight, weight_h, decay, decay_bias, highway_bias}, m, f, &saved);
    ctx->save_for_backward(saved.list());
    std::vector<int64_t> flags(knn::field_count<knn::PooledFlags>());
    knn::pack(f, flags, 0);
    ctx->saved_data["flags"] = flags;
    ctx->saved_data["onednn"] = f.onednn;
    // An unused output's gradient stays undefined instead of a tensor of zeros to add.
    ctx->set_materialize_grads(false);
    return {h, z};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    knn::PooledFlags f =
        knn::unpack<knn::PooledFlags>(ctx->saved_data["flags"].toIntVector(), 0);
    f.onednn = ctx->saved_data["onednn"].toBool();
    knn::PooledGrads g = knn::pooled_backward(
        knn::PooledSaved::from_list(ctx->get_saved_variables()), f, grads[0], grads[1],
        ctx->needs_input_grad(0));
    // One per forward argument (x, weight, weight_h, decay, decay_bias, highway_bias, m, f);
    // needs_input_grad counts the tensor arguments only.
    auto wanted = [&](const Tensor& grad, int i) { return ctx->needs_input_grad(i) ? grad : Tensor(); };
    const knn::PooledParams& d = g.params;
    return {g.dx, d.weight, d.weight_h, wanted(d.decay, 3), wanted(d.decay_bias, 4),
            wanted(d.highway_bias, 5), Tensor(), Tensor()};
  }
};

std::vector<Tensor> pooled(const Tensor& x, const std::optional<Tensor>& in_mask,
                           const std::optional<Tensor>& x_mask, const Tensor& weight,
                           const std::optional<Tensor>& weight_h, const std::optional<Tensor>& decay,
                           const std::optional<Tensor>& decay_bias,
                           const std::optional<Tensor>& highway_bias,
                           const std::optional<Tensor>& h_mask, const Tensor& mask, int64_t n,
                           bool mult, bool norm, bool out_sum, int64_t act, bool highway,
                           bool carry_is_input, bool onednn) {
  const Tensor none = x.new_empty({0});
  auto param = [&](const std::optional<Tensor>& t) { return t.has_value() ? *t : none; };
  auto get = [](const std::optional<Tensor>& t) { return t.has_value() ? *t : Tensor(); };
  return PooledLayer::apply(
      x, weight, param(weight_h), param(decay), param(decay_bias), param(highway_bias),
      knn::PooledMasks{get(in_mask), get(x_mask), get(h_mask), mask},
      knn::PooledFlags{n, act, mult, norm, out_sum, highway, carry_is_input, onednn});
}

}  // namespace

// The layer's arguments are named as the fields of pooled_layer.h's PooledParams,
// PooledMasks and PooledFlags: knn.ops.pooled passes them by those names.
TORCH_LIBRARY_FRAGMENT(knn_sk_cpu, m) {
  m.def(
      "pooled(Tensor x, Tensor? in_mask, Tensor? x_mask, Tensor weight, Tensor? weight_h, "
      "Tensor? decay, Tensor? decay_bias, Tensor? highway_bias, Tensor? h_mask, Tensor mask, "
      "int n, bool mult, bool norm, bool out_sum, int act, bool highway, bool carry_is_input, "
      "bool onednn) -> Tensor[]",
      &pooled);
}
