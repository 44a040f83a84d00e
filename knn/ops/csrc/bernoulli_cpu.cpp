// Bernoulli masks drawn exactly as torch's CPU `bernoulli_(p)` draws them, in vectorized loops.
//
// torch (ATen/native/cpu/DistributionTemplates.h, the path it takes unless it hands the
// draw to MKL) fills a tensor one element at a time: two 32-bit words from the default
// generator's mt19937, u = ((w1 << 32 | w2) mod 2^53) · 2^-53, value = (u < p), about
// 10 ns per element against this file's 0.8 (docs/performance.md).
// Here the same words come out of the same engine state, in the same order, and the
// state is written back, so masks and every later draw are unchanged; the twist,
// the tempering and the comparison are plain loops over arrays that gcc vectorizes.
//
// The comparison is done on integers: v · 2^-53 < p  <=>  v < ceil(p · 2^53) for an
// integer v < 2^53, both sides exact in double.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/MT19937RNGEngine.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <vector>

namespace {

constexpr int kN = 624;  // mt19937 state words
constexpr int kM = 397;
constexpr uint32_t kMatrixA = 0x9908b0df;
constexpr uint32_t kUpper = 0x80000000;
constexpr uint32_t kLower = 0x7fffffff;
constexpr int64_t kChunk = 2048;  // elements per pass: two words each stay in L1

inline uint32_t twist(uint32_t u, uint32_t v) {
  return (((u & kUpper) | (v & kLower)) >> 1) ^ ((v & 1u) ? kMatrixA : 0u);
}

inline uint32_t temper(uint32_t y) {
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

// at::mt19937_engine::next_state, as loops whose reads run at least kN - kM words
// ahead of or behind their writes, so each vectorizes.
void regenerate(at::mt19937_data_pod& s) {
  uint32_t* x = s.state_.data();
  for (int i = 0; i < kN - kM; ++i) x[i] = x[i + kM] ^ twist(x[i], x[i + 1]);
  for (int i = kN - kM; i < kN - 1; ++i) x[i] = x[i + kM - kN] ^ twist(x[i], x[i + 1]);
  x[kN - 1] = x[kM - 1] ^ twist(x[kN - 1], x[0]);
  s.left_ = kN;
  s.next_ = 0;
}

// The next n outputs of the engine, as n calls of at::mt19937_engine::operator()
// return them: that call decrements left_, regenerates when it reaches 0 (setting
// it back to kN), then returns state_[next_++] tempered.
void draw_words(at::mt19937_data_pod& s, uint32_t* out, int64_t n) {
  while (n > 0) {
    if (s.left_ == 1) {
      regenerate(s);
      *out++ = temper(s.state_[s.next_++]);
      --n;
      continue;
    }
    const int64_t m = std::min<int64_t>(n, s.left_ - 1);
    const uint32_t* src = s.state_.data() + s.next_;
    for (int64_t i = 0; i < m; ++i) out[i] = temper(src[i]);
    out += m;
    n -= m;
    s.next_ += static_cast<uint32_t>(m);
    s.left_ -= static_cast<int>(m);
  }
}

template <typename T>
void fill_mask(at::mt19937_data_pod& s, T* out, int64_t n, uint64_t threshold, T kept) {
  std::vector<uint32_t> words(2 * kChunk);
  for (int64_t lo = 0; lo < n; lo += kChunk) {
    const int64_t m = std::min(kChunk, n - lo);
    draw_words(s, words.data(), 2 * m);
    const uint32_t* w = words.data();
    for (int64_t k = 0; k < m; ++k) {
      // random64() puts the first word high; uniform_real<double> keeps the low 53 bits.
      const uint64_t v = (static_cast<uint64_t>(w[2 * k] & 0x1fffffu) << 32) | w[2 * k + 1];
      out[lo + k] = v < threshold ? kept : T(0);
    }
  }
}

// A new contiguous tensor of `size` and `dtype` whose elements are Bernoulli(p): the values
// `torch.empty(size, dtype=dtype).bernoulli_(p)` gives on torch's mt19937 path, then, with a
// divisor, `.div_(divisor)` in the same pass. A kept element is what torch's div_ makes of
// 1: the divisor cast to the tensor's dtype, then one correctly rounded division in that
// dtype (aten's div_true_kernel for float and double); a dropped one stays 0: dropout's mask
// in one pass (tests/ops/test_dropout.py compares it with torch's, bit for bit).
at::Tensor draw(c10::IntArrayRef size, double p, c10::ScalarType dtype, const std::optional<double>& divisor) {
  TORCH_CHECK(p >= 0.0 && p <= 1.0, "bernoulli: p must be in [0, 1], got ", p);
  at::Tensor out = at::empty(size, at::TensorOptions().dtype(dtype));
  const uint64_t threshold = static_cast<uint64_t>(std::ceil(std::ldexp(p, 53)));
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  auto* impl = gen.get<at::CPUGeneratorImpl>();
  at::mt19937 engine = impl->engine();
  at::mt19937_data_pod state = engine.data();
  AT_DISPATCH_FLOATING_TYPES(dtype, "knn_bernoulli", [&] {
    const scalar_t kept = divisor.has_value() ? scalar_t(1) / static_cast<scalar_t>(*divisor)
                                              : scalar_t(1);
    fill_mask<scalar_t>(state, out.data_ptr<scalar_t>(), out.numel(), threshold, kept);
  });
  engine.set_data(state);
  impl->set_engine(engine);
  return out;
}

at::Tensor bernoulli(c10::IntArrayRef size, double p, c10::ScalarType dtype) {
  return draw(size, p, dtype, std::nullopt);
}

// bernoulli(size, q, dtype).div_(q), in one pass: dropout's mask for the keep rate q > 0.
at::Tensor scaled_mask(c10::IntArrayRef size, double q, c10::ScalarType dtype) {
  TORCH_CHECK(q > 0.0 && q <= 1.0, "scaled mask: q must be in (0, 1], got ", q);
  return draw(size, q, dtype, q);
}

}  // namespace

// torch.ops.knn_rng_cpu.bernoulli; built into the same library as the CPU scan
// (knn/ops/recurrence.py builds it, knn/ops/dropout.py calls it).
TORCH_LIBRARY(knn_rng_cpu, m) {
  m.def("bernoulli", &bernoulli);
  m.def("scaled_mask", &scaled_mask);
}
