#include "kvrt/frontend/llama_weights.h"

#include <algorithm>
#include <cstring>
#include <unordered_set>

namespace kvrt::frontend {
namespace {

constexpr const char* kEmbedding = "model.embed_tokens.weight";
constexpr const char* kLmHead = "lm_head.weight";

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

bool is_derived_buffer(const std::string& name) {
  return name.ends_with(".rotary_emb.inv_freq");
}

// A tied checkpoint that still stores lm_head.weight is fine when it equals the table.
Status check_tied_head(const WeightIndex& weights) {
  const WeightEntry* head = weights.find(kLmHead);
  const WeightEntry* table = weights.find(kEmbedding);
  if (head == nullptr) return Status();
  if (table == nullptr || !weights.has_data() || head->record.dtype != table->record.dtype ||
      head->record.shape != table->record.shape) {
    return invalid_argument("checkpoint has tie_word_embeddings but stores a separate '", kLmHead,
                            "'");
  }
  auto head_bytes = weights.bytes(*head);
  auto table_bytes = weights.bytes(*table);
  if (!head_bytes.ok()) return head_bytes.status();
  if (!table_bytes.ok()) return table_bytes.status();
  if (head_bytes->size() != table_bytes->size() ||
      std::memcmp(head_bytes->data(), table_bytes->data(), head_bytes->size()) != 0) {
    return invalid_argument("checkpoint has tie_word_embeddings but its '", kLmHead,
                            "' differs from '", kEmbedding, "'");
  }
  return Status();
}

}  // namespace

std::vector<ExpectedTensor> expected_llama_tensors(const ModelConfig& c) {
  const int64_t h = c.hidden_size;
  const int64_t q_width = c.num_attention_heads * c.head_dim;
  const int64_t kv_width = c.num_key_value_heads * c.head_dim;
  const int64_t i = c.intermediate_size;
  std::vector<ExpectedTensor> out;
  out.push_back({kEmbedding, {c.vocab_size, h}});
  const bool fused = c.architecture == Architecture::kPhi3;  // qkv_proj, gate_up_proj
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    out.push_back({p + "input_layernorm.weight", {h}});
    if (fused) {
      out.push_back({p + "self_attn.qkv_proj.weight", {q_width + 2 * kv_width, h}});
    } else {
      out.push_back({p + "self_attn.q_proj.weight", {q_width, h}});
      out.push_back({p + "self_attn.k_proj.weight", {kv_width, h}});
      out.push_back({p + "self_attn.v_proj.weight", {kv_width, h}});
    }
    if (has_qk_norm(c.architecture)) {
      out.push_back({p + "self_attn.q_norm.weight", {c.head_dim}});
      out.push_back({p + "self_attn.k_norm.weight", {c.head_dim}});
    }
    if (c.qkv_bias) {
      out.push_back({p + "self_attn.q_proj.bias", {q_width}});
      out.push_back({p + "self_attn.k_proj.bias", {kv_width}});
      out.push_back({p + "self_attn.v_proj.bias", {kv_width}});
    }
    out.push_back({p + "self_attn.o_proj.weight", {h, q_width}});
    if (c.o_bias) out.push_back({p + "self_attn.o_proj.bias", {h}});
    out.push_back({p + "post_attention_layernorm.weight", {h}});
    if (c.architecture == Architecture::kGemma3) {
      out.push_back({p + "pre_feedforward_layernorm.weight", {h}});
      out.push_back({p + "post_feedforward_layernorm.weight", {h}});
    }
    if (fused) {
      out.push_back({p + "mlp.gate_up_proj.weight", {2 * i, h}});
    } else {
      out.push_back({p + "mlp.gate_proj.weight", {i, h}});
      out.push_back({p + "mlp.up_proj.weight", {i, h}});
    }
    out.push_back({p + "mlp.down_proj.weight", {h, i}});
    if (c.mlp_bias) {
      out.push_back({p + "mlp.gate_proj.bias", {i}});
      out.push_back({p + "mlp.up_proj.bias", {i}});
      out.push_back({p + "mlp.down_proj.bias", {h}});
    }
  }
  out.push_back({"model.norm.weight", {h}});
  if (!c.tie_word_embeddings) out.push_back({kLmHead, {c.vocab_size, h}});
  return out;
}

Status check_llama_weights(const ModelConfig& config, const WeightIndex& weights) {
  std::unordered_set<std::string> expected_names;
  for (const ExpectedTensor& expected : expected_llama_tensors(config)) {
    const WeightEntry* entry = weights.find(expected.name);
    if (entry == nullptr) {
      return not_found("checkpoint has no tensor '", expected.name, "' (expected shape ",
                       shape_string(expected.shape), ")");
    }
    if (entry->record.shape != expected.shape) {
      return invalid_argument("tensor '", expected.name, "' has shape ",
                              shape_string(entry->record.shape), " but the config implies ",
                              shape_string(expected.shape));
    }
    if (!is_floating(entry->record.dtype)) {
      return invalid_argument("tensor '", expected.name, "' has dtype ",
                              dtype_name(entry->record.dtype),
                              "; weights must be f32, f16 or bf16");
    }
    expected_names.insert(expected.name);
  }
  for (const WeightEntry& entry : weights.entries()) {
    const std::string& name = entry.record.name;
    if (expected_names.contains(name) || is_derived_buffer(name)) continue;
    if (name == kLmHead && config.tie_word_embeddings) {
      KVRT_RETURN_IF_ERROR(check_tied_head(weights));
      continue;
    }
    return invalid_argument("checkpoint tensor '", name, "' is not part of a ",
                            architecture_name(config.architecture),
                            " model with this config (an unsupported feature?)");
  }
  return Status();
}

}  // namespace kvrt::frontend
