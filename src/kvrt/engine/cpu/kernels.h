// The math of every op in docs/graph.md, on raw contiguous f32 activations. Weights
// and caches may be f32, f16 or bf16: they are widened on read (and a cache is
// narrowed on write). Each function computes every output element with one fixed
// summation order that does not depend on T or the thread count, so prefill of T
// tokens and T separate decodes give bitwise identical rows.
#pragma once

#include <cstdint>
#include <vector>

#include "kvrt/core/dtype.h"
#include "kvrt/engine/cpu/thread_pool.h"

namespace kvrt::engine::cpu::kernels {

// f16 -> f32 without branches on the common path (exact for every f16 value).
float half_to_float(uint16_t bits);

// dst[i] = element (offset + i) of `src` (dtype f32, f16 or bf16), for i < n.
void widen(const void* src, DType dtype, int64_t offset, int64_t n, float* dst);
// Element (offset + i) of `dst` = src[i], rounded to nearest even for f16/bf16.
void narrow(const float* src, int64_t n, void* dst, DType dtype, int64_t offset);

// sum_i a[i] * b[i] with 16 interleaved partial sums (vectorizable, order fixed by n).
float dot(const float* a, const float* b, int64_t n);
// The same dot with b stored as bf16, widened on the fly: bitwise equal to dot() over
// the widened values (lets a GEMV stream bf16 weights without a staging copy).
float dot_bf16(const float* a, const uint16_t* b, int64_t n);

// out [T,H] = table[tokens[t]]; table [V,H]. Token ids must be checked by the caller.
void embedding(const int32_t* tokens, int64_t T, const void* table, DType table_dtype, int64_t H,
               float* out);

// out [T,H] = x / sqrt(mean(x^2) + eps) * weight; weight [H]. With unit_offset the
// scale is (1 + weight), computed in f32 (Gemma's RMSNorm). Per-head norms call this
// with T*heads rows of width head_dim.
void rms_norm(const float* x, int64_t T, int64_t H, const void* weight, DType weight_dtype,
              float eps, float* out, bool unit_offset = false);

// out [T,N] = x [T,K] . weight[N,K]^T (+ bias[N]). Parallel over blocks of output rows;
// each weight row is read once per call and reused for all T tokens.
void linear(const float* x, int64_t T, int64_t K, const void* weight, DType weight_dtype, int64_t N,
            const void* bias, DType bias_dtype, float* out, ThreadPool* pool);

struct RopeScaling {
  enum class Type { kDefault, kLlama3, kLinear } type = Type::kDefault;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position_embeddings = 8192.0;
};
// inv_freq [D/2] in f32, computed as Hugging Face transformers does (including the
// Llama 3.1 adjustment, and linear scaling: inv_freq / factor). D is the rotary width.
std::vector<float> rope_inv_freq(int64_t head_dim, double theta, const RopeScaling& scaling);

// Rotate-half RoPE on x [T, n*D] (in place allowed: out may equal x); row t has
// absolute position P + t. Only the first rotary_dim (even, <= D) dims of each head
// rotate, with inv_freq [rotary_dim/2]; the rest pass through (partial rotary, Phi-3).
void rope(const float* x, int64_t T, int64_t num_heads, int64_t head_dim, int64_t P,
          const float* inv_freq, float* out, int64_t rotary_dim);

// cache [KVH,S,D] rows P..P+T-1 of every head = new_rows [T, KVH*D]. Only those rows are
// written. Bounds (P + T <= S) must be checked by the caller.
void kv_cache_write(const float* new_rows, int64_t T, int64_t kv_heads, int64_t S, int64_t head_dim,
                    int64_t P, void* cache, DType cache_dtype);

// out [T, NH*D]: causal attention of q [T, NH*D] over cache rows 0..P+t of k, v
// [KVH,S,D]; query head h reads KV head h / (NH/KVH); softmax(q.k * scale). With
// window > 0 (sliding-window attention) query P+t reads only rows P+t-window+1..P+t.
void attention(const float* q, int64_t T, const void* k_cache, const void* v_cache,
               DType cache_dtype, int64_t S, int64_t num_heads, int64_t kv_heads, int64_t head_dim,
               float scale, int64_t P, float* out, ThreadPool* pool, int64_t window = 0);

// out[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + exp(-x)).
void silu_mul(const float* gate, const float* up, int64_t n, float* out);
// out[i] = a[i] + b[i].
void add(const float* a, const float* b, int64_t n, float* out);
// out[r] = the index of row r's largest logit; ties go to the lowest index and NaN
// counts as the largest value, as torch.argmax (and the CUDA engine) decide.
void argmax_rows(const float* logits, int64_t rows, int64_t width, int32_t* out);

// The model-family ops (kernels_family.cpp).
// out[i] = x[i] * factor.
void scale(const float* x, int64_t n, float factor, float* out);
// out[i] = gelu_tanh(gate[i]) * up[i], with PyTorch's tanh approximation
// 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))).
void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out);
// out[i] = tanh(x[i] / cap) * cap.
void softcap(const float* x, int64_t n, float cap, float* out);
// out [T, size] = columns begin..begin+size-1 of x [T, width].
void slice_columns(const float* x, int64_t T, int64_t width, int64_t begin, int64_t size,
                   float* out);

}  // namespace kvrt::engine::cpu::kernels
