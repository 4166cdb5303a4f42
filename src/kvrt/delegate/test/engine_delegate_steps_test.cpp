// Runs of greedy decode steps through the engine delegate (ExecuteOptions::steps) on the
// CPU engine: a run of k steps must equal k one-step calls, each fed the token the one
// before chose (ids and caches), and a run that cannot be honoured changes nothing.
#include <gtest/gtest.h>

#include <algorithm>

#include "kvrt/delegate/engine_delegate.h"
#include "kvrt/delegate/test/delegate_test_util.h"
#include "kvrt/engine/cpu/test/tiny_llama.h"

namespace kvrt::delegate {
namespace {

int32_t argmax(const std::vector<float>& logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

class EngineDelegateSteps : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::vector<std::byte>> bytes = testing::write(parts);
    ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
    blob = std::move(bytes).value();
    for (auto* h : {&handle, &single}) {
      Result<std::unique_ptr<DelegateHandle>> made =
          make_engine_backend()->init(blob, model.weights, {});
      ASSERT_TRUE(made.ok()) << made.status().to_string();
      *h = std::move(made).value();
    }
    store = std::make_unique<testing::ArgStore>(handle->signature());
    single_store = std::make_unique<testing::ArgStore>(single->signature());
  }

  size_t arg(std::string_view name) const {
    const format::BlobMetadata& sig = handle->signature();
    for (size_t i = 0; i < sig.inputs.size(); ++i) {
      if (sig.inputs[i].name == name) return i;
    }
    for (size_t o = 0; o < sig.outputs.size(); ++o) {
      if (sig.outputs[o].name == name) return sig.inputs.size() + o;
    }
    ADD_FAILURE() << "no binding " << name;
    return 0;
  }

  // The arguments of a run from `token` at `position`, its ids in `ids` ([steps, 1]).
  std::vector<TensorView> run_args(int32_t token, int32_t position, std::vector<int32_t>& ids) {
    store->set_tokens({token}, position);
    std::vector<TensorView> args = store->views();
    args[arg("next_token")] =
        TensorView(ids.data(), DType::kI32, {static_cast<int64_t>(ids.size()), 1});
    return args;
  }

  // One-step calls on the other handle, each fed the last one's token.
  std::vector<int32_t> single_steps(int32_t token, int32_t position, int steps) {
    std::vector<int32_t> ids;
    for (int i = 0; i < steps; ++i) {
      single_store->set_tokens({token}, position + i);
      std::vector<TensorView> args = single_store->views();
      const Status status = single->execute(args);
      EXPECT_TRUE(status.ok()) << status.to_string();
      std::memcpy(&token, single_store->buffer("next_token").data(), sizeof(token));
      ids.push_back(token);
    }
    return ids;
  }

  kvrt::testing::TinyModel model = kvrt::testing::make_tiny_model({.next_token = true});
  testing::BlobParts parts = testing::blob_parts(model.method_graph(1, 1));
  std::vector<std::byte> blob;
  std::unique_ptr<DelegateHandle> handle, single;
  std::unique_ptr<testing::ArgStore> store, single_store;
};

TEST_F(EngineDelegateSteps, TheStepOutputIsTheGreedyToken) {
  EXPECT_GT(handle->max_steps(), 1);
  EXPECT_EQ(handle->step_arg(), static_cast<int>(arg("next_token")));
}

TEST_F(EngineDelegateSteps, ARunEqualsOneStepCallsIdsAndCaches) {
  std::vector<int32_t> ids(5, -1);
  std::vector<TensorView> args = run_args(3, 0, ids);
  ExecuteOptions options;
  options.steps = 5;
  const Status status = handle->execute(args, options);
  ASSERT_TRUE(status.ok()) << status.to_string();
  EXPECT_EQ(args[arg("next_token")].shape(), (Shape{5, 1}));
  EXPECT_EQ(ids, single_steps(3, 0, 5));
  for (const std::string& buffer : model.buffer_names()) {
    EXPECT_TRUE(store->buffer(buffer) == single_store->buffer(buffer)) << buffer;
  }
  // Against the independent reference: each id is the argmax after the tokens before it.
  std::vector<int32_t> history = {3};
  for (int32_t id : ids) {
    EXPECT_EQ(id, argmax(model.reference_logits(history)));
    history.push_back(id);
  }
}

TEST_F(EngineDelegateSteps, ARunThatCannotBeHonouredChangesNothing) {
  ExecuteOptions options;
  options.steps = 4;
  store->set_tokens({3}, 0);
  const auto before = store->buffers();
  auto expect_refused = [&](std::vector<TensorView> args, ErrorCode code, std::string_view needle) {
    const Status status = handle->execute(args, options);
    EXPECT_EQ(status.code(), code) << status.to_string();
    EXPECT_NE(status.message().find(needle), std::string::npos) << status.to_string();
    EXPECT_TRUE(store->buffers() == before) << "a refused run wrote caller storage";
  };
  std::vector<int32_t> three(3, -1), four(4, -1), many(64, -1);
  // Storage for fewer ids than steps.
  expect_refused(run_args(3, 0, three), ErrorCode::kInvalidArgument, "next_token");
  EXPECT_EQ(three, std::vector<int32_t>(3, -1));
  // The last step's position past the cache (max_seq 16): positions 13..16.
  store->set_tokens({3}, 13);
  const auto at_13 = store->buffers();
  std::vector<TensorView> args = run_args(3, 13, four);
  const Status past = handle->execute(args, options);
  EXPECT_FALSE(past.ok());
  EXPECT_TRUE(store->buffers() == at_13) << "a run past the cache wrote the cache";
  EXPECT_EQ(four, std::vector<int32_t>(4, -1));
  // More steps than the engine runs.
  options.steps = handle->max_steps() + 1;
  many.resize(static_cast<size_t>(options.steps), -1);
  args = run_args(3, 0, many);
  EXPECT_EQ(handle->execute(args, options).code(), ErrorCode::kInvalidArgument);
  // The handle still works: positions 12..15 fit.
  options.steps = 4;
  args = run_args(3, 12, four);
  const Status fits = handle->execute(args, options);
  EXPECT_TRUE(fits.ok()) << fits.to_string();
}

}  // namespace
}  // namespace kvrt::delegate
