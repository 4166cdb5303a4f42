// The greedy pipeline on the CPU engine: tokens chosen by the program's argmax, queued
// steps fed by the previous step's token, against the independent reference's argmax.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "kvrt/runtime/module.h"
#include "kvrt/runtime/test/runtime_test_util.h"

namespace kvrt::runtime {
namespace {

using testing::write_tiny_program;

int32_t argmax(const std::vector<float>& logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

class ModuleGreedyTest : public ::testing::Test {
 protected:
  std::unique_ptr<Module> load(const kvrt::testing::TinyModel& tiny, const std::string& name) {
    Result<std::string> path = write_tiny_program(tiny, name);
    EXPECT_TRUE(path.ok()) << path.status().to_string();
    if (!path.ok()) return nullptr;
    paths_.push_back(*path);
    Result<std::unique_ptr<Module>> module = Module::load(*path);
    EXPECT_TRUE(module.ok()) << module.status().to_string();
    return module.ok() ? std::move(module).value() : nullptr;
  }
  void TearDown() override {
    for (const std::string& path : paths_) std::remove(path.c_str());
  }

  kvrt::testing::TinyModel model =
      kvrt::testing::make_tiny_model({.layers = 2, .max_seq = 16, .next_token = true});
  std::vector<std::string> paths_;
};

TEST_F(ModuleGreedyTest, QueuedStepsFollowTheReferenceArgmax) {
  std::unique_ptr<Module> module = load(model, "greedy.kvrt");
  ASSERT_TRUE(module);
  ASSERT_TRUE(module->has_device_greedy());
  std::vector<int32_t> tokens = {3, 14, 15, 9, 26};
  ASSERT_TRUE(module->submit_greedy("prefill", tokens, 0).ok());
  int32_t position = static_cast<int32_t>(tokens.size());
  for (int step = 0; step < 6; ++step) {
    // The step after this token is queued before its token is read.
    ASSERT_TRUE(module->submit_greedy_continuation(position).ok());
    EXPECT_EQ(module->queued_tokens(), 2u);
    Result<int32_t> token = module->wait_token();
    ASSERT_TRUE(token.ok()) << token.status().to_string();
    EXPECT_EQ(*token, argmax(model.reference_logits(tokens))) << "step " << step;
    tokens.push_back(*token);
    ++position;
  }
  Result<int32_t> last = module->wait_token();
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(*last, argmax(model.reference_logits(tokens)));
  EXPECT_EQ(module->last_stats().total_buffer_bytes(), 0);  // F2 on the queued path too
}

TEST_F(ModuleGreedyTest, MisuseIsRefusedAndNothingIsQueued) {
  std::unique_ptr<Module> module = load(model, "misuse.kvrt");
  ASSERT_TRUE(module);
  EXPECT_EQ(module->wait_token().status().code(), ErrorCode::kInvalidState);
  EXPECT_EQ(module->submit_greedy_continuation(0).code(), ErrorCode::kInvalidState);
  const std::vector<int32_t> bad = {3, 999};
  const Status refused = module->submit_greedy("prefill", bad, 0);
  EXPECT_EQ(refused.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("token id 999"), std::string::npos) << refused.to_string();
  EXPECT_EQ(module->queued_tokens(), 0u);
  const std::vector<int32_t> one = {3};
  ASSERT_TRUE(module->submit_greedy("decode", one, 0).ok());
  EXPECT_EQ(module->submit_greedy_continuation(16).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(module->queued_tokens(), 1u);
  for (int32_t p = 1; module->queued_tokens() < 8; ++p) {
    ASSERT_TRUE(module->submit_greedy_continuation(p).ok());
  }
  EXPECT_EQ(module->submit_greedy_continuation(9).code(), ErrorCode::kInvalidState);
  ASSERT_TRUE(module->wait_token().ok());
  // A reset drops what is queued.
  ASSERT_TRUE(module->reset().ok());
  EXPECT_EQ(module->queued_tokens(), 0u);
  EXPECT_EQ(module->submit_greedy_continuation(0).code(), ErrorCode::kInvalidState);
}

TEST_F(ModuleGreedyTest, AProgramWithoutNextTokenHasNoDeviceGreedy) {
  kvrt::testing::TinyModel plain = kvrt::testing::make_tiny_model({.layers = 1, .max_seq = 16});
  std::unique_ptr<Module> module = load(plain, "plain.kvrt");
  ASSERT_TRUE(module);
  EXPECT_FALSE(module->has_device_greedy());
  const std::vector<int32_t> one = {3};
  EXPECT_EQ(module->submit_greedy("decode", one, 0).code(), ErrorCode::kInvalidState);
  EXPECT_TRUE(module->decode(3, 0).ok());  // the logits path still works
}

TEST_F(ModuleGreedyTest, CallerOutputStorageIsCheckedAndWritten) {
  std::unique_ptr<Module> module = load(model, "storage.kvrt");
  ASSERT_TRUE(module);
  Method* decode = module->method("decode");
  ASSERT_NE(decode, nullptr);
  int32_t token = 5, position = 0;
  const TensorView inputs[] = {TensorView(&token, DType::kI32, {1, 1}),
                               TensorView(&position, DType::kI32, {1})};
  float wrong = 0;
  TensorView outputs[2] = {TensorView(), TensorView(&wrong, DType::kF32, {1, 1})};
  RunOptions options;
  options.outputs = outputs;
  Result<std::span<const TensorView>> refused = decode->execute(inputs, options);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("output 'next_token'"), std::string::npos)
      << refused.status().to_string();
  int32_t chosen = -1;
  outputs[1] = TensorView(&chosen, DType::kI32, {1, 1});
  Result<std::span<const TensorView>> ran = decode->execute(inputs, options);
  ASSERT_TRUE(ran.ok()) << ran.status().to_string();
  EXPECT_EQ((*ran)[1].data(), &chosen);
  EXPECT_EQ(chosen, argmax(model.reference_logits({5})));
}

}  // namespace
}  // namespace kvrt::runtime
