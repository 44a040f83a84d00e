// Fused CPU scan of the string-kernel recurrence (forward and backward).
//
// The math, block layout and argument meanings are documented in
// knn/ops/recurrence.py next to string_kernel_recurrence_ref, the plain
// PyTorch twin this file must agree with (tests/ops check values and
// gradients). Layout: proj (T, B, K, d) contiguous; element e = b * d + i.
//
// Without a recurrent weight (constant, learned or x-gated decay) every
// element's scan is independent, so one parallel_for runs whole time loops.
// With the (x, h)-gated decay, each step first needs U (h[t-1] ⊙ m), one small
// GEMM (BLAS as aten's mm calls it, cpu_gemm.h), then the elementwise update; rows are
// still independent, so blocks of rows run their time loops in parallel (for_row_blocks).
#include "string_kernel_common.h"
#include "cpu_gemm.h"
#include "cpu_parallel.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

// glibc declares the vector forms of exp (libmvec) only under __FAST_MATH__, which
// -fno-finite-math-only (recurrence.py's build flags) leaves undefined. Declaring them
// here lets gcc vectorize the sigmoids; libmvec's exp differs from the scalar one by a
// few ulp at most and keeps inf and NaN (tests/ops/test_recurrence.py checks both).
extern "C" {
__attribute__((__simd__("notinbranch"))) float expf(float) noexcept;
__attribute__((__simd__("notinbranch"))) double exp(double) noexcept;
}

namespace {

using namespace knn;

constexpr int64_t kGrain = 4096;  // elements of work below which a thread is not worth waking

// Rows (batch items) per parallel task, for rows of `work` elements each.
inline int64_t row_grain(int64_t work) { return std::max<int64_t>(1, kGrain / std::max<int64_t>(work, 1)); }

// Rows (batch items) per block of the (x, h)-gated scan, at least: below it a block's
// per-step products are too small to be worth a thread. The (x, h) gate couples steps,
// not rows, so each block (for_row_blocks, cpu_parallel.h) runs its own whole time loop,
// its rows' products and updates, with one fork for the scan instead of two per step.
constexpr int64_t kMinBlockRows = 8;

// y = act(x) and dy *= d act / d x (y = act(x)) over one row, through act_fwd / act_bwd of
// string_kernel_common.h. The activation is a template argument, so each loop has no
// branch inside and vectorizes; act_row / act_grad_row dispatch on it once per row.
template <typename T, int64_t A>
void act_row_as(const T* x, T* y, int64_t d) {
  for (int64_t i = 0; i < d; ++i) y[i] = act_fwd(x[i], A);
}

template <typename T, int64_t A>
void act_grad_row_as(const T* x, const T* y, T* dy, int64_t d) {
  for (int64_t i = 0; i < d; ++i) dy[i] *= act_bwd(x[i], y[i], A);
}

template <typename T>
void act_row(const T* x, T* y, int64_t d, int64_t act) {
  switch (act) {
    case kTanh: act_row_as<T, kTanh>(x, y, d); break;
    case kRelu: act_row_as<T, kRelu>(x, y, d); break;
    case kSigmoid: act_row_as<T, kSigmoid>(x, y, d); break;
    default: std::copy(x, x + d, y);
  }
}

template <typename T>
void act_grad_row(const T* x, const T* y, T* dy, int64_t d, int64_t act) {
  switch (act) {
    case kTanh: act_grad_row_as<T, kTanh>(x, y, dy, d); break;
    case kRelu: act_grad_row_as<T, kRelu>(x, y, dy, d); break;
    case kSigmoid: act_grad_row_as<T, kSigmoid>(x, y, dy, d); break;
    default: break;  // identity: dy unchanged
  }
}

// c_new = λ ⊙ c_old + a ⊙ in(i), a = 1 - λ (normalized) or 1, over one row.
template <typename T, typename Input>
inline void decay_add_row(bool norm, const T* lam, const T* c_old, T* c_new, int64_t d, Input in) {
  if (norm)
    for (int64_t i = 0; i < d; ++i) c_new[i] = lam[i] * c_old[i] + (T(1) - lam[i]) * in(i);
  else
    for (int64_t i = 0; i < d; ++i) c_new[i] = lam[i] * c_old[i] + in(i);
}

// One row (t, b) of the forward scan. Each loop runs over the contiguous hidden
// index i with no branch inside, so gcc vectorizes it (sigmoid's exp included,
// through glibc's vector math); `tmp` holds 2 d-wide scratch rows.
template <typename T>
void row_forward(const Spec& s, const Buffers<T>& p, int64_t t, int64_t b, T* tmp) {
  const int64_t d = s.d, n = s.n, row = t * s.B + b;
  const T* c_old = p.c_all + row * n * d;
  T* c_new = p.c_all + (row + s.B) * n * d;
  const T* h_old = p.h_all + row * d;
  T* h_new = p.h_all + (row + s.B) * d;
  T* out = p.out + row * d;
  if (s.has_mask && p.mask[row] < T(0.5)) {  // padding: state unchanged, output zero
    std::copy(c_old, c_old + n * d, c_new);
    std::copy(h_old, h_old + d, h_new);
    std::fill(out, out + d, T(0));
    return;  // p.hm's row already holds h_old ⊙ m
  }
  const T* u = p.proj + row * s.K * d;  // block k at u + k * d
  T* sum = tmp;
  T* y = tmp + d;
  const T* lam = p.decay;
  if (s.gated) {
    const T* g = u + s.lam_idx * d;
    T* lam_t = p.lam_all + row * d;  // saved for backward
    if (s.xh) {
      const T* r = p.r + b * d;
      for (int64_t i = 0; i < d; ++i) lam_t[i] = sigm(g[i] + p.bias[i] + r[i]);
    } else {
      for (int64_t i = 0; i < d; ++i) lam_t[i] = sigm(g[i] + p.bias[i]);
    }
    lam = lam_t;
  }
  // Descending j: c_{j-1}[t-1] is read before row j-1 is overwritten (they are distinct rows anyway).
  for (int64_t j = n - 1; j >= 0; --j) {
    const T* uj = u + j * d;
    const T* prev = c_old + (j - 1) * d;
    T* cn = c_new + j * d;
    if (j == 0)
      decay_add_row(s.norm, lam, c_old, cn, d, [&](int64_t i) { return uj[i]; });
    else if (s.mult)
      decay_add_row(s.norm, lam, c_old + j * d, cn, d, [&](int64_t i) { return prev[i] * uj[i]; });
    else
      decay_add_row(s.norm, lam, c_old + j * d, cn, d, [&](int64_t i) { return prev[i] + uj[i]; });
  }
  std::copy(c_new + (n - 1) * d, c_new + n * d, sum);
  if (s.out_sum)  // c_n + c_{n-1} + ... + c_1, in that order
    for (int64_t j = n - 2; j >= 0; --j)
      for (int64_t i = 0; i < d; ++i) sum[i] += c_new[j * d + i];
  act_row(sum, y, d, s.act);
  if (s.highway) {
    const T* fpre = u + s.f_idx * d;
    const T* carry = s.carry_in_proj ? u + s.p_idx * d : p.carry + row * d;
    if (s.has_hmask) {
      const T* m = p.hmask + b * d;
      for (int64_t i = 0; i < d; ++i) y[i] *= m[i];
    }
    for (int64_t i = 0; i < d; ++i) {
      const T f = sigm(fpre[i] + p.bias[d + i]);
      y[i] = f * y[i] + (T(1) - f) * carry[i];
    }
  }
  std::copy(y, y + d, h_new);
  std::copy(y, y + d, out);
  if (p.hm) {
    const T* m = p.hmask + b * d;
    T* hm = p.hm + b * d;
    for (int64_t i = 0; i < d; ++i) hm[i] = y[i] * m[i];
  }
}

// The highway's backward over one row, h = f ⊙ y_in + (1 - f) ⊙ carry: dh is dL/dh on
// entry and dL/dy_in on return. The rows are distinct; restrict (honoured by gcc on
// parameters only) spares it more run-time overlap checks than it is willing to emit.
template <typename T>
void highway_grad_row(int64_t d, const T* __restrict f, const T* __restrict y_in, const T* __restrict carry,
                      T* __restrict dh, T* __restrict df_pre, T* __restrict dcarry) {
  for (int64_t i = 0; i < d; ++i) {
    const T g = dh[i];
    df_pre[i] = g * (y_in[i] - carry[i]) * f[i] * (T(1) - f[i]);
    dcarry[i] = g * (T(1) - f[i]);
    dh[i] = g * f[i];
  }
}

// What c_j[t] adds to its input: u_j (j = 0), c_{j-1}[t-1] ⊙ u_j or c_{j-1}[t-1] + u_j.
enum Input { kFirst, kMult, kAdd };

// One row of dλ += dc_j ⊙ (c_j[t] - a ⊙ in_j) (a ⊙ in_j only when normalized) and
// d u_j = dc_j ⊙ a ⊙ (c_{j-1}[t-1] if multiplicative and j > 0, else 1), a = 1 - λ or 1.
// The flags are template arguments and the rows distinct (restrict), so the loop has no
// branch and gcc vectorizes it; with them tested inside, gcc leaves it scalar.
template <typename T, bool Norm, int In>
void decay_grad_row_as(int64_t d, const T* __restrict lam, const T* __restrict uj,
                       const T* __restrict prev, const T* __restrict cj, const T* __restrict dcj,
                       T* __restrict dlam, T* __restrict duj) {
  for (int64_t i = 0; i < d; ++i) {
    const T a = Norm ? T(1) - lam[i] : T(1);
    const T in = In == kFirst ? uj[i] : (In == kMult ? prev[i] * uj[i] : prev[i] + uj[i]);
    dlam[i] += dcj[i] * (cj[i] - (Norm ? in : T(0)));
    duj[i] = dcj[i] * a * (In == kMult ? prev[i] : T(1));
  }
}

template <typename T>
void decay_grad_row(bool norm, Input in, int64_t d, const T* lam, const T* uj, const T* prev,
                    const T* cj, const T* dcj, T* dlam, T* duj) {
  if (norm && in == kFirst) decay_grad_row_as<T, true, kFirst>(d, lam, uj, prev, cj, dcj, dlam, duj);
  else if (norm && in == kMult) decay_grad_row_as<T, true, kMult>(d, lam, uj, prev, cj, dcj, dlam, duj);
  else if (norm) decay_grad_row_as<T, true, kAdd>(d, lam, uj, prev, cj, dcj, dlam, duj);
  else if (in == kFirst) decay_grad_row_as<T, false, kFirst>(d, lam, uj, prev, cj, dcj, dlam, duj);
  else if (in == kMult) decay_grad_row_as<T, false, kMult>(d, lam, uj, prev, cj, dcj, dlam, duj);
  else decay_grad_row_as<T, false, kAdd>(d, lam, uj, prev, cj, dcj, dlam, duj);
}

// One row of dc_j[t-1] = dc_j ⊙ λ + dc_{j+1} ⊙ a ⊙ (u_{j+1} if multiplicative, else 1), for
// j < n - 1 (the last order has no c_{j+1} to feed); branch-free as decay_grad_row_as.
template <typename T, bool Norm, bool Mult>
void carry_grad_row_as(int64_t d, const T* __restrict lam, const T* __restrict dnext,
                       const T* __restrict unext, T* __restrict dcj) {
  for (int64_t i = 0; i < d; ++i) {
    const T a = Norm ? T(1) - lam[i] : T(1);
    dcj[i] = dcj[i] * lam[i] + dnext[i] * a * (Mult ? unext[i] : T(1));
  }
}

template <typename T>
void carry_grad_row(bool norm, bool mult, int64_t d, const T* lam, const T* dnext,
                    const T* unext, T* dcj) {
  if (norm && mult) carry_grad_row_as<T, true, true>(d, lam, dnext, unext, dcj);
  else if (norm) carry_grad_row_as<T, true, false>(d, lam, dnext, unext, dcj);
  else if (mult) carry_grad_row_as<T, false, true>(d, lam, dnext, unext, dcj);
  else carry_grad_row_as<T, false, false>(d, lam, dnext, unext, dcj);
}

// One row (t, b) of the backward scan; `tmp` holds 5 d-wide scratch rows.
template <typename T>
void row_backward(const Spec& s, const Buffers<T>& p, const Grads<T>& g, int64_t t, int64_t b, T* tmp) {
  const int64_t d = s.d, n = s.n, row = t * s.B + b;
  if (s.has_mask && p.mask[row] < T(0.5)) {  // state passed through untouched, no gradient
    std::fill(g.d_proj + row * s.K * d, g.d_proj + (row + 1) * s.K * d, T(0));
    if (g.d_carry) std::fill(g.d_carry + row * d, g.d_carry + (row + 1) * d, T(0));
    if (g.dg_all) std::fill(g.dg_all + row * d, g.dg_all + (row + 1) * d, T(0));
    return;
  }
  const T* c_old = p.c_all + row * n * d;
  const T* c_new = p.c_all + (row + s.B) * n * d;
  const T* u = p.proj + row * s.K * d;
  T* du = g.d_proj + row * s.K * d;
  T* dc = g.dc + b * n * d;
  T* dh_rec = g.dh + b * d;
  const T* d_out = g.d_out + row * d;
  const T* lam = s.gated ? p.lam_all + row * d : p.decay;
  T* sum = tmp;
  T* ds = tmp + d;
  T* dlam = tmp + 2 * d;
  T* y = tmp + 3 * d;
  T* y_m = tmp + 4 * d;

  std::fill(sum, sum + d, T(0));
  for (int64_t j = 0; j < n; ++j)
    if (s.out_sum || j == n - 1)
      for (int64_t i = 0; i < d; ++i) sum[i] += c_new[j * d + i];
  act_row(sum, y, d, s.act);
  for (int64_t i = 0; i < d; ++i) ds[i] = d_out[i] + dh_rec[i];  // dL/dh[t]
  std::fill(dh_rec, dh_rec + d, T(0));  // the (x, h) gate adds its share after the step
  if (s.highway) {
    const T* fpre = u + s.f_idx * d;
    const T* carry = s.carry_in_proj ? u + s.p_idx * d : p.carry + row * d;
    T* dcarry = s.carry_in_proj ? du + s.p_idx * d : g.d_carry + row * d;
    T* dfpre = du + s.f_idx * d;
    const T* m = s.has_hmask ? p.hmask + b * d : nullptr;
    T* f = dlam;  // scratch until dlam is computed below
    for (int64_t i = 0; i < d; ++i) f[i] = sigm(fpre[i] + p.bias[d + i]);
    const T* y_in = y;  // what the highway mixed in: y ⊙ m
    if (m) {
      for (int64_t i = 0; i < d; ++i) y_m[i] = y[i] * m[i];
      y_in = y_m;
    }
    highway_grad_row(d, f, y_in, carry, ds, dfpre, dcarry);
    if (m)
      for (int64_t i = 0; i < d; ++i) ds[i] *= m[i];
  }
  act_grad_row(sum, y, ds, d, s.act);  // ds: dL/d(sum)
  // dc[j] becomes dL/dc_j[t] (adding the output's share) ...
  for (int64_t j = 0; j < n; ++j)
    if (s.out_sum || j == n - 1)
      for (int64_t i = 0; i < d; ++i) dc[j * d + i] += ds[i];
  std::fill(dlam, dlam + d, T(0));
  for (int64_t j = 0; j < n; ++j) {
    const T* prev = j == 0 ? nullptr : c_old + (j - 1) * d;
    decay_grad_row(s.norm, j == 0 ? kFirst : (s.mult ? kMult : kAdd), d, lam, u + j * d, prev,
                   c_old + j * d, dc + j * d, dlam, du + j * d);
  }
  // ... then dL/dc_j[t-1]: through the decay, and into c_{j+1}[t]. Ascending j
  // reads dc[j+1] before it is overwritten.
  for (int64_t j = 0; j < n; ++j) {
    T* dcj = dc + j * d;
    if (j + 1 < n)
      carry_grad_row(s.norm, s.mult, d, lam, dc + (j + 1) * d, u + (j + 1) * d, dcj);
    else
      for (int64_t i = 0; i < d; ++i) dcj[i] *= lam[i];
  }
  if (s.gated) {
    T* dg = du + s.lam_idx * d;
    for (int64_t i = 0; i < d; ++i) dg[i] = dlam[i] * lam[i] * (T(1) - lam[i]);
    if (g.dg_all) std::copy(dg, dg + d, g.dg_all + row * d);
  } else {
    T* acc = g.d_lam_part + b * d;
    for (int64_t i = 0; i < d; ++i) acc[i] += dlam[i];
  }
}

std::vector<at::Tensor> forward(at::Tensor proj, at::Tensor carry, at::Tensor decay, at::Tensor bias,
                                at::Tensor weight_h, at::Tensor c0, at::Tensor h0, at::Tensor mask,
                                at::Tensor h_mask, int64_t n, bool mult, bool norm, bool out_sum,
                                int64_t act, bool highway) {
  const Spec s = make_spec(proj, carry, decay, weight_h, mask, h_mask, n, mult, norm, out_sum, act, highway);
  at::Tensor c_all = proj.new_empty({s.T + 1, s.B, s.n, s.d});
  at::Tensor h_all = proj.new_empty({s.T + 1, s.B, s.d});
  at::Tensor lam_all = s.gated ? proj.new_empty({s.T, s.B, s.d}) : proj.new_empty({0});
  at::Tensor out = proj.new_empty({s.T, s.B, s.d});
  c_all.select(0, 0).copy_(c0);
  h_all.select(0, 0).copy_(h0);
  AT_DISPATCH_FLOATING_TYPES(proj.scalar_type(), "string_kernel_forward", [&] {
    Buffers<scalar_t> p = buffers<scalar_t>(proj, carry, decay, bias, mask, h_mask, c_all, h_all, lam_all, out);
    if (!s.xh) {
      at::parallel_for(0, s.B, row_grain(s.d * s.T), [&](int64_t lo, int64_t hi) {
        std::vector<scalar_t> tmp(2 * s.d);
        for (int64_t t = 0; t < s.T; ++t)
          for (int64_t b = lo; b < hi; ++b) row_forward(s, p, t, b, tmp.data());
      });
    } else {
      // h[t-1] ⊙ m, written by row_forward for the next step (no product of its own per step).
      at::Tensor h_in = s.has_hmask ? h0 * h_mask : at::Tensor();
      if (s.has_hmask) p.hm = h_in.data_ptr<scalar_t>();
      at::Tensor wt = weight_h.t();
      // One (B, d) buffer for every step's product: at SST's sizes a fresh one per step
      // costs more than the product's arithmetic.
      at::Tensor r = proj.new_empty({s.B, s.d});
      scalar_t* r_p = r.data_ptr<scalar_t>();
      p.r = r_p;
      // r = (h[t-1] ⊙ m) Uᵀ on BLAS directly (cpu_gemm.h); through the dispatcher (mm_out)
      // when a dispatch mode watches it, so FlopCounterMode still counts it.
      const bool direct = blas_direct<scalar_t>();
      const scalar_t* wh = weight_h.const_data_ptr<scalar_t>();
      for_row_blocks(s.B, kMinBlockRows, [&](int64_t lo, int64_t hi) {
        std::vector<scalar_t> tmp(2 * s.d);
        for (int64_t t = 0; t < s.T; ++t) {
          if (direct && hi - lo > 1) {
            const scalar_t* src = s.has_hmask ? p.hm : p.h_all + t * s.B * s.d;
            gemm<scalar_t>(false, true, hi - lo, s.d, s.d, src + lo * s.d, s.d, wh, s.d,
                           r_p + lo * s.d, s.d);
          } else {
            const at::Tensor& src = s.has_hmask ? h_in : h_all.select(0, t);
            at::Tensor r_rows = r.narrow(0, lo, hi - lo);
            at::mm_out(r_rows, src.narrow(0, lo, hi - lo), wt);
          }
          for (int64_t b = lo; b < hi; ++b) row_forward(s, p, t, b, tmp.data());
        }
      });
    }
  });
  return {out, c_all, h_all, lam_all};
}

std::vector<at::Tensor> backward(at::Tensor d_out, at::Tensor d_c_last, at::Tensor d_h_last,
                                 at::Tensor proj, at::Tensor carry, at::Tensor decay, at::Tensor bias,
                                 at::Tensor weight_h, at::Tensor c0, at::Tensor h0, at::Tensor mask,
                                 at::Tensor h_mask, at::Tensor c_all, at::Tensor h_all, at::Tensor lam_all,
                                 int64_t n, bool mult, bool norm, bool out_sum, int64_t act, bool highway) {
  const Spec s = make_spec(proj, carry, decay, weight_h, mask, h_mask, n, mult, norm, out_sum, act, highway);
  // Every row writes all of its gradient blocks; padded rows zero theirs (row_backward).
  at::Tensor d_proj = at::empty_like(proj);
  at::Tensor d_carry = carry.numel() ? at::empty_like(carry) : proj.new_empty({0});
  at::Tensor dc = d_c_last.clone();
  at::Tensor dh = d_h_last.clone();
  at::Tensor d_lam_part = at::zeros({s.B, s.d}, proj.options());
  at::Tensor dg_all, d_wh;  // xh only: dL/dg_t over all steps, and dU
  AT_DISPATCH_FLOATING_TYPES(proj.scalar_type(), "string_kernel_backward", [&] {
    Buffers<scalar_t> p = buffers<scalar_t>(proj, carry, decay, bias, mask, h_mask, c_all, h_all, lam_all, d_out);
    p.out = nullptr;  // backward writes no forward outputs
    Grads<scalar_t> g = grads<scalar_t>(d_out, dc, dh, d_proj, d_carry, d_lam_part);
    if (!s.xh) {
      at::parallel_for(0, s.B, row_grain(s.d * s.T), [&](int64_t lo, int64_t hi) {
        std::vector<scalar_t> tmp(5 * s.d);
        for (int64_t t = s.T - 1; t >= 0; --t)
          for (int64_t b = lo; b < hi; ++b) row_backward(s, p, g, t, b, tmp.data());
      });
    } else {
      // dL/dg_t for every step, contiguous (T, B, d): each step's product reads its slice,
      // and dU reads all of it in one GEMM.
      dg_all = proj.new_empty({s.T, s.B, s.d});
      g.dg_all = dg_all.data_ptr<scalar_t>();
      at::Tensor back = proj.new_empty({s.B, s.d});  // every step's dL/dg_t U, one buffer
      scalar_t* back_p = back.data_ptr<scalar_t>();
      scalar_t* dh_p = dh.data_ptr<scalar_t>();
      const int64_t numel = s.B * s.d;
      const bool direct = blas_direct<scalar_t>();  // as in forward
      const scalar_t* wh = weight_h.const_data_ptr<scalar_t>();
      for_row_blocks(s.B, kMinBlockRows, [&](int64_t lo, int64_t hi) {
        std::vector<scalar_t> tmp(5 * s.d);
        for (int64_t t = s.T - 1; t >= 0; --t) {
          for (int64_t b = lo; b < hi; ++b) row_backward(s, p, g, t, b, tmp.data());
          // dL/dh[t-1] += (dL/dg_t U) ⊙ m; padded rows have dg_t = 0 and keep their dh.
          if (direct && hi - lo > 1) {
            gemm<scalar_t>(false, false, hi - lo, s.d, s.d, g.dg_all + (t * s.B + lo) * s.d, s.d,
                           wh, s.d, back_p + lo * s.d, s.d);
          } else {
            at::Tensor back_rows = back.narrow(0, lo, hi - lo);
            at::mm_out(back_rows, dg_all.select(0, t).narrow(0, lo, hi - lo), weight_h);
          }
          const int64_t e0 = lo * s.d, e1 = hi * s.d;
          if (s.has_hmask) {
            const scalar_t* m = p.hmask;
            for (int64_t e = e0; e < e1; ++e) dh_p[e] += back_p[e] * m[e];
          } else {
            for (int64_t e = e0; e < e1; ++e) dh_p[e] += back_p[e];
          }
        }
      });
      // dU = Σ_t dg_tᵀ (h[t-1] ⊙ m): one GEMM over all steps, its right side made here
      // in one pass (h[t-1] ⊙ m as the forward's products saw it).
      at::Tensor h_in = h_all.narrow(0, 0, s.T);
      if (s.has_hmask) {
        at::Tensor masked = proj.new_empty({s.T, s.B, s.d});
        const scalar_t* h_p = h_in.data_ptr<scalar_t>();
        const scalar_t* m = p.hmask;
        scalar_t* out_p = masked.data_ptr<scalar_t>();
        for (int64_t t = 0; t < s.T; ++t)
          for (int64_t e = 0; e < numel; ++e) out_p[t * numel + e] = h_p[t * numel + e] * m[e];
        h_in = masked;
      }
      d_wh = blas_mm_in_row_blocks(dg_all.view({s.T * s.B, s.d}).t(),
                                   h_in.reshape({s.T * s.B, s.d}), kMinProductRows);
    }
  });
  return finish_backward(s, d_proj, d_carry, d_lam_part, bias, h_all, h_mask, dc, dh, d_wh);
}

}  // namespace

// torch.ops.knn_sk_cpu.forward / .backward (the namespace is fixed; the library file's
// name carries the sources' digest, see knn/ops/recurrence.py).
TORCH_LIBRARY(knn_sk_cpu, m) {
  m.def("forward", &forward);
  m.def("backward", &backward);
}
