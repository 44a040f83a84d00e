// The CPU ops' matrix products, called on BLAS directly when nothing watches the dispatcher
// (string_kernel_cpu.cpp, string_kernel_pooled_cpu.cpp).
//
// An SST step makes about 60 products, most of them the scan's per-step (B, d) x (d, d)
// ones of a few tens of microseconds each. Through at::mm_out each also pays the
// dispatcher, its checks and its narrow/select views; without them an SST layer's
// (x, h) scan takes 6-20% less time at one thread (docs/performance.md). Here the same
// BLAS routine (sgemm_/dgemm_) is called with the arguments aten's mm passes it for these
// layouts (addmm_impl_cpu_: a row-major result is computed as its column-major
// transpose), so the bits are the same (tests/layers/test_string_kernel_pooled.py checks
// the layer against aten's products bit for bit).
//
// The dispatcher is kept where it is watched: under a TorchDispatchMode (torch's
// FlopCounterMode counts the products it sees), where this torch exports no BLAS, for other
// dtypes, and for degenerate shapes, aten's at::mm_out runs instead. torch.profiler sees
// the direct products as "knn::gemm" (a RecordFunction, free when nothing profiles).
#pragma once

#include "cpu_parallel.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>

#include <type_traits>

// Fortran BLAS as libtorch_cpu exports it (MKL's on x86 builds). Weak: a torch without
// them still loads these ops, and takes aten's path.
extern "C" {
void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
            const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
            const float* beta, float* c, const int* ldc) __attribute__((weak));
void dgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
            const double* alpha, const double* a, const int* lda, const double* b, const int* ldb,
            const double* beta, double* c, const int* ldc) __attribute__((weak));
}

namespace knn {

// Whether products of T may go straight to BLAS here (see the top of this file). The
// dispatch modes are thread-local; cpu_parallel.h carries the caller's into its workers.
template <typename T>
bool blas_direct() {
  if (c10::impl::TorchDispatchModeTLS::stack_len() > 0) return false;
  if constexpr (std::is_same_v<T, float>) return sgemm_ != nullptr;
  if constexpr (std::is_same_v<T, double>) return dgemm_ != nullptr;
  return false;
}

// c (M, N), row-major with row stride ldc, = a (M, K) · b (K, N), where a is row-major with
// row stride lda, or (a_t) the transpose of a row-major (K, M) with row stride lda; b
// likewise. Only where blas_direct<T>().
template <typename T>
void gemm(bool a_t, bool b_t, int64_t M, int64_t N, int64_t K, const T* a, int64_t lda,
          const T* b, int64_t ldb, T* c, int64_t ldc) {
  RECORD_FUNCTION("knn::gemm", std::vector<c10::IValue>());
  // Column-major BLAS computes cᵀ (N, M) = bᵀ aᵀ: b is its first operand.
  const char ta = b_t ? 't' : 'n', tb = a_t ? 't' : 'n';
  const int m = int(N), n = int(M), k = int(K), la = int(ldb), lb = int(lda), lc = int(ldc);
  const T one = 1, zero = 0;
  if constexpr (std::is_same_v<T, float>)
    sgemm_(&ta, &tb, &m, &n, &k, &one, b, &la, a, &lb, &zero, c, &lc);
  else
    dgemm_(&ta, &tb, &m, &n, &k, &one, b, &la, a, &lb, &zero, c, &lc);
}

// How a 2-D operand lies for gemm: transposed or not, and its leading stride; false when it
// is neither row- nor column-major with a usable stride (aten would copy it first).
inline bool layout(const at::Tensor& x, bool* transposed, int64_t* ld) {
  const int64_t rows = x.size(0), cols = x.size(1);
  if (x.stride(1) == 1 && x.stride(0) >= cols) {
    *transposed = false, *ld = x.stride(0);
    return true;
  }
  if (x.stride(0) == 1 && x.stride(1) >= rows) {
    *transposed = true, *ld = x.stride(1);
    return true;
  }
  return false;
}

// out (M, N) = a (M, K) · b (K, N), as at::mm_out(out, a, b) computes it.
inline void blas_mm_out(at::Tensor& out, const at::Tensor& a, const at::Tensor& b) {
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  bool a_t = false, b_t = false;
  int64_t lda = 0, ldb = 0;
  // Dimensions of 1 are where aten renormalizes the leading strides (and BLAS may take
  // other kernels): leave those to aten, as every non-row-major result.
  const auto dtype = out.scalar_type();
  const bool plain = M > 1 && N > 1 && K > 1 && out.stride(1) == 1 && out.stride(0) >= N &&
                     layout(a, &a_t, &lda) && layout(b, &b_t, &ldb) &&
                     (dtype == at::kFloat || dtype == at::kDouble) &&
                     a.scalar_type() == dtype && b.scalar_type() == dtype;
  bool done = false;
  if (plain) {
    AT_DISPATCH_FLOATING_TYPES(dtype, "knn_mm_out", [&] {
      if (blas_direct<scalar_t>()) {
        gemm<scalar_t>(a_t, b_t, M, N, K, a.const_data_ptr<scalar_t>(), lda,
                       b.const_data_ptr<scalar_t>(), ldb, out.mutable_data_ptr<scalar_t>(),
                       out.stride(0));
        done = true;
      }
    });
  }
  if (!done) at::mm_out(out, a, b);
}

// a · b into a new (M, N) tensor.
inline at::Tensor blas_mm(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor out = a.new_empty({a.size(0), b.size(1)});
  blas_mm_out(out, a, b);
  return out;
}

// Rows of a product per thread, at least (below it splitting does not pay).
constexpr int64_t kMinProductRows = 64;

// a · b into a new (M, N) tensor, in blocks of at least min_rows rows of a, one per thread
// (cpu_parallel.h); each row is the same dot products as in one call.
inline at::Tensor blas_mm_in_row_blocks(const at::Tensor& a, const at::Tensor& b, int64_t min_rows) {
  at::Tensor out = a.new_empty({a.size(0), b.size(1)});
  for_row_blocks(a.size(0), min_rows, [&](int64_t lo, int64_t hi) {
    at::Tensor rows = out.narrow(0, lo, hi - lo);
    blas_mm_out(rows, a.narrow(0, lo, hi - lo), b);
  });
  return out;
}

}  // namespace knn
