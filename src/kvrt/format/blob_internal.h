// Pieces of the blob reader and writer shared by blob.cpp, blob_json.cpp and
// blob_validate.cpp. Not part of the API: include blob.h instead.
#pragma once

#include <string>
#include <string_view>

#include "kvrt/core/result.h"
#include "kvrt/format/blob.h"

namespace kvrt::format::detail {

// Parses the metadata JSON (syntax, nesting, duplicate keys, field types) into the
// struct. With `strict_keys`, an unknown key is an error (catches typos such as
// "knid"); a blob of a newer minor version is read with strict_keys false.
// Errors are InvalidProgram naming the field.
Result<BlobMetadata> parse_blob_metadata(std::string_view text, bool strict_keys);

// The semantic rules shared by reader and writer (names, dtypes, dims, aliases,
// target device). Errors are InvalidProgram naming the field.
Status validate_blob_metadata(const BlobMetadata& metadata);

// For messages: control bytes (and bytes >= 0x80 when `escape_high`) become \xNN, so
// an error is always one printable line.
std::string printable(std::string_view text, bool escape_high = false);

}  // namespace kvrt::format::detail
