#include "kvrt/engine/cuda/test/reference.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "kvrt/core/dtype.h"

namespace kvrt::engine::cuda::reference {

float round_bf16(float value) {
  return bf16_to_f32(f32_to_bf16(value));
}

std::vector<float> linear(const std::vector<float>& w, const std::vector<float>& x, int tokens,
                          int rows, int in, size_t w_offset) {
  std::vector<float> y(static_cast<size_t>(tokens) * rows);
  for (int t = 0; t < tokens; ++t) {
    const float* xt = x.data() + static_cast<size_t>(t) * in;
    for (int r = 0; r < rows; ++r) {
      const float* wr = w.data() + w_offset + static_cast<size_t>(r) * in;
      double sum = 0.0;
      for (int k = 0; k < in; ++k) sum += static_cast<double>(wr[k]) * xt[k];
      y[static_cast<size_t>(t) * rows + r] = static_cast<float>(sum);
    }
  }
  return y;
}

std::vector<float> rmsnorm(const std::vector<float>& x, const std::vector<float>& gamma, int tokens,
                           int hidden, float eps) {
  std::vector<float> y(x.size());
  for (int t = 0; t < tokens; ++t) {
    const float* xt = x.data() + static_cast<size_t>(t) * hidden;
    double squares = 0.0;
    for (int i = 0; i < hidden; ++i) squares += static_cast<double>(xt[i]) * xt[i];
    const float inv_rms = static_cast<float>(1.0 / std::sqrt(squares / hidden + eps));
    for (int i = 0; i < hidden; ++i) {
      y[static_cast<size_t>(t) * hidden + i] = round_bf16(round_bf16(xt[i] * inv_rms) * gamma[i]);
    }
  }
  return y;
}

float swiglu(float gate, float up) {
  const double g = round_bf16(gate);
  const float silu = round_bf16(static_cast<float>(g / (1.0 + std::exp(-g))));
  return round_bf16(silu * round_bf16(up));
}

void row_norm(const float* x, const float* weight, const float* residual, float* out, int width,
              float eps, bool unit_offset) {
  double squares = 0.0;
  for (int i = 0; i < width; ++i) squares += static_cast<double>(x[i]) * x[i];
  const double r = 1.0 / std::sqrt(squares / width + eps);
  for (int i = 0; i < width; ++i) {
    const float normed = unit_offset
                             ? round_bf16(static_cast<float>(x[i] * r * (1.0 + weight[i])))
                             : round_bf16(round_bf16(static_cast<float>(x[i] * r)) * weight[i]);
    out[i] = residual != nullptr ? round_bf16(residual[i] + normed) : normed;
  }
}

float geglu(float gate, float up) {
  const double g = round_bf16(gate);
  const double inner = std::sqrt(2.0 / std::numbers::pi) * (g + 0.044715 * g * g * g);
  const float gelu = round_bf16(static_cast<float>(0.5 * g * (1.0 + std::tanh(inner))));
  return round_bf16(gelu * round_bf16(up));
}

float softcap(float x, float cap) {
  return static_cast<float>(std::tanh(static_cast<double>(x) / cap) * cap);
}

void rope_head(float* head, int head_dim, int position, const std::vector<float>& inv_freq,
               float attention_scaling, int rotary_dim) {
  const int half = (rotary_dim != 0 ? rotary_dim : head_dim) / 2;
  for (int j = 0; j < half; ++j) {
    const float angle = static_cast<float>(position) * inv_freq[static_cast<size_t>(j)];
    const double c = std::cos(static_cast<double>(angle)) * attention_scaling;
    const double s = std::sin(static_cast<double>(angle)) * attention_scaling;
    const double x1 = head[j], x2 = head[j + half];
    head[j] = static_cast<float>(x1 * c - x2 * s);
    head[j + half] = static_cast<float>(x2 * c + x1 * s);
  }
}

std::vector<float> attention(const std::vector<float>& q, const std::vector<float>& k_cache,
                             const std::vector<float>& v_cache, const std::vector<int>& positions,
                             int q_heads, int kv_heads, int dim, int max_seq, float scale,
                             int window) {
  const int tokens = static_cast<int>(positions.size());
  const int group = q_heads / kv_heads;
  std::vector<float> out(static_cast<size_t>(tokens) * q_heads * dim, 0.0f);
  std::vector<double> weights;
  for (int t = 0; t < tokens; ++t) {
    const int last = positions[static_cast<size_t>(t)];
    const int first = window > 0 ? std::max(0, last - window + 1) : 0;
    for (int h = 0; h < q_heads; ++h) {
      const float* qh = q.data() + (static_cast<size_t>(t) * q_heads + h) * dim;
      const size_t head_base = static_cast<size_t>(h / group) * max_seq * dim;
      weights.assign(static_cast<size_t>(last + 1), 0.0);
      double max_score = -INFINITY;
      for (int j = first; j <= last; ++j) {
        const float* kj = k_cache.data() + head_base + static_cast<size_t>(j) * dim;
        double dot = 0.0;
        for (int d = 0; d < dim; ++d) dot += static_cast<double>(qh[d]) * kj[d];
        weights[static_cast<size_t>(j)] = dot * scale;
        max_score = std::max(max_score, dot * scale);
      }
      double sum = 0.0;
      for (int j = first; j <= last; ++j) {
        double& w = weights[static_cast<size_t>(j)];
        w = std::exp(w - max_score);
        sum += w;
      }
      float* oh = out.data() + (static_cast<size_t>(t) * q_heads + h) * dim;
      for (int d = 0; d < dim; ++d) {
        double acc = 0.0;
        for (int j = first; j <= last; ++j) {
          acc += weights[static_cast<size_t>(j)] *
                 v_cache[head_base + static_cast<size_t>(j) * dim + d];
        }
        oh[d] = static_cast<float>(acc / sum);
      }
    }
  }
  return out;
}

int argmax(const float* logits, int count) {
  int best = 0;
  for (int i = 1; i < count; ++i) {
    const bool nan = std::isnan(logits[i]), best_nan = std::isnan(logits[best]);
    if (best_nan) continue;
    if (nan || logits[i] > logits[best]) best = i;
  }
  return best;
}

}  // namespace kvrt::engine::cuda::reference
