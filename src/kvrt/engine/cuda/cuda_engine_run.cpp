// The CUDA engine's launches. Decode (one token) of a Llama/Qwen2 layer is the kernel
// library's fused step: norm+q/k/v GEMV, attention with rope and the cache write fused,
// o_proj+residual, norm+gate/up+SwiGLU, down+residual; other layers are composed
// (cuda_engine_layer.cpp); then norm+LM head (+argmax). The step is captured once per set
// of bound pointers (and run length) in a CUDA graph and replayed. A run of greedy steps is
// one graph: step i reads step i - 1's token where its LM head wrote it. Prefill runs
// chunks of up to chunk_ tokens through the composed layers (cuBLASLt linears).
#include <algorithm>

#include "kvrt/engine/cuda/cuda_engine_impl.h"

namespace kvrt::engine::cuda::detail {
namespace {

// Captured graphs kept per engine: enough for alternating bindings (two token slots) at
// a few run lengths without re-capturing, few enough to bound graph memory.
constexpr size_t kMaxCapturedSteps = 8;

}  // namespace

bool CudaEngine::fused_decode(size_t layer) const {
  return plan_.layers[layer].plain() && plan_.activation == Activation::kSilu &&
         plan_.rotary_dim == plan_.head_dim;
}

Status CudaEngine::rope_write(bf16* qkv, const int32_t* positions, int tokens, size_t layer,
                              cudaStream_t stream) {
  const LayerPlan& lp = plan_.layers[layer];
  RopeKvWrite rope;
  rope.qkv = qkv;
  rope.positions = positions;
  rope.inv_freq = layers_[layer].inv_freq;
  rope.tokens = tokens;
  rope.q_heads = static_cast<int>(plan_.q_heads);
  rope.kv_heads = static_cast<int>(plan_.kv_heads);
  rope.head_dim = static_cast<int>(plan_.head_dim);
  rope.k_cache = cache(lp.k_cache_input);
  rope.v_cache = cache(lp.v_cache_input);
  rope.max_seq = static_cast<int>(plan_.max_seq);
  rope.rotary_dim = static_cast<int>(plan_.rotary_dim);
  return rope_kv_write(rope, stream);
}

Status CudaEngine::rope_and_generic_attention(bf16* qkv, const int32_t* positions, int tokens,
                                              size_t layer, bf16* out, cudaStream_t stream) {
  const LayerPlan& lp = plan_.layers[layer];
  KVRT_RETURN_IF_ERROR(rope_write(qkv, positions, tokens, layer, stream));
  GenericAttention attention;
  attention.q = qkv;
  attention.q_token_stride = (plan_.q_heads + 2 * plan_.kv_heads) * plan_.head_dim;
  attention.k_cache = cache(lp.k_cache_input);
  attention.v_cache = cache(lp.v_cache_input);
  attention.positions = positions;
  attention.out = out;
  attention.tokens = tokens;
  attention.q_heads = static_cast<int>(plan_.q_heads);
  attention.kv_heads = static_cast<int>(plan_.kv_heads);
  attention.head_dim = static_cast<int>(plan_.head_dim);
  attention.max_seq = static_cast<int>(plan_.max_seq);
  attention.scale = plan_.attention_scale;
  attention.window = static_cast<int>(lp.window);
  return generic_attention(attention, stream);
}

Status CudaEngine::decode_layer_fused(size_t l, const StepIo& io, cudaStream_t stream) {
  const DecoderPlan& p = plan_;
  const int hidden = static_cast<int>(p.hidden), inter = static_cast<int>(p.intermediate);
  const int q_heads = static_cast<int>(p.q_heads), kv_heads = static_cast<int>(p.kv_heads);
  const int dim = static_cast<int>(p.head_dim);
  const LayerWeights& w = layers_[l];
  const LayerPlan& lp = p.layers[l];
  DecodeLinear qkv;
  qkv.weight = w.qkv;
  qkv.input = h_;
  qkv.rows = (q_heads + 2 * kv_heads) * dim;
  qkv.in = hidden;
  qkv.norm_weight = w.input_norm;
  qkv.norm_eps = lp.input_norm.eps;
  qkv.bias = w.qkv_bias;
  qkv.output = qkv_;
  KVRT_RETURN_IF_ERROR(decode_linear(qkv, stream));

  if (!attention_head_dim_supported(p.head_dim)) {
    KVRT_RETURN_IF_ERROR(rope_and_generic_attention(qkv_, io.position, 1, l, attn_, stream));
  } else {
    DecodeAttention attention;
    attention.q = qkv_;
    attention.k_cache = cache(lp.k_cache_input);
    attention.v_cache = cache(lp.v_cache_input);
    attention.position = io.position;
    attention.out = attn_;
    attention.q_heads = q_heads;
    attention.kv_heads = kv_heads;
    attention.head_dim = dim;
    attention.max_seq = static_cast<int>(p.max_seq);
    attention.scale = p.attention_scale;
    attention.splits = splits_;
    attention.min_splits = min_splits_;
    attention.workspace = attention_workspace_;
    attention.workspace_bytes = attention_workspace_bytes_;
    attention.rope_inv_freq = w.inv_freq;
    KVRT_RETURN_IF_ERROR(decode_attention(attention, stream));
  }

  DecodeLinear o;
  o.weight = w.o;
  o.input = attn_;
  o.rows = hidden;
  o.in = q_heads * dim;
  o.bias = w.o_bias;
  o.residual = h_;
  o.output = h_;
  KVRT_RETURN_IF_ERROR(decode_linear(o, stream));

  DecodeLinear gate_up;
  gate_up.weight = w.gate_up;
  gate_up.input = h_;
  gate_up.rows = inter;
  gate_up.in = hidden;
  gate_up.norm_weight = w.post_norm;
  gate_up.norm_eps = lp.post_attention_norm.eps;
  gate_up.swiglu = true;
  gate_up.bias = w.gate_up_bias;
  gate_up.output = act_;
  KVRT_RETURN_IF_ERROR(decode_linear(gate_up, stream));

  DecodeLinear down;
  down.weight = w.down;
  down.input = act_;
  down.rows = hidden;
  down.in = inter;
  down.bias = w.down_bias;
  down.residual = h_;
  down.output = h_;
  return decode_linear(down, stream);
}

Status CudaEngine::decode_step(const StepIo& io, cudaStream_t stream) {
  KVRT_RETURN_IF_ERROR(embedding_gather(embedding_, static_cast<int>(plan_.vocab),
                                        static_cast<int>(plan_.hidden), io.token, 1, h_, stream));
  KVRT_RETURN_IF_ERROR(scale_embeddings(h_, 1, stream));
  LayerActivations a;
  a.positions = io.position;
  a.x = h_, a.normed = row_, a.qkv = qkv_, a.attn = attn_, a.gate_up = d_gate_up_, a.act = act_;
  for (size_t l = 0; l < layers_.size(); ++l) {
    KVRT_RETURN_IF_ERROR(fused_decode(l) ? decode_layer_fused(l, io, stream)
                                         : composed_layer(l, a, stream));
  }
  return head(h_, io.next_token, stream);
}

// Step i at the bound position + i (positions_[i]), on the token step i - 1 chose.
// decode_attention reads its position before its PDL wait (kernels.h), so step 0 reads
// the bound position, which the host wrote before the launch, rather than positions_[0],
// which fill_positions writes three kernels earlier in the same chain; later steps are
// a whole step's launches away from it.
Status CudaEngine::decode_steps(int steps, cudaStream_t stream) {
  if (steps == 1) return decode_step({tokens_ptr(), position_ptr(), next_token_ptr()}, stream);
  KVRT_RETURN_IF_ERROR(fill_positions(position_ptr(), 0, steps, positions_, stream));
  int32_t* ids = next_token_ptr();
  KVRT_RETURN_IF_ERROR(decode_step({tokens_ptr(), position_ptr(), ids}, stream));
  for (int i = 1; i < steps; ++i) {
    KVRT_RETURN_IF_ERROR(decode_step({ids + i - 1, positions_ + i, ids + i}, stream));
  }
  return Status();
}

// The final norm folds into the LM head's GEMV unless it is Gemma's (1 + w); a soft cap
// runs on the logits after it, and then makes the greedy choice itself (capping can
// saturate distinct logits into ties, which argmax breaks to the lowest index).
Status CudaEngine::head(const bf16* x, int32_t* next_token, cudaStream_t stream) {
  const int vocab = static_cast<int>(plan_.vocab);
  DecodeLinear lm_head;
  lm_head.weight = lm_head_;
  lm_head.input = x;
  lm_head.rows = vocab;
  lm_head.in = static_cast<int>(plan_.hidden);
  if (plan_.final_norm.unit_offset) {
    KVRT_RETURN_IF_ERROR(norm_rows(plan_.final_norm, final_norm_, x, 1, nullptr, row_, stream));
    lm_head.input = row_;
  } else {
    lm_head.norm_weight = final_norm_;
    lm_head.norm_eps = plan_.final_norm.eps;
  }
  lm_head.output_f32 = logits_ptr();
  const bool capped = plan_.logit_softcap > 0;
  if (next_token != nullptr && !capped) {  // greedy: the token chosen in the last block
    lm_head.argmax_out = next_token;
    lm_head.argmax_workspace = argmax_workspace_;
  }
  KVRT_RETURN_IF_ERROR(decode_linear(lm_head, stream));
  if (!capped) return Status();
  return softcap_logits(logits_ptr(), vocab, plan_.logit_softcap, next_token, stream);
}

Status CudaEngine::run_decode(int steps, cudaStream_t stream) {
  // The legacy default stream cannot be captured: run the launches as they are.
  if (stream == nullptr) return decode_steps(steps, stream);
  std::vector<void*>& key = scratch_pointers_;
  key.clear();
  for (const Binding& b : input_bindings_) key.push_back(b.data);
  for (const Binding& b : output_bindings_) key.push_back(b.data);
  for (size_t i = 0; i < captured_.size(); ++i) {
    if (captured_[i].pointers != key || captured_[i].steps != steps) continue;
    // Most recent last, so the steady state finds its graph first time round.
    if (i + 1 != captured_.size())
      std::rotate(captured_.begin() + i, captured_.begin() + i + 1, captured_.end());
    return cuda_check(cudaGraphLaunch(captured_.back().exec, stream), "cudaGraphLaunch");
  }
  // New bindings: capture the step for them. Thread-local capture mode, so another
  // thread's CUDA calls (another engine, an allocation) are not disturbed.
  KVRT_RETURN_IF_ERROR(cuda_check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
                                  "cudaStreamBeginCapture"));
  const Status launched = decode_steps(steps, stream);
  cudaGraph_t graph = nullptr;
  const Status ended = cuda_check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  if (!launched.ok() || !ended.ok()) {
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    return launched.ok() ? ended : launched;
  }
  cudaGraphExec_t exec = nullptr;
  const Status instantiated =
      cuda_check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  (void)cudaGraphDestroy(graph);
  KVRT_RETURN_IF_ERROR(instantiated);
  if (captured_.size() == kMaxCapturedSteps) {
    (void)cudaGraphExecDestroy(captured_.front().exec);
    captured_.erase(captured_.begin());
  }
  captured_.push_back({key, steps, exec});
  return cuda_check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
}

Status CudaEngine::run_prefill(int64_t tokens, cudaStream_t stream) {
  if (gemm_ == nullptr) {
    return invalid_argument("this partition takes one token per call, got ", tokens);
  }
  for (int64_t offset = 0; offset < tokens; offset += chunk_) {
    const int count = static_cast<int>(std::min<int64_t>(chunk_, tokens - offset));
    KVRT_RETURN_IF_ERROR(
        prefill_chunk(static_cast<int>(offset), count, offset + count == tokens, stream));
  }
  return Status();
}

// Tokens [offset, offset + count) of the call, at positions P + offset + i.
Status CudaEngine::prefill_chunk(int offset, int count, bool last, cudaStream_t stream) {
  const int hidden = static_cast<int>(plan_.hidden);
  KVRT_RETURN_IF_ERROR(fill_positions(position_ptr(), offset, count, positions_, stream));
  KVRT_RETURN_IF_ERROR(embedding_gather(embedding_, static_cast<int>(plan_.vocab), hidden,
                                        tokens_ptr() + offset, count, x_, stream));
  KVRT_RETURN_IF_ERROR(scale_embeddings(x_, count, stream));
  LayerActivations a;
  a.tokens = count;
  a.decode = false;
  a.positions = positions_;
  a.x = x_, a.normed = normed_, a.qkv = p_qkv_, a.attn = p_attn_, a.gate_up = gate_up_;
  a.act = p_act_;
  for (size_t l = 0; l < layers_.size(); ++l) {
    KVRT_RETURN_IF_ERROR(composed_layer(l, a, stream));
  }
  if (!last) return Status();
  return head(x_ + static_cast<size_t>(count - 1) * hidden, next_token_ptr(), stream);
}

}  // namespace kvrt::engine::cuda::detail
