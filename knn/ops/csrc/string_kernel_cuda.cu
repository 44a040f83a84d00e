// Fused CUDA scan of the string-kernel recurrence (forward and backward).
//
// The math, block layout and argument meanings are documented in
// knn/ops/recurrence.py next to string_kernel_recurrence_ref, the plain
// PyTorch twin this file must agree with (tests/ops check values and
// gradients on a GPU). It computes what string_kernel_cpu.cpp computes, with
// one thread per element e = b * d + i instead of one loop per row (b).
//
// Without a recurrent weight (constant, learned or x-gated decay) every
// element's scan is independent: one kernel runs the whole time loop, the
// n-gram states c_1..c_n held in registers (SRU's layout). With the
// (x, h)-gated decay, each step needs U (h[t-1] ⊙ m) of the whole previous
// state first: a cuBLAS GEMM through ATen, then one elementwise kernel per step.
#include "string_kernel_common.h"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <type_traits>
#include <vector>

namespace {

using namespace knn;

constexpr int kThreads = 256;

inline int blocks_for(int64_t elements) { return static_cast<int>((elements + kThreads - 1) / kThreads); }

// Calls f with the compile-time bound N ≥ n that the kernels size their state
// arrays by: exact bounds keep the states in registers for the common orders.
template <typename F>
void with_order_bound(int64_t n, F&& f) {
  if (n == 1) f(std::integral_constant<int, 1>{});
  else if (n <= 3) f(std::integral_constant<int, 3>{});
  else f(std::integral_constant<int, static_cast<int>(kMaxN)>{});
}

// Step t of element (b, i): c (n states) and h go in as the state at t-1 and
// come out as the state at t; c_all, h_all, out and (gated) lam_all are written.
template <typename T, int N>
__device__ void elem_forward(const Spec& s, const Buffers<T>& p, int64_t t, int64_t b, int64_t i,
                             T (&c)[N], T& h) {
  const int64_t d = s.d, n = s.n, row = t * s.B + b;
  T* c_new = p.c_all + (row + s.B) * n * d + i;
  T* h_new = p.h_all + (row + s.B) * d + i;
  T* out = p.out + row * d + i;
  if (s.has_mask && p.mask[row] < T(0.5)) {  // padding: state unchanged, output zero
#pragma unroll
    for (int j = 0; j < N; ++j)
      if (j < n) c_new[j * d] = c[j];
    *h_new = h;
    *out = T(0);
    return;
  }
  const T* u = p.proj + row * s.K * d + i;  // block k at u[k * d]
  T lam;
  if (s.gated) {
    lam = sigm(u[s.lam_idx * d] + p.bias[i] + (s.xh ? p.r[b * d + i] : T(0)));
    p.lam_all[row * d + i] = lam;
  } else {
    lam = p.decay[i];
  }
  const T a = s.norm ? T(1) - lam : T(1);
  T sum = T(0);
  // Descending j: c_{j-1}[t-1] is read before it is overwritten.
#pragma unroll
  for (int j = N - 1; j >= 0; --j) {
    if (j >= n) continue;
    const T uj = u[j * d];
    const T in = j == 0 ? uj : (s.mult ? c[j > 0 ? j - 1 : 0] * uj : c[j > 0 ? j - 1 : 0] + uj);
    c[j] = lam * c[j] + a * in;
    c_new[j * d] = c[j];
    if (s.out_sum || j == n - 1) sum += c[j];
  }
  T y = act_fwd(sum, s.act);
  if (s.highway) {
    if (s.has_hmask) y *= p.hmask[b * d + i];
    const T f = sigm(u[s.f_idx * d] + p.bias[d + i]);
    const T x_c = s.carry_in_proj ? u[s.p_idx * d] : p.carry[row * d + i];
    y = f * y + (T(1) - f) * x_c;
  }
  h = y;
  *h_new = y;
  *out = y;
}

// Step t (backward) of element (b, i): dc (dL/dc_j[t]) and dh (dL/dh[t] through
// the recurrence) go in and come out one step earlier; dlam accumulates Σ_t dL/dλ
// for constant and learned decay.
template <typename T, int N>
__device__ void elem_backward(const Spec& s, const Buffers<T>& p, const Grads<T>& g, int64_t t,
                              int64_t b, int64_t i, T (&dc)[N], T& dh_rec, T& dlam_acc) {
  const int64_t d = s.d, n = s.n, row = t * s.B + b;
  if (s.has_mask && p.mask[row] < T(0.5)) return;  // state passed through untouched
  const T* c_old = p.c_all + row * n * d + i;
  const T* c_new = p.c_all + (row + s.B) * n * d + i;
  const T* u = p.proj + row * s.K * d + i;
  T* du = g.d_proj + row * s.K * d + i;
  const T lam = s.gated ? p.lam_all[row * d + i] : p.decay[i];
  const T a = s.norm ? T(1) - lam : T(1);

  T sum = T(0);
#pragma unroll
  for (int j = 0; j < N; ++j)
    if (j < n && (s.out_sum || j == n - 1)) sum += c_new[j * d];
  const T dh = g.d_out[row * d + i] + dh_rec;
  const T y = act_fwd(sum, s.act);
  T dy = dh;
  if (s.highway) {
    const T mi = s.has_hmask ? p.hmask[b * d + i] : T(1);
    const T f = sigm(u[s.f_idx * d] + p.bias[d + i]);
    const T x_c = s.carry_in_proj ? u[s.p_idx * d] : p.carry[row * d + i];
    du[s.f_idx * d] = dh * (y * mi - x_c) * f * (T(1) - f);
    const T dcarry = dh * (T(1) - f);
    if (s.carry_in_proj) du[s.p_idx * d] = dcarry;
    else g.d_carry[row * d + i] = dcarry;
    dy = dh * f * mi;
  }
  const T ds = dy * act_bwd(sum, y, s.act);
  dh_rec = T(0);  // the (x, h) gate adds its share after the step

  // dc[j] becomes dL/dc_j[t] (adding the output's share) ...
  T dlam = T(0);
#pragma unroll
  for (int j = 0; j < N; ++j) {
    if (j >= n) continue;
    if (s.out_sum || j == n - 1) dc[j] += ds;
    const T uj = u[j * d];
    const T prev = j == 0 ? T(0) : c_old[(j - 1) * d];
    const T in = j == 0 ? uj : (s.mult ? prev * uj : prev + uj);
    dlam += dc[j] * (c_old[j * d] - (s.norm ? in : T(0)));
    du[j * d] = dc[j] * a * ((j == 0 || !s.mult) ? T(1) : prev);
  }
  // ... then dL/dc_j[t-1]: through the decay, and into c_{j+1}[t]. Ascending j
  // reads dc[j+1] before it is overwritten.
#pragma unroll
  for (int j = 0; j < N; ++j) {
    if (j >= n) continue;
    const T nxt = j + 1 < n ? dc[j + 1 < N ? j + 1 : j] * a * (s.mult ? u[(j + 1) * d] : T(1)) : T(0);
    dc[j] = dc[j] * lam + nxt;
  }
  if (s.gated) du[s.lam_idx * d] = dlam * lam * (T(1) - lam);
  else dlam_acc += dlam;
}

// Steps t0 .. t1-1 of every element: the whole scan (no recurrent weight) or one step (x, h).
template <typename T, int N>
__global__ void forward_kernel(Spec s, Buffers<T> p, int64_t t0, int64_t t1) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= s.B * s.d) return;
  const int64_t b = e / s.d, i = e % s.d;
  T c[N];
  const T* c_old = p.c_all + (t0 * s.B + b) * s.n * s.d + i;
#pragma unroll
  for (int j = 0; j < N; ++j) c[j] = j < s.n ? c_old[j * s.d] : T(0);
  T h = p.h_all[(t0 * s.B + b) * s.d + i];
  for (int64_t t = t0; t < t1; ++t) elem_forward<T, N>(s, p, t, b, i, c, h);
}

// Steps t1-1 down to t0; the running gradients live in g.dc and g.dh between launches.
template <typename T, int N>
__global__ void backward_kernel(Spec s, Buffers<T> p, Grads<T> g, int64_t t0, int64_t t1) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= s.B * s.d) return;
  const int64_t b = e / s.d, i = e % s.d;
  T dc[N];
  T* dc_run = g.dc + b * s.n * s.d + i;
#pragma unroll
  for (int j = 0; j < N; ++j) dc[j] = j < s.n ? dc_run[j * s.d] : T(0);
  T dh = g.dh[e];
  T dlam = T(0);
  for (int64_t t = t1 - 1; t >= t0; --t) elem_backward<T, N>(s, p, g, t, b, i, dc, dh, dlam);
#pragma unroll
  for (int j = 0; j < N; ++j)
    if (j < s.n) dc_run[j * s.d] = dc[j];
  g.dh[e] = dh;
  g.d_lam_part[e] += dlam;
}

void check_inputs(const std::vector<at::Tensor>& tensors) {
  for (const at::Tensor& x : tensors)
    TORCH_CHECK(x.numel() == 0 || (x.is_cuda() && x.is_contiguous()),
                "string-kernel CUDA op: every tensor must be contiguous and on the GPU");
}

std::vector<at::Tensor> forward(at::Tensor proj, at::Tensor carry, at::Tensor decay, at::Tensor bias,
                                at::Tensor weight_h, at::Tensor c0, at::Tensor h0, at::Tensor mask,
                                at::Tensor h_mask, int64_t n, bool mult, bool norm, bool out_sum,
                                int64_t act, bool highway) {
  check_inputs({proj, carry, decay, bias, weight_h, c0, h0, mask, h_mask});
  const c10::cuda::CUDAGuard guard(proj.device());
  const Spec s = make_spec(proj, carry, decay, weight_h, mask, h_mask, n, mult, norm, out_sum, act, highway);
  at::Tensor c_all = proj.new_empty({s.T + 1, s.B, s.n, s.d});
  at::Tensor h_all = proj.new_empty({s.T + 1, s.B, s.d});
  at::Tensor lam_all = s.gated ? proj.new_empty({s.T, s.B, s.d}) : proj.new_empty({0});
  at::Tensor out = proj.new_empty({s.T, s.B, s.d});
  c_all.select(0, 0).copy_(c0);
  h_all.select(0, 0).copy_(h0);
  if (s.T == 0 || s.B * s.d == 0) return {out, c_all, h_all, lam_all};
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int grid = blocks_for(s.B * s.d);
  AT_DISPATCH_FLOATING_TYPES(proj.scalar_type(), "string_kernel_forward_cuda", [&] {
    Buffers<scalar_t> p = buffers<scalar_t>(proj, carry, decay, bias, mask, h_mask, c_all, h_all, lam_all, out);
    with_order_bound(s.n, [&](auto bound) {
      constexpr int N = decltype(bound)::value;
      if (!s.xh) {
        forward_kernel<scalar_t, N><<<grid, kThreads, 0, stream>>>(s, p, 0, s.T);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        return;
      }
      const at::Tensor wt = weight_h.t();
      for (int64_t t = 0; t < s.T; ++t) {
        at::Tensor h_prev = h_all.select(0, t);
        if (s.has_hmask) h_prev = h_prev * h_mask;  // h[t-1] ⊙ m
        // Freed at the end of the iteration: the caching allocator orders its
        // reuse after this step's kernel on the same stream.
        const at::Tensor r = at::mm(h_prev, wt);
        p.r = r.data_ptr<scalar_t>();
        forward_kernel<scalar_t, N><<<grid, kThreads, 0, stream>>>(s, p, t, t + 1);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      }
    });
  });
  return {out, c_all, h_all, lam_all};
}

std::vector<at::Tensor> backward(at::Tensor d_out, at::Tensor d_c_last, at::Tensor d_h_last,
                                 at::Tensor proj, at::Tensor carry, at::Tensor decay, at::Tensor bias,
                                 at::Tensor weight_h, at::Tensor c0, at::Tensor h0, at::Tensor mask,
                                 at::Tensor h_mask, at::Tensor c_all, at::Tensor h_all, at::Tensor lam_all,
                                 int64_t n, bool mult, bool norm, bool out_sum, int64_t act, bool highway) {
  check_inputs({d_out, d_c_last, d_h_last, proj, carry, decay, bias, weight_h, mask, h_mask, c_all, h_all,
                lam_all});
  const c10::cuda::CUDAGuard guard(proj.device());
  const Spec s = make_spec(proj, carry, decay, weight_h, mask, h_mask, n, mult, norm, out_sum, act, highway);
  at::Tensor d_proj = at::zeros_like(proj);
  at::Tensor d_carry = carry.numel() ? at::zeros_like(carry) : proj.new_empty({0});
  at::Tensor dc = d_c_last.clone();
  at::Tensor dh = d_h_last.clone();
  at::Tensor d_lam_part = at::zeros({s.B, s.d}, proj.options());
  if (s.T > 0 && s.B * s.d > 0) {
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const int grid = blocks_for(s.B * s.d);
    AT_DISPATCH_FLOATING_TYPES(proj.scalar_type(), "string_kernel_backward_cuda", [&] {
      Buffers<scalar_t> p = buffers<scalar_t>(proj, carry, decay, bias, mask, h_mask, c_all, h_all, lam_all, d_out);
      p.out = nullptr;  // backward writes no forward outputs
      Grads<scalar_t> g = grads<scalar_t>(d_out, dc, dh, d_proj, d_carry, d_lam_part);
      with_order_bound(s.n, [&](auto bound) {
        constexpr int N = decltype(bound)::value;
        if (!s.xh) {
          backward_kernel<scalar_t, N><<<grid, kThreads, 0, stream>>>(s, p, g, 0, s.T);
          C10_CUDA_KERNEL_LAUNCH_CHECK();
          return;
        }
        for (int64_t t = s.T - 1; t >= 0; --t) {
          backward_kernel<scalar_t, N><<<grid, kThreads, 0, stream>>>(s, p, g, t, t + 1);
          C10_CUDA_KERNEL_LAUNCH_CHECK();
          // dL/dh[t-1] += (dL/dg_t U) ⊙ m; padded rows have dg_t = 0 and keep their dh.
          const at::Tensor dg = d_proj.select(0, t).select(1, s.lam_idx);  // (B, d)
          const at::Tensor back = at::mm(dg, weight_h);
          if (s.has_hmask) dh.addcmul_(back, h_mask);
          else dh.add_(back);
        }
      });
    });
  }
  return finish_backward(s, d_proj, d_carry, d_lam_part, bias, h_all, h_mask, dc, dh);
}

}  // namespace

// torch.ops.knn_sk_cuda.forward / .backward (the namespace is fixed; the library file's
// name carries the sources' digest, see knn/ops/recurrence.py).
TORCH_LIBRARY(knn_sk_cuda, m) {
  m.def("forward", &forward);
  m.def("backward", &backward);
}
