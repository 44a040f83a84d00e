// The SST Kernel NN classifier's summed training loss and its gradients as one C++
// autograd node (torch.ops.knn_sk_cpu.classifier_nll), for
// knn.models.classifier.KernelClassifier.nll_sum on CPU; Python calls it at one point,
// knn.ops.pooled.classifier_nll.
//
// The batch's B columns are cut into two halves H; each half runs the whole model, forward
// and backward, on its own thread (cpu_parallel.h), and the two halves' sums are added:
//
//   x¹ = E[tokens_H],  (h^l, z^l) = pooled layer l on x^l (pooled_layer.h),  x^{l+1} = h^l
//   f  = [z¹; …; z^L] ⊙ m_out,  s = f W_outᵀ,  ℓ_H = Σ_{b∈H} -log softmax(s_b)[y_b]
//   ∂ℓ_H/∂s = softmax(s) - onehot(y),  ∂ℓ_H/∂W_out = (∂ℓ_H/∂s)ᵀ f,  ∂ℓ_H/∂f = (∂ℓ_H/∂s) W_out
//   ∂ℓ_H/∂z^l = (∂ℓ_H/∂f ⊙ m_out)[l-th block];  layer l's pooled_backward, from the top, with
//   ∂ℓ_H/∂h^l = layer l+1's ∂/∂x
//   ℓ = ℓ_1 + ℓ_2,  ∂ℓ/∂θ = ∂ℓ_1/∂θ + ∂ℓ_2/∂θ
//
// Why: at SST's sizes (32 phrases of about 20 tokens, d = 200) a step is a few hundred small
// ops. Split op by op over two threads, each thread waits for the other at every op (and for
// Python between them); a whole half batch keeps a thread busy from its first op to its last.
// Each example's terms are the ones the Python model computes, with the dropout masks the
// caller drew for the whole batch; only the sums over examples are added in another order,
// so the loss and gradients agree with the module's to rounding
// (tests/models/test_classifier_fused.py). The split does not depend on the thread count:
// with one thread the halves run one after the other, with the same numbers.
//
// The gradients are computed in the forward; the node's backward scales them by the
// incoming gradient (the loss is a scalar), so the trainer's loss.backward(), clipping and
// optimizer work as for any other loss.
#include "pooled_layer.h"

#include "cpu_gemm.h"
#include "cpu_parallel.h"

#include <ATen/ATen.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <string>
#include <string_view>
#include <vector>

namespace {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The op's per-layer arguments are three flat lists, layer after layer, each layer's
// entries in the order of pooled_layer.h (unpack, pack): its PooledParams in `params`, then
// W_out last; its PooledMasks in `masks` (in_mask (T, B, d_in), x_mask (1, B, d_in),
// h_mask (B, d)), then m_out (B, F) last; its PooledFlags in `flags`. Absent tensors:
// 0 elements.

// The arguments that are not differentiated.
struct Inputs {
  Tensor tokens, mask, labels, table;
  std::vector<Tensor> masks;
  std::vector<int64_t> flags;
  bool onednn;
};

// Columns [lo, lo + n) of a batch-wide mask, whose batch dimension is `dim`; undefined if absent.
Tensor columns(const Tensor& t, int64_t dim, int64_t lo, int64_t n) {
  return knn::given(t) ? t.narrow(dim, lo, n) : Tensor();
}

// Adds b into a (undefined stands for zero).
void accumulate(Tensor& a, const Tensor& b) {
  if (!b.defined()) return;
  a = a.defined() ? a + b : b;
}

struct HalfResult {
  Tensor nll;                  // ℓ_H, 0-dim
  std::vector<Tensor> grads;   // ∂ℓ_H/∂params, undefined for absent params
};

// ℓ_H and its gradients for columns [lo, lo + n) of the batch (the formulas at the top).
HalfResult half_loss(at::TensorList params, const Inputs& in, int64_t lo, int64_t n) {
  const size_t L = in.flags.size() / knn::field_count<knn::PooledFlags>();
  const int64_t T = in.tokens.size(0);
  const Tensor mask = in.mask.narrow(1, lo, n).contiguous();
  const Tensor labels = in.labels.narrow(0, lo, n).unsqueeze(1);  // (n, 1)
  Tensor x = in.table.index_select(0, in.tokens.narrow(1, lo, n).reshape(-1))
                 .view({T, n, in.table.size(1)});
  std::vector<knn::PooledSaved> saved(L);
  std::vector<knn::PooledFlags> flags(L);
  std::vector<Tensor> z(L);
  for (size_t l = 0; l < L; ++l) {
    flags[l] = knn::unpack<knn::PooledFlags>(in.flags, l);
    flags[l].onednn = in.onednn;
    const knn::PooledMasks drawn = knn::unpack<knn::PooledMasks>(in.masks, l);
    const knn::PooledMasks layer_masks{columns(drawn.in_mask, 1, lo, n),
                                       columns(drawn.x_mask, 1, lo, n),
                                       columns(drawn.h_mask, 0, lo, n), mask};
    std::tie(x, z[l]) = knn::pooled_forward(x, knn::unpack<knn::PooledParams>(params, l),
                                            layer_masks, flags[l], &saved[l]);
  }
  const Tensor& w_out = params.back();  // (C, L·d)
  const Tensor out_mask = columns(in.masks.back(), 0, lo, n);
  Tensor feat = at::cat(z, 1);
  if (out_mask.defined()) feat = feat * out_mask;
  const Tensor log_p = at::log_softmax(knn::blas_mm(feat, w_out.t()), 1);  // (n, C)
  HalfResult r;
  r.nll = -log_p.gather(1, labels).sum();
  Tensor d_s = log_p.exp();  // softmax(s) - onehot(y)
  d_s.scatter_(1, labels, d_s.gather(1, labels) - 1);
  r.grads.resize(params.size());
  r.grads.back() = knn::blas_mm(d_s.t(), feat);
  Tensor d_feat = knn::blas_mm(d_s, w_out);
  if (out_mask.defined()) d_feat = d_feat * out_mask;
  const int64_t d = z[0].size(1);
  Tensor d_h;  // ∂ℓ_H/∂h^l from the layer above; none reaches the top layer's h
  for (size_t l = L; l-- > 0;) {
    knn::PooledGrads g = knn::pooled_backward(saved[l], flags[l], d_h,
                                              d_feat.narrow(1, int64_t(l) * d, d), l > 0);
    knn::pack(g.params, r.grads, l);
    d_h = g.dx;
  }
  return r;
}

class ClassifierNLL : public torch::autograd::Function<ClassifierNLL> {
 public:
  static variable_list forward(AutogradContext* ctx, at::TensorList params, const Inputs& in) {
    const int64_t B = in.tokens.size(1), halves = B > 1 ? 2 : 1;
    std::vector<HalfResult> r(halves);
    auto run = [&](int64_t k) {
      const int64_t lo = k * B / halves;
      r[k] = half_loss(params, in, lo, (k + 1) * B / halves - lo);
    };
    // An active Python dispatch mode needs the GIL, which the calling thread holds: the
    // halves then run on it, one after the other.
    if (c10::impl::TorchDispatchModeTLS::stack_len() > 0) {
      for (int64_t k = 0; k < halves; ++k) run(k);
    } else {
      knn::parallel_tasks(halves, run);
    }
    Tensor nll = r[0].nll;
    std::vector<Tensor> grads = r[0].grads;
    for (int64_t k = 1; k < halves; ++k) {
      nll = nll + r[k].nll;
      for (size_t i = 0; i < grads.size(); ++i) accumulate(grads[i], r[k].grads[i]);
    }
    ctx->save_for_backward(grads);
    return {nll};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    variable_list grads = ctx->get_saved_variables();
    for (Tensor& g : grads)
      if (g.defined()) g = g * grad_out[0];
    grads.push_back(Tensor());  // for `in`
    return grads;
  }
};

Tensor classifier_nll(at::TensorList params, const Tensor& tokens, const Tensor& mask,
                      const Tensor& labels, const Tensor& table, at::TensorList masks,
                      at::IntArrayRef flags, bool onednn) {
  const size_t n_params = knn::field_count<knn::PooledParams>(),
               n_masks = knn::field_count<knn::PooledMasks>(),
               n_flags = knn::field_count<knn::PooledFlags>();
  const size_t L = flags.size() / n_flags;
  TORCH_CHECK(L > 0 && flags.size() == L * n_flags && params.size() == L * n_params + 1 &&
                  masks.size() == L * n_masks + 1,
              "classifier_nll: ", L, " layers need ", L * n_params + 1, " params, ",
              L * n_masks + 1, " masks and ", L * n_flags, " flags; got ", params.size(), ", ",
              masks.size(), " and ", flags.size());
  return ClassifierNLL::apply(params, Inputs{tokens, mask, labels, table, masks.vec(),
                                             flags.vec(), onednn})[0];
}

// The names of one kind ("params", "masks" or "flags") of classifier_nll's per-layer
// arguments, in the order it reads them: knn.ops.pooled packs the lists by these.
std::vector<std::string> classifier_layout(std::string_view kind) {
  if (kind == "params") return knn::field_names<knn::PooledParams>();
  if (kind == "masks") return knn::field_names<knn::PooledMasks>();
  TORCH_CHECK(kind == "flags", "classifier_layout: kind must be params, masks or flags; got ",
              kind);
  return knn::field_names<knn::PooledFlags>();
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(knn_sk_cpu, m) {
  m.def("classifier_layout(str kind) -> str[]", &classifier_layout);
  m.def(
      "classifier_nll(Tensor[] params, Tensor tokens, Tensor mask, Tensor labels, Tensor table, "
      "Tensor[] masks, int[] flags, bool onednn) -> Tensor",
      &classifier_nll);
}
