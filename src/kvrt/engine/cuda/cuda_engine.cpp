// CUDA engine build and bindings: the plan from the subgraph, weights from the shared
// store, activations and workspaces in one allocation. The launches are in
// cuda_engine_run.cpp.
#include <algorithm>

#include "kvrt/engine/cuda/cuda_device_api.h"
#include "kvrt/engine/cuda/cuda_engine_impl.h"

namespace kvrt::engine::cuda {
namespace detail {
namespace {

using graph::ValueId;

// Prefill runs in chunks of at most this many tokens, bounding its activations.
constexpr int kPrefillChunk = 512;

}  // namespace

DeviceMemory::~DeviceMemory() {
  if (base_ != nullptr) (void)cudaFree(base_);
}

size_t DeviceMemory::reserve(size_t bytes) {
  const size_t offset = size_;
  size_ += (bytes + 255) / 256 * 256;
  return offset;
}

Status DeviceMemory::commit() {
  void* ptr = nullptr;
  const cudaError_t error = cudaMalloc(&ptr, std::max<size_t>(size_, 256));
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    return allocation_failed("CUDA engine activations: cudaMalloc of ", size_, " bytes failed (",
                             cudaGetErrorName(error), ")");
  }
  base_ = static_cast<std::byte*>(ptr);
  return cuda_check(cudaMemset(base_, 0, std::max<size_t>(size_, 256)), "cudaMemset");
}

CudaEngine::~CudaEngine() {
  for (CapturedStep& step : captured_) (void)cudaGraphExecDestroy(step.exec);
}

Result<std::unique_ptr<Engine>> CudaEngine::create(const graph::Graph& graph,
                                                   const WeightProvider& weights,
                                                   const EngineOptions& options) {
  if (!options.device.is_cuda()) {
    return invalid_argument("the CUDA engine cannot run on ", options.device.to_string());
  }
  KVRT_RETURN_IF_ERROR(cuda_device_api(options.device.index).status());
  KVRT_RETURN_IF_ERROR(
      cuda_check(cudaSetDevice(options.device.index), "cudaSetDevice for the CUDA engine"));
  auto engine = std::make_unique<CudaEngine>();
  engine->device_ = options.device;
  KVRT_ASSIGN_OR_RETURN(engine->plan_, plan_decoder(graph));
  for (ValueId id : graph.inputs) {
    const graph::Value& v = graph.values[static_cast<size_t>(id)];
    engine->inputs_.push_back({v.name, v.dtype, v.shape});
  }
  std::vector<ValueId> outputs = graph.outputs;
  for (const graph::BufferMutation& m : graph.mutations) {
    if (std::find(outputs.begin(), outputs.end(), m.updated) == outputs.end()) {
      outputs.push_back(m.updated);
    }
  }
  engine->output_alias_.assign(outputs.size(), -1);
  for (size_t o = 0; o < outputs.size(); ++o) {
    const graph::Value& v = graph.values[static_cast<size_t>(outputs[o])];
    engine->outputs_.push_back({v.name, v.dtype, v.shape});
  }
  for (const LayerPlan& layer : engine->plan_.layers) {
    engine->output_alias_[static_cast<size_t>(layer.k_cache_output)] = layer.k_cache_input;
    engine->output_alias_[static_cast<size_t>(layer.v_cache_output)] = layer.v_cache_input;
  }
  engine->input_bindings_.assign(engine->inputs_.size(), Binding{});
  engine->output_bindings_.assign(engine->outputs_.size(), Binding{});
  KVRT_ASSIGN_OR_RETURN(engine->store_, WeightStore::of(weights, options.device.index));
  KVRT_RETURN_IF_ERROR(engine->resolve_weights());
  KVRT_RETURN_IF_ERROR(engine->plan_memory());
  return std::unique_ptr<Engine>(std::move(engine));
}

Status CudaEngine::resolve_weights() {
  WeightStore& store = *store_;
  auto one = [&](const std::string& name) { return store.get({name}); };
  // Biases of a fused matrix: all parts have one, or none does.
  auto biases = [&](std::initializer_list<const LinearWeights*> parts,
                    const char* what) -> Result<const bf16*> {
    std::vector<std::string> names;
    for (const LinearWeights* part : parts) {
      if (!part->bias.empty()) names.push_back(part->bias);
    }
    if (names.empty()) return static_cast<const bf16*>(nullptr);
    if (names.size() != parts.size()) {
      return not_supported("the CUDA engine fuses ", what,
                           " and needs a bias on every part or on none");
    }
    return store.get(names);
  };
  auto norm = [&](const NormPlan& n) -> Result<const bf16*> {
    if (!n.present()) return static_cast<const bf16*>(nullptr);
    return one(n.weight);
  };
  for (const LayerPlan& layer : plan_.layers) {
    LayerWeights w;
    KVRT_ASSIGN_OR_RETURN(w.input_norm, norm(layer.input_norm));
    if (layer.qkv_fused) {  // Phi-3's qkv_proj is already the layout the kernels want
      KVRT_ASSIGN_OR_RETURN(w.qkv, one(layer.q.weight));
      KVRT_ASSIGN_OR_RETURN(w.qkv_bias, biases({&layer.q}, "qkv_proj"));
    } else {
      KVRT_ASSIGN_OR_RETURN(w.qkv, store.get({layer.q.weight, layer.k.weight, layer.v.weight}));
      KVRT_ASSIGN_OR_RETURN(w.qkv_bias, biases({&layer.q, &layer.k, &layer.v}, "q/k/v"));
    }
    KVRT_ASSIGN_OR_RETURN(w.q_norm, norm(layer.q_norm));
    KVRT_ASSIGN_OR_RETURN(w.k_norm, norm(layer.k_norm));
    KVRT_ASSIGN_OR_RETURN(w.o, one(layer.o.weight));
    KVRT_ASSIGN_OR_RETURN(w.o_bias, biases({&layer.o}, "o_proj"));
    KVRT_ASSIGN_OR_RETURN(w.attention_output_norm, norm(layer.attention_output_norm));
    KVRT_ASSIGN_OR_RETURN(w.post_norm, norm(layer.post_attention_norm));
    if (layer.gate_up_fused) {
      KVRT_ASSIGN_OR_RETURN(w.gate_up, one(layer.gate.weight));
      KVRT_ASSIGN_OR_RETURN(w.gate_up_bias, biases({&layer.gate}, "gate_up_proj"));
    } else {
      KVRT_ASSIGN_OR_RETURN(w.gate_up, store.get({layer.gate.weight, layer.up.weight}));
      KVRT_ASSIGN_OR_RETURN(w.gate_up_bias, biases({&layer.gate, &layer.up}, "gate/up"));
    }
    KVRT_ASSIGN_OR_RETURN(w.down, one(layer.down.weight));
    KVRT_ASSIGN_OR_RETURN(w.down_bias, biases({&layer.down}, "down_proj"));
    KVRT_ASSIGN_OR_RETURN(w.mlp_output_norm, norm(layer.mlp_output_norm));
    layers_.push_back(w);
  }
  KVRT_ASSIGN_OR_RETURN(embedding_, one(plan_.embedding));
  KVRT_ASSIGN_OR_RETURN(final_norm_, one(plan_.final_norm.weight));
  KVRT_ASSIGN_OR_RETURN(lm_head_, one(plan_.lm_head));
  return Status();
}

Status CudaEngine::plan_memory() {
  const DecoderPlan& p = plan_;
  const size_t qkv_width = static_cast<size_t>(p.q_heads + 2 * p.kv_heads) * p.head_dim;
  const size_t q_width = static_cast<size_t>(p.q_heads) * p.head_dim;
  const size_t h = static_cast<size_t>(p.hidden), inter = static_cast<size_t>(p.intermediate);
  const int q_heads = static_cast<int>(p.q_heads), kv_heads = static_cast<int>(p.kv_heads);
  KVRT_ASSIGN_OR_RETURN(min_splits_,
                        decode_attention_splits(q_heads, kv_heads, static_cast<int>(p.max_seq)));
  KVRT_ASSIGN_OR_RETURN(splits_,
                        decode_attention_max_splits(q_heads, kv_heads, static_cast<int>(p.head_dim),
                                                    static_cast<int>(p.max_seq), min_splits_));
  attention_workspace_bytes_ = decode_attention_workspace_bytes(
      static_cast<int>(p.q_heads), static_cast<int>(p.head_dim), splits_);
  chunk_ = static_cast<int>(std::min<int64_t>(p.max_tokens, kPrefillChunk));
  const bool prefill = p.max_tokens > 1;
  const size_t c = prefill ? static_cast<size_t>(chunk_) : 0;

  std::vector<size_t> tables;
  for (const std::vector<float>& table : p.rope_tables) {
    tables.push_back(memory_.reserve(table.size() * sizeof(float)));
  }
  const size_t workspace = memory_.reserve(attention_workspace_bytes_);
  const size_t h_at = memory_.reserve(h * 2), qkv_at = memory_.reserve(qkv_width * 2);
  const size_t attn_at = memory_.reserve(q_width * 2), act_at = memory_.reserve(inter * 2);
  const size_t row_at = memory_.reserve(h * 2), d_gate_up_at = memory_.reserve(2 * inter * 2);
  const size_t x_at = memory_.reserve(c * h * 2), normed_at = memory_.reserve(c * h * 2);
  const size_t p_qkv_at = memory_.reserve(c * qkv_width * 2);
  const size_t p_attn_at = memory_.reserve(c * q_width * 2);
  const size_t gate_up_at = memory_.reserve(c * 2 * inter * 2);
  const size_t p_act_at = memory_.reserve(c * inter * 2);
  const size_t positions_at =
      memory_.reserve(std::max<size_t>(c, kMaxDecodeSteps) * sizeof(int32_t));
  const size_t argmax_at =
      memory_.reserve(p.next_token_output >= 0 ? kDecodeLinearArgmaxWorkspaceBytes : 0);
  KVRT_RETURN_IF_ERROR(memory_.commit());  // zeroed: the attention counters start at 0

  for (size_t t = 0; t < tables.size(); ++t) {
    rope_tables_.push_back(reinterpret_cast<float*>(memory_.at(tables[t])));
    KVRT_RETURN_IF_ERROR(
        cuda_check(cudaMemcpy(rope_tables_[t], p.rope_tables[t].data(),
                              p.rope_tables[t].size() * sizeof(float), cudaMemcpyHostToDevice),
                   "rope table upload"));
  }
  for (size_t l = 0; l < layers_.size(); ++l) {
    layers_[l].inv_freq = rope_tables_[static_cast<size_t>(p.layers[l].rope_table)];
  }
  attention_workspace_ = reinterpret_cast<float*>(memory_.at(workspace));
  auto bf = [&](size_t at) { return reinterpret_cast<bf16*>(memory_.at(at)); };
  h_ = bf(h_at), qkv_ = bf(qkv_at), attn_ = bf(attn_at), act_ = bf(act_at);
  row_ = bf(row_at), d_gate_up_ = bf(d_gate_up_at);
  x_ = bf(x_at), normed_ = bf(normed_at), p_qkv_ = bf(p_qkv_at), p_attn_ = bf(p_attn_at);
  gate_up_ = bf(gate_up_at), p_act_ = bf(p_act_at);
  positions_ = reinterpret_cast<int32_t*>(memory_.at(positions_at));
  argmax_workspace_ = memory_.at(argmax_at);
  if (prefill) {
    KVRT_ASSIGN_OR_RETURN(gemm_, PrefillLinear::create());
  }
  return Status();
}

std::optional<std::string> CudaEngine::aliased_input(std::string_view output_name) const {
  for (size_t o = 0; o < outputs_.size(); ++o) {
    if (outputs_[o].name == output_name && output_alias_[o] >= 0) {
      return inputs_[static_cast<size_t>(output_alias_[o])].name;
    }
  }
  return std::nullopt;
}

Status CudaEngine::set_tensor(std::string_view name, void* data, const Shape& shape) {
  KVRT_ASSIGN_OR_RETURN(int index, tensor_index(name));
  return set_tensor(index, data, shape);
}

Status CudaEngine::set_tensor(int index, void* data, const Shape& shape) {
  const bool is_output = index >= static_cast<int>(inputs_.size());
  const size_t slot =
      static_cast<size_t>(is_output ? index - static_cast<int>(inputs_.size()) : index);
  if (index < 0 || (is_output && slot >= outputs_.size())) {
    return invalid_argument("the CUDA engine has no tensor ", index);
  }
  const TensorInfo& info = is_output ? outputs_[slot] : inputs_[slot];
  if (shape.rank() != static_cast<int>(info.shape.size())) {
    return invalid_argument("tensor '", info.name, "' has rank ", shape.rank(), ", expected ",
                            info.shape.size());
  }
  for (int d = 0; d < shape.rank(); ++d) {
    const graph::Dim& dim = info.shape[static_cast<size_t>(d)];
    const bool ok = !dim.is_dynamic() ? shape[d] == dim.size
                    : is_output       ? shape[d] >= 0
                                      : shape[d] >= dim.min && shape[d] <= dim.max;
    if (!ok) {
      return invalid_argument("tensor '", info.name, "' shape ", shape.to_string(),
                              " does not fit dim ", d, " of its declared shape");
    }
  }
  if (data == nullptr) return invalid_argument("tensor '", info.name, "' has null storage");
  (is_output ? output_bindings_[slot] : input_bindings_[slot]) = {data, shape, true};
  return Status();
}

Result<Shape> CudaEngine::output_shape(std::string_view name) const {
  for (size_t o = 0; o < outputs_.size(); ++o) {
    if (outputs_[o].name != name) continue;
    if (static_cast<int>(o) == plan_.logits_output) return Shape{1, plan_.vocab};
    if (static_cast<int>(o) == plan_.next_token_output) return Shape{1, 1};
    return Shape{plan_.kv_heads, plan_.max_seq, plan_.head_dim};
  }
  return not_found("the CUDA engine has no output '", name, "'");
}

Status CudaEngine::check_bindings(int64_t& tokens) const {
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (!input_bindings_[i].bound) {
      return invalid_argument("input '", inputs_[i].name, "' is not bound");
    }
  }
  for (size_t o = 0; o < outputs_.size(); ++o) {
    if (!output_bindings_[o].bound) {
      return invalid_argument("output '", outputs_[o].name, "' is not bound");
    }
  }
  const Binding& logits = output_bindings_[static_cast<size_t>(plan_.logits_output)];
  if (logits.shape[1] < plan_.vocab) {
    return invalid_argument("output '", outputs_[static_cast<size_t>(plan_.logits_output)].name,
                            "' holds ", logits.shape[1], " logits, the vocabulary has ",
                            plan_.vocab);
  }
  tokens = input_bindings_[static_cast<size_t>(plan_.tokens_input)].shape[1];
  // An aliased output must be bound to its input's storage: the kernels write the
  // input's (the delegate binds it so, D3).
  for (size_t o = 0; o < outputs_.size(); ++o) {
    const int alias = output_alias_[o];
    if (alias >= 0 &&
        output_bindings_[o].data != input_bindings_[static_cast<size_t>(alias)].data) {
      return invalid_argument("output '", outputs_[o].name, "' must be bound to the storage of '",
                              inputs_[static_cast<size_t>(alias)].name, "'");
    }
  }
  return Status();
}

const int32_t* CudaEngine::tokens_ptr() const {
  return static_cast<const int32_t*>(input_bindings_[static_cast<size_t>(plan_.tokens_input)].data);
}
const int32_t* CudaEngine::position_ptr() const {
  return static_cast<const int32_t*>(
      input_bindings_[static_cast<size_t>(plan_.position_input)].data);
}
float* CudaEngine::logits_ptr() const {
  return static_cast<float*>(output_bindings_[static_cast<size_t>(plan_.logits_output)].data);
}
int32_t* CudaEngine::next_token_ptr() const {
  if (plan_.next_token_output < 0) return nullptr;
  return static_cast<int32_t*>(output_bindings_[static_cast<size_t>(plan_.next_token_output)].data);
}
bf16* CudaEngine::cache(int input) const {
  return static_cast<bf16*>(input_bindings_[static_cast<size_t>(input)].data);
}

Status CudaEngine::enqueue(StreamHandle handle) {
  int64_t tokens = 0;
  KVRT_RETURN_IF_ERROR(check_bindings(tokens));
  auto stream = static_cast<cudaStream_t>(handle);
  if (tokens == 1) return run_decode(1, stream);
  return run_prefill(tokens, stream);
}

Status CudaEngine::enqueue_steps(StreamHandle handle, int steps) {
  if (steps == 1) return enqueue(handle);
  if (steps < 1 || steps > max_steps()) {
    return invalid_argument("a run of ", steps, " steps: this engine runs 1 to ", max_steps());
  }
  int64_t tokens = 0;
  KVRT_RETURN_IF_ERROR(check_bindings(tokens));
  if (tokens != 1) {
    return invalid_argument("a run of steps starts from one token; input '",
                            inputs_[static_cast<size_t>(plan_.tokens_input)].name, "' holds ",
                            tokens);
  }
  return run_decode(steps, static_cast<cudaStream_t>(handle));
}

}  // namespace detail

Result<std::unique_ptr<Engine>> build_cuda_engine(const graph::Graph& graph,
                                                  const WeightProvider& weights,
                                                  const EngineOptions& options) {
  return detail::CudaEngine::create(graph, weights, options);
}

Result<std::unique_ptr<Engine>> build_cuda_engine(std::span<const std::byte> payload,
                                                  const WeightProvider& weights,
                                                  const EngineOptions& options) {
  const std::string_view text(reinterpret_cast<const char*>(payload.data()), payload.size());
  KVRT_ASSIGN_OR_RETURN(graph::Graph graph, graph::graph_from_json_text(text, "engine payload"));
  return build_cuda_engine(graph, weights, options);
}

EngineTarget cuda_engine_target() {
  EngineTarget target;
  target.name = "cuda";
  target.device_type = DeviceType::kCuda;
  target.build = [](std::span<const std::byte> payload, const WeightProvider& weights,
                    const EngineOptions& options) {
    return build_cuda_engine(payload, weights, options);
  };
  target.device_api = [](int index) { return cuda_device_api(index); };
  return target;
}

}  // namespace kvrt::engine::cuda
