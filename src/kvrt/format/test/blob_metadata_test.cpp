// The blob metadata rules (A2): every rejection names the field, escapes and non-ASCII
// names round-trip, a missing alias kind means kv_cache_update, and the writer refuses
// whatever the reader would reject.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "kvrt/format/blob.h"
#include "kvrt/format/test/blob_test_util.h"

namespace kvrt::format {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
using testing::blob_with_metadata;
using testing::error_of;
using testing::sample_metadata;

// Reads a blob whose metadata is the sample's JSON after `mutate`.
std::string read_error(const std::function<void(json&)>& mutate) {
  json metadata = metadata_to_json(sample_metadata());
  mutate(metadata);
  return error_of(read_blob(blob_with_metadata(metadata.dump())));
}

std::string read_text_error(const std::string& text) {
  return error_of(read_blob(blob_with_metadata(text)));
}

std::string write_error(const std::function<void(BlobMetadata&)>& mutate) {
  BlobMetadata metadata = sample_metadata();
  mutate(metadata);
  return error_of(write_blob(metadata, {}));
}

json dynamic_dim(const char* symbol, int64_t min, int64_t max) {
  return {{"symbol", symbol}, {"min", min}, {"max", max}};
}

// ---- names --------------------------------------------------------------------------

TEST(BlobNames, EscapedAndNonAsciiNamesRoundTrip_A2) {
  BlobMetadata metadata = sample_metadata();
  metadata.inputs[2].name = "k\"cache\\0";  // a quote, a backslash and a zero digit
  metadata.outputs[1].name = "ключ_0";
  metadata.inputs[3].name = "缓存";
  metadata.outputs[2].name = "🔑 cache/0";
  metadata.aliases = {{"ключ_0", "k\"cache\\0"}, {"🔑 cache/0", "缓存"}};
  auto bytes = write_blob(metadata, {});
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto blob = read_blob(*bytes);
  ASSERT_TRUE(blob.ok()) << blob.status().to_string();
  EXPECT_EQ(blob->metadata, metadata);
  EXPECT_EQ(blob->metadata.inputs[2].name.size(), 9u);
  EXPECT_EQ(find_output(blob->metadata, "ключ_0"), 1);
}

TEST(BlobNames, JsonEscapesDecodeToTheSameName_A2) {
  const std::string text = read_text_error(R"({"inputs": [], "outputs": [
      {"name": "\u043a\u043b\u044e\u0447_0", "dtype": "f32", "shape": []},
      {"name": "k\"cache\\0", "dtype": "f32", "shape": []}]})");
  EXPECT_EQ(text, "ok");
  auto blob_bytes = blob_with_metadata(
      R"({"inputs": [], "outputs": [{"name": "\u043a\u043b\u044e\u0447_0", "dtype": "f32",
          "shape": []}]})");
  auto blob = read_blob(blob_bytes);
  ASSERT_TRUE(blob.ok()) << blob.status().to_string();
  EXPECT_EQ(blob->metadata.outputs[0].name, "ключ_0");
}

TEST(BlobNames, EmptyNameIsRefused_A2) {
  EXPECT_THAT(read_error([](json& m) { m["outputs"][2]["name"] = ""; }),
              HasSubstr("InvalidProgram: metadata.outputs[2].name: empty binding name"));
}

TEST(BlobNames, DuplicateOutputNameIsRefused_A2) {
  EXPECT_THAT(read_error([](json& m) { m["outputs"][2]["name"] = "logits"; }),
              HasSubstr("metadata.outputs[2].name: duplicate binding name 'logits' (also "
                        "metadata.outputs[0])"));
}

TEST(BlobNames, DuplicateInputNameIsRefused_A2) {
  EXPECT_THAT(read_error([](json& m) { m["inputs"][1]["name"] = "tokens"; }),
              HasSubstr("metadata.inputs[1].name: duplicate binding name 'tokens' (also "
                        "metadata.inputs[0])"));
}

TEST(BlobNames, OutputMayNotShareAnInputsName_A2) {
  EXPECT_THAT(read_error([](json& m) { m["outputs"][0]["name"] = "position"; }),
              HasSubstr("metadata.outputs[0].name: duplicate binding name 'position' (also "
                        "metadata.inputs[1])"));
}

TEST(BlobNames, NameWithNulOrControlCharacterIsRefused_A2) {
  EXPECT_THAT(read_error([](json& m) { m["inputs"][0]["name"] = std::string("tok\0ens", 7); }),
              HasSubstr("metadata.inputs[0].name: binding name 'tok\\x00ens' contains a "
                        "control character"));
  EXPECT_THAT(read_error([](json& m) { m["outputs"][0]["name"] = "log\nits"; }),
              HasSubstr("metadata.outputs[0].name: binding name 'log\\x0aits'"));
}

TEST(BlobNames, NameThatIsNotAStringIsRefused_A2) {
  EXPECT_THAT(read_error([](json& m) { m["inputs"][3]["name"] = 7; }),
              HasSubstr("metadata.inputs[3].name: must be a string, got integer"));
  EXPECT_THAT(read_error([](json& m) { m["inputs"][3].erase("name"); }),
              HasSubstr("metadata.inputs[3].name: missing"));
}

// ---- JSON structure -------------------------------------------------------------------

TEST(BlobJson, InvalidJsonIsRefused_A2) {
  EXPECT_THAT(read_text_error(R"({"inputs": [)"),
              HasSubstr("InvalidProgram: metadata: invalid JSON at byte"));
  EXPECT_THAT(read_text_error("{\"inputs\": [], \"outputs\": [], \"producer\": \"\xff\"}"),
              HasSubstr("metadata: invalid JSON at byte"));
  EXPECT_THAT(read_text_error(R"({"inputs": []} trailing)"), HasSubstr("invalid JSON"));
}

TEST(BlobJson, MetadataThatIsNotAnObjectIsRefused_A2) {
  EXPECT_THAT(read_text_error("[1, 2]"), HasSubstr("metadata: must be an object, got array"));
}

TEST(BlobJson, DuplicateKeysAreRefused_A2) {
  EXPECT_THAT(read_text_error(R"({"inputs": [], "outputs": [], "inputs": []})"),
              HasSubstr("InvalidProgram: metadata: duplicate key 'inputs'"));
  // nlohmann objects cannot hold duplicates, so splice one into the text.
  json metadata = metadata_to_json(sample_metadata());
  std::string text = metadata.dump();
  const std::string kind = R"("kind":"kv_cache_update")";
  text.replace(text.rfind(kind), kind.size(), kind + R"(,"kind":"user")");
  EXPECT_THAT(read_text_error(text),
              HasSubstr("InvalidProgram: metadata.aliases[1]: duplicate key 'kind'"));
}

TEST(BlobJson, NestingBeyondTheLimitIsRefused_A4) {
  json deep = 1;
  for (int i = 0; i < kBlobMaxJsonDepth; ++i) deep = json::array({deep});
  EXPECT_THAT(read_error([&](json& m) {
                m["producer"] = {{"x", deep}};
              }),
              HasSubstr("metadata.producer.x[0][0]"));
  EXPECT_THAT(read_error([&](json& m) {
                m["producer"] = {{"x", deep}};
              }),
              HasSubstr("JSON nested deeper than 32 levels"));
  const std::string bomb = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_THAT(read_text_error(bomb), HasSubstr("nested deeper than"));
}

TEST(BlobJson, MissingBindingSectionsAreRefused_A2) {
  EXPECT_THAT(read_error([](json& m) { m.erase("inputs"); }),
              HasSubstr("metadata.inputs: missing"));
  EXPECT_THAT(read_error([](json& m) { m.erase("outputs"); }),
              HasSubstr("metadata.outputs: missing"));
}

TEST(BlobJson, BindingSectionsOfTheWrongTypeAreRefused_A2) {
  EXPECT_THAT(read_error([](json& m) { m["outputs"] = json::object(); }),
              HasSubstr("metadata.outputs: must be an array, got object"));
  EXPECT_THAT(read_error([](json& m) { m["inputs"][1] = "position"; }),
              HasSubstr("metadata.inputs[1]: must be an object, got string"));
  EXPECT_THAT(read_error([](json& m) { m["aliases"] = "all"; }),
              HasSubstr("metadata.aliases: must be an array, got string"));
}

TEST(BlobJson, NoOutputsIsRefused_A2) {
  EXPECT_THAT(read_text_error(R"({"inputs": [], "outputs": []})"),
              HasSubstr("metadata.outputs: a delegate needs at least one output"));
}

// ---- dtypes and dims ------------------------------------------------------------------

TEST(BlobDtype, UnknownOrNonCanonicalDtypeIsRefused_A2) {
  EXPECT_THAT(read_error([](json& m) { m["outputs"][0]["dtype"] = "float8"; }),
              HasSubstr("metadata.outputs[0].dtype: unknown dtype 'float8'"));
  EXPECT_THAT(read_error([](json& m) { m["outputs"][0]["dtype"] = "F32"; }),
              HasSubstr("metadata.outputs[0].dtype: unknown dtype 'F32'"));
  EXPECT_THAT(read_error([](json& m) { m["outputs"][0].erase("dtype"); }),
              HasSubstr("metadata.outputs[0].dtype: missing"));
}

TEST(BlobDims, NegativeStaticDimIsRefused_A2) {
  EXPECT_THAT(read_error([](json& m) { m["inputs"][1]["shape"][0] = -2; }),
              HasSubstr("metadata.inputs[1].shape[0]: negative dimension -2"));
}

TEST(BlobDims, DimOfTheWrongTypeIsRefused_A2) {
  EXPECT_THAT(read_error([](json& m) { m["inputs"][1]["shape"][0] = 1.5; }),
              HasSubstr("metadata.inputs[1].shape[0]: must be an integer, got number"));
  EXPECT_THAT(read_error([](json& m) { m["inputs"][1]["shape"][0] = "T"; }),
              HasSubstr("metadata.inputs[1].shape[0]: a dimension must be an integer or an "
                        "object, got string"));
  EXPECT_THAT(read_error([](json& m) { m["inputs"][1]["shape"] = 1; }),
              HasSubstr("metadata.inputs[1].shape: must be an array, got integer"));
  EXPECT_THAT(read_error([](json& m) { m["inputs"][1]["shape"][0] = UINT64_MAX; }),
              HasSubstr("metadata.inputs[1].shape[0]: 18446744073709551615 is out of range"));
}

TEST(BlobDims, DynamicDimWithMinAboveMaxIsRefused_A2) {
  EXPECT_THAT(read_error([](json& m) { m["inputs"][0]["shape"][1] = dynamic_dim("T", 9, 4); }),
              HasSubstr("metadata.inputs[0].shape[1]: min 9 is greater than max 4"));
  EXPECT_THAT(read_error([](json& m) { m["inputs"][0]["shape"][1] = dynamic_dim("T", -1, 4); }),
              HasSubstr("metadata.inputs[0].shape[1].min: negative bound -1"));
}

TEST(BlobDims, DynamicDimMustHaveSizeMinusOne_A2) {
  EXPECT_THAT(read_error([](json& m) { m["inputs"][0]["shape"][1]["size"] = 4; }),
              HasSubstr("metadata.inputs[0].shape[1]: dynamic dimension 'T' must have size -1, "
                        "got 4"));
  EXPECT_EQ(read_error([](json& m) { m["inputs"][0]["shape"][1]["size"] = -1; }), "ok");
}

TEST(BlobDims, DynamicDimNeedsSymbolAndBounds_A2) {
  EXPECT_THAT(read_error([](json& m) { m["inputs"][0]["shape"][1].erase("max"); }),
              HasSubstr("metadata.inputs[0].shape[1].max: missing"));
  EXPECT_THAT(read_error([](json& m) { m["inputs"][0]["shape"][1]["symbol"] = ""; }),
              HasSubstr("metadata.inputs[0].shape[1].symbol: empty symbol"));
  EXPECT_THAT(read_error([](json& m) { m["inputs"][0]["shape"][1]["min"] = "1"; }),
              HasSubstr("metadata.inputs[0].shape[1].min: must be an integer, got string"));
}

TEST(BlobDims, SymbolWithDifferentBoundsIsRefused_A2) {
  EXPECT_THAT(read_error([](json& m) { m["outputs"][0]["shape"][0] = dynamic_dim("T", 1, 64); }),
              HasSubstr("metadata.outputs[0].shape[0]: symbol 'T' has bounds 1..64 here but "
                        "1..128 at metadata.inputs[0].shape[1]"));
}

TEST(BlobDims, ShapeWhoseByteSizeOverflowsIsRefused_A2) {
  EXPECT_THAT(read_error([](json& m) {
                m["outputs"][0]["shape"] = {int64_t{1} << 40, int64_t{1} << 30};
              }),
              HasSubstr("metadata.outputs[0].shape: maximum byte size overflows 64 bits"));
}

// ---- aliases ---------------------------------------------------------------------------

TEST(BlobAliases, MissingKindMeansKvCacheUpdate_A2) {
  json metadata = metadata_to_json(sample_metadata());
  metadata["aliases"][0].erase("kind");
  auto blob = read_blob(blob_with_metadata(metadata.dump()));
  ASSERT_TRUE(blob.ok()) << blob.status().to_string();
  EXPECT_EQ(blob->metadata.aliases[0].kind, AliasKind::kKvCacheUpdate);
}

TEST(BlobAliases, MissingAliasesMeansNone_A2) {
  json metadata = metadata_to_json(sample_metadata());
  metadata.erase("aliases");
  auto blob = read_blob(blob_with_metadata(metadata.dump()));
  ASSERT_TRUE(blob.ok()) << blob.status().to_string();
  EXPECT_TRUE(blob->metadata.aliases.empty());
}

TEST(BlobAliases, UnknownKindIsRefused_A2) {
  EXPECT_THAT(read_error([](json& m) { m["aliases"][0]["kind"] = "kv_cache"; }),
              HasSubstr("metadata.aliases[0].kind: unknown alias kind 'kv_cache' (expected "
                        "kv_cache_update or user)"));
  EXPECT_THAT(read_error([](json& m) { m["aliases"][0]["kind"] = nullptr; }),
              HasSubstr("metadata.aliases[0].kind: must be a string, got null"));
}

TEST(BlobAliases, AliasNamingAnUnknownBindingIsRefused_A2) {
  EXPECT_THAT(read_error([](json& m) { m["aliases"][1]["output"] = "v_cache.0.new"; }),
              HasSubstr("metadata.aliases[1].output: no output binding named 'v_cache.0.new'"));
  EXPECT_THAT(read_error([](json& m) { m["aliases"][1]["input"] = "v_cache.1"; }),
              HasSubstr("metadata.aliases[1].input: no input binding named 'v_cache.1'"));
  // An input name in the output slot (or the reverse) is not a match.
  EXPECT_THAT(read_error([](json& m) { m["aliases"][1]["output"] = "v_cache.0"; }),
              HasSubstr("metadata.aliases[1].output: no output binding named 'v_cache.0'"));
  EXPECT_THAT(read_error([](json& m) { m["aliases"][1].erase("input"); }),
              HasSubstr("metadata.aliases[1].input: missing"));
}

TEST(BlobAliases, OutputAliasedTwiceIsRefused_A2) {
  EXPECT_THAT(read_error([](json& m) { m["aliases"][1]["output"] = "k_cache.0.updated"; }),
              HasSubstr("metadata.aliases[1].output: output 'k_cache.0.updated' is already "
                        "aliased by metadata.aliases[0]"));
}

TEST(BlobAliases, InputAliasedByTwoOutputsIsRefused_A2) {
  EXPECT_THAT(read_error([](json& m) { m["aliases"][1]["input"] = "k_cache.0"; }),
              HasSubstr("metadata.aliases[1].input: input 'k_cache.0' is already aliased by "
                        "another output at metadata.aliases[0]"));
}

TEST(BlobAliases, DtypeMismatchIsRefused_A2) {
  EXPECT_THAT(read_error([](json& m) { m["outputs"][1]["dtype"] = "f16"; }),
              HasSubstr("metadata.aliases[0]: dtype mismatch: output 'k_cache.0.updated' is "
                        "f16, input 'k_cache.0' is f32"));
}

TEST(BlobAliases, ShapeMismatchIsRefused_A2) {
  EXPECT_THAT(read_error([](json& m) {
                m["outputs"][1]["shape"] = {2, 64};
              }),
              HasSubstr("metadata.aliases[0]: shape mismatch: output 'k_cache.0.updated' is "
                        "[2, 64], input 'k_cache.0' is [2, 64, 16]"));
  EXPECT_THAT(read_error([](json& m) { m["outputs"][1]["shape"][1] = 65; }),
              HasSubstr("metadata.aliases[0]: shape mismatch"));
  EXPECT_THAT(read_error([](json& m) { m["outputs"][1]["shape"][1] = dynamic_dim("S", 64, 64); }),
              HasSubstr("metadata.aliases[0]: shape mismatch"));
}

TEST(BlobAliases, DynamicAliasNeedsEqualBounds_A2) {
  auto with_dims = [](json lhs, json rhs) {
    return [lhs, rhs](json& m) {
      m["inputs"][2]["shape"][1] = lhs;
      m["outputs"][1]["shape"][1] = rhs;
    };
  };
  EXPECT_THAT(read_error(with_dims(dynamic_dim("S", 1, 64), dynamic_dim("R", 1, 32))),
              HasSubstr("output 'k_cache.0.updated' is [2, R=1..32, 16], input 'k_cache.0' is "
                        "[2, S=1..64, 16]"));
  EXPECT_EQ(read_error(with_dims(dynamic_dim("S", 1, 64), dynamic_dim("R", 1, 64))), "ok");
}

// ---- target device and producer ---------------------------------------------------------

TEST(BlobTargetDevice, UnknownTargetDeviceIsRefused_A2) {
  EXPECT_THAT(read_error([](json& m) { m["target_device"] = "tpu"; }),
              HasSubstr("metadata.target_device: unknown target device 'tpu'"));
  EXPECT_THAT(read_error([](json& m) { m["target_device"] = 0; }),
              HasSubstr("metadata.target_device: must be a string, got integer"));
}

TEST(BlobTargetDevice, MissingTargetDeviceMeansAny_A2) {
  json metadata = metadata_to_json(sample_metadata());
  metadata.erase("target_device");
  metadata.erase("producer");
  auto blob = read_blob(blob_with_metadata(metadata.dump()));
  ASSERT_TRUE(blob.ok()) << blob.status().to_string();
  EXPECT_EQ(blob->metadata.target_device, "any");
  EXPECT_EQ(blob->metadata.producer, json::object());
}

TEST(BlobProducer, FreeFormProducerRoundTrips_A2) {
  BlobMetadata metadata = sample_metadata();
  metadata.producer = {{"tool", "kvrt export"},
                       {"checkpoint", "/models/模型"},
                       {"options", {{"kv_dtype", "f32"}, {"layers", {0, 1, 2}}}},
                       {"scale", 0.125},
                       {"dirty", nullptr}};
  auto bytes = write_blob(metadata, {});
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto blob = read_blob(*bytes);
  ASSERT_TRUE(blob.ok()) << blob.status().to_string();
  EXPECT_EQ(blob->metadata.producer, metadata.producer);
}

TEST(BlobJson, NumberOutsideDoubleRangeIsRefused_A2) {
  json metadata = metadata_to_json(sample_metadata());
  std::string text = metadata.dump();
  text.replace(text.find(R"("layers":1)"), 10, R"("layers":[2,1e999])");
  EXPECT_THAT(read_text_error(text),
              HasSubstr("InvalidProgram: metadata: invalid JSON: number overflow parsing '1e999'"));
}

// ---- the writer refuses what the reader rejects -------------------------------------------

TEST(BlobWriter, WriterRefusesWhatTheReaderRejects_A2) {
  const std::vector<std::pair<std::function<void(BlobMetadata&)>, std::string>> cases = {
      {[](BlobMetadata& m) { m.outputs[2].name = ""; }, "metadata.outputs[2].name: empty"},
      {[](BlobMetadata& m) { m.outputs[2].name = "logits"; }, "duplicate binding name"},
      {[](BlobMetadata& m) { m.outputs[0].name = "tokens"; }, "(also metadata.inputs[0])"},
      {[](BlobMetadata& m) { m.inputs[1].name = std::string("a\0b", 3); }, "control character"},
      {[](BlobMetadata& m) { m.inputs[1].name = std::string(1, '\xc3'); }, "is not valid UTF-8"},
      {[](BlobMetadata& m) { m.inputs[1].dtype = static_cast<DType>(42); },
       "metadata.inputs[1].dtype: invalid dtype value 42"},
      {[](BlobMetadata& m) { m.inputs[1].shape[0] = graph::Dim::fixed(-1); },
       "negative dimension -1"},
      {[](BlobMetadata& m) { m.inputs[0].shape[1] = graph::Dim::dynamic("T", 5, 2); },
       "min 5 is greater than max 2"},
      {[](BlobMetadata& m) {
         m.inputs[0].shape[1] = graph::Dim{4, "T", 1, 128};
       },
       "must have size -1, got 4"},
      {[](BlobMetadata& m) { m.aliases[0].output = "nope"; }, "no output binding named 'nope'"},
      {[](BlobMetadata& m) { m.aliases[1].output = m.aliases[0].output; }, "already aliased"},
      {[](BlobMetadata& m) { m.aliases[1].input = m.aliases[0].input; }, "already aliased"},
      {[](BlobMetadata& m) { m.outputs[2].dtype = DType::kBF16; }, "dtype mismatch"},
      {[](BlobMetadata& m) { m.aliases[0].kind = static_cast<AliasKind>(9); },
       "metadata.aliases[0].kind: invalid kind value 9"},
      {[](BlobMetadata& m) { m.target_device = "gpu"; }, "unknown target device 'gpu'"},
      {[](BlobMetadata& m) { m.outputs.clear(); }, "at least one output"},
      {[](BlobMetadata& m) {
         m.producer = {{"name", "\xff"}};
       },
       "metadata.producer"},
      {[](BlobMetadata& m) {
         m.producer = {{"x", std::nan("")}};
       },
       "metadata.producer: does not survive a JSON round trip"},
      {[](BlobMetadata& m) {
         json deep = 0;
         for (int i = 0; i < 40; ++i) deep = json::array({deep});
         m.producer = deep;
       },
       "nested deeper than 32 levels"},
  };
  for (const auto& [mutate, expected] : cases) {
    const std::string error = write_error(mutate);
    EXPECT_THAT(error, HasSubstr("InvalidArgument: ")) << expected;
    EXPECT_THAT(error, HasSubstr(expected));
  }
}

}  // namespace
}  // namespace kvrt::format
