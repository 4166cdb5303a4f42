// Internal: the CUDA engine's state, shared by cuda_engine.cpp (build, bindings) and
// cuda_engine_run.cpp (the decode step, its CUDA graph, prefill).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

#include "kvrt/engine/cuda/cuda_engine.h"
#include "kvrt/engine/cuda/decoder_plan.h"
#include "kvrt/engine/cuda/kernels.h"
#include "kvrt/engine/cuda/weight_store.h"

namespace kvrt::engine::cuda::detail {

// Device memory the engine owns (activations, workspaces, tables).
class DeviceMemory {
 public:
  DeviceMemory() = default;
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  // Carves `bytes` (rounded up to 256) from one allocation made by commit().
  size_t reserve(size_t bytes);
  Status commit();
  std::byte* at(size_t offset) const { return base_ + offset; }

 private:
  std::byte* base_ = nullptr;
  size_t size_ = 0;
};

struct LayerWeights {
  const bf16* input_norm = nullptr;
  const bf16* qkv = nullptr;  // [(NH + 2 KVH) D, H]
  const bf16* qkv_bias = nullptr;
  const bf16* q_norm = nullptr;  // [D] or null, and k_norm
  const bf16* k_norm = nullptr;
  const bf16* o = nullptr;
  const bf16* o_bias = nullptr;
  const bf16* attention_output_norm = nullptr;  // [H] or null
  const bf16* post_norm = nullptr;
  const bf16* gate_up = nullptr;  // [2 I, H]
  const bf16* gate_up_bias = nullptr;
  const bf16* down = nullptr;
  const bf16* down_bias = nullptr;
  const bf16* mlp_output_norm = nullptr;  // [H] or null
  const float* inv_freq = nullptr;        // the layer's rope table, [rotary_dim / 2]
};

// What a decode GEMV folds in: its input's Llama norm, SwiGLU over [gate; up] rows.
struct GemvFold {
  const bf16* norm_weight = nullptr;
  float norm_eps = 0;
  bool swiglu = false;
};

// The activations one composed layer works in: a decode token's or a prefill chunk's.
struct LayerActivations {
  int tokens = 1;
  bool decode = true;                  // decode_linear and decode_attention, else cuBLASLt
  const int32_t* positions = nullptr;  // [tokens], device
  bf16* x = nullptr;                   // [tokens, H], the residual stream
  bf16* normed = nullptr;              // [tokens, H], a norm's output or a block's
  bf16* qkv = nullptr;                 // [tokens, (NH + 2 KVH) D]
  bf16* attn = nullptr;                // [tokens, NH D]
  bf16* gate_up = nullptr;             // [tokens, 2 I]
  bf16* act = nullptr;                 // [tokens, I]
};

struct Binding {
  void* data = nullptr;
  Shape shape;
  bool bound = false;
};

// A run of decode steps captured for one set of bound pointers and one length.
struct CapturedStep {
  std::vector<void*> pointers;
  int steps = 1;
  cudaGraphExec_t exec = nullptr;
};

// Where one decode step reads its token and position and writes its greedy token.
struct StepIo {
  const int32_t* token = nullptr;
  const int32_t* position = nullptr;
  int32_t* next_token = nullptr;  // null: no greedy choice
};

// The longest run of decode steps one graph holds.
inline constexpr int kMaxDecodeSteps = 16;

class CudaEngine final : public Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const graph::Graph& graph,
                                                const WeightProvider& weights,
                                                const EngineOptions& options);
  ~CudaEngine() override;

  Device device() const override { return device_; }
  std::span<const TensorInfo> inputs() const override { return inputs_; }
  std::span<const TensorInfo> outputs() const override { return outputs_; }
  std::optional<std::string> aliased_input(std::string_view output_name) const override;
  Status set_tensor(std::string_view name, void* data, const Shape& shape) override;
  Status set_tensor(int index, void* data, const Shape& shape) override;
  Status enqueue(StreamHandle stream) override;
  // Captured graphs and prefill launches carry their pointers; bindings are host-only.
  bool enqueue_snapshots_bindings() const override { return true; }
  int max_steps() const override { return plan_.next_token_output >= 0 ? kMaxDecodeSteps : 1; }
  int step_output() const override { return plan_.next_token_output; }
  Status enqueue_steps(StreamHandle stream, int steps) override;
  Result<Shape> output_shape(std::string_view name) const override;

  CudaEngine() = default;

 private:
  Status resolve_weights();
  Status plan_memory();
  Status check_bindings(int64_t& tokens) const;
  const int32_t* tokens_ptr() const;
  const int32_t* position_ptr() const;
  float* logits_ptr() const;
  int32_t* next_token_ptr() const;  // null when the graph makes no greedy choice
  bf16* cache(int input) const;

  // cuda_engine_run.cpp
  // The Llama/Qwen2 layer with the decode kernels' fusions (norms in the GEMVs, rope and
  // the cache write in the attention): every plain layer of a SiLU, full-rotary model.
  bool fused_decode(size_t layer) const;
  Status rope_write(bf16* qkv, const int32_t* positions, int tokens, size_t layer,
                    cudaStream_t stream);
  Status rope_and_generic_attention(bf16* qkv, const int32_t* positions, int tokens, size_t layer,
                                    bf16* out, cudaStream_t stream);
  Status decode_layer_fused(size_t layer, const StepIo& io, cudaStream_t stream);
  // Any layer the plan matches, one launch per op (cuda_engine_layer.cpp).
  Status composed_layer(size_t layer, const LayerActivations& a, cudaStream_t stream);
  Status attend(size_t layer, const LayerActivations& a, cudaStream_t stream);
  // x·Wᵀ (+ bias) (+ residual): decode_linear for a decode token, else cuBLASLt.
  Status project(const bf16* weight, const bf16* bias, const LayerActivations& a, const bf16* in,
                 int rows, int in_features, const bf16* residual, bf16* out, cudaStream_t stream,
                 const GemvFold& fold = {});
  Status norm_rows(const NormPlan& norm, const bf16* weight, const bf16* x, int tokens,
                   const bf16* residual, bf16* out, cudaStream_t stream);
  Status scale_embeddings(bf16* x, int tokens, cudaStream_t stream);
  Status decode_step(const StepIo& io, cudaStream_t stream);  // the launches of one token
  Status decode_steps(int steps, cudaStream_t stream);        // a run of them
  Status run_decode(int steps, cudaStream_t stream);          // replays (or captures) decode_steps
  Status run_prefill(int64_t tokens, cudaStream_t stream);
  Status prefill_chunk(int offset, int count, bool last, cudaStream_t stream);
  // Norm + LM head of hidden row `x` into the logits, and their argmax into
  // `next_token` when not null.
  Status head(const bf16* x, int32_t* next_token, cudaStream_t stream);

  Device device_;
  DecoderPlan plan_;
  std::vector<TensorInfo> inputs_, outputs_;
  std::vector<int> output_alias_;  // per output: aliased input index or -1
  std::vector<Binding> input_bindings_, output_bindings_;
  std::shared_ptr<WeightStore> store_;  // keeps the shared weights alive
  std::vector<LayerWeights> layers_;
  const bf16* embedding_ = nullptr;
  const bf16* final_norm_ = nullptr;
  const bf16* lm_head_ = nullptr;

  DeviceMemory memory_;
  std::vector<float*> rope_tables_;  // plan_.rope_tables on the device
  int splits_ = 0;                   // decode_attention's grid
  int min_splits_ = 0;               // and the fewest a step uses
  float* attention_workspace_ = nullptr;
  size_t attention_workspace_bytes_ = 0;
  // Decode activations (one token). row_ also holds the head's normed row (Gemma).
  bf16 *h_ = nullptr, *qkv_ = nullptr, *attn_ = nullptr, *act_ = nullptr;
  bf16 *row_ = nullptr, *d_gate_up_ = nullptr;
  // Prefill activations (up to chunk_ tokens).
  int chunk_ = 0;
  bf16 *x_ = nullptr, *normed_ = nullptr, *p_qkv_ = nullptr, *p_attn_ = nullptr;
  bf16 *gate_up_ = nullptr, *p_act_ = nullptr;
  int32_t* positions_ = nullptr;  // prefill's chunk, or a run of decode steps
  void* argmax_workspace_ = nullptr;
  std::unique_ptr<PrefillLinear> gemm_;

  std::vector<CapturedStep> captured_;  // most recent last
  std::vector<void*> scratch_pointers_;
};

}  // namespace kvrt::engine::cuda::detail
