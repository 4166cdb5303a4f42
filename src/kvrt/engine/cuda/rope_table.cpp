// The rotary embedding's inverse-frequency table, computed once on the host at init
// (HF transformers' default and "llama3" rope types, in f32 as HF computes them).
#include <cmath>
#include <numbers>

#include "kvrt/engine/cuda/kernels.h"

namespace kvrt::engine::cuda {

Result<std::vector<float>> rope_inv_freq(int head_dim, float theta, const RopeScaling& scaling) {
  if (head_dim <= 0 || head_dim % 2 != 0) {
    return invalid_argument("rope_inv_freq: head_dim must be positive and even, got ", head_dim);
  }
  if (!(theta > 1.0f)) return invalid_argument("rope_inv_freq: theta must be > 1, got ", theta);
  std::vector<float> inv_freq(static_cast<size_t>(head_dim / 2));
  for (int i = 0; i < head_dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv_freq[static_cast<size_t>(i)] = 1.0f / std::pow(theta, exponent);
  }
  if (scaling.type == RopeType::kDefault) return inv_freq;

  const float factor = scaling.factor;
  const float low = scaling.low_freq_factor;
  const float high = scaling.high_freq_factor;
  const float old_context = static_cast<float>(scaling.original_max_position);
  if (!(factor > 0.0f) || !(low > 0.0f) || !(high > low) || !(old_context > 0.0f)) {
    return invalid_argument(
        "rope_inv_freq: llama3 scaling needs factor > 0, 0 < low_freq_factor < "
        "high_freq_factor and original_max_position > 0");
  }
  const float low_freq_wavelen = old_context / low;
  const float high_freq_wavelen = old_context / high;
  for (float& inv : inv_freq) {
    const float wavelen = 2.0f * std::numbers::pi_v<float> / inv;
    if (wavelen < high_freq_wavelen) continue;  // high frequencies: unchanged
    if (wavelen > low_freq_wavelen) {           // low frequencies: slowed by `factor`
      inv = inv / factor;
      continue;
    }
    const float smooth = (old_context / wavelen - low) / (high - low);
    inv = (1.0f - smooth) * inv / factor + smooth * inv;
  }
  return inv_freq;
}

}  // namespace kvrt::engine::cuda
