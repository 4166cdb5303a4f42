// The element-wise ops that only some model families use: scale (Gemma's embedding
// normalizer), gelu_tanh_mul (GeGLU), softcap (Gemma 3's final logits) and
// slice_columns (Phi-3's fused projections). Each follows PyTorch's f32 arithmetic.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "kvrt/engine/cpu/kernels.h"

namespace kvrt::engine::cpu::kernels {

void scale(const float* x, int64_t n, float factor, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * factor;
}

void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) {
  // PyTorch's GeluKernel, approximate="tanh": kBeta = sqrt(2) * (2/sqrt(pi)) * 0.5,
  // rounded to f32 once, then 0.5 * x * (1 + tanh(kBeta * (x + kKappa * x^3))).
  constexpr float kBeta =
      static_cast<float>(std::numbers::sqrt2 * (2.0 * std::numbers::inv_sqrtpi) * 0.5);
  constexpr float kKappa = 0.044715f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    const float cube = x * x * x;
    const float inner = kBeta * (x + kKappa * cube);
    out[i] = 0.5f * x * (1.0f + std::tanh(inner)) * up[i];
  }
}

void softcap(const float* x, int64_t n, float cap, float* out) {
  // HF: logits / cap, tanh, * cap (three separate f32 ops).
  for (int64_t i = 0; i < n; ++i) out[i] = std::tanh(x[i] / cap) * cap;
}

void slice_columns(const float* x, int64_t T, int64_t width, int64_t begin, int64_t size,
                   float* out) {
  for (int64_t t = 0; t < T; ++t) {
    const float* src = x + t * width + begin;
    std::copy(src, src + size, out + t * size);
  }
}

}  // namespace kvrt::engine::cpu::kernels
