// The (x, h)-gated scan's per-step products, c = a · b with b the same (d, d) matrix at
// every step, on a register-blocked AVX2 kernel with b packed once per scan
// (string_kernel_cpu.cpp).
//
// An SST step makes about 40 of these (B, 200) x (200, 200) products, B = 32 rows (16 per
// thread at two threads). BLAS repacks b on every call and its kernels are tuned for
// larger products: at these sizes sgemm_ ran at about half of this CPU's FMA rate
// (experiments/bench/sst_epoch/README.md, 2026-12-02). Here b is packed once, into
// panels of kPanelCols columns laid out k-major, and each step runs a kernel that keeps a
// kTileRows x kPanelCols block of c in twelve AVX registers while it walks k.
//
// Each element of c is one sum over k in ascending order with fused multiply-adds, so it
// differs from BLAS's (whose order is its own) by rounding only;
// tests/ops/test_recurrence.py checks panel_mm against torch.mm and the scan against
// its PyTorch reference. Float only, in AVX2 builds (recurrence.py's "avx2" ISA); other
// dtypes and builds, and dispatch modes (cpu_gemm.h), keep the BLAS or aten path.
#pragma once

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define KNN_PANEL_GEMM 1
#else
#define KNN_PANEL_GEMM 0
#endif

namespace knn {

constexpr int64_t kPanelCols = 24;  // three 8-float vectors
constexpr int64_t kTileRows = 4;    // 4 x 3 accumulators, 2 operands, 1 broadcast: 15 of 16 registers
// Depth above which a panel (depth x kPanelCols floats) no longer sits in L1 beside a's rows:
// there BLAS's blocking is the better deal.
constexpr int64_t kMaxPanelDepth = 512;

// b (K, N), b(k, j) = b[k * row_stride + j * col_stride], as panels: panel p holds columns
// [p·kPanelCols, (p+1)·kPanelCols) as K rows of kPanelCols floats, zero past N.
struct Panels {
  std::vector<float> data;
  int64_t K = 0, N = 0;
};

// Whether panel_gemm runs for products of T with depth K here: not under a dispatch mode,
// where the products go through aten for it to see (cpu_gemm.h).
template <typename T>
bool panel_gemm_applies(int64_t K) {
  return KNN_PANEL_GEMM && std::is_same_v<T, float> && K <= kMaxPanelDepth &&
         c10::impl::TorchDispatchModeTLS::stack_len() == 0;
}

// Only where panel_gemm_applies<T>(K) (T is float there; the template lets the scan's
// dtype dispatch compile).
template <typename T>
Panels pack_panels(const T* b, int64_t K, int64_t N, int64_t row_stride, int64_t col_stride) {
  TORCH_CHECK((std::is_same_v<T, float>), "pack_panels is float only");
  Panels p;
  p.K = K, p.N = N;
  const int64_t panels = (N + kPanelCols - 1) / kPanelCols;
  p.data.assign(panels * K * kPanelCols, 0.f);
  for (int64_t q = 0; q < panels; ++q) {
    float* dst = p.data.data() + q * K * kPanelCols;
    const int64_t j0 = q * kPanelCols, w = std::min(kPanelCols, N - j0);
    // Read along b's contiguous direction; the writes stay inside one panel.
    if (col_stride == 1) {
      for (int64_t k = 0; k < K; ++k)
        std::copy(b + k * row_stride + j0, b + k * row_stride + j0 + w, dst + k * kPanelCols);
    } else {
      for (int64_t j = 0; j < w; ++j) {
        const T* src = b + (j0 + j) * col_stride;
        for (int64_t k = 0; k < K; ++k) dst[k * kPanelCols + j] = float(src[k * row_stride]);
      }
    }
  }
  return p;
}

#if KNN_PANEL_GEMM
// c[r][0, w) = Σ_k a[r][k] · panel[k][0, w) for the R (<= kTileRows) rows of one tile; a's
// rows are lda apart.
template <int R>
inline void panel_tile(int64_t K, const float* a, int64_t lda, const float* panel, float* c,
                       int64_t ldc, int64_t w) {
  __m256 x0 = _mm256_setzero_ps(), y0 = x0, z0 = x0, x1 = x0, y1 = x0, z1 = x0;
  __m256 x2 = x0, y2 = x0, z2 = x0, x3 = x0, y3 = x0, z3 = x0;
  const float* a0 = a;
  const float* a1 = a + lda;
  const float* a2 = a + 2 * lda;
  const float* a3 = a + 3 * lda;
  for (int64_t k = 0; k < K; ++k) {
    const float* pk = panel + k * kPanelCols;
    const __m256 b0 = _mm256_loadu_ps(pk), b1 = _mm256_loadu_ps(pk + 8), b2 = _mm256_loadu_ps(pk + 16);
    __m256 s;
    // Named registers, not arrays: gcc spilled array accumulators to the stack every step.
#define KNN_PANEL_ROW(r)                      \
  if constexpr (R > r) {                      \
    s = _mm256_broadcast_ss(a##r + k);        \
    x##r = _mm256_fmadd_ps(s, b0, x##r);      \
    y##r = _mm256_fmadd_ps(s, b1, y##r);      \
    z##r = _mm256_fmadd_ps(s, b2, z##r);      \
  }
    KNN_PANEL_ROW(0) KNN_PANEL_ROW(1) KNN_PANEL_ROW(2) KNN_PANEL_ROW(3)
#undef KNN_PANEL_ROW
  }
  const __m256 xs[4] = {x0, x1, x2, x3}, ys[4] = {y0, y1, y2, y3}, zs[4] = {z0, z1, z2, z3};
  for (int r = 0; r < R; ++r) {
    float* cr = c + r * ldc;
    if (w == kPanelCols) {
      _mm256_storeu_ps(cr, xs[r]), _mm256_storeu_ps(cr + 8, ys[r]), _mm256_storeu_ps(cr + 16, zs[r]);
    } else {
      alignas(32) float row[kPanelCols];
      _mm256_store_ps(row, xs[r]), _mm256_store_ps(row + 8, ys[r]), _mm256_store_ps(row + 16, zs[r]);
      std::copy(row, row + w, cr);
    }
  }
}
#endif

// c (M, N), row stride ldc, = a (M, K), row-major with row stride lda, · b (packed).
// Only where panel_gemm_applies<T>(b.K).
template <typename T>
void panel_gemm(int64_t M, const T* a, int64_t lda, const Panels& b, T* c, int64_t ldc) {
#if KNN_PANEL_GEMM
  if constexpr (std::is_same_v<T, float>) {
    RECORD_FUNCTION("knn::panel_gemm", std::vector<c10::IValue>());
    const int64_t panels = (b.N + kPanelCols - 1) / kPanelCols;
    for (int64_t q = 0; q < panels; ++q) {
      const float* panel = b.data.data() + q * b.K * kPanelCols;
      const int64_t w = std::min(kPanelCols, b.N - q * kPanelCols);
      for (int64_t i = 0; i < M; i += kTileRows) {
        const float* ai = a + i * lda;
        float* ci = c + i * ldc + q * kPanelCols;
        switch (std::min(kTileRows, M - i)) {
          case 4: panel_tile<4>(b.K, ai, lda, panel, ci, ldc, w); break;
          case 3: panel_tile<3>(b.K, ai, lda, panel, ci, ldc, w); break;
          case 2: panel_tile<2>(b.K, ai, lda, panel, ci, ldc, w); break;
          default: panel_tile<1>(b.K, ai, lda, panel, ci, ldc, w);
        }
      }
    }
    return;
  }
#endif
  TORCH_CHECK(false, "panel_gemm needs float and an AVX2 build");
}

}  // namespace knn
