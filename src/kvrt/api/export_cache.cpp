#include "kvrt/api/export_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>

#include "kvrt/core/temp_file.h"
#include "kvrt/export/exporter.h"

namespace kvrt {

namespace fs = std::filesystem;

namespace {

// Bump when the exporter's output changes for the same input: old programs are then
// never reused (they age out by the size limit or `kvrt cache clean`).
// 2: next_token; 3: producer.generation.config, max_prompt in the key
constexpr std::string_view kExporterVersion = "kvrt-0.1.0-program-3";
constexpr const char* kHashMemo = "content-hashes.json";

// A 64-bit hash over 8-byte words (not cryptographic: it tells apart files, it does
// not resist an adversary), fast enough to run at disk speed.
class Hasher {
 public:
  void update(const void* data, size_t size) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < size; ++i) {
      tail_ = (tail_ << 8) | bytes[i];
      if (++tail_bytes_ == 8) {
        mix(tail_);
        tail_ = 0;
        tail_bytes_ = 0;
      }
    }
  }
  void update(std::string_view text) {
    update(text.data(), text.size());
    const uint64_t size = text.size();  // so "ab"+"c" and "a"+"bc" differ
    update(&size, sizeof(size));
  }
  std::string hex() {
    mix(tail_ ^ (static_cast<uint64_t>(tail_bytes_) << 56));
    char text[17];
    std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(state_));
    return text;
  }

 private:
  void mix(uint64_t word) {
    state_ = (state_ ^ word) * 0x9E3779B97F4A7C15ull;
    state_ ^= state_ >> 29;
  }
  uint64_t state_ = 0xcbf29ce484222325ull;
  uint64_t tail_ = 0;
  int tail_bytes_ = 0;
};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

Status write_json_atomically(const fs::path& path, const nlohmann::json& json) {
  KVRT_ASSIGN_OR_RETURN(TempFile file, TempFile::create(path.string()));
  const std::string text = json.dump(1);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(file.fd(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return invalid_argument("cannot write '", path.string(), "': ", std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  return file.commit();
}

nlohmann::json read_json_or_empty(const fs::path& path) {
  nlohmann::json json = nlohmann::json::parse(read_text(path), nullptr, false);
  return json.is_object() ? json : nlohmann::json::object();
}

fs::path sidecar_of(const std::string& program) {
  return fs::path(program + ".json");
}

std::string checkpoint_name(const std::string& path) {
  fs::path normal = fs::path(path).lexically_normal();
  if (normal.filename().empty()) normal = normal.parent_path();
  const std::string name = normal.filename().string();
  return name.empty() || name == "." || name == ".." ? "model" : name;
}

}  // namespace

std::string human_bytes(uint64_t bytes) {
  char text[32];
  const double value = static_cast<double>(bytes);
  if (bytes >= 1000000000ull) {
    std::snprintf(text, sizeof(text), "%.2f GB", value / 1e9);
  } else if (bytes >= 1000000) {
    std::snprintf(text, sizeof(text), "%.1f MB", value / 1e6);
  } else if (bytes >= 1000) {
    std::snprintf(text, sizeof(text), "%.1f KB", value / 1e3);
  } else {
    std::snprintf(text, sizeof(text), "%llu B", static_cast<unsigned long long>(bytes));
  }
  return text;
}

ExportCache::ExportCache(std::string dir, uint64_t limit_bytes)
    : dir_(dir.empty() ? default_dir() : std::move(dir)),
      limit_(limit_bytes == 0 ? kDefaultLimitBytes : limit_bytes) {}

std::string ExportCache::default_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return (fs::path(xdg) / "kvrt").string();
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return (fs::path(home) / ".cache" / "kvrt").string();
  }
  return (fs::temp_directory_path() / "kvrt-cache").string();
}

Result<uint64_t> ExportCache::default_limit() {
  const char* value = std::getenv("KVRT_CACHE_LIMIT");
  if (value == nullptr || *value == '\0') return kDefaultLimitBytes;
  char* end = nullptr;
  errno = 0;
  const double number = std::strtod(value, &end);
  uint64_t scale = 1;
  const std::string unit(end);
  if (unit == "K" || unit == "KB") scale = 1000;
  if (unit == "M" || unit == "MB") scale = 1000 * 1000;
  if (unit == "G" || unit == "GB") scale = 1000 * 1000 * 1000;
  const bool known_unit = unit.empty() || scale != 1;
  if (end == value || errno != 0 || !known_unit || !(number > 0) || number * scale > 1e18) {
    return invalid_argument("KVRT_CACHE_LIMIT: '", value,
                            "' is not a size (a number of bytes, or with K, M or G)");
  }
  return static_cast<uint64_t>(number * static_cast<double>(scale));
}

Result<std::string> ExportCache::content_hash(const std::string& file) {
  struct stat info {};
  if (::stat(file.c_str(), &info) != 0) {
    return not_found("cannot read '", file, "': ", std::strerror(errno));
  }
  const std::string absolute = fs::absolute(file).lexically_normal().string();
  const nlohmann::json stamp = {
      {"size", info.st_size},
      {"inode", info.st_ino},
      {"mtime_ns", info.st_mtim.tv_sec * 1000000000ll + info.st_mtim.tv_nsec}};
  const fs::path memo_path = fs::path(dir_) / kHashMemo;
  nlohmann::json memo = read_json_or_empty(memo_path);
  if (auto it = memo.find(absolute); it != memo.end() && it->is_object() &&
                                     it->value("stamp", nlohmann::json()) == stamp &&
                                     (*it)["hash"].is_string()) {
    return (*it)["hash"].get<std::string>();
  }
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return not_found("cannot read '", file, "': ", std::strerror(errno));
  Hasher hasher;
  std::vector<char> buffer(size_t{4} << 20);
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int code = errno;
      ::close(fd);
      return invalid_argument("cannot read '", file, "': ", std::strerror(code));
    }
    if (n == 0) break;
    hasher.update(buffer.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  const std::string hash = hasher.hex();
  // Re-read before writing: another process may have added entries meanwhile. A lost
  // entry only costs hashing that file again.
  // A file written within the last seconds may be written again within one tick of
  // the file system's clock, leaving size and mtime as they are: its hash is not
  // remembered until its stamp is safely in the past (git's "racy clean" rule).
  const int64_t age_ns = now_ns() - stamp["mtime_ns"].get<int64_t>();
  if (age_ns < 2'000'000'000) return hash;
  memo = read_json_or_empty(memo_path);
  memo[absolute] = {{"stamp", stamp}, {"hash", hash}};
  std::error_code error;
  fs::create_directories(dir_, error);
  (void)write_json_atomically(memo_path, memo);  // a memo that cannot be written is no error
  return hash;
}

Result<ProgramKey> ExportCache::key(const ExportRequest& request) {
  const std::string& checkpoint_dir = request.checkpoint_dir;
  std::error_code error;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(checkpoint_dir, error)) {
    files.push_back(entry.path());
  }
  if (error) {
    return not_found("cannot list checkpoint directory '", checkpoint_dir, "': ", error.message());
  }
  std::sort(files.begin(), files.end());
  Hasher hasher;
  hasher.update(kExporterVersion);
  hasher.update(std::to_string(request.max_seq));
  hasher.update(std::to_string(request.max_prompt));
  hasher.update(dtype_name(request.cache_dtype));
  for (const fs::path& file : files) {
    const std::string name = file.filename().string();
    const bool config = name == "config.json" || name == "generation_config.json" ||
                        name.ends_with(".safetensors.index.json");
    if (!config && !name.ends_with(".safetensors")) continue;
    hasher.update(name);
    if (config) {
      hasher.update(read_text(file));
    } else {
      KVRT_ASSIGN_OR_RETURN(std::string hash, content_hash(file.string()));
      hasher.update(hash);
    }
  }
  return ProgramKey{hasher.hex(), request.max_seq, request.max_prompt, request.cache_dtype};
}

Result<std::string> ExportCache::get_or_export(const ExportRequest& request, bool* exported) {
  if (exported != nullptr) *exported = false;
  std::error_code error;
  fs::create_directories(dir_, error);
  if (error) {
    return invalid_argument("cannot create cache directory '", dir_, "': ", error.message());
  }
  KVRT_ASSIGN_OR_RETURN(ProgramKey program_key, key(request));
  if (auto cached = find(program_key)) {
    (void)record_use(*cached, program_key, request.checkpoint_dir);  // a stale time is no error
    return *cached;
  }
  const std::string program = path_for(program_key, request.checkpoint_dir);
  exporter::ExportOptions options;
  options.checkpoint_dir = request.checkpoint_dir;
  options.output_path = program;
  options.max_seq = request.max_seq;
  options.max_prompt = request.max_prompt;
  options.cache_dtype = request.cache_dtype;
  options.progress = request.progress;
  KVRT_RETURN_IF_ERROR(exporter::export_checkpoint(options).status());
  if (exported != nullptr) *exported = true;
  (void)record_use(program, program_key, request.checkpoint_dir);
  KVRT_RETURN_IF_ERROR(evict(program).status());
  return program;
}

std::optional<std::string> ExportCache::find(const ProgramKey& key) const {
  std::error_code error;
  const std::string suffix = "-" + key.hash + ".kvrt";
  for (const auto& entry : fs::directory_iterator(dir_, error)) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(suffix) && entry.is_regular_file(error)) return entry.path().string();
  }
  return std::nullopt;
}

std::string ExportCache::path_for(const ProgramKey& key, const std::string& checkpoint_dir) const {
  return (fs::path(dir_) / (checkpoint_name(checkpoint_dir) + "-" + key.hash + ".kvrt")).string();
}

Status ExportCache::record_use(const std::string& program, const ProgramKey& key,
                               const std::string& source) {
  std::error_code error;
  const nlohmann::json sidecar = {
      {"source", fs::absolute(source, error).lexically_normal().string()},
      {"last_used_ns", now_ns()},
      {"max_seq", key.max_seq},
      {"max_prompt", key.max_prompt},
      {"cache_dtype", dtype_name(key.cache_dtype)}};
  return write_json_atomically(sidecar_of(program), sidecar);
}

Result<std::vector<CachedProgram>> ExportCache::list() const {
  std::vector<CachedProgram> programs;
  std::error_code error;
  if (!fs::is_directory(dir_, error)) return programs;
  for (const auto& entry : fs::directory_iterator(dir_, error)) {
    if (entry.path().extension() != ".kvrt" || !entry.is_regular_file(error)) continue;
    CachedProgram program;
    program.path = entry.path().string();
    program.bytes = entry.file_size(error);
    const nlohmann::json sidecar = read_json_or_empty(sidecar_of(program.path));
    program.source = sidecar.value("source", std::string());
    program.max_seq = sidecar.value("max_seq", int64_t{0});
    program.cache_dtype = sidecar.value("cache_dtype", std::string());
    // A program without a sidecar (an older kvrt's) was last used when written.
    struct stat info {};
    const int64_t written = ::stat(program.path.c_str(), &info) == 0
                                ? int64_t{info.st_mtim.tv_sec} * 1000000000 + info.st_mtim.tv_nsec
                                : 0;
    program.last_used_ns = sidecar.value("last_used_ns", written);
    program.last_used = program.last_used_ns / 1000000000;
    programs.push_back(std::move(program));
  }
  if (error) return not_found("cannot list the cache '", dir_, "': ", error.message());
  std::sort(programs.begin(), programs.end(), [](const auto& a, const auto& b) {
    return a.last_used_ns != b.last_used_ns ? a.last_used_ns > b.last_used_ns : a.path < b.path;
  });
  return programs;
}

Result<std::vector<std::string>> ExportCache::evict(const std::string& keep) {
  KVRT_ASSIGN_OR_RETURN(std::vector<CachedProgram> programs, list());
  uint64_t total = 0;
  for (const CachedProgram& program : programs) total += program.bytes;
  std::vector<std::string> removed;
  std::error_code error;
  // Oldest last: the list is most recent first.
  for (auto it = programs.rbegin(); it != programs.rend() && total > limit_; ++it) {
    if (fs::equivalent(it->path, keep, error)) continue;
    fs::remove(it->path, error);
    fs::remove(sidecar_of(it->path), error);
    total -= it->bytes;
    removed.push_back(it->path);
  }
  return removed;
}

Result<uint64_t> ExportCache::clean() {
  std::error_code error;
  uint64_t freed = 0;
  if (!fs::is_directory(dir_, error)) return freed;
  std::vector<fs::path> doomed;
  for (const auto& entry : fs::directory_iterator(dir_, error)) {
    const std::string name = entry.path().filename().string();
    // Programs, their sidecars, the memo and temporaries a killed export left.
    if (name.ends_with(".kvrt") || name.ends_with(".kvrt.json") || name == kHashMemo ||
        name.find(".kvrt.") != std::string::npos || name.find(".json.") != std::string::npos) {
      doomed.push_back(entry.path());
    }
  }
  for (const fs::path& path : doomed) {
    const uint64_t bytes = fs::is_regular_file(path, error) ? fs::file_size(path, error) : 0;
    if (fs::remove(path, error)) freed += bytes;
    if (error) return invalid_argument("cannot remove '", path.string(), "': ", error.message());
  }
  return freed;
}

}  // namespace kvrt
