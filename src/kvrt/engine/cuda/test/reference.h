// CPU reference implementations of every kernel, as plain loops in f32/f64 over the
// same bf16 inputs. Where the kernels round an intermediate to bf16 because HF
// transformers does (RMSNorm output, SwiGLU's gate/up/silu), the reference rounds at the
// same points; everything else is computed in higher precision than the kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvrt::engine::cuda::reference {

float round_bf16(float value);

// y[t, r] = sum_k w[r, k] * x[t, k]; w [rows, in], x [tokens, in]; f64 accumulation.
std::vector<float> linear(const std::vector<float>& w, const std::vector<float>& x, int tokens,
                          int rows, int in, size_t w_offset = 0);

// HF LlamaRMSNorm: bf16(bf16(x * rsqrt(mean(x^2) + eps)) * gamma).
std::vector<float> rmsnorm(const std::vector<float>& x, const std::vector<float>& gamma, int tokens,
                           int hidden, float eps);

// HF LlamaMLP's act(gate) * up on bf16 tensors: bf16(bf16(silu(bf16(gate))) * bf16(up)).
float swiglu(float gate, float up);

// One row of RMSNorm into out[0, width): HF LlamaRMSNorm (unit_offset false:
// bf16(bf16(x * r) * w)) or GemmaRMSNorm (true: bf16(x * r * (1 + w)), r in f64, the
// rest unrounded), r = 1/sqrt(mean(x^2) + eps); with residual (may be null),
// bf16(residual + normed). x, residual and out may be the same row.
void row_norm(const float* x, const float* weight, const float* residual, float* out, int width,
              float eps, bool unit_offset);

// HF GemmaMLP's act(gate) * up on bf16 tensors with gelu_pytorch_tanh:
// bf16(bf16(gelu_tanh(bf16(gate))) * bf16(up)), the GELU in f64.
float geglu(float gate, float up);

// tanh(x / cap) * cap in f64, as f32 (final_logit_softcapping).
float softcap(float x, float cap);

// Rotates one head vector (HF rotate_half) at `position`: the angle is the f32 product
// position * inv_freq[j] (as HF and the kernel form it), cos and sin in f64. Partial
// rotary (rotary_dim < head_dim, 0 means head_dim): the pairs (j, j + rotary_dim/2) of
// the first rotary_dim dims turn, the rest stay as they are.
void rope_head(float* head, int head_dim, int position, const std::vector<float>& inv_freq,
               float attention_scaling, int rotary_dim = 0);

// Causal attention: q [tokens, q_heads, dim]; caches [kv_heads, max_seq, dim]; query t
// sees keys [0, positions[t]], or with a window > 0 only the last `window` of them,
// [max(0, positions[t] - window + 1), positions[t]]. Returns [tokens, q_heads, dim]; f64
// softmax.
std::vector<float> attention(const std::vector<float>& q, const std::vector<float>& k_cache,
                             const std::vector<float>& v_cache, const std::vector<int>& positions,
                             int q_heads, int kv_heads, int dim, int max_seq, float scale,
                             int window = 0);

// torch.argmax: the first maximum; NaN counts as the largest value.
int argmax(const float* logits, int count);

}  // namespace kvrt::engine::cuda::reference
