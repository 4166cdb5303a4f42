// Gemma and Gemma 3 decoder layers. Every norm is Gemma's RMSNorm, x * rsqrt(mean(x²) +
// eps) * (1 + w); the MLP is GeGLU with PyTorch's tanh GELU.
//
//   Gemma:    x ─► input_norm ─► attention ─► + ─► post_attention_norm ─► GeGLU ─► +
//   Gemma 3:  x ─► input_norm ─► attention ─► attn.post_norm ─► + ─► pre_mlp_norm ─►
//             GeGLU ─► mlp.post_norm ─► +
// (Gemma 3's attention also has q/k norms and, on its sliding layers, a window and the
// local rope base: decoder_attention.cpp.)
#include "kvrt/frontend/decoder_builder.h"

namespace kvrt::frontend::detail {

graph::ValueId DecoderBuilder::gemma_layer(int64_t layer, ValueId x) {
  const std::string n = "layers." + std::to_string(layer) + ".";        // node names
  const std::string p = "model.layers." + std::to_string(layer) + ".";  // tensor names
  const bool gemma3 = c_.architecture == Architecture::kGemma3;
  ValueId normed = norm(n + "input_norm", x, p + "input_layernorm.weight", d_.h);
  ValueId o = attention_block(layer, normed);
  if (gemma3) o = norm(n + "attn.post_norm", o, p + "post_attention_layernorm.weight", d_.h);
  x = w_.node(n + "attn.residual", "add", {x, o}, {d_.t, d_.h});
  // Gemma's pre-MLP norm is its post_attention_layernorm; Gemma 3 has a dedicated one.
  normed = gemma3 ? norm(n + "pre_mlp_norm", x, p + "pre_feedforward_layernorm.weight", d_.h)
                  : norm(n + "post_attention_norm", x, p + "post_attention_layernorm.weight", d_.h);
  ValueId gate = linear(n + "mlp.gate_proj", normed, p + "mlp.gate_proj", false, d_.mlp);
  ValueId up = linear(n + "mlp.up_proj", normed, p + "mlp.up_proj", false, d_.mlp);
  ValueId act = w_.node(n + "mlp.gelu_mul", "gelu_tanh_mul", {gate, up}, {d_.t, d_.mlp});
  ValueId down = linear(n + "mlp.down_proj", act, p + "mlp.down_proj", false, d_.h);
  if (gemma3) down = norm(n + "mlp.post_norm", down, p + "post_feedforward_layernorm.weight", d_.h);
  return w_.node(n + "mlp.residual", "add", {x, down}, {d_.t, d_.h});
}

}  // namespace kvrt::frontend::detail
