// Work split over the intra-op threads for the CPU ops (string_kernel_cpu.cpp,
// string_kernel_pooled_cpu.cpp): independent pieces of one op, each on its own thread,
// instead of one small product at a time split across all of them.
//
// Products called inside a parallel region run single-threaded (neither MKL nor oneDNN
// forks again there). At SST's sizes (16 to a few hundred rows) a product gains little
// from a second thread of its own, so independent products run side by side instead
// (docs/performance.md says which ones).
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/ThreadLocalState.h>

#include <algorithm>

namespace knn {

// Runs fn(k) for k in [0, tasks) on the intra-op threads, one task per thread. The caller's
// thread-local state (grad mode, profiler) holds in the workers too: the ops run beneath
// autograd, so a worker's products must not see it either.
template <typename F>
void parallel_tasks(int64_t tasks, const F& fn) {
  if (tasks == 1 || at::get_num_threads() == 1 || at::in_parallel_region()) {
    for (int64_t k = 0; k < tasks; ++k) fn(k);
    return;
  }
  const at::ThreadLocalState state;
  at::parallel_for(0, tasks, 1, [&](int64_t lo, int64_t hi) {
    at::ThreadLocalStateGuard guard(state);
    for (int64_t k = lo; k < hi; ++k) fn(k);
  });
}

// Runs fn(lo, hi) over consecutive blocks of rows [0, n), one block per thread, each block
// at least `min_rows` long (one block when there is a single thread).
template <typename F>
void for_row_blocks(int64_t n, int64_t min_rows, const F& fn) {
  const int64_t blocks = at::in_parallel_region() ? 1 :
      std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), n / min_rows));
  parallel_tasks(blocks, [&](int64_t k) { fn(k * n / blocks, (k + 1) * n / blocks); });
}

}  // namespace knn
