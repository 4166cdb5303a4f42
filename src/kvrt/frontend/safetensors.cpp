#include "kvrt/frontend/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <unordered_set>

namespace kvrt::frontend {
namespace {

using nlohmann::json;

// The reference implementation's limit; a larger header is a corrupt length field.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DTypeSpelling {
  std::string_view name;
  DType dtype;
};
constexpr DTypeSpelling kSupported[] = {
    {"F32", DType::kF32}, {"F16", DType::kF16}, {"BF16", DType::kBF16}, {"I32", DType::kI32},
    {"I64", DType::kI64}, {"U8", DType::kU8},   {"BOOL", DType::kBool},
};
constexpr std::string_view kKnownUnsupported[] = {
    "F64",     "I8",      "I16",     "U16", "U32", "U64",         "F8_E4M3",    "F8_E5M2",
    "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4",  "C64", "F8_E4M3FNUZ", "F8_E5M2FNUZ"};

uint64_t read_le64(const std::byte* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<uint8_t>(bytes[i]);
  return value;
}

Result<uint64_t> read_u64(const json& value, const std::string& where) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    return static_cast<uint64_t>(value.get<int64_t>());
  }
  return invalid_argument(where, ": expected a non-negative integer, got ", value.dump());
}

// Parses one header entry; `where` is "<path>: tensor '<name>'".
Result<TensorRecord> parse_entry(const std::string& name, const json& entry,
                                 const std::string& where, uint64_t data_begin,
                                 uint64_t data_size) {
  if (!entry.is_object()) return invalid_argument(where, ": expected an object");
  for (const auto& [key, value] : entry.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return invalid_argument(where, ": unknown field '", key, "'");
    }
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(key)) return invalid_argument(where, ": missing field '", key, "'");
  }
  TensorRecord record;
  record.name = name;
  if (!entry["dtype"].is_string()) return invalid_argument(where, ": dtype must be a string");
  auto dtype = parse_safetensors_dtype(entry["dtype"].get<std::string>());
  if (!dtype.ok()) return dtype.status().with_context(where);
  record.dtype = *dtype;

  const json& shape = entry["shape"];
  if (!shape.is_array()) return invalid_argument(where, ": shape must be an array");
  int64_t numel = 1;
  for (const json& dim : shape) {
    KVRT_ASSIGN_OR_RETURN(uint64_t size, read_u64(dim, where + ": shape"));
    if (size > static_cast<uint64_t>(INT64_MAX) ||
        !checked_mul(numel, static_cast<int64_t>(size), &numel)) {
      return invalid_argument(where, ": element count of shape ", shape.dump(), " overflows");
    }
    record.shape.push_back(static_cast<int64_t>(size));
  }
  int64_t nbytes = 0;
  if (!checked_mul(numel, static_cast<int64_t>(dtype_size(record.dtype)), &nbytes)) {
    return invalid_argument(where, ": byte size of shape ", shape.dump(), " overflows");
  }
  record.nbytes = static_cast<uint64_t>(nbytes);

  const json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) {
    return invalid_argument(where, ": data_offsets must be [begin, end]");
  }
  KVRT_ASSIGN_OR_RETURN(uint64_t begin, read_u64(offsets[0], where + ": data_offsets[0]"));
  KVRT_ASSIGN_OR_RETURN(uint64_t end, read_u64(offsets[1], where + ": data_offsets[1]"));
  if (begin > end) {
    return invalid_argument(where, ": data_offsets [", begin, ", ", end, "] end before begin");
  }
  if (end > data_size) {
    return invalid_argument(where, ": data_offsets [", begin, ", ", end,
                            "] extend beyond the data section (", data_size, " bytes)");
  }
  if (end - begin != record.nbytes) {
    return invalid_argument(where, ": data_offsets [", begin, ", ", end, "] hold ", end - begin,
                            " bytes but ", entry["dtype"].get<std::string>(), " ", shape.dump(),
                            " needs ", record.nbytes);
  }
  record.offset = data_begin + begin;
  return record;
}

Status check_overlaps(const std::string& path, std::vector<TensorRecord> records) {
  std::erase_if(records, [](const TensorRecord& r) { return r.nbytes == 0; });
  std::sort(records.begin(), records.end(),
            [](const TensorRecord& a, const TensorRecord& b) { return a.offset < b.offset; });
  for (size_t i = 1; i < records.size(); ++i) {
    const TensorRecord& previous = records[i - 1];
    if (records[i].offset < previous.offset + previous.nbytes) {
      return invalid_argument(path, ": tensor '", records[i].name, "' overlaps tensor '",
                              previous.name, "'");
    }
  }
  return Status();
}

Result<std::map<std::string, std::string>> parse_metadata(const std::string& path,
                                                          const json& metadata) {
  std::map<std::string, std::string> out;
  if (!metadata.is_object()) return invalid_argument(path, ": __metadata__ must be an object");
  for (const auto& [key, value] : metadata.items()) {
    if (!value.is_string()) {
      return invalid_argument(path, ": __metadata__ entry '", key, "' must be a string");
    }
    out[key] = value.get<std::string>();
  }
  return out;
}

}  // namespace

Result<DType> parse_safetensors_dtype(std::string_view name) {
  for (const DTypeSpelling& spelling : kSupported) {
    if (spelling.name == name) return spelling.dtype;
  }
  for (std::string_view known : kKnownUnsupported) {
    if (known == name) return not_supported("dtype '", name, "' is not supported");
  }
  return invalid_argument("unknown dtype '", name, "'");
}

std::string_view safetensors_dtype_name(DType dtype) {
  for (const DTypeSpelling& spelling : kSupported) {
    if (spelling.dtype == dtype) return spelling.name;
  }
  return "invalid";
}

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  KVRT_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  const uint64_t size = file.size();
  if (size < 8) {
    return invalid_argument(path, ": file is ", size,
                            " bytes, shorter than the 8-byte header length");
  }
  const uint64_t header_bytes = read_le64(file.data());
  if (header_bytes > size - 8) {
    return invalid_argument(path, ": header length ", header_bytes, " exceeds the file (", size - 8,
                            " bytes after the length field)");
  }
  if (header_bytes > kMaxHeaderBytes) {
    return invalid_argument(path, ": header length ", header_bytes, " exceeds the limit of ",
                            kMaxHeaderBytes);
  }
  // Duplicate top-level keys would silently keep the last entry: refuse them.
  std::string duplicate;
  std::unordered_set<std::string> keys;
  json::parser_callback_t on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && parsed.is_string()) {
      if (!keys.insert(parsed.get<std::string>()).second && duplicate.empty()) {
        duplicate = parsed.get<std::string>();
      }
    }
    return true;
  };
  const char* text = reinterpret_cast<const char*>(file.data() + 8);
  json header = json::parse(text, text + header_bytes, on_event, /*allow_exceptions=*/false);
  if (header.is_discarded()) return invalid_argument(path, ": header is not valid JSON");
  if (!header.is_object()) return invalid_argument(path, ": header must be a JSON object");
  if (!duplicate.empty()) {
    return invalid_argument(path, ": tensor '", duplicate, "' appears twice in the header");
  }

  SafetensorsFile out;
  const uint64_t data_begin = 8 + header_bytes;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      KVRT_ASSIGN_OR_RETURN(out.metadata_, parse_metadata(path, entry));
      continue;
    }
    if (name.empty()) return invalid_argument(path, ": a tensor has an empty name");
    KVRT_ASSIGN_OR_RETURN(
        TensorRecord record,
        parse_entry(name, entry, path + ": tensor '" + name + "'", data_begin, size - data_begin));
    out.tensors_.push_back(std::move(record));
  }
  KVRT_RETURN_IF_ERROR(check_overlaps(path, out.tensors_));
  std::sort(out.tensors_.begin(), out.tensors_.end(),
            [](const TensorRecord& a, const TensorRecord& b) { return a.name < b.name; });
  out.file_ = std::move(file);
  return out;
}

const TensorRecord* SafetensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const TensorRecord& r, std::string_view n) { return r.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

std::span<const std::byte> SafetensorsFile::bytes(const TensorRecord& record) const {
  return file_.bytes().subspan(record.offset, record.nbytes);
}

Result<TensorView> SafetensorsFile::view(std::string_view name) const {
  const TensorRecord* record = find(name);
  if (record == nullptr) return not_found(path(), ": no tensor '", name, "'");
  return view(*record);
}

Result<TensorView> SafetensorsFile::view(const TensorRecord& record) const {
  auto shape = Shape::from_span(record.shape);
  if (!shape.ok()) return shape.status().with_context(path() + ": tensor '" + record.name + "'");
  // const_cast: TensorView is shared with writable device memory; this one is read-only.
  void* data = const_cast<std::byte*>(file_.data() + record.offset);
  return TensorView(data, record.dtype, *shape, Device::cpu());
}

}  // namespace kvrt::frontend
