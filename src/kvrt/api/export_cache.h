// The cache of programs Llm::load exports from checkpoint directories
// ($XDG_CACHE_HOME/kvrt, else ~/.cache/kvrt). One file per distinct program: the key
// is a hash of what the exported bytes depend on — kvrt's exporter version, the export
// options (context length, KV cache dtype), config.json, generation_config.json, the
// safetensors index and the full content of every weight file. Not the path, not
// modification times: the same checkpoint moved, copied or touched maps to the same
// program. Hashing a weight file reads it once; the hash is remembered by the file's
// path, size, inode and modification time (content-hashes.json), so later loads read
// no weights (a file modified in the last two seconds is not remembered: a second
// write within one tick of the file system's clock would keep its stamp). Tokenizer files are not
// part of the key: the program holds no tokenizer (it is found beside the checkpoint at load time).
//
// Each program has a sidecar <program>.json: where it was last loaded from, when, and
// its options. Past the size limit the least recently used programs are removed.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kvrt/core/dtype.h"
#include "kvrt/core/result.h"

namespace kvrt {

struct CachedProgram {
  std::string path;          // the program file
  uint64_t bytes = 0;        // its size on disk
  std::string source;        // the checkpoint it was last loaded from ("" when unknown)
  int64_t last_used = 0;     // seconds since the epoch
  int64_t last_used_ns = 0;  // the same, finer: orders uses within one second
  int64_t max_seq = 0;       // export options
  std::string cache_dtype;
};

// What is asked of an export: the checkpoint and the options that change the program.
struct ExportRequest {
  std::string checkpoint_dir;
  int64_t max_seq = 0;     // 0: the exporter's default
  int64_t max_prompt = 0;  // 0: max_seq
  DType cache_dtype = DType::kF32;
  std::function<void(uint64_t done, uint64_t total)> progress;  // weight bytes written
};

struct ProgramKey {
  std::string hash;  // 16 hex digits
  int64_t max_seq = 0;
  int64_t max_prompt = 0;
  DType cache_dtype = DType::kF32;
};

class ExportCache {
 public:
  static constexpr uint64_t kDefaultLimitBytes = 32ull * 1000 * 1000 * 1000;  // 32 GB

  // dir empty: default_dir(). limit_bytes 0: kDefaultLimitBytes.
  explicit ExportCache(std::string dir = {}, uint64_t limit_bytes = 0);

  static std::string default_dir();
  // $KVRT_CACHE_LIMIT ("20G", "500M", a number of bytes) or kDefaultLimitBytes;
  // InvalidArgument names the variable when it is not a size.
  static Result<uint64_t> default_limit();

  const std::string& dir() const { return dir_; }
  uint64_t limit_bytes() const { return limit_; }

  // The key of the program exporting checkpoint_dir with these options would write.
  // Errors name the file that could not be read.
  Result<ProgramKey> key(const ExportRequest& request);
  // The cached program for `request`, exported first when there is none (after which
  // programs past the limit are evicted); the use is recorded. *exported says whether
  // it was exported now. Errors are the exporter's, or name the cache directory.
  Result<std::string> get_or_export(const ExportRequest& request, bool* exported = nullptr);
  // The cached program with this key, if any (any name: the first checkpoint names it).
  std::optional<std::string> find(const ProgramKey& key) const;
  // Where a new program with this key goes, named after the checkpoint.
  std::string path_for(const ProgramKey& key, const std::string& checkpoint_dir) const;
  // Records a load of `program` from `source` now (the sidecar).
  Status record_use(const std::string& program, const ProgramKey& key, const std::string& source);
  // Removes least recently used programs until the total fits the limit; `keep` stays.
  // Returns the paths removed.
  Result<std::vector<std::string>> evict(const std::string& keep);

  // Every program in the cache, most recently used first.
  Result<std::vector<CachedProgram>> list() const;
  // Removes every program, its sidecar, the hash memo and leftover temporaries;
  // returns the bytes freed.
  Result<uint64_t> clean();

 private:
  Result<std::string> content_hash(const std::string& file);

  std::string dir_;
  uint64_t limit_;
};

// "1.50 GB", "363.8 KB", "512 B".
std::string human_bytes(uint64_t bytes);

}  // namespace kvrt
