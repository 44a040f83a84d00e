// Shared by the CPU (string_kernel_cpu.cpp) and CUDA (string_kernel_cuda.cu)
// scans: the elementwise math, the scan's static shape (Spec), the raw
// pointers a step reads and writes, and the parameter gradients that are
// plain reductions once the scan is done.
//
// The math and block layout are documented in knn/ops/recurrence.py next to
// string_kernel_recurrence_ref, the PyTorch twin both ops must agree with.
#pragma once

// ATen and torch/library.h only, not torch/extension.h: the ops register through
// TORCH_LIBRARY, so building them needs no Python headers (GPU images often lack them).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>
#include <vector>

#ifdef __CUDACC__
#define KNN_HD __host__ __device__
#else
#define KNN_HD
#endif

namespace knn {

constexpr int64_t kMaxN = 16;  // n-gram orders above this are not useful; keeps state in registers/stack

enum Act { kIdentity = 0, kTanh = 1, kRelu = 2, kSigmoid = 3 };

template <typename T>
KNN_HD inline T sigm(T x) { return T(1) / (T(1) + std::exp(-x)); }

template <typename T>
KNN_HD inline T act_fwd(T s, int64_t a) {
  switch (a) {
    case kTanh: return std::tanh(s);
    case kRelu: return s < T(0) ? T(0) : s;  // NaN stays NaN, as torch.relu: a diverged run must show
    case kSigmoid: return sigm(s);
    default: return s;
  }
}

// d act / d s, given the pre-activation s and y = act(s).
template <typename T>
KNN_HD inline T act_bwd(T s, T y, int64_t a) {
  switch (a) {
    case kTanh: return T(1) - y * y;
    case kRelu: return s <= T(0) ? T(0) : T(1);  // torch's threshold_backward (NaN passes)
    case kSigmoid: return y * (T(1) - y);
    default: return T(1);
  }
}

struct Spec {
  int64_t T, B, K, d, n;
  bool mult, norm, out_sum, highway, gated, xh, carry_in_proj, has_mask, has_hmask;
  int64_t act, lam_idx, f_idx, p_idx;
};

inline Spec make_spec(const at::Tensor& proj, const at::Tensor& carry, const at::Tensor& decay,
                      const at::Tensor& weight_h, const at::Tensor& mask, const at::Tensor& h_mask,
                      int64_t n, bool mult, bool norm, bool out_sum, int64_t act, bool highway) {
  TORCH_CHECK(proj.dim() == 4, "proj must be (T, B, K, d)");
  TORCH_CHECK(n >= 1 && n <= kMaxN, "n-gram order must be in [1, 16]");
  Spec s;
  s.T = proj.size(0); s.B = proj.size(1); s.K = proj.size(2); s.d = proj.size(3);
  s.n = n; s.mult = mult; s.norm = norm; s.out_sum = out_sum; s.act = act; s.highway = highway;
  s.gated = decay.numel() == 0;
  s.xh = weight_h.numel() > 0;
  s.carry_in_proj = highway && carry.numel() == 0;
  s.has_mask = mask.numel() > 0;
  s.has_hmask = h_mask.numel() > 0;
  s.lam_idx = n;
  s.f_idx = n + (s.gated ? 1 : 0);
  s.p_idx = s.f_idx + 1;
  const int64_t want = n + (s.gated ? 1 : 0) + (highway ? 1 : 0) + (s.carry_in_proj ? 1 : 0);
  TORCH_CHECK(s.K == want, "proj has ", s.K, " blocks, expected ", want);
  return s;
}

// Pointers into the tensors one step needs; the same struct serves forward and backward.
template <typename T>
struct Buffers {
  const T* proj; const T* carry; const T* decay; const T* bias; const T* mask; const T* hmask;
  T* c_all;    // (T+1, B, n, d)
  T* h_all;    // (T+1, B, d)
  T* lam_all;  // (T, B, d) λ_t, saved for backward (gated only)
  T* out;      // (T, B, d)
  const T* r;  // (B, d) U (h[t-1] ⊙ m) for the current step (xh only)
  T* hm;       // (B, d) h[t] ⊙ m, the next step's input to U (CPU, xh with a mask only)
};

// Gradients that are written per element; reductions over (t, b) happen after.
template <typename T>
struct Grads {
  const T* d_out;  // (T, B, d)
  T* dc;           // (B, n, d) running dL/dc_j[t]
  T* dh;           // (B, d) running dL/dh[t] arriving through the recurrence
  T* d_proj;       // (T, B, K, d)
  T* d_carry;      // (T, B, d)
  T* d_lam_part;   // (B, d) Σ_t dL/dλ (constant / learned decay)
  T* dg_all;       // (T, B, d) dL/dg_t again, contiguous, or null (CPU, xh only: feeds dU)
};

template <typename T>
Buffers<T> buffers(const at::Tensor& proj, const at::Tensor& carry, const at::Tensor& decay,
                   const at::Tensor& bias, const at::Tensor& mask, const at::Tensor& h_mask,
                   at::Tensor& c_all, at::Tensor& h_all, at::Tensor& lam_all, at::Tensor& out) {
  Buffers<T> p;
  p.proj = proj.data_ptr<T>();
  p.carry = carry.numel() ? carry.data_ptr<T>() : nullptr;
  p.decay = decay.numel() ? decay.data_ptr<T>() : nullptr;
  p.bias = bias.data_ptr<T>();
  p.mask = mask.numel() ? mask.data_ptr<T>() : nullptr;
  p.hmask = h_mask.numel() ? h_mask.data_ptr<T>() : nullptr;
  p.c_all = c_all.data_ptr<T>();
  p.h_all = h_all.data_ptr<T>();
  p.lam_all = lam_all.numel() ? lam_all.data_ptr<T>() : nullptr;
  p.out = out.numel() ? out.data_ptr<T>() : nullptr;
  p.r = nullptr;
  p.hm = nullptr;
  return p;
}

template <typename T>
Grads<T> grads(const at::Tensor& d_out, at::Tensor& dc, at::Tensor& dh, at::Tensor& d_proj,
               at::Tensor& d_carry, at::Tensor& d_lam_part) {
  Grads<T> g;
  g.d_out = d_out.data_ptr<T>();
  g.dc = dc.data_ptr<T>();
  g.dh = dh.data_ptr<T>();
  g.d_proj = d_proj.data_ptr<T>();
  g.d_carry = d_carry.numel() ? d_carry.data_ptr<T>() : nullptr;
  g.d_lam_part = d_lam_part.data_ptr<T>();
  g.dg_all = nullptr;
  return g;
}

// After the backward scan: the gradients of the biases, the decay and U, as
// reductions of the per-step gradients over time and batch. Returns the
// backward op's full result {d_proj, d_carry, d_decay, d_bias, d_wh, dc, dh}.
// `d_wh`, when defined, is dU already computed by the caller (the CPU op, from its
// contiguous buffers); otherwise it is computed here.
inline std::vector<at::Tensor> finish_backward(const Spec& s, const at::Tensor& d_proj,
                                               const at::Tensor& d_carry, const at::Tensor& d_lam_part,
                                               const at::Tensor& bias, const at::Tensor& h_all,
                                               const at::Tensor& h_mask, const at::Tensor& dc,
                                               const at::Tensor& dh, at::Tensor d_wh = at::Tensor()) {
  at::Tensor d_bias = at::zeros_like(bias);
  if (s.gated) d_bias.select(0, 0).copy_(d_proj.select(2, s.lam_idx).sum(at::IntArrayRef{0, 1}));
  if (s.highway) d_bias.select(0, 1).copy_(d_proj.select(2, s.f_idx).sum(at::IntArrayRef{0, 1}));
  at::Tensor d_decay = s.gated ? d_proj.new_empty({0}) : d_lam_part.sum(0);
  if (d_wh.defined()) return {d_proj, d_carry, d_decay, d_bias, d_wh, dc, dh};
  d_wh = d_proj.new_empty({0});
  if (s.xh) {
    // dU = Σ_t dg_tᵀ (h[t-1] ⊙ m): one GEMM over all steps.
    at::Tensor dg_all = d_proj.select(2, s.lam_idx).reshape({s.T * s.B, s.d});
    at::Tensor h_in = h_all.narrow(0, 0, s.T);
    if (s.has_hmask) h_in = h_in * h_mask;
    d_wh = at::mm(dg_all.t(), h_in.reshape({s.T * s.B, s.d}));
  }
  return {d_proj, d_carry, d_decay, d_bias, d_wh, dc, dh};
}

}  // namespace knn
