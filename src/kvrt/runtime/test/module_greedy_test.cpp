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
  // Runs of up to 8 steps, as on a device (the CPU's default is one step per call).
  std::unique_ptr<Module> load(const kvrt::testing::TinyModel& tiny, const std::string& name,
                               int max_greedy_steps = 8) {
    Result<std::string> path = write_tiny_program(tiny, name);
    EXPECT_TRUE(path.ok()) << path.status().to_string();
    if (!path.ok()) return nullptr;
    paths_.push_back(*path);
    Result<std::unique_ptr<Module>> module =
        Module::load(*path, {.max_greedy_steps = max_greedy_steps});
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

// Runs of steps: each run's tokens come back one at a time, in order, and each step
// decodes the token the one before chose.
TEST_F(ModuleGreedyTest, RunsOfStepsFollowTheReferenceArgmax) {
  std::unique_ptr<Module> module = load(model, "runs.kvrt");
  ASSERT_TRUE(module);
  ASSERT_EQ(module->max_greedy_steps(), 8);
  std::vector<int32_t> tokens = {3, 14, 15};  // + 3 + 1 + 8 steps: 15 of the 16 rows
  ASSERT_TRUE(module->submit_greedy("prefill", tokens, 0).ok());
  int32_t position = static_cast<int32_t>(tokens.size());
  for (int steps : {3, 1, module->max_greedy_steps()}) {
    const size_t before = module->queued_tokens();
    ASSERT_TRUE(module->submit_greedy_continuation(position, steps).ok()) << steps;
    EXPECT_EQ(module->queued_tokens(), before + static_cast<size_t>(steps));
    position += steps;
  }
  const size_t queued = module->queued_tokens();
  for (size_t i = 0; i < queued; ++i) {
    Result<int32_t> token = module->wait_token();
    ASSERT_TRUE(token.ok()) << token.status().to_string();
    EXPECT_EQ(*token, argmax(model.reference_logits(tokens))) << "token " << i;
    tokens.push_back(*token);
  }
  EXPECT_EQ(module->queued_tokens(), 0u);
  EXPECT_EQ(module->last_stats().total_buffer_bytes(), 0);  // F2 on runs too
}

TEST_F(ModuleGreedyTest, TheCpuDefaultIsOneStepPerCall) {
  std::unique_ptr<Module> module = load(model, "cpu_default.kvrt", 0);
  ASSERT_TRUE(module);
  EXPECT_EQ(module->max_greedy_steps(), 1);
  EXPECT_GT(module->method("decode")->max_steps(), 1);  // the engine could; the module won't
}

TEST_F(ModuleGreedyTest, ARunIsCheckedWholeBeforeAnythingIsQueued) {
  std::unique_ptr<Module> module = load(model, "run_misuse.kvrt");
  ASSERT_TRUE(module);
  const std::vector<int32_t> one = {3};
  ASSERT_TRUE(module->submit_greedy("decode", one, 0).ok());
  // max_seq 16: positions 10..17 do not fit, 0 and too many steps are refused.
  const Status past = module->submit_greedy_continuation(10, 8);
  EXPECT_EQ(past.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(past.message().find("position 17"), std::string::npos) << past.to_string();
  EXPECT_EQ(module->submit_greedy_continuation(1, 0).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(module->submit_greedy_continuation(1, module->max_greedy_steps() + 1).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(module->queued_tokens(), 1u);
  // A run that ends on the last row fits.
  ASSERT_TRUE(module->submit_greedy_continuation(8, 8).ok());
  EXPECT_EQ(module->queued_tokens(), 9u);
}

// A run whose caller storage holds fewer tokens than steps is refused, naming the
// output; with room for them, each id follows the reference.
TEST_F(ModuleGreedyTest, MethodRunsAreChecked) {
  std::unique_ptr<Module> module = load(model, "method_runs.kvrt");
  ASSERT_TRUE(module);
  Method* decode = module->method("decode");
  ASSERT_NE(decode, nullptr);
  ASSERT_GT(decode->max_steps(), 1);
  int32_t token = 5, position = 0;
  const TensorView inputs[] = {TensorView(&token, DType::kI32, {1, 1}),
                               TensorView(&position, DType::kI32, {1})};
  int32_t ids[4] = {-1, -1, -1, -1};
  TensorView outputs[2] = {TensorView(), TensorView(ids, DType::kI32, {2, 1})};
  RunOptions options;
  options.outputs = outputs;
  options.steps = 4;
  Result<std::span<const TensorView>> refused = decode->execute(inputs, options);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("output 'next_token'"), std::string::npos)
      << refused.status().to_string();
  EXPECT_EQ(ids[0], -1);
  outputs[1] = TensorView(ids, DType::kI32, {4, 1});
  Result<std::span<const TensorView>> ran = decode->execute(inputs, options);
  ASSERT_TRUE(ran.ok()) << ran.status().to_string();
  EXPECT_EQ((*ran)[1].shape(), (Shape{4, 1}));
  std::vector<int32_t> history = {5};
  for (int32_t id : ids) {
    EXPECT_EQ(id, argmax(model.reference_logits(history)));
    history.push_back(id);
  }
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
  EXPECT_EQ(module->max_greedy_steps(), 1);
  // Without a greedy output there is nothing to feed a run: one step per call.
  Method* decode = module->method("decode");
  ASSERT_NE(decode, nullptr);
  EXPECT_EQ(decode->max_steps(), 1);
  int32_t token = 3, position = 0;
  const TensorView inputs[] = {TensorView(&token, DType::kI32, {1, 1}),
                               TensorView(&position, DType::kI32, {1})};
  RunOptions options;
  options.steps = 2;
  EXPECT_EQ(decode->execute(inputs, options).status().code(), ErrorCode::kNotSupported);
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
