// A small valid graph shared by the graph tests: embedding, one cache write, attention.
#pragma once

#include "kvrt/graph/graph.h"

namespace kvrt::graph::testing {

// tokens[1,T] -> embedding -> k_proj -> kv_cache_write(k_cache) -> attention -> logits.
inline Graph tiny_graph() {
  Graph g;
  const Dim t = Dim::dynamic("T", 1, 16);
  ValueId tokens = g.add_value({"tokens", DType::kI32, {Dim::fixed(1), t}, ValueKind::kInput});
  ValueId position = g.add_value({"position", DType::kI32, {Dim::fixed(1)}, ValueKind::kInput});
  ValueId table = g.add_value(
      {"embed.weight", DType::kBF16, {Dim::fixed(8), Dim::fixed(4)}, ValueKind::kParameter});
  ValueId k_weight =
      g.add_value({"k.weight", DType::kF32, {Dim::fixed(4), Dim::fixed(4)}, ValueKind::kParameter});
  ValueId cache = g.add_value({"k_cache.0",
                               DType::kF32,
                               {Dim::fixed(1), Dim::fixed(16), Dim::fixed(4)},
                               ValueKind::kBuffer});
  ValueId hidden = g.add_value({"embed", DType::kF32, {t, Dim::fixed(4)}});
  ValueId k = g.add_value({"k_proj", DType::kF32, {t, Dim::fixed(4)}});
  ValueId updated = g.add_value(
      {"k_cache.0.updated", DType::kF32, {Dim::fixed(1), Dim::fixed(16), Dim::fixed(4)}});
  ValueId attended = g.add_value({"attention", DType::kF32, {t, Dim::fixed(4)}});
  g.nodes.push_back({"embed", "embedding", {tokens, table}, {hidden}, nlohmann::json::object()});
  g.nodes.push_back({"k_proj", "linear", {hidden, k_weight}, {k}, nlohmann::json::object()});
  g.nodes.push_back(
      {"k_write", "kv_cache_write", {cache, k, position}, {updated}, nlohmann::json::object()});
  g.nodes.push_back({"attention",
                     "attention",
                     {k, updated, updated, position},
                     {attended},
                     {{"num_heads", 1}, {"num_kv_heads", 1}, {"head_dim", 4}, {"scale", 0.5}}});
  g.inputs = {tokens, position};
  g.outputs = {attended};
  g.mutations = {{cache, updated}};
  return g;
}

}  // namespace kvrt::graph::testing
