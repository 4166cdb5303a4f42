#include "kvrt/generation/sampling_stop.h"

#include <gtest/gtest.h>

namespace kvrt {
namespace {

StopChecker make(StopParams params, size_t prompt_tokens = 1) {
  auto checker = StopChecker::create(std::move(params), prompt_tokens);
  EXPECT_TRUE(checker.ok()) << checker.status().to_string();
  return std::move(checker).value();
}

TEST(StopChecker, EosStopsWithoutShowingItsText) {
  StopChecker stop = make({.eos_ids = {2, 7}, .max_context = 100});
  std::string emit;
  EXPECT_EQ(stop.push(5, "Hi", emit), StopReason::kNone);
  EXPECT_EQ(emit, "Hi");
  EXPECT_EQ(stop.push(7, "</s>", emit), StopReason::kEos);
  EXPECT_EQ(emit, "");
}

TEST(StopChecker, StopStringAcrossTokensIsFoundAndCut) {
  StopChecker stop = make({.stop_strings = {"STOP"}, .max_context = 100});
  std::string emit;
  EXPECT_EQ(stop.push(1, "Hel", emit), StopReason::kNone);
  EXPECT_EQ(emit, "Hel");
  EXPECT_EQ(stop.push(2, "lo ST", emit), StopReason::kNone);
  EXPECT_EQ(emit, "lo ");  // "ST" may start the stop string: held
  EXPECT_EQ(stop.push(3, "OP now", emit), StopReason::kStopString);
  EXPECT_EQ(emit, "");
}

TEST(StopChecker, HeldTextIsReleasedWhenItIsNotAStopString) {
  StopChecker stop = make({.stop_strings = {"\n\nUser:"}, .max_context = 100});
  std::string emit;
  EXPECT_EQ(stop.push(1, "a\n", emit), StopReason::kNone);
  EXPECT_EQ(emit, "a");
  EXPECT_EQ(stop.push(2, "\nx", emit), StopReason::kNone);
  EXPECT_EQ(emit, "\n\nx");
}

TEST(StopChecker, EarliestStopStringWins) {
  StopChecker stop = make({.stop_strings = {"world", "lo"}, .max_context = 100});
  std::string emit;
  EXPECT_EQ(stop.push(1, "hello world", emit), StopReason::kStopString);
  EXPECT_EQ(emit, "hel");
}

TEST(StopChecker, EosReleasesHeldText) {
  StopChecker stop = make({.eos_ids = {0}, .stop_strings = {"STOP"}, .max_context = 100});
  std::string emit;
  EXPECT_EQ(stop.push(1, "ok ST", emit), StopReason::kNone);
  EXPECT_EQ(emit, "ok ");
  EXPECT_EQ(stop.push(0, "", emit), StopReason::kEos);
  EXPECT_EQ(emit, "ST");
}

TEST(StopChecker, MaxNewTokensStopsAfterShowingTheLastToken) {
  StopChecker stop = make({.max_new_tokens = 2, .max_context = 100});
  std::string emit;
  EXPECT_EQ(stop.push(1, "a", emit), StopReason::kNone);
  EXPECT_EQ(stop.push(1, "b", emit), StopReason::kMaxNewTokens);
  EXPECT_EQ(emit, "b");
  EXPECT_EQ(stop.generated(), 2u);
}

TEST(StopChecker, ContextLimitCountsThePrompt) {
  StopChecker stop = make({.max_context = 10}, /*prompt_tokens=*/8);
  std::string emit;
  EXPECT_EQ(stop.push(1, "a", emit), StopReason::kNone);
  EXPECT_EQ(stop.push(1, "b", emit), StopReason::kMaxContext);
}

TEST(StopChecker, PromptLongerThanContextIsAnError) {
  auto checker = StopChecker::create({.max_context = 4}, 5);
  ASSERT_FALSE(checker.ok());
  EXPECT_EQ(checker.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(checker.status().message().find("5 tokens"), std::string::npos);
  EXPECT_TRUE(StopChecker::create({.max_context = 4}, 4).ok());
}

TEST(StopChecker, BadParametersAreRefused) {
  EXPECT_FALSE(StopChecker::create({.max_context = 0}, 0).ok());
  EXPECT_FALSE(StopChecker::create({.max_new_tokens = 0, .max_context = 8}, 0).ok());
  EXPECT_FALSE(StopChecker::create({.stop_strings = {""}, .max_context = 8}, 0).ok());
}

TEST(StopChecker, FlushReturnsHeldText) {
  StopChecker stop = make({.stop_strings = {"END"}, .max_context = 100});
  std::string emit;
  EXPECT_EQ(stop.push(1, "the EN", emit), StopReason::kNone);
  EXPECT_EQ(emit, "the ");
  EXPECT_EQ(stop.flush(), "EN");
}

TEST(StopChecker, ReasonsHaveNames) {
  EXPECT_EQ(stop_reason_name(StopReason::kStopString), "stop_string");
  EXPECT_EQ(stop_reason_name(StopReason::kMaxContext), "max_context");
}

}  // namespace
}  // namespace kvrt
