// linear: x [T,K] . W[N,K]^T (+ bias). With T = 1 (decode) this is a GEMV that streams
// every weight row exactly once, front to back; with T > 1 (prefill) a block of rows is
// widened once and reused for every token. Blocks of rows go to the thread pool.
#include <algorithm>
#include <vector>

#include "kvrt/engine/cpu/kernels.h"

namespace kvrt::engine::cpu::kernels {
namespace {

constexpr int64_t kRowBlock = 16;
// Below this many multiply-adds (~50 us on one core) a call is not worth waking the
// pool for: the wake-up costs more than it saves.
constexpr int64_t kParallelWork = int64_t{1} << 19;

void linear_rows(const float* x, int64_t T, int64_t K, const void* weight, DType weight_dtype,
                 int64_t N, const void* bias, DType bias_dtype, float* out, int64_t n_begin,
                 int64_t n_end) {
  thread_local std::vector<float> rows;  // widened weight block, f16/bf16 only
  for (int64_t n0 = n_begin; n0 < n_end; n0 += kRowBlock) {
    const int64_t count = std::min(kRowBlock, n_end - n0);
    if (weight_dtype == DType::kBF16 && T == 1) {
      // GEMV: stream the bf16 rows straight into the dot, no staging copy.
      const uint16_t* w = static_cast<const uint16_t*>(weight) + n0 * K;
      float bias_block[kRowBlock] = {};
      if (bias != nullptr) widen(bias, bias_dtype, n0, count, bias_block);
      for (int64_t r = 0; r < count; ++r) out[n0 + r] = dot_bf16(x, w + r * K, K) + bias_block[r];
      continue;
    }
    const float* block;
    if (weight_dtype == DType::kF32) {
      block = static_cast<const float*>(weight) + n0 * K;
    } else {
      rows.resize(static_cast<size_t>(kRowBlock * K));
      widen(weight, weight_dtype, n0 * K, count * K, rows.data());
      block = rows.data();
    }
    float bias_block[kRowBlock] = {};
    if (bias != nullptr) widen(bias, bias_dtype, n0, count, bias_block);
    for (int64_t t = 0; t < T; ++t) {
      const float* xt = x + t * K;
      float* ot = out + t * N + n0;
      for (int64_t r = 0; r < count; ++r) ot[r] = dot(xt, block + r * K, K) + bias_block[r];
    }
  }
}

}  // namespace

void linear(const float* x, int64_t T, int64_t K, const void* weight, DType weight_dtype, int64_t N,
            const void* bias, DType bias_dtype, float* out, ThreadPool* pool) {
  const int64_t blocks = (N + kRowBlock - 1) / kRowBlock;
  auto run = [&](int64_t b_begin, int64_t b_end) {
    linear_rows(x, T, K, weight, weight_dtype, N, bias, bias_dtype, out, b_begin * kRowBlock,
                std::min(N, b_end * kRowBlock));
  };
  if (pool == nullptr || N * K * T < kParallelWork) {
    run(0, blocks);
    return;
  }
  pool->parallel_for(blocks, 1, run);
}

}  // namespace kvrt::engine::cpu::kernels
