// B5: every artifact that carries the graph declares each cache mutation exactly once,
// and a format that cannot express a program refuses it. Each test parses the written
// file itself (not the in-memory spec) and counts declarations.
#include <gtest/gtest.h>

#include <map>

#include "kvrt/export/exporter.h"
#include "kvrt/export/test/export_test_util.h"
#include "kvrt/format/blob.h"
#include "kvrt/format/program.h"
#include "kvrt/format/program_engine.h"
#include "kvrt/frontend/checkpoint.h"

namespace kvrt::exporter {
namespace {

using testing::options_for;
using testing::ScratchDir;

std::vector<std::byte> read_all(const std::string& path) {
  auto file = MappedFile::open(path);
  EXPECT_TRUE(file.ok());
  if (!file.ok()) return {};
  return {file->bytes().begin(), file->bytes().end()};
}

// Number of layers' caches the fixture has: 2 buffers per layer.
size_t buffer_count(const std::string& dir) {
  auto checkpoint = frontend::Checkpoint::open(dir);
  EXPECT_TRUE(checkpoint.ok());
  return checkpoint.ok() ? 2 * static_cast<size_t>(checkpoint->config().num_hidden_layers) : 0;
}

// Alias declarations per buffer across the blobs of one method.
std::map<std::string, int> alias_counts(const std::vector<std::span<const std::byte>>& blobs,
                                        const std::vector<format::DelegateSpec>& delegates,
                                        std::string_view method) {
  std::map<std::string, int> counts;
  for (size_t d = 0; d < delegates.size(); ++d) {
    if (delegates[d].method != method) continue;
    auto blob = format::read_blob(blobs[d]);
    EXPECT_TRUE(blob.ok()) << blob.status().to_string();
    if (!blob.ok()) continue;
    for (const auto& alias : blob->metadata.aliases) {
      ++counts[alias.input];
      EXPECT_EQ(alias.output, alias.input + ".updated");
    }
    const bool requires_aliased_io =
        std::find(blob->required_features.begin(), blob->required_features.end(), "aliased_io") !=
        blob->required_features.end();
    EXPECT_EQ(requires_aliased_io, !blob->metadata.aliases.empty());
  }
  return counts;
}

void expect_each_once(const std::map<std::string, int>& counts, size_t buffers,
                      const std::string& where) {
  EXPECT_EQ(counts.size(), buffers) << where;
  for (const auto& [buffer, count] : counts) EXPECT_EQ(count, 1) << where << ": " << buffer;
}

TEST(Artifacts, ProgramDeclaresEachMutationOncePerMethod_B5) {
  KVRT_REQUIRE_FIXTURE(dir, "llama_gqa");
  ScratchDir out;
  ExportOptions options = options_for(dir, out.file("m.kvrt"));
  options.force_host = {"final_norm"};  // two partitions per method: still once
  ASSERT_TRUE(export_checkpoint(options).ok());
  auto program = format::ProgramFile::open(out.file("m.kvrt"));
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  const size_t buffers = buffer_count(dir);
  // The metadata JSON as stored, not the parsed spec.
  const auto metadata = format::program_metadata_json(program->spec());
  for (const auto& method : metadata["methods"]) {
    std::map<std::string, int> declared;
    for (const auto& mutation : method["mutations"]) ++declared[mutation["buffer"]];
    expect_each_once(declared, buffers,
                     "program mutations of " + method["name"].get<std::string>());
    expect_each_once(alias_counts(program->view().blobs, program->spec().delegates,
                                  method["name"].get<std::string>()),
                     buffers, "blob aliases of " + method["name"].get<std::string>());
  }
  EXPECT_EQ(program->spec().required_features, std::vector<std::string>{"aliased_io"});
}

TEST(Artifacts, EngineFileDeclaresEachMutationOncePerMethod_B5) {
  KVRT_REQUIRE_FIXTURE(dir, "llama_gqa");
  ScratchDir out;
  ExportOptions options = options_for(dir, out.file("m.engine"));
  options.format = ExportFormat::kEngine;
  auto summary = export_checkpoint(options);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  const auto bytes = read_all(out.file("m.engine"));
  auto engine = format::read_engine_file(bytes);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  // An alias-unaware reader must refuse it: the feature is required at file level too.
  EXPECT_EQ(engine->spec.required_features, std::vector<std::string>{"aliased_io"});
  ASSERT_EQ(engine->spec.delegates.size(), 2u);
  const size_t buffers = buffer_count(dir);
  for (const char* method : {"prefill", "decode"}) {
    expect_each_once(alias_counts(engine->blobs, engine->spec.delegates, method), buffers,
                     std::string("engine file ") + method);
  }
  // Weights once, shared by both blobs.
  auto checkpoint = frontend::Checkpoint::open(dir);
  ASSERT_TRUE(checkpoint.ok());
  EXPECT_EQ(engine->spec.weights.size(), checkpoint->weights().size());
  // A program file reader refuses an engine file (different magic), and vice versa.
  EXPECT_NE(format::read_program(bytes).status().message().find("bad magic"), std::string::npos);
}

TEST(Artifacts, GraphJsonListsEachMutationOncePerMethod_B5) {
  KVRT_REQUIRE_FIXTURE(dir, "llama_gqa");
  ScratchDir out;
  ExportOptions options = options_for(dir, out.file("m.json"));
  options.format = ExportFormat::kGraphJson;
  ASSERT_TRUE(export_checkpoint(options).ok());
  std::ifstream in(out.file("m.json"));
  const auto dump = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(dump.is_discarded());
  EXPECT_EQ(dump["format"], "kvrt-graphs");
  const size_t buffers = buffer_count(dir);
  for (const char* method : {"prefill", "decode"}) {
    const auto& g = dump["methods"][method];
    auto parsed = graph::graph_from_json(g);
    ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
    std::map<std::string, int> declared;
    for (const auto& mutation : parsed->mutations) {
      ++declared[parsed->values[static_cast<size_t>(mutation.buffer)].name];
    }
    expect_each_once(declared, buffers, std::string("graph-json ") + method);
    // The only declaration: no value carries a second one, and the raw JSON list has
    // exactly one entry per buffer.
    EXPECT_EQ(g["mutations"].size(), buffers);
  }
}

TEST(Artifacts, EngineFormatRefusesProgramsItCannotExpress_B5) {
  KVRT_REQUIRE_FIXTURE(dir, "llama_gqa");
  ScratchDir out;
  for (const char* forced : {"final_norm", "layers.0.attn.k_cache_write"}) {
    ExportOptions options = options_for(dir, out.file("m.engine"));
    options.format = ExportFormat::kEngine;
    options.force_host = {forced};
    auto summary = export_checkpoint(options);
    ASSERT_FALSE(summary.ok()) << forced;
    EXPECT_EQ(summary.status().code(), ErrorCode::kNotSupported);
    EXPECT_NE(summary.status().message().find("--format engine"), std::string::npos);
    EXPECT_FALSE(std::filesystem::exists(out.file("m.engine")));
  }
}

TEST(Artifacts, EngineFileRejectsMissingAliasedIoFeature) {
  KVRT_REQUIRE_FIXTURE(dir, "llama_gqa");
  ScratchDir out;
  ExportOptions options = options_for(dir, out.file("m.engine"));
  options.format = ExportFormat::kEngine;
  ASSERT_TRUE(export_checkpoint(options).ok());
  auto engine_bytes = read_all(out.file("m.engine"));
  // Turn "aliased_io" into an unknown feature name of the same length.
  const std::string needle = "\"aliased_io\"";
  std::string text(reinterpret_cast<const char*>(engine_bytes.data()), engine_bytes.size());
  const size_t at = text.find(needle);
  ASSERT_NE(at, std::string::npos);
  engine_bytes[at + 1] = std::byte{'X'};
  auto engine = format::read_engine_file(engine_bytes);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.status().message().find("Xliased_io"), std::string::npos);
}

}  // namespace
}  // namespace kvrt::exporter
