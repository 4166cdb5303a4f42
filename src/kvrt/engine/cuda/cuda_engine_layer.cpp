// The composed decoder layer: one launch per op, for every layer the plan matches
// (docs/cuda-families.md). Prefill runs every layer through it (cuBLASLt linears); decode
// runs through it the layers the fused step does not cover (Qwen3's head norms, Gemma's
// (1 + w) norms and GeGLU, Gemma 3's post norms, windows, partial rotary), with the
// decode GEMV and attention kernels.
//
//   norm ─► qkv ─► (q/k head norms) ─► rope + cache write ─► attention ─► o (─► norm) ─► +
//   norm ─► gate|up ─► SwiGLU | GeGLU ─► down (─► norm) ─► +
#include <cuda_bf16.h>

#include "kvrt/engine/cuda/cuda_engine_impl.h"

namespace kvrt::engine::cuda::detail {

// Llama's whole-row norm without a residual is the rmsnorm kernel the fused-era prefill
// used; every other form (Gemma's (1 + w), a residual add) is row_norm.
Status CudaEngine::norm_rows(const NormPlan& norm, const bf16* weight, const bf16* x, int tokens,
                             const bf16* residual, bf16* out, cudaStream_t stream) {
  const int hidden = static_cast<int>(plan_.hidden);
  if (!norm.unit_offset && residual == nullptr) {
    return rmsnorm(x, weight, out, tokens, hidden, norm.eps, stream);
  }
  RowNorm op;
  op.x = x;
  op.out = out;
  op.weight = weight;
  op.residual = residual;
  op.tokens = tokens;
  op.width = hidden;
  op.eps = norm.eps;
  op.unit_offset = norm.unit_offset;
  return row_norm(op, stream);
}

// Gemma's normalizer is a tensor of the activations' dtype in HF: sqrt(H) rounded to bf16.
Status CudaEngine::scale_embeddings(bf16* x, int tokens, cudaStream_t stream) {
  if (plan_.embedding_scale <= 0) return Status();
  const float factor = __bfloat162float(__float2bfloat16(plan_.embedding_scale));
  return scale_bf16(x, static_cast<size_t>(tokens) * static_cast<size_t>(plan_.hidden), factor,
                    stream);
}

Status CudaEngine::project(const bf16* weight, const bf16* bias, const LayerActivations& a,
                           const bf16* in, int rows, int in_features, const bf16* residual,
                           bf16* out, cudaStream_t stream, const GemvFold& fold) {
  if (!a.decode) {
    return gemm_->run(weight, in, a.tokens, rows, in_features, residual, out, stream, bias);
  }
  DecodeLinear op;
  op.weight = weight;
  op.input = in;
  op.rows = fold.swiglu ? rows / 2 : rows;
  op.in = in_features;
  op.norm_weight = fold.norm_weight;
  op.norm_eps = fold.norm_eps;
  op.swiglu = fold.swiglu;
  op.bias = bias;
  op.residual = residual;
  op.output = out;
  return decode_linear(op, stream);
}

// rope_kv_write, then the fast attention kernel where it applies (no window, a head dim
// it is built for), else generic_attention.
Status CudaEngine::attend(size_t layer, const LayerActivations& a, cudaStream_t stream) {
  const DecoderPlan& p = plan_;
  const LayerPlan& lp = p.layers[layer];
  if (lp.window > 0 || !attention_head_dim_supported(p.head_dim)) {
    return rope_and_generic_attention(a.qkv, a.positions, a.tokens, layer, a.attn, stream);
  }
  KVRT_RETURN_IF_ERROR(rope_write(a.qkv, a.positions, a.tokens, layer, stream));
  if (a.decode) {
    DecodeAttention attention;
    attention.q = a.qkv;
    attention.k_cache = cache(lp.k_cache_input);
    attention.v_cache = cache(lp.v_cache_input);
    attention.position = a.positions;
    attention.out = a.attn;
    attention.q_heads = static_cast<int>(p.q_heads);
    attention.kv_heads = static_cast<int>(p.kv_heads);
    attention.head_dim = static_cast<int>(p.head_dim);
    attention.max_seq = static_cast<int>(p.max_seq);
    attention.scale = p.attention_scale;
    attention.splits = splits_;
    attention.min_splits = min_splits_;
    attention.workspace = attention_workspace_;
    attention.workspace_bytes = attention_workspace_bytes_;
    return decode_attention(attention, stream);
  }
  PrefillAttention attention;
  attention.q = a.qkv;
  attention.q_token_stride = (p.q_heads + 2 * p.kv_heads) * p.head_dim;
  attention.k_cache = cache(lp.k_cache_input);
  attention.v_cache = cache(lp.v_cache_input);
  attention.positions = a.positions;
  attention.out = a.attn;
  attention.tokens = a.tokens;
  attention.q_heads = static_cast<int>(p.q_heads);
  attention.kv_heads = static_cast<int>(p.kv_heads);
  attention.head_dim = static_cast<int>(p.head_dim);
  attention.max_seq = static_cast<int>(p.max_seq);
  attention.scale = p.attention_scale;
  return prefill_attention(attention, stream);
}

Status CudaEngine::composed_layer(size_t layer, const LayerActivations& a, cudaStream_t stream) {
  const DecoderPlan& p = plan_;
  const LayerPlan& lp = p.layers[layer];
  const LayerWeights& w = layers_[layer];
  const int hidden = static_cast<int>(p.hidden), inter = static_cast<int>(p.intermediate);
  const int q_heads = static_cast<int>(p.q_heads), kv_heads = static_cast<int>(p.kv_heads);
  const int dim = static_cast<int>(p.head_dim);
  const int qkv_rows = (q_heads + 2 * kv_heads) * dim;

  // A decode GEMV normalizes its input itself when the norm is Llama's (Qwen3, Mistral).
  const bool fold_input_norm = a.decode && !lp.input_norm.unit_offset;
  if (fold_input_norm) {
    KVRT_RETURN_IF_ERROR(project(w.qkv, w.qkv_bias, a, a.x, qkv_rows, hidden, nullptr, a.qkv,
                                 stream, {w.input_norm, lp.input_norm.eps, false}));
  } else {
    KVRT_RETURN_IF_ERROR(
        norm_rows(lp.input_norm, w.input_norm, a.x, a.tokens, nullptr, a.normed, stream));
    KVRT_RETURN_IF_ERROR(
        project(w.qkv, w.qkv_bias, a, a.normed, qkv_rows, hidden, nullptr, a.qkv, stream));
  }
  if (w.q_norm != nullptr) {  // per head, in place in the fused rows: q heads, then k heads
    for (auto [norm, weight, first, heads] :
         {std::tuple{&lp.q_norm, w.q_norm, 0, q_heads},
          std::tuple{&lp.k_norm, w.k_norm, q_heads, kv_heads}}) {
      RowNorm op;
      op.x = a.qkv + static_cast<size_t>(first) * dim;
      op.out = a.qkv + static_cast<size_t>(first) * dim;
      op.weight = weight;
      op.tokens = a.tokens;
      op.rows_per_token = heads;
      op.token_stride = qkv_rows;
      op.width = dim;
      op.eps = norm->eps;
      op.unit_offset = norm->unit_offset;
      KVRT_RETURN_IF_ERROR(row_norm(op, stream));
    }
  }
  KVRT_RETURN_IF_ERROR(attend(layer, a, stream));

  // x += o(attn), or x += norm(o(attn)) with Gemma 3's post-attention norm.
  const bool attention_norm = w.attention_output_norm != nullptr;
  KVRT_RETURN_IF_ERROR(project(w.o, w.o_bias, a, a.attn, hidden, q_heads * dim,
                               attention_norm ? nullptr : a.x, attention_norm ? a.normed : a.x,
                               stream));
  if (attention_norm) {
    KVRT_RETURN_IF_ERROR(norm_rows(lp.attention_output_norm, w.attention_output_norm, a.normed,
                                   a.tokens, a.x, a.x, stream));
  }

  // Decode with Llama's norm and SwiGLU: one GEMV normalizes, projects and activates.
  if (a.decode && !lp.post_attention_norm.unit_offset && p.activation == Activation::kSilu) {
    KVRT_RETURN_IF_ERROR(project(w.gate_up, w.gate_up_bias, a, a.x, 2 * inter, hidden, nullptr,
                                 a.act, stream, {w.post_norm, lp.post_attention_norm.eps, true}));
  } else {
    KVRT_RETURN_IF_ERROR(
        norm_rows(lp.post_attention_norm, w.post_norm, a.x, a.tokens, nullptr, a.normed, stream));
    KVRT_RETURN_IF_ERROR(project(w.gate_up, w.gate_up_bias, a, a.normed, 2 * inter, hidden, nullptr,
                                 a.gate_up, stream));
    KVRT_RETURN_IF_ERROR(p.activation == Activation::kSilu
                             ? swiglu(a.gate_up, a.act, a.tokens, inter, stream)
                             : geglu(a.gate_up, a.act, a.tokens, inter, stream));
  }
  const bool mlp_norm = w.mlp_output_norm != nullptr;
  KVRT_RETURN_IF_ERROR(project(w.down, w.down_bias, a, a.act, hidden, inter,
                               mlp_norm ? nullptr : a.x, mlp_norm ? a.normed : a.x, stream));
  if (!mlp_norm) return Status();
  return norm_rows(lp.mlp_output_norm, w.mlp_output_norm, a.normed, a.tokens, a.x, a.x, stream);
}

}  // namespace kvrt::engine::cuda::detail
