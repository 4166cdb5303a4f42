// End-to-end through the public API: checkpoint directory in, tokens out, compared with
// greedy continuations computed by HF transformers (tests/fixtures, models/).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "kvrt/api/kvrt.h"
#include "kvrt/export/exporter.h"
#include "kvrt/format/test/program_test_util.h"

namespace kvrt {
namespace {

namespace fs = std::filesystem;

std::string source_dir() {
  const char* env = std::getenv("KVRT_SOURCE_DIR");
  return env ? env : KVRT_SOURCE_DIR;
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

class LlmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_dir_ =
        fs::temp_directory_path() /
        ("kvrt_api_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(cache_dir_);
  }
  void TearDown() override { fs::remove_all(cache_dir_); }

  LoadOptions cpu_options() const {
    LoadOptions options;
    options.device = "cpu";
    options.cache_dir = cache_dir_.string();
    return options;
  }

  fs::path cache_dir_;
};

GenerateOptions greedy(size_t tokens) {
  GenerateOptions options;
  options.max_new_tokens = static_cast<int32_t>(tokens);
  options.sampling.temperature = 0.0f;
  options.ignore_eos = true;
  return options;
}

TEST_F(LlmTest, FixtureGreedyIdsMatchTransformers_G2) {
  for (const char* name : {"llama_gqa", "llama_untied", "qwen2_bias", "llama_sharded"}) {
    const fs::path dir = fs::path(source_dir()) / "tests/fixtures" / name;
    if (!fs::exists(dir / "reference.json")) GTEST_SKIP() << "no fixture " << dir;
    const nlohmann::json reference = read_json(dir / "reference.json");
    auto llm = Llm::load(dir.string(), cpu_options());
    ASSERT_TRUE(llm.ok()) << name << ": " << llm.status().to_string();
    const auto prompt = reference["prompt_ids"].get<std::vector<int32_t>>();
    const auto expected = reference["greedy_ids"].get<std::vector<int32_t>>();
    auto result = (*llm)->generate_ids(prompt, greedy(expected.size()));
    ASSERT_TRUE(result.ok()) << name << ": " << result.status().to_string();
    EXPECT_EQ(result->ids, expected) << name;
    EXPECT_EQ(result->stats.cache_bytes_copied_per_step, 0u) << name;
  }
}

TEST_F(LlmTest, BundledModelGreedyTextMatchesTransformers) {
  const fs::path dir = fs::path(source_dir()) / "models/fortune-llama";
  const nlohmann::json reference = read_json(dir / "reference.json");
  auto llm = Llm::load(dir.string(), cpu_options());
  ASSERT_TRUE(llm.ok()) << llm.status().to_string();
  // The prompt goes through kvrt's tokenizer, so this checks the tokenizer too.
  auto prompt = (*llm)->encode("The meaning of life is");
  ASSERT_TRUE(prompt.ok()) << prompt.status().to_string();
  EXPECT_EQ(*prompt, reference["prompt_ids"].get<std::vector<int32_t>>());
  const auto expected = reference["greedy_ids"].get<std::vector<int32_t>>();
  auto result = (*llm)->generate_ids(*prompt, greedy(expected.size()));
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_EQ(result->ids, expected);
  auto expected_text = (*llm)->decode(expected);
  ASSERT_TRUE(expected_text.ok());
  EXPECT_EQ(result->text, *expected_text);
}

TEST_F(LlmTest, SecondLoadReusesTheExportedProgram) {
  const fs::path dir = fs::path(source_dir()) / "tests/fixtures/llama_gqa";
  if (!fs::exists(dir)) GTEST_SKIP() << "no fixture";
  auto first = Llm::load(dir.string(), cpu_options());
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  const auto stamp = fs::last_write_time((*first)->program_path());
  auto second = Llm::load(dir.string(), cpu_options());
  ASSERT_TRUE(second.ok());
  EXPECT_EQ((*second)->program_path(), (*first)->program_path());
  EXPECT_EQ(fs::last_write_time((*second)->program_path()), stamp);
}

TEST_F(LlmTest, ResetStartsANewSequence) {
  const fs::path dir = fs::path(source_dir()) / "tests/fixtures/llama_gqa";
  if (!fs::exists(dir)) GTEST_SKIP() << "no fixture";
  auto llm = Llm::load(dir.string(), cpu_options());
  ASSERT_TRUE(llm.ok());
  const std::vector<int32_t> prompt = {5, 6, 7};
  auto first = (*llm)->generate_ids(prompt, greedy(6));
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE((*llm)->reset().ok());
  auto again = (*llm)->generate_ids(prompt, greedy(6));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(first->ids, again->ids);
}

// Prefix reuse on the real engine: after conversation A, a sequence that parts from it
// midway rewinds the cache, and must continue exactly as a fresh model would; rows of A
// past the common prefix are overwritten, never read.
TEST_F(LlmTest, ReusedPrefixContinuesAsAFreshModelWould) {
  const fs::path dir = fs::path(source_dir()) / "models/fortune-llama";
  if (!fs::exists(dir)) GTEST_SKIP() << "no bundled model";
  auto llm = Llm::load(dir.string(), cpu_options());
  ASSERT_TRUE(llm.ok()) << llm.status().to_string();
  auto a = (*llm)->encode("A computer is a machine that");
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE((*llm)->generate_sequence(*a, greedy(12)).ok());
  std::vector<int32_t> b(a->begin(), a->begin() + 4);
  for (int32_t id : {17, 42, 99}) b.push_back(id);
  auto reused = (*llm)->generate_sequence(b, greedy(8));
  ASSERT_TRUE(reused.ok()) << reused.status().to_string();
  EXPECT_EQ(reused->stats.cached_tokens, 4);
  EXPECT_EQ(reused->stats.prompt_tokens, 3);
  ASSERT_TRUE((*llm)->reset().ok());
  auto fresh = (*llm)->generate_ids(b, greedy(8));
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(reused->ids, fresh->ids);
  // Extending the sequence by the reply and one token prefills only that token plus
  // the pending last reply token.
  std::vector<int32_t> c = (*llm)->tokens();
  c.push_back(5);
  auto extended = (*llm)->generate_sequence(c, greedy(2));
  ASSERT_TRUE(extended.ok());
  EXPECT_EQ(extended->stats.cached_tokens, static_cast<int32_t>(c.size()) - 2);
  EXPECT_EQ(extended->stats.prompt_tokens, 2);
}

// Two threads on one Llm: the calls are serialized, so the outcome is one of the two
// sequential orders, never an interleaving.
TEST_F(LlmTest, ConcurrentCallsOnOneLlmAreSerialized) {
  const fs::path dir = fs::path(source_dir()) / "tests/fixtures/llama_gqa";
  if (!fs::exists(dir)) GTEST_SKIP() << "no fixture";
  auto llm = Llm::load(dir.string(), cpu_options());
  ASSERT_TRUE(llm.ok());
  const std::vector<int32_t> a = {5, 6, 7}, b = {9, 3};
  auto sequential = [&](const std::vector<int32_t>& first, const std::vector<int32_t>& second) {
    EXPECT_TRUE((*llm)->reset().ok());
    auto r1 = (*llm)->generate_ids(first, greedy(8));
    auto r2 = (*llm)->generate_ids(second, greedy(8));
    return std::make_pair(r1->ids, r2->ids);
  };
  const auto ab = sequential(a, b), ba = sequential(b, a);
  ASSERT_TRUE((*llm)->reset().ok());
  std::vector<int32_t> got_a, got_b;
  std::thread ta([&] { got_a = (*llm)->generate_ids(a, greedy(8))->ids; });
  std::thread tb([&] { got_b = (*llm)->generate_ids(b, greedy(8))->ids; });
  ta.join();
  tb.join();
  const bool a_first = got_a == ab.first && got_b == ab.second;
  const bool b_first = got_b == ba.first && got_a == ba.second;
  EXPECT_TRUE(a_first || b_first);
}

// "dir/" names its cached program after the directory, like "dir".
TEST_F(LlmTest, TrailingSlashNamesTheCacheFileAfterTheDirectory) {
  const fs::path dir = fs::path(source_dir()) / "tests/fixtures/llama_gqa";
  if (!fs::exists(dir)) GTEST_SKIP() << "no fixture";
  auto llm = Llm::load(dir.string() + "/", cpu_options());
  ASSERT_TRUE(llm.ok()) << llm.status().to_string();
  EXPECT_TRUE(fs::path((*llm)->program_path()).filename().string().starts_with("llama_gqa-"))
      << (*llm)->program_path();
}

TEST_F(LlmTest, MissingModelIsNotFound) {
  auto llm = Llm::load("/nonexistent/kvrt-model", cpu_options());
  ASSERT_FALSE(llm.ok());
  EXPECT_EQ(llm.status().code(), ErrorCode::kNotFound);
}

TEST_F(LlmTest, DeviceItCannotRunOnIsRefusedBeforeTheExport) {
  const fs::path dir = fs::path(source_dir()) / "tests/fixtures/llama_gqa";
  if (!fs::exists(dir)) GTEST_SKIP() << "no fixture";
  LoadOptions options = cpu_options();
  options.device = "cuda";
  auto llm = Llm::load(dir.string(), options);
  if (llm.ok()) GTEST_SKIP() << "this build and machine run on cuda";
  EXPECT_NE(llm.status().message().find("CUDA"), std::string::npos) << llm.status().to_string();
  std::error_code error;
  EXPECT_FALSE(fs::exists(cache_dir_, error) && !fs::is_empty(cache_dir_, error))
      << "exported before refusing the device";
}

TEST_F(LlmTest, PromptBeyondTheContextIsRejected) {
  const fs::path dir = fs::path(source_dir()) / "tests/fixtures/llama_gqa";
  if (!fs::exists(dir)) GTEST_SKIP() << "no fixture";
  LoadOptions options = cpu_options();
  options.max_seq = 16;
  auto llm = Llm::load(dir.string(), options);
  ASSERT_TRUE(llm.ok()) << llm.status().to_string();
  std::vector<int32_t> prompt(17, 3);
  auto result = (*llm)->generate_ids(prompt, greedy(1));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), ErrorCode::kInvalidArgument);
  // Still usable afterwards.
  EXPECT_TRUE((*llm)->generate_ids(std::vector<int32_t>{1, 2}, greedy(2)).ok());
}

}  // namespace
}  // namespace kvrt

namespace kvrt {
namespace {

// Each CPU thread is an OS thread: an absurd count is refused up front, never an
// exception from std::thread (or a slow failure creating 100000 of them).
TEST_F(LlmTest, ThreadCountBeyondTheLimitIsRefused) {
  const fs::path dir = fs::path(source_dir()) / "tests/fixtures/llama_gqa";
  for (int threads : {-1, Llm::kMaxThreads + 1, 100000}) {
    LoadOptions options = cpu_options();
    options.num_threads = threads;
    auto llm = Llm::load(dir.string(), options);
    ASSERT_FALSE(llm.ok()) << threads;
    EXPECT_EQ(llm.status().code(), ErrorCode::kInvalidArgument) << llm.status().to_string();
    EXPECT_NE(llm.status().message().find("num_threads"), std::string::npos);
  }
}

// EOS ids recorded in a program file that are not token ids of the model would never
// stop generation: the load is refused, naming the file and the field.
TEST_F(LlmTest, ProgramEosIdOutsideTheVocabularyIsRefused) {
  const fs::path dir = fs::path(source_dir()) / "tests/fixtures/llama_gqa";
  if (!fs::exists(dir)) GTEST_SKIP() << "no fixture";
  fs::create_directories(cache_dir_);
  const std::string program = (cache_dir_ / "m.kvrt").string();
  exporter::ExportOptions export_options;
  export_options.checkpoint_dir = dir.string();
  export_options.output_path = program;
  export_options.max_seq = 16;
  ASSERT_TRUE(exporter::export_checkpoint(export_options).ok());
  const std::vector<std::byte> bytes = format::testing::read_file_bytes(program);
  for (const nlohmann::json& eos : {nlohmann::json::array({2, 256}), nlohmann::json::array({-1}),
                                    nlohmann::json::array({4294967298u})}) {
    nlohmann::json metadata = format::testing::metadata_of(bytes);
    metadata["producer"]["generation"]["eos_token_ids"] = eos;
    const auto edited = format::testing::with_metadata(bytes, metadata);
    const std::string path = (cache_dir_ / "edited.kvrt").string();
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(edited.data()),
               static_cast<std::streamsize>(edited.size()));
    auto llm = Llm::load(path, cpu_options());
    ASSERT_FALSE(llm.ok()) << eos.dump();
    EXPECT_EQ(llm.status().code(), ErrorCode::kInvalidProgram) << llm.status().to_string();
    EXPECT_NE(llm.status().message().find("producer.generation.eos_token_ids["), std::string::npos)
        << llm.status().to_string();
    EXPECT_NE(llm.status().message().find("edited.kvrt"), std::string::npos);
  }
}

}  // namespace
}  // namespace kvrt

namespace kvrt {
namespace {

// request_stop() from another thread while generate() runs (kvrt.h): the generation
// ends early, and ThreadSanitizer (the CI's TSan stage) sees no race.
// The callback runs only for tokens that produce text, so the model has a tokenizer; the
// stopper also gives up once generation is over, so a callback that never runs fails the
// test instead of hanging it.
TEST_F(LlmTest, RequestStopFromAnotherThreadEndsGeneration) {
  const fs::path dir = fs::path(source_dir()) / "models/fortune-llama";
  if (!fs::exists(dir)) GTEST_SKIP() << "no bundled model";
  auto llm = Llm::load(dir.string(), cpu_options());
  ASSERT_TRUE(llm.ok()) << llm.status().to_string();
  std::atomic<int> tokens{0};
  std::atomic<bool> finished{false};
  std::thread stopper([&] {
    while (tokens.load() == 0 && !finished.load()) std::this_thread::yield();
    (*llm)->request_stop();
  });
  const std::vector<int32_t> prompt = {5, 6, 7};
  auto result = (*llm)->generate_ids(prompt, greedy(200), [&](std::string_view, int32_t) {
    tokens.fetch_add(1);
    return true;
  });
  finished = true;
  stopper.join();
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_GT(tokens.load(), 0) << "no text came out: the stop was never requested mid-way";
  EXPECT_LT(result->ids.size(), 200u);
}

}  // namespace
}  // namespace kvrt

namespace kvrt {
namespace {

// A program file carries its model's generation_config.json: copied away from the
// checkpoint it still samples as the model asks, and default_options() applies it.
TEST_F(LlmTest, ProgramFileCarriesItsGenerationDefaults) {
  const fs::path ckpt = cache_dir_ / "ckpt";
  fs::create_directories(cache_dir_);
  fs::copy(fs::path(source_dir()) / "models/fortune-llama", ckpt);
  std::ofstream(ckpt / "generation_config.json")
      << R"({"do_sample": true, "temperature": 0.5, "top_k": 7, "max_new_tokens": 9,
            "eos_token_id": 2})";
  const std::string program = (cache_dir_ / "m.kvrt").string();
  exporter::ExportOptions export_options;
  export_options.checkpoint_dir = ckpt.string();
  export_options.output_path = program;
  export_options.max_seq = 32;
  ASSERT_TRUE(exporter::export_checkpoint(export_options).ok());
  fs::remove_all(ckpt);
  auto llm = Llm::load(program, cpu_options());
  ASSERT_TRUE(llm.ok()) << llm.status().to_string();
  const GenerateOptions options = (*llm)->default_options({}, 11);
  EXPECT_EQ(options.sampling.temperature, 0.5f);
  EXPECT_EQ(options.sampling.top_k, 7);
  EXPECT_EQ(options.sampling.seed, 11u);
  EXPECT_EQ(options.max_new_tokens, 9);
  SamplingOverrides greedy;
  greedy.temperature = 0.0f;
  EXPECT_EQ((*llm)->default_options(greedy).sampling.temperature, 0.0f);
}

// The bundled model has no do_sample: greedy by default, as HF's generate() would be.
TEST_F(LlmTest, DefaultOptionsFollowTheModel) {
  auto llm = Llm::load((fs::path(source_dir()) / "models/fortune-llama").string(), cpu_options());
  ASSERT_TRUE(llm.ok()) << llm.status().to_string();
  EXPECT_EQ((*llm)->default_options().sampling.temperature, 0.0f);
}

// Text needs a tokenizer: required, its absence is NotFound before any export.
TEST_F(LlmTest, RequiredTokenizerIsCheckedBeforeTheExport) {
  LoadOptions options = cpu_options();
  options.require_tokenizer = true;
  auto llm = Llm::load((fs::path(source_dir()) / "tests/fixtures/llama_gqa").string(), options);
  ASSERT_FALSE(llm.ok());
  EXPECT_EQ(llm.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(llm.status().message().find("no tokenizer.json"), std::string::npos);
  std::error_code error;
  EXPECT_FALSE(fs::exists(cache_dir_, error) && !fs::is_empty(cache_dir_, error));
}

}  // namespace
}  // namespace kvrt
