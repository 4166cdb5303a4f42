#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kvrt/frontend/weight_index.h"
#include "test_util.h"

namespace kvrt::frontend {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::TempDir;
using testing::write_file;

const std::vector<ExpectedTensor> kSpecs = {
    {"a.weight", {4, 2}}, {"b.weight", {3}}, {"c.weight", {2, 2}}, {"d.bias", {5}}};

void expect_error(const Result<WeightIndex>& index, ErrorCode code,
                  std::initializer_list<std::string> parts) {
  ASSERT_FALSE(index.ok());
  EXPECT_EQ(index.status().code(), code) << index.status().to_string();
  for (const std::string& part : parts) EXPECT_THAT(index.status().message(), HasSubstr(part));
}

TEST(WeightIndex, OpenDirReadsASingleFile) {
  TempDir dir;
  ASSERT_TRUE(testing::write_random_weights(dir.path(), kSpecs, DType::kF32).ok());
  auto index = WeightIndex::open_dir(dir.path());
  ASSERT_TRUE(index.ok()) << index.status().to_string();
  EXPECT_EQ(index->size(), 4u);
  EXPECT_EQ(index->files().size(), 1u);
  const WeightEntry* entry = index->find("c.weight");
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->record.shape, (std::vector<int64_t>{2, 2}));
  auto view = index->view("c.weight");
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->shape(), (Shape{2, 2}));
  auto bytes = index->bytes("d.bias");
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->size(), 20u);
}

TEST(WeightIndex, OpenDirJoinsShardsThroughTheIndex) {
  TempDir dir;
  ASSERT_TRUE(testing::write_random_weights(dir.path(), kSpecs, DType::kBF16, 2).ok());
  auto index = WeightIndex::open_dir(dir.path());
  ASSERT_TRUE(index.ok()) << index.status().to_string();
  EXPECT_EQ(index->size(), 4u);
  ASSERT_EQ(index->files().size(), 2u);
  EXPECT_THAT(index->find("a.weight")->file, HasSubstr("model-00001-of-00002.safetensors"));
  EXPECT_THAT(index->find("b.weight")->file, HasSubstr("model-00002-of-00002.safetensors"));
  EXPECT_EQ(index->find("b.weight")->record.dtype, DType::kBF16);
  // Entries are sorted by name across shards.
  std::vector<std::string> names;
  for (const WeightEntry& entry : index->entries()) names.push_back(entry.record.name);
  EXPECT_EQ(names, (std::vector<std::string>{"a.weight", "b.weight", "c.weight", "d.bias"}));
  auto view = index->view("d.bias");
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->dtype(), DType::kBF16);
}

TEST(WeightIndex, EmptyDirIsNotFound) {
  TempDir dir;
  expect_error(WeightIndex::open_dir(dir.path()), ErrorCode::kNotFound,
               {"model.safetensors", "model.safetensors.index.json"});
}

// A two-shard checkpoint whose index is then replaced by `index_json`.
std::string sharded_with_index(const TempDir& dir, const std::string& index_json) {
  EXPECT_TRUE(testing::write_random_weights(dir.path(), kSpecs, DType::kF32, 2).ok());
  const std::string path = dir.file("model.safetensors.index.json");
  write_file(path, index_json);
  return path;
}

nlohmann::json good_map() {
  return {{"a.weight", "model-00001-of-00002.safetensors"},
          {"c.weight", "model-00001-of-00002.safetensors"},
          {"b.weight", "model-00002-of-00002.safetensors"},
          {"d.bias", "model-00002-of-00002.safetensors"}};
}

TEST(WeightIndex, ShardIndexWithBadJsonIsRejected) {
  TempDir dir;
  const std::string path = sharded_with_index(dir, "{\"weight_map\": ");
  expect_error(WeightIndex::open_sharded(path), ErrorCode::kInvalidArgument,
               {path, "not valid JSON"});
}

TEST(WeightIndex, ShardIndexWithoutWeightMapIsRejected) {
  TempDir dir;
  const std::string path = sharded_with_index(dir, R"({"metadata": {}})");
  expect_error(WeightIndex::open_sharded(path), ErrorCode::kInvalidArgument,
               {path, "field 'weight_map': missing"});
}

TEST(WeightIndex, NonStringShardNameIsRejected) {
  TempDir dir;
  nlohmann::json map = good_map();
  map["a.weight"] = 1;
  const std::string path = sharded_with_index(dir, nlohmann::json{{"weight_map", map}}.dump());
  expect_error(WeightIndex::open_sharded(path), ErrorCode::kInvalidArgument,
               {"field 'weight_map.a.weight'", "expected a shard file name"});
}

TEST(WeightIndex, ShardPathOutsideTheFolderIsRejected) {
  TempDir dir;
  nlohmann::json map = good_map();
  map["a.weight"] = "../model-00001-of-00002.safetensors";
  const std::string path = sharded_with_index(dir, nlohmann::json{{"weight_map", map}}.dump());
  expect_error(WeightIndex::open_sharded(path), ErrorCode::kInvalidArgument,
               {"field 'weight_map.a.weight'", "must be a file name in the index's folder"});
}

TEST(WeightIndex, MissingShardFileIsNotFoundNamingTheShard) {
  TempDir dir;
  nlohmann::json map = good_map();
  map["e.weight"] = "model-00003-of-00003.safetensors";
  const std::string path = sharded_with_index(dir, nlohmann::json{{"weight_map", map}}.dump());
  expect_error(WeightIndex::open_sharded(path), ErrorCode::kNotFound,
               {"shard 'model-00003-of-00003.safetensors'"});
}

TEST(WeightIndex, MappedTensorAbsentFromItsShardIsRejected) {
  TempDir dir;
  nlohmann::json map = good_map();
  map["ghost.weight"] = "model-00001-of-00002.safetensors";
  const std::string path = sharded_with_index(dir, nlohmann::json{{"weight_map", map}}.dump());
  expect_error(WeightIndex::open_sharded(path), ErrorCode::kNotFound,
               {"tensor 'ghost.weight'", "does not hold it"});
}

TEST(WeightIndex, ShardTensorMissingFromWeightMapIsRejected) {
  TempDir dir;
  nlohmann::json map = good_map();
  map.erase("c.weight");
  const std::string path = sharded_with_index(dir, nlohmann::json{{"weight_map", map}}.dump());
  expect_error(WeightIndex::open_sharded(path), ErrorCode::kInvalidArgument,
               {"holds tensor 'c.weight', which weight_map does not list"});
}

TEST(WeightIndex, ShardTensorMappedToAnotherShardIsRejected) {
  TempDir dir;
  nlohmann::json map = good_map();
  map["c.weight"] = "model-00002-of-00002.safetensors";
  const std::string path = sharded_with_index(dir, nlohmann::json{{"weight_map", map}}.dump());
  expect_error(WeightIndex::open_sharded(path), ErrorCode::kInvalidArgument,
               {"holds tensor 'c.weight', which weight_map puts in 'model-00002-of-00002"});
}

TEST(WeightIndex, CorruptShardIsRejectedNamingIndexAndShard) {
  TempDir dir;
  const std::string path =
      sharded_with_index(dir, nlohmann::json{{"weight_map", good_map()}}.dump());
  write_file(dir.file("model-00002-of-00002.safetensors"), "short");
  expect_error(WeightIndex::open_sharded(path), ErrorCode::kInvalidArgument,
               {path, "shard 'model-00002-of-00002.safetensors'", "shorter than"});
}

TEST(WeightIndex, ShapeOnlyIndexHasShapesButNoData) {
  auto index = WeightIndex::shape_only({{"w", DType::kBF16, {4096, 4096}, 0, 0}});
  ASSERT_TRUE(index.ok());
  EXPECT_FALSE(index->has_data());
  EXPECT_EQ(index->find("w")->record.shape[0], 4096);
  auto view = index->view("w");
  ASSERT_FALSE(view.ok());
  EXPECT_EQ(view.status().code(), ErrorCode::kInvalidState);
  EXPECT_EQ(index->view("x").status().code(), ErrorCode::kNotFound);
  auto twice =
      WeightIndex::shape_only({{"w", DType::kF32, {1}, 0, 0}, {"w", DType::kF32, {1}, 0, 0}});
  expect_error(twice, ErrorCode::kInvalidArgument, {"tensor 'w' is listed twice"});
}

}  // namespace
}  // namespace kvrt::frontend
