// rope and attention: the two ops that depend on the absolute position P.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "kvrt/engine/cpu/kernels.h"

namespace kvrt::engine::cpu::kernels {

std::vector<float> rope_inv_freq(int64_t head_dim, double theta, const RopeScaling& scaling) {
  // Float32 throughout, in HF's operation order:
  //   inv_freq = 1.0 / (theta ** (arange(0, D, 2).float() / D))
  const int64_t half = head_dim / 2;
  std::vector<float> inv_freq(static_cast<size_t>(half));
  const float base = static_cast<float>(theta);
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv_freq[static_cast<size_t>(i)] = 1.0f / std::pow(base, exponent);
  }
  if (scaling.type == RopeScaling::Type::kLinear) {
    // transformers' _compute_linear_scaling_rope_parameters: inv_freq /= factor.
    const float factor = static_cast<float>(scaling.factor);
    for (float& f : inv_freq) f = f / factor;
    return inv_freq;
  }
  if (scaling.type != RopeScaling::Type::kLlama3) return inv_freq;

  // transformers' _compute_llama3_parameters: long wavelengths are divided by `factor`,
  // short ones kept, the band between blended smoothly.
  const float factor = static_cast<float>(scaling.factor);
  const float low = static_cast<float>(scaling.low_freq_factor);
  const float old_len = static_cast<float>(scaling.original_max_position_embeddings);
  const float low_freq_wavelen =
      static_cast<float>(scaling.original_max_position_embeddings / scaling.low_freq_factor);
  const float high_freq_wavelen =
      static_cast<float>(scaling.original_max_position_embeddings / scaling.high_freq_factor);
  const float band = static_cast<float>(scaling.high_freq_factor - scaling.low_freq_factor);
  const float two_pi = static_cast<float>(2.0 * std::numbers::pi);
  for (float& f : inv_freq) {
    const float wavelen = two_pi / f;
    float llama = wavelen > low_freq_wavelen ? f / factor : f;
    const float smooth = (old_len / wavelen - low) / band;
    const float smoothed = (1.0f - smooth) * llama / factor + smooth * llama;
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    if (medium) llama = smoothed;
    f = llama;
  }
  return inv_freq;
}

void rope(const float* x, int64_t T, int64_t num_heads, int64_t head_dim, int64_t P,
          const float* inv_freq, float* out, int64_t rotary_dim) {
  const int64_t half = rotary_dim / 2;
  thread_local std::vector<float> cos_sin;
  cos_sin.resize(static_cast<size_t>(2 * half));
  for (int64_t t = 0; t < T; ++t) {
    const float position = static_cast<float>(P + t);
    for (int64_t i = 0; i < half; ++i) {
      const float angle = inv_freq[i] * position;
      cos_sin[static_cast<size_t>(i)] = std::cos(angle);
      cos_sin[static_cast<size_t>(half + i)] = std::sin(angle);
    }
    for (int64_t h = 0; h < num_heads; ++h) {
      const float* src = x + (t * num_heads + h) * head_dim;
      float* dst = out + (t * num_heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float a = src[i], b = src[i + half];
        const float c = cos_sin[static_cast<size_t>(i)], s = cos_sin[static_cast<size_t>(half + i)];
        // x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1].
        dst[i] = a * c + (-b) * s;
        dst[i + half] = b * c + a * s;
      }
      // Partial rotary: torch.cat([rotated, x[..., rotary_dim:]]).
      if (dst != src) std::copy(src + rotary_dim, src + head_dim, dst + rotary_dim);
    }
  }
}

namespace {

// One (token, query head) pair: out [D] = softmax(q . k_j * scale) . v_j over
// first <= j < first + length.
void attend_one(const float* q, const void* k_cache, const void* v_cache, DType cache_dtype,
                int64_t S, int64_t head_dim, int64_t kv_head, int64_t first, int64_t length,
                float scale, float* out, std::vector<float>& scores, std::vector<float>& row) {
  scores.resize(static_cast<size_t>(length));
  row.resize(static_cast<size_t>(head_dim));
  const int64_t base = (kv_head * S + first) * head_dim;
  const bool f32 = cache_dtype == DType::kF32;
  float max_score = -INFINITY;
  for (int64_t j = 0; j < length; ++j) {
    const float* k = f32 ? static_cast<const float*>(k_cache) + base + j * head_dim : row.data();
    if (!f32) widen(k_cache, cache_dtype, base + j * head_dim, head_dim, row.data());
    const float s = dot(q, k, head_dim) * scale;
    scores[static_cast<size_t>(j)] = s;
    max_score = std::max(max_score, s);
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < length; ++j) {
    const float e = std::exp(scores[static_cast<size_t>(j)] - max_score);
    scores[static_cast<size_t>(j)] = e;
    sum += e;
  }
  const float inv_sum = 1.0f / sum;
  std::fill(out, out + head_dim, 0.0f);
  for (int64_t j = 0; j < length; ++j) {
    const float p = scores[static_cast<size_t>(j)] * inv_sum;
    const float* v = f32 ? static_cast<const float*>(v_cache) + base + j * head_dim : row.data();
    if (!f32) widen(v_cache, cache_dtype, base + j * head_dim, head_dim, row.data());
    for (int64_t d = 0; d < head_dim; ++d) out[d] += p * v[d];
  }
}

}  // namespace

void attention(const float* q, int64_t T, const void* k_cache, const void* v_cache,
               DType cache_dtype, int64_t S, int64_t num_heads, int64_t kv_heads, int64_t head_dim,
               float scale, int64_t P, float* out, ThreadPool* pool, int64_t window) {
  const int64_t group = num_heads / kv_heads;
  auto run = [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scores, row;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = item / num_heads, h = item % num_heads;
      const int64_t offset = (t * num_heads + h) * head_dim;
      // HF's sliding-window mask keeps kv_idx > q_idx - window.
      const int64_t first = window > 0 ? std::max<int64_t>(0, P + t - window + 1) : 0;
      attend_one(q + offset, k_cache, v_cache, cache_dtype, S, head_dim, h / group, first,
                 P + t + 1 - first, scale, out + offset, scores, row);
    }
  };
  const int64_t items = T * num_heads;
  if (pool == nullptr || items * (P + T) * head_dim < (int64_t{1} << 18)) {
    run(0, items);
    return;
  }
  pool->parallel_for(items, 1, run);
}

}  // namespace kvrt::engine::cpu::kernels
