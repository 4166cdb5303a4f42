#include "kvrt/engine/cpu/test/tiny_llama.h"

#include <cmath>
#include <cstring>
#include <numbers>
#include <random>

namespace kvrt::testing {

float round_to(DType dtype, float value) {
  if (dtype == DType::kBF16) return bf16_to_f32(f32_to_bf16(value));
  if (dtype == DType::kF16) return f16_to_f32(f32_to_f16(value));
  return value;
}

Result<TensorView> TinyWeights::weight(std::string_view name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return not_found("no weight named '", name, "'");
  const Tensor& t = it->second;
  KVRT_ASSIGN_OR_RETURN(Shape shape, Shape::from_span(t.shape));
  return TensorView(const_cast<uint8_t*>(t.bytes.data()), t.dtype, shape);
}

void TinyWeights::add(const std::string& name, DType dtype, std::vector<int64_t> shape,
                      const std::vector<float>& values) {
  Tensor t{dtype, std::move(shape), std::vector<uint8_t>(values.size() * dtype_size(dtype))};
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(t.bytes.data() + 4 * i, &values[i], 4);
    } else {
      const uint16_t bits = dtype == DType::kBF16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
      std::memcpy(t.bytes.data() + 2 * i, &bits, 2);
    }
  }
  tensors_[name] = std::move(t);
}

std::vector<float> TinyWeights::values(const std::string& name) const {
  const Tensor& t = tensors_.at(name);
  const size_t n = t.bytes.size() / dtype_size(t.dtype);
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (t.dtype == DType::kF32) {
      std::memcpy(&out[i], t.bytes.data() + 4 * i, 4);
    } else {
      uint16_t bits;
      std::memcpy(&bits, t.bytes.data() + 2 * i, 2);
      out[i] = t.dtype == DType::kBF16 ? bf16_to_f32(bits) : f16_to_f32(bits);
    }
  }
  return out;
}

namespace {

std::string layer_name(int64_t l, const char* rest) {
  return "model.layers." + std::to_string(l) + "." + rest;
}

}  // namespace

TinyModel make_tiny_model(const TinyConfig& config) {
  TinyModel model;
  model.config = config;
  std::mt19937 rng(config.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float scale, float offset) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> values(static_cast<size_t>(n));
    for (float& v : values) v = offset + scale * normal(rng);
    model.weights.add(name, config.weight_dtype, std::move(shape), values);
  };
  const int64_t h = config.hidden, d = config.head_dim;
  add("model.embed_tokens.weight", {config.vocab, h}, 0.5f, 0.0f);
  for (int64_t l = 0; l < config.layers; ++l) {
    add(layer_name(l, "input_layernorm.weight"), {h}, 0.1f, 1.0f);
    add(layer_name(l, "self_attn.q_proj.weight"), {config.heads * d, h}, 0.3f, 0.0f);
    add(layer_name(l, "self_attn.k_proj.weight"), {config.kv_heads * d, h}, 0.3f, 0.0f);
    add(layer_name(l, "self_attn.v_proj.weight"), {config.kv_heads * d, h}, 0.3f, 0.0f);
    if (config.bias) {
      add(layer_name(l, "self_attn.q_proj.bias"), {config.heads * d}, 0.1f, 0.0f);
      add(layer_name(l, "self_attn.k_proj.bias"), {config.kv_heads * d}, 0.1f, 0.0f);
      add(layer_name(l, "self_attn.v_proj.bias"), {config.kv_heads * d}, 0.1f, 0.0f);
    }
    add(layer_name(l, "self_attn.o_proj.weight"), {h, config.heads * d}, 0.3f, 0.0f);
    add(layer_name(l, "post_attention_layernorm.weight"), {h}, 0.1f, 1.0f);
    add(layer_name(l, "mlp.gate_proj.weight"), {config.intermediate, h}, 0.3f, 0.0f);
    add(layer_name(l, "mlp.up_proj.weight"), {config.intermediate, h}, 0.3f, 0.0f);
    add(layer_name(l, "mlp.down_proj.weight"), {h, config.intermediate}, 0.3f, 0.0f);
  }
  add("model.norm.weight", {h}, 0.1f, 1.0f);
  if (!config.tied) add("lm_head.weight", {config.vocab, h}, 0.5f, 0.0f);
  return model;
}

std::vector<std::string> TinyModel::buffer_names() const {
  std::vector<std::string> names;
  for (int64_t l = 0; l < config.layers; ++l) {
    names.push_back("k_cache." + std::to_string(l));
    names.push_back("v_cache." + std::to_string(l));
  }
  return names;
}

graph::Graph TinyModel::method_graph(int64_t t_min, int64_t t_max, bool buffers_as_inputs) const {
  using graph::Dim;
  using graph::ValueKind;
  const TinyConfig& c = config;
  graph::Graph g;
  const Dim t = t_min == t_max ? Dim::fixed(t_min) : Dim::dynamic("T", t_min, t_max);
  auto fixed = [](int64_t n) { return Dim::fixed(n); };
  auto param = [&](const std::string& name) {
    if (std::optional<graph::ValueId> existing = g.find_value(name)) return *existing;
    const TinyWeights::Tensor& w = weights.tensors().find(name)->second;
    std::vector<Dim> dims;
    for (int64_t s : w.shape) dims.push_back(Dim::fixed(s));
    return g.add_value({name, w.dtype, dims, ValueKind::kParameter});
  };
  auto act = [&](const std::string& name, int64_t width) {
    return g.add_value({name, DType::kF32, {t, fixed(width)}, ValueKind::kIntermediate});
  };
  auto node = [&](const std::string& name, const char* op, std::vector<graph::ValueId> in,
                  graph::ValueId out, nlohmann::json attrs = nlohmann::json::object()) {
    g.nodes.push_back({name, op, std::move(in), {out}, std::move(attrs)});
  };
  const graph::ValueId tokens =
      g.add_value({"tokens", DType::kI32, {fixed(1), t}, ValueKind::kInput});
  const graph::ValueId position =
      g.add_value({"position", DType::kI32, {fixed(1)}, ValueKind::kInput});
  g.inputs = {tokens, position};
  std::vector<Dim> cache_dims = {fixed(c.kv_heads), fixed(c.max_seq), fixed(c.head_dim)};
  for (const std::string& name : buffer_names()) {
    const graph::ValueId buffer =
        g.add_value({name, c.cache_dtype, cache_dims, ValueKind::kBuffer});
    if (buffers_as_inputs) g.inputs.push_back(buffer);
  }
  nlohmann::json rope_scaling = {{"type", "default"}};
  if (c.llama3_rope) {
    rope_scaling = {{"type", "llama3"},
                    {"factor", 8.0},
                    {"low_freq_factor", 1.0},
                    {"high_freq_factor", 4.0},
                    {"original_max_position_embeddings", 8}};
  }
  const int64_t q_width = c.heads * c.head_dim, kv_width = c.kv_heads * c.head_dim;
  graph::ValueId x = act("embed", c.hidden);
  node("embed", "embedding", {tokens, param("model.embed_tokens.weight")}, x);
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    auto w = [&](const char* rest) { return param(layer_name(l, rest)); };
    const graph::ValueId h = act(p + "input_norm", c.hidden);
    node(p + "input_norm", "rms_norm", {x, w("input_layernorm.weight")}, h, {{"eps", c.eps}});
    graph::ValueId qkv[3];
    const char* names[3] = {"q", "k", "v"};
    for (int i = 0; i < 3; ++i) {
      const std::string proj = std::string("self_attn.") + names[i] + "_proj.";
      std::vector<graph::ValueId> in = {h, w((proj + "weight").c_str())};
      if (c.bias) in.push_back(w((proj + "bias").c_str()));
      qkv[i] = act(p + names[i] + "_proj", i == 0 ? q_width : kv_width);
      node(p + names[i] + "_proj", "linear", in, qkv[i]);
    }
    const graph::ValueId q = act(p + "q_rope", q_width), k = act(p + "k_rope", kv_width);
    nlohmann::json rope = {{"head_dim", c.head_dim}, {"theta", c.theta}, {"scaling", rope_scaling}};
    rope["num_heads"] = c.heads;
    node(p + "q_rope", "rope", {qkv[0], position}, q, rope);
    rope["num_heads"] = c.kv_heads;
    node(p + "k_rope", "rope", {qkv[1], position}, k, rope);
    graph::ValueId updated[2];
    for (int i = 0; i < 2; ++i) {
      const std::string cache = (i == 0 ? "k_cache." : "v_cache.") + std::to_string(l);
      const graph::ValueId buffer = *g.find_value(cache);
      updated[i] = g.add_value({cache + ".updated", c.cache_dtype, cache_dims});
      node(p + (i == 0 ? "k_write" : "v_write"), "kv_cache_write",
           {buffer, i == 0 ? k : qkv[2], position}, updated[i]);
      g.mutations.push_back({buffer, updated[i]});
    }
    const graph::ValueId attn = act(p + "attention", q_width);
    node(p + "attention", "attention", {q, updated[0], updated[1], position}, attn,
         {{"num_heads", c.heads},
          {"num_kv_heads", c.kv_heads},
          {"head_dim", c.head_dim},
          {"scale", 1.0 / std::sqrt(static_cast<double>(c.head_dim))}});
    const graph::ValueId o = act(p + "o_proj", c.hidden);
    node(p + "o_proj", "linear", {attn, w("self_attn.o_proj.weight")}, o);
    const graph::ValueId x1 = act(p + "attn_residual", c.hidden);
    node(p + "attn_residual", "add", {x, o}, x1);
    const graph::ValueId h2 = act(p + "post_norm", c.hidden);
    node(p + "post_norm", "rms_norm", {x1, w("post_attention_layernorm.weight")}, h2,
         {{"eps", c.eps}});
    const graph::ValueId gate = act(p + "gate_proj", c.intermediate);
    node(p + "gate_proj", "linear", {h2, w("mlp.gate_proj.weight")}, gate);
    const graph::ValueId up = act(p + "up_proj", c.intermediate);
    node(p + "up_proj", "linear", {h2, w("mlp.up_proj.weight")}, up);
    const graph::ValueId m = act(p + "silu_mul", c.intermediate);
    node(p + "silu_mul", "silu_mul", {gate, up}, m);
    const graph::ValueId down = act(p + "down_proj", c.hidden);
    node(p + "down_proj", "linear", {m, w("mlp.down_proj.weight")}, down);
    const graph::ValueId x2 = act(p + "mlp_residual", c.hidden);
    node(p + "mlp_residual", "add", {x1, down}, x2);
    x = x2;
  }
  const graph::ValueId normed = act("norm", c.hidden);
  node("norm", "rms_norm", {x, param("model.norm.weight")}, normed, {{"eps", c.eps}});
  const graph::ValueId last =
      g.add_value({"last", DType::kF32, {fixed(1), fixed(c.hidden)}, ValueKind::kIntermediate});
  node("take_last", "take_last", {normed}, last);
  const graph::ValueId logits =
      g.add_value({"logits", DType::kF32, {fixed(1), fixed(c.vocab)}, ValueKind::kIntermediate});
  node("lm_head", "linear", {last, param(c.tied ? "model.embed_tokens.weight" : "lm_head.weight")},
       logits);
  g.outputs = {logits};
  if (c.next_token) {
    const graph::ValueId next =
        g.add_value({"next_token", DType::kI32, {fixed(1), fixed(1)}, ValueKind::kIntermediate});
    node("next_token", "argmax", {logits}, next);
    g.outputs.push_back(next);
  }
  return g;
}

namespace {

using Matrix = std::vector<std::vector<double>>;  // [rows][cols]

Matrix matmul_t(const Matrix& x, const std::vector<float>& w, int64_t n, int64_t k,
                const std::vector<float>* bias) {
  Matrix out(x.size(), std::vector<double>(static_cast<size_t>(n)));
  for (size_t t = 0; t < x.size(); ++t) {
    for (int64_t r = 0; r < n; ++r) {
      double sum = bias ? (*bias)[static_cast<size_t>(r)] : 0.0;
      for (int64_t i = 0; i < k; ++i) sum += x[t][i] * w[static_cast<size_t>(r * k + i)];
      out[t][static_cast<size_t>(r)] = sum;
    }
  }
  return out;
}

Matrix rms(const Matrix& x, const std::vector<float>& w, double eps) {
  Matrix out = x;
  for (auto& row : out) {
    double ss = 0;
    for (double v : row) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(row.size()) + eps);
    for (size_t i = 0; i < row.size(); ++i) row[i] = row[i] * inv * w[i];
  }
  return out;
}

std::vector<double> inv_freqs(const TinyConfig& c) {
  std::vector<double> f;
  for (int64_t i = 0; i < c.head_dim / 2; ++i) {
    double inv = std::pow(c.theta, -2.0 * static_cast<double>(i) / static_cast<double>(c.head_dim));
    if (c.llama3_rope) {
      // Llama 3.1: wavelengths above old/low are slowed by 8, below old/high kept,
      // linear blend in 1/wavelength between (old = 8, low 1, high 4).
      const double wavelen = 2 * std::numbers::pi / inv;
      if (wavelen > 8.0) {
        inv = inv / 8.0;
      } else if (wavelen >= 2.0) {
        const double smooth = (8.0 / wavelen - 1.0) / 3.0;
        inv = (1 - smooth) * inv / 8.0 + smooth * inv;
      }
    }
    f.push_back(inv);
  }
  return f;
}

void rotate(Matrix& x, int64_t heads, int64_t d, const std::vector<double>& freqs) {
  for (size_t t = 0; t < x.size(); ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      double* v = x[t].data() + h * d;
      for (int64_t i = 0; i < d / 2; ++i) {
        const double angle = static_cast<double>(t) * freqs[static_cast<size_t>(i)];
        const double a = v[i], b = v[i + d / 2];
        v[i] = a * std::cos(angle) - b * std::sin(angle);
        v[i + d / 2] = b * std::cos(angle) + a * std::sin(angle);
      }
    }
  }
}

}  // namespace

std::vector<float> TinyModel::reference_logits(const std::vector<int32_t>& tokens) const {
  const TinyConfig& c = config;
  const auto W = [&](const std::string& name) { return weights.values(name); };
  const std::vector<float> embed = W("model.embed_tokens.weight");
  Matrix x(tokens.size(), std::vector<double>(static_cast<size_t>(c.hidden)));
  for (size_t t = 0; t < tokens.size(); ++t) {
    for (int64_t i = 0; i < c.hidden; ++i) x[t][i] = embed[tokens[t] * c.hidden + i];
  }
  const std::vector<double> freqs = inv_freqs(c);
  const int64_t d = c.head_dim, group = c.heads / c.kv_heads;
  for (int64_t l = 0; l < c.layers; ++l) {
    const auto LW = [&](const char* rest) { return W(layer_name(l, rest)); };
    Matrix h = rms(x, LW("input_layernorm.weight"), c.eps);
    std::vector<float> qb, kb, vb;
    if (c.bias) {
      qb = LW("self_attn.q_proj.bias");
      kb = LW("self_attn.k_proj.bias");
      vb = LW("self_attn.v_proj.bias");
    }
    Matrix q =
        matmul_t(h, LW("self_attn.q_proj.weight"), c.heads * d, c.hidden, c.bias ? &qb : nullptr);
    Matrix k = matmul_t(h, LW("self_attn.k_proj.weight"), c.kv_heads * d, c.hidden,
                        c.bias ? &kb : nullptr);
    Matrix v = matmul_t(h, LW("self_attn.v_proj.weight"), c.kv_heads * d, c.hidden,
                        c.bias ? &vb : nullptr);
    rotate(q, c.heads, d, freqs);
    rotate(k, c.kv_heads, d, freqs);
    for (auto* m : {&k, &v}) {
      for (auto& row : *m) {
        for (double& e : row) e = round_to(c.cache_dtype, static_cast<float>(e));
      }
    }
    Matrix attn(x.size(), std::vector<double>(static_cast<size_t>(c.heads * d), 0.0));
    for (size_t t = 0; t < x.size(); ++t) {
      for (int64_t hh = 0; hh < c.heads; ++hh) {
        const int64_t g = hh / group;
        std::vector<double> s(t + 1);
        double mx = -1e300;
        for (size_t j = 0; j <= t; ++j) {
          double dotp = 0;
          for (int64_t i = 0; i < d; ++i) dotp += q[t][hh * d + i] * k[j][g * d + i];
          s[j] = dotp / std::sqrt(static_cast<double>(d));
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (size_t j = 0; j <= t; ++j) {
          for (int64_t i = 0; i < d; ++i) attn[t][hh * d + i] += s[j] / sum * v[j][g * d + i];
        }
      }
    }
    Matrix o = matmul_t(attn, LW("self_attn.o_proj.weight"), c.hidden, c.heads * d, nullptr);
    for (size_t t = 0; t < x.size(); ++t) {
      for (int64_t i = 0; i < c.hidden; ++i) x[t][i] += o[t][i];
    }
    Matrix h2 = rms(x, LW("post_attention_layernorm.weight"), c.eps);
    Matrix gate = matmul_t(h2, LW("mlp.gate_proj.weight"), c.intermediate, c.hidden, nullptr);
    Matrix up = matmul_t(h2, LW("mlp.up_proj.weight"), c.intermediate, c.hidden, nullptr);
    for (size_t t = 0; t < x.size(); ++t) {
      for (int64_t i = 0; i < c.intermediate; ++i) {
        const double gv = gate[t][i];
        gate[t][i] = gv / (1 + std::exp(-gv)) * up[t][i];
      }
    }
    Matrix down = matmul_t(gate, LW("mlp.down_proj.weight"), c.hidden, c.intermediate, nullptr);
    for (size_t t = 0; t < x.size(); ++t) {
      for (int64_t i = 0; i < c.hidden; ++i) x[t][i] += down[t][i];
    }
  }
  Matrix last = {x.back()};
  last = rms(last, W("model.norm.weight"), c.eps);
  Matrix logits = matmul_t(last, W(c.tied ? "model.embed_tokens.weight" : "lm_head.weight"),
                           c.vocab, c.hidden, nullptr);
  return std::vector<float>(logits[0].begin(), logits[0].end());
}

}  // namespace kvrt::testing
