// kvrt's CUDA kernel library: the ops the CUDA engine assembles a Llama-family decoder
// from, each proven on its own against a CPU reference (test/) and timed (bench/).
//
// Conventions (docs/kernels.md has the design of each kernel):
// - bf16 storage, f32 accumulation; built for Hopper (sm_90a) only.
// - Plain device pointers + sizes + a stream. Every call checks its arguments first and
//   returns InvalidArgument naming the argument, before it touches the device; a failed
//   launch comes back as Internal with the CUDA error name.
// - Positions and token ids are read from device memory, never baked into a launch, so
//   a decode step can be captured once in a CUDA graph and replayed after the caller
//   writes the next position / token into the same device buffers.
// - Kernels are launched with programmatic dependent launch (PDL) by default on created
//   streams: a kernel may start (and prefetch its weights into L2) while its predecessor
//   on the stream drains; it reads nothing that predecessor writes before the dependency
//   is resolved. Weights (W, norm weights) are model constants and may be read before
//   that point: no kernel earlier in the same PDL chain may write them.
// - This header compiles with g++ (the engine's .cpp files): only CUDA runtime types.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/core/status.h"
#include "kvrt/engine/cuda/tuning.h"

namespace kvrt::engine::cuda {

using bf16 = __nv_bfloat16;

// ---------------------------------------------------------------------------------------
// Device and launch settings

// True when a CUDA device that can run these kernels (compute capability 9.0, the sm_90a
// build) is present. Otherwise false, with the reason in *why ("no CUDA device: ...").
bool cuda_device_available(std::string* why);

// Ok for cudaSuccess, else Internal "<what>: <cudaErrorName> (<description>)".
Status cuda_check(cudaError_t error, std::string_view what);

// Multiprocessor count of the current device (cached per device).
Result<int> sm_count();

// Programmatic dependent launch for the kernels this thread launches (default on; a
// setting of the calling thread only). Off makes each kernel wait for its predecessor's
// completion before it starts, as plain launches do; results are the same either way.
void set_programmatic_launch(bool enabled);
bool programmatic_launch();

// ---------------------------------------------------------------------------------------
// Decode linear layers: y = W·x for 1..8 token vectors (tensor-core GEMV)

// W is row-major [rows, in] as stored in HF checkpoints. Fusions:
//  - norm_weight set: x is RMS-normalized on the fly (HF LlamaRMSNorm: bf16(x·rsqrt(
//    mean(x²)+eps)) · gamma, rounded to bf16), computed once per block from x.
//  - swiglu: W is [2·rows, in], the gate rows then the up rows (the two HF matrices
//    concatenated, not interleaved); y = bf16(silu(gate) · up), HF's rounding points.
//  - bias set: bias[r] is added to (W·x)[r] in f32 before any rounding, as F.linear's
//    bias is (Qwen2's q/k/v; Llama's attention_bias and mlp_bias). With swiglu it is
//    [2·rows]: the gate's bias then the up's, like W.
//  - residual set: y = bf16(bf16(W·x + bias) + residual); residual may be the output
//    storage itself (h += o_proj(attn) in place).
//  - q/k/v or any concatenation of matrices that share x: concatenate their rows.
// Exactly one of output (bf16) and output_f32 (f32, e.g. logits; no residual/swiglu).
// in must be a multiple of 8; weight and input 16-byte aligned; output must not overlap
// the input. tokens·in·2 bytes of x are staged in shared memory (≤ 144 KiB).
struct DecodeLinear {
  const bf16* weight = nullptr;       // [rows, in], or [2·rows, in] with swiglu
  const bf16* input = nullptr;        // [tokens, in]
  int tokens = 1;                     // 1..8
  int rows = 0;                       // output features
  int in = 0;                         // input features
  const bf16* norm_weight = nullptr;  // [in] RMSNorm gamma, or null
  float norm_eps = 1e-5f;
  bool swiglu = false;
  const bf16* bias = nullptr;      // [rows], or [2·rows] with swiglu; or null
  const bf16* residual = nullptr;  // [tokens, rows], or null
  bf16* output = nullptr;          // [tokens, rows]
  float* output_f32 = nullptr;     // [tokens, rows]
  // Greedy decoding fused in (output_f32, one token): argmax_out[0] = the index of the
  // largest output, ties to the lowest, NaN the largest (torch.argmax), written by the
  // launch's last block. argmax_workspace: kDecodeLinearArgmaxWorkspaceBytes, 8-byte
  // aligned, zero before the first launch; every launch leaves it zero again.
  int32_t* argmax_out = nullptr;
  void* argmax_workspace = nullptr;
  // Launch geometry (tuning.h); the default, every field unset, is the library's choice
  // for the shape. For the benchmark and the tests, which compare geometries.
  DecodeLinearTuning tuning;
};
inline constexpr size_t kDecodeLinearArgmaxWorkspaceBytes = 16;
Status decode_linear(const DecodeLinear& op, cudaStream_t stream);

// ---------------------------------------------------------------------------------------
// Prefill linear layers: cuBLASLt GEMM, y[tokens, rows] = x[tokens, in] · Wᵀ (+ bias)
// (+ residual)

class PrefillLinear {
 public:
  // Creates the cuBLASLt handle and a device workspace of `workspace_bytes`.
  static Result<std::unique_ptr<PrefillLinear>> create(size_t workspace_bytes = 32u << 20);
  ~PrefillLinear();
  PrefillLinear(const PrefillLinear&) = delete;
  PrefillLinear& operator=(const PrefillLinear&) = delete;

  // residual (may equal output) is added through cuBLASLt's C operand (beta = 1), and
  // bias ([rows] bf16, 16-byte aligned, or null) through its BIAS epilogue, both in the
  // same f32 epilogue as the product: one rounding (decode_linear rounds W·x + bias
  // before adding a residual, as the bf16 layers do; the two differ by at most an ulp of
  // it). Plans (descriptors, heuristic's algorithm) are cached per shape, fusions and
  // pointer alignment; the call is capturable in a CUDA graph.
  Status run(const bf16* weight, const bf16* input, int tokens, int rows, int in,
             const bf16* residual, bf16* output, cudaStream_t stream, const bf16* bias = nullptr);

 private:
  struct Plan;
  // tokens, rows, in, residual, bias, alignment
  using PlanKey = std::tuple<int, int, int, bool, bool, int>;
  PrefillLinear() = default;
  Result<const Plan*> plan(const PlanKey& key);

  void* handle_ = nullptr;  // cublasLtHandle_t
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::mutex mutex_;
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;
};

// ---------------------------------------------------------------------------------------
// Elementwise and gather ops (prefill paths; decode folds norm and SwiGLU into the GEMV)

// y[t] = bf16(x[t]·rsqrt(mean(x[t]²) + eps)) · weight, rounded to bf16. y may equal x.
Status rmsnorm(const bf16* x, const bf16* weight, bf16* y, int tokens, int hidden, float eps,
               cudaStream_t stream);

// out[t, i] = bf16(silu(gate_up[t, i]) · gate_up[t, intermediate + i]); gate_up is the
// [tokens, 2·intermediate] output of the concatenated gate/up projection.
Status swiglu(const bf16* gate_up, bf16* out, int tokens, int intermediate, cudaStream_t stream);

// out[i] = table[tokens[i]] for i < count; token ids are read from device memory. An id
// outside [0, vocab) yields a zero row.
Status embedding_gather(const bf16* table, int vocab, int hidden, const int32_t* tokens, int count,
                        bf16* out, cudaStream_t stream);

// out[i] = start[0] + offset + i for i < count: the per-token positions of a chunk of a
// prompt that starts at the position in device memory `start`.
Status fill_positions(const int32_t* start, int offset, int count, int32_t* out,
                      cudaStream_t stream);

// ---------------------------------------------------------------------------------------
// Rotary embedding fused with the KV-cache write

// One layer's cache, for K and for V: [kv_heads, max_seq, head_dim] bf16, row-major, so
// the rows of one head are contiguous and attention streams them with 16-byte loads.
enum class RopeType { kDefault, kLlama3 };
struct RopeScaling {
  RopeType type = RopeType::kDefault;
  // llama3 (HF rope_type "llama3"): factor, low/high_freq_factor, original context.
  float factor = 8.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_max_position = 8192;
};
// inv_freq[i] = 1 / theta^(2i/head_dim), i < head_dim/2, with the scaling applied;
// computed once on the host at init and uploaded. Error on odd or non-positive head_dim.
Result<std::vector<float>> rope_inv_freq(int head_dim, float theta, const RopeScaling& scaling);

// qkv is [tokens, (q_heads + 2·kv_heads)·head_dim] (the fused q/k/v projection's
// output). For each token at position p = positions[t] (device memory): q heads are
// rotated in place (HF rotate_half convention), k heads rotated and written to k_cache
// row p, v heads copied to v_cache row p. A token whose position is outside
// [0, max_seq) is left untouched and writes nothing.
struct RopeKvWrite {
  bf16* qkv = nullptr;
  const int32_t* positions = nullptr;  // [tokens], device
  const float* inv_freq = nullptr;     // [head_dim/2], device
  float attention_scaling = 1.0f;      // multiplies cos and sin (1 for default/llama3)
  int tokens = 1;
  int q_heads = 0;
  int kv_heads = 0;
  int head_dim = 0;         // any even value
  bf16* k_cache = nullptr;  // [kv_heads, max_seq, head_dim]
  bf16* v_cache = nullptr;  // [kv_heads, max_seq, head_dim]
  int max_seq = 0;
  // Partial rotary (Phi-3): only the first rotary_dim dims of each head turn, the pair
  // (j, j + rotary_dim/2) by p·inv_freq[j], inv_freq [rotary_dim/2]; dims rotary_dim..
  // head_dim-1 pass through unchanged (k still written, q left as it is). 0: head_dim.
  int rotary_dim = 0;
};
Status rope_kv_write(const RopeKvWrite& op, cudaStream_t stream);

// ---------------------------------------------------------------------------------------
// Attention (head_dim 64, 80, 96 or 128; GQA: q head h reads kv head h / (q_heads/kv_heads))

// Decode: one query per head against cache rows [0, position[0]] (position read from
// device memory). Split-K (flash-decoding) in one kernel: `splits` blocks per kv head
// each reduce a slice of the cache to a partial softmax in `workspace`, and the last
// block of each head group to finish merges them. The slice size is derived on the
// device from the live length, so one captured graph serves every position.
//
// The rows before the position are history: with prefetch_history (the default) they,
// and position[0] itself, are read before the PDL wait, while the kernels ahead of this
// one in the stream may still run. So none of those kernels (back to the last non-PDL
// point: a graph launch, a copy, a launch without PDL) may write position[0] or a cache
// row before it; in a decode step they come from earlier steps, and only the row at the
// position (rope_kv_write) and q are this step's. Clear it when that does not hold.
//
// The workspace's first decode_attention_counter_bytes(q_heads) bytes are completion
// counters: zero them once before the first call (cudaMemset); every call leaves them at
// zero again. The rest needs no initialization. Calls sharing a workspace must not run
// concurrently.
struct DecodeAttention {
  const bf16* q = nullptr;            // [q_heads, head_dim]; with rope: the fused qkv row
  bf16* k_cache = nullptr;            // [kv_heads, max_seq, head_dim]
  bf16* v_cache = nullptr;            // [kv_heads, max_seq, head_dim]
  const int32_t* position = nullptr;  // [1], device: the query's position
  bf16* out = nullptr;                // [q_heads, head_dim], 8-byte aligned
  int q_heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int max_seq = 0;
  float scale = 0.0f;  // 0: 1/sqrt(head_dim)
  int splits = 0;      // 1..512: the grid's, e.g. decode_attention_max_splits()
  // The fewest splits a step uses (0: always `splits`). Between the two, each step uses as
  // many as keep every slice short enough to be scored in one pass, chosen on the device
  // from the position (e.g. decode_attention_splits()).
  int min_splits = 0;
  float* workspace = nullptr;  // decode_attention_workspace_bytes()
  size_t workspace_bytes = 0;
  bool prefetch_history = true;  // see above
  // Rotary embedding and the cache write fused in (replaces rope_kv_write for a decode
  // token): q points at the unrotated [q_heads + 2·kv_heads, head_dim] qkv row; q and the
  // new k are rotated on the fly (same bits as rope_kv_write), the new K/V row is
  // written to the cache at the position, and qkv is left as it was. Null: q is rotated
  // and the row written already.
  const float* rope_inv_freq = nullptr;  // [head_dim/2], rope_inv_freq()
  float rope_attention_scaling = 1.0f;
  // Where the next kernel of the stream may launch (tuning.h); kDefault is the library's
  // choice. For the benchmark and the tests.
  DependentLaunch next_launch = DependentLaunch::kDefault;
};
// A split count measured to suit the device: 16, slices of at most ~1024 keys of
// max_seq, at least a quarter of the multiprocessors busy, beyond 16k keys about a
// block per multiprocessor (the last two in whole batches of 16 splits); <= 512.
Result<int> decode_attention_splits(int q_heads, int kv_heads, int max_seq);
// The grid's splits for `splits` as min_splits: up to twice as many where the kernel
// scores short slices in one pass and the larger grid still runs in one wave, so lengths
// past splits x 256 keys keep that pass (decode_attention's `min_splits`).
Result<int> decode_attention_max_splits(int q_heads, int kv_heads, int head_dim, int max_seq,
                                        int splits);
size_t decode_attention_workspace_bytes(int q_heads, int head_dim, int splits);
size_t decode_attention_counter_bytes(int q_heads);
Status decode_attention(const DecodeAttention& op, cudaStream_t stream);

// Prefill: causal attention for `tokens` queries at positions[t] (device memory) over
// cache rows [0, positions[t]]; the cache already holds those rows (rope_kv_write).
// Tensor cores (mma.sync bf16), online softmax, FlashAttention-2 tiling.
struct PrefillAttention {
  const bf16* q = nullptr;        // token t, head h at q + t·q_token_stride + h·head_dim
  int64_t q_token_stride = 0;     // elements; 0 means q_heads·head_dim
  const bf16* k_cache = nullptr;  // [kv_heads, max_seq, head_dim]
  const bf16* v_cache = nullptr;
  const int32_t* positions = nullptr;  // [tokens], device
  bf16* out = nullptr;                 // [tokens, q_heads, head_dim]
  int tokens = 0;
  int q_heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int max_seq = 0;
  float scale = 0.0f;  // 0: 1/sqrt(head_dim)
};
Status prefill_attention(const PrefillAttention& op, cudaStream_t stream);

// Any other head_dim (even, up to 256): the same causal attention as prefill_attention,
// one block per (token, head), f32 online softmax. For head dims the fast kernels are not
// built for (test models' 16 and 32, and 256); decode calls it with one token.
struct GenericAttention {
  const bf16* q = nullptr;  // token t, head h at q + t·q_token_stride + h·head_dim
  int64_t q_token_stride = 0;
  const bf16* k_cache = nullptr;  // [kv_heads, max_seq, head_dim]
  const bf16* v_cache = nullptr;
  const int32_t* positions = nullptr;  // [tokens], device
  bf16* out = nullptr;                 // [tokens, q_heads, head_dim]
  int tokens = 0;
  int q_heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int max_seq = 0;
  float scale = 0.0f;  // 0: 1/sqrt(head_dim)
  // Sliding window (Mistral, Gemma 3's local layers): query at position p sees keys
  // max(0, p - window + 1)..p only (HF's kv_idx > q_idx - window). 0: no window.
  int window = 0;
};
bool generic_attention_supports(int head_dim);
Status generic_attention(const GenericAttention& op, cudaStream_t stream);

// ---------------------------------------------------------------------------------------
// Model-family ops (Qwen3, Phi-3, Gemma, Gemma 3): the engine's composed layers, for what
// the fused Llama path does not cover. Rounding points are HF's bf16 modules'.

// RMSNorm of `rows` rows of `width`, row r at x + r·stride (stride 0: width), out the
// same layout (out may be x):
//  - Llama/Qwen (unit_offset false): bf16(bf16(x·r) · w), r = rsqrt(mean(x²) + eps);
//    HF LlamaRMSNorm, Qwen3's q_norm/k_norm.
//  - Gemma (unit_offset true): bf16(x·r · (1 + w)), all in f32; HF GemmaRMSNorm.
// With residual (may equal out; then stride must be 0): out = bf16(residual + normed),
// normed rounded to bf16 first (HF's `residual + norm(h)` on bf16 tensors).
// Per-head norms (q_norm, k_norm) are rows of head_dim: rows = tokens·heads is not
// contiguous in the fused qkv; pass rows_per_token heads and token_stride elements.
// So row h of token t is at x + t·token_stride + h·width (out likewise); the residual's
// rows are back to back, row t·rows_per_token + h at residual + (t·rows_per_token + h)·
// width. Elements between rows are left as they are. out is x or does not overlap it.
struct RowNorm {
  const bf16* x = nullptr;
  bf16* out = nullptr;
  const bf16* weight = nullptr;    // [width]
  const bf16* residual = nullptr;  // [rows, width], or null
  int tokens = 1;
  int rows_per_token = 1;    // rows of one token (heads), each `width` wide, back to back
  int64_t token_stride = 0;  // elements between tokens' first rows; 0: rows_per_token·width
  int width = 0;
  float eps = 1e-6f;
  bool unit_offset = false;
};
Status row_norm(const RowNorm& op, cudaStream_t stream);

// out[t, i] = bf16(bf16(gelu_tanh(gate)) · up), gate = gate_up[t, i], up = gate_up[t,
// intermediate + i]: HF's GemmaMLP with gelu_pytorch_tanh on bf16 tensors.
Status geglu(const bf16* gate_up, bf16* out, int tokens, int intermediate, cudaStream_t stream);

// x[i] = bf16(x[i] · factor) for i < count, in place (Gemma's embedding normalizer; the
// engine passes the factor already rounded to bf16, as HF's bf16 tensor holds it).
Status scale_bf16(bf16* x, size_t count, float factor, cudaStream_t stream);

// logits[i] = tanh(logits[i] / cap) · cap in f32, in place (final_logit_softcapping);
// with argmax_out, argmax_out[0] = the index of the largest capped logit (ties to the
// lowest, NaN the largest: torch.argmax), computed by the same launch.
Status softcap_logits(float* logits, int count, float cap, int32_t* argmax_out,
                      cudaStream_t stream);

}  // namespace kvrt::engine::cuda
