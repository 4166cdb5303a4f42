#include "kvrt/export/inspect.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "kvrt/lowering/test/lowering_test_util.h"

namespace kvrt::exporter {
namespace {

// Lowers the tiny model with `force_host`, writes it, and describes the file.
nlohmann::json describe_tiny(std::set<std::string, std::less<>> force_host, std::string* text) {
  auto tiny = lowering::testing::lower_tiny(std::move(force_host));
  EXPECT_TRUE(tiny.lowered.ok()) << tiny.lowered.status().to_string();
  if (!tiny.lowered.ok()) return {};
  const std::string path = lowering::testing::temp_path("inspect.kvrt");
  EXPECT_TRUE(format::write_program(path, tiny.lowered->spec, tiny.lowered->blobs,
                                    lowering::testing::zero_fillers(tiny.lowered->spec))
                  .ok());
  auto json_text = inspect_file(path, /*json=*/true);
  auto report = inspect_file(path, /*json=*/false);
  std::filesystem::remove(path);
  EXPECT_TRUE(json_text.ok() && report.ok());
  if (!json_text.ok() || !report.ok()) return {};
  *text = *report;
  return nlohmann::json::parse(*json_text);
}

TEST(Inspect, ShowsArgumentOrderAliasesAndZeroCopyBuffers_F2) {
  std::string text;
  const auto d = describe_tiny({}, &text);
  ASSERT_EQ(d["kind"], "program");
  ASSERT_EQ(d["methods"].size(), 2u);
  for (const auto& buffer : d["buffers"]) {
    EXPECT_EQ(buffer["arena"], "device");
    EXPECT_EQ(buffer["copy_bytes_per_step"]["decode"], 0);
  }
  const auto& call = d["methods"][1]["instructions"][0];
  ASSERT_EQ(call["kind"], "delegate_call");
  // Arguments (program side) and bindings (blob side) listed in the same order.
  std::vector<std::string> args, bindings;
  for (const auto& v : call["inputs"]) args.push_back(v["name"]);
  for (const auto& v : call["outputs"]) args.push_back(v["name"]);
  for (const auto& name : call["input_bindings"]) bindings.push_back(name);
  for (const auto& name : call["output_bindings"]) bindings.push_back(name);
  EXPECT_EQ(args, bindings);
  EXPECT_EQ(call["aliases"].size(), 4u);
  EXPECT_NE(text.find("alias k_cache.0.updated -> k_cache.0 (kv_cache_update)"), std::string::npos);
  EXPECT_NE(text.find("(zero-copy)"), std::string::npos);
  EXPECT_NE(text.find("in  arg 0: k_cache.0 f32 [1, 16, 4] (buffer k_cache.0)"), std::string::npos)
      << text;
}

TEST(Inspect, ReportsTheCopyPathAndItsBytes_F3) {
  std::string text;
  const auto d = describe_tiny({"layers.1.attn.k_cache_write"}, &text);
  bool found = false;
  for (const auto& buffer : d["buffers"]) {
    if (buffer["name"] != "k_cache.1") continue;
    found = true;
    EXPECT_EQ(buffer["copy_bytes_per_step"]["decode"], 2 * 256);
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(d["methods"][1]["copy_bytes_per_step"], 2 * 256);
  EXPECT_NE(text.find("(explicit copy path)"), std::string::npos);
  EXPECT_NE(text.find("host_kernel kv_cache_write 'layers.1.attn.k_cache_write'"),
            std::string::npos);
}

TEST(Inspect, OtherFilesAreRefused) {
  const std::string path = lowering::testing::temp_path("not_a_program.bin");
  std::ofstream(path) << "KVRTBLOBxxxxxxxx";
  auto report = inspect_file(path, false);
  std::filesystem::remove(path);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find("not a kvrt program"), std::string::npos);
}

}  // namespace
}  // namespace kvrt::exporter
