// The program file: what `kvrt export` writes and the runtime loads. It holds the
// methods (prefill, decode) as instruction lists over typed values, the memory plan,
// the mutable buffers shared by name across methods, the delegate blobs, and every
// weight exactly once (F1). Byte layout, schema and versioning: docs/program-format.md.
//
// Writing streams weights into a temporary file that is renamed into place on
// success. Reading maps the file and returns views: no weight byte is
// copied on the host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kvrt/core/dtype.h"
#include "kvrt/core/mapped_file.h"
#include "kvrt/core/result.h"
#include "kvrt/core/tensor.h"
#include "kvrt/graph/graph.h"

namespace kvrt::format {

inline constexpr char kProgramMagic[8] = {'K', 'V', 'R', 'T', 'P', 'R', 'O', 'G'};
inline constexpr uint16_t kProgramVersionMajor = 1;
inline constexpr uint16_t kProgramVersionMinor = 0;
inline constexpr uint64_t kProgramHeaderSize = 64;
// The weight segment starts on a page so a mapping of it can be used in place; each
// weight starts on a cache line (and a vector width) inside it.
inline constexpr uint64_t kWeightSegmentAlignment = 4096;
inline constexpr uint64_t kWeightAlignment = 64;
inline constexpr uint64_t kBlobAlignment = 64;
// Planned offsets inside an arena are multiples of this.
inline constexpr uint64_t kPlanAlignment = 64;

// Program-level required features (the program file's own list; a delegate blob has
// its own). `aliased_io`: some delegate call has an output whose storage is a buffer.
inline constexpr std::string_view kProgramFeatureAliasedIo = "aliased_io";

// Where a buffer or planned value lives. `device` is the engine's device (host memory
// for the CPU engine); `host` is host memory that host kernels can touch.
enum class Arena : uint8_t { kDevice, kHost };
std::string_view arena_name(Arena arena);
Result<Arena> parse_arena(std::string_view name);

struct WeightSpec {
  std::string name;  // checkpoint tensor name, as parameters are named in the graph
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // from the start of the weight segment; assigned by the writer
  uint64_t nbytes = 0;  // numel * dtype_size
};

// A mutable buffer (KV cache). Owned by the program, outside every delegate (B1),
// shared by name across methods, zero at load (F4). Never in a planned arena.
struct BufferSpec {
  std::string name;  // "k_cache.0"
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // static: [kv_heads, max_seq, head_dim]
  Arena arena = Arena::kDevice;
  // Bytes moved between arenas per call of each method because a host kernel uses the
  // buffer (F3); absent or 0 means zero-copy. Must equal the sum of that method's copy
  // instructions touching the buffer (the reader checks).
  std::map<std::string, uint64_t> copy_bytes_per_step;
};

struct DelegateSpec {
  std::string backend = "engine";  // the delegate registry name
  std::string method;              // the method whose delegate_call uses it
  uint64_t offset = 0;             // in the blob segment; assigned by the writer
  uint64_t size = 0;
};

enum class StorageKind : uint8_t {
  kInput,    // a method input, bound by the caller at execute
  kPlanned,  // arena + offset + nbytes in the method's memory plan
  kBuffer,   // the storage of buffer `name`
  kWeight,   // the (read-only) storage of weight `name`
};

struct Storage {
  StorageKind kind = StorageKind::kPlanned;
  Arena arena = Arena::kHost;  // kPlanned only
  uint64_t offset = 0;         // kPlanned only
  uint64_t nbytes = 0;         // kPlanned only: bytes at the maximum shape
  std::string name;            // kBuffer, kWeight
};

struct ValueSpec {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<graph::Dim> shape;  // dynamic dims carry min/max bounds
  Storage storage;
};

using ValueIndex = int32_t;  // index into MethodSpec::values

// Runs delegate `delegate` with arguments `args`: inputs first, then outputs, exactly in
// the order of the blob's bindings (A3). An aliased output argument names a value whose
// storage is the same buffer as the aliased input argument, so the runtime binds one
// pointer twice and nothing is copied (D3, F2).
struct DelegateCall {
  int32_t delegate = -1;  // index into ProgramSpec::delegates
  std::vector<ValueIndex> args;
  uint32_t num_inputs = 0;
};

// A node the partitioner kept on the host (op vocabulary of docs/graph.md). For
// kv_cache_write the output value has the same storage as the cache input.
struct HostKernel {
  std::string op;
  std::string node;  // the graph node name, for messages and inspect
  std::vector<ValueIndex> inputs;
  std::vector<ValueIndex> outputs;
  nlohmann::json attributes = nlohmann::json::object();
};

// The explicit F3 path: copies nbytes from src's storage to dst's storage.
struct CopyInstruction {
  ValueIndex src = -1;
  ValueIndex dst = -1;
  uint64_t nbytes = 0;
};

using Instruction = std::variant<DelegateCall, HostKernel, CopyInstruction>;

// A method-level buffer mutation: after the method runs, buffer `buffer` holds `value`.
// Declared exactly once per (method, buffer) (B5).
struct MutationSpec {
  std::string buffer;
  ValueIndex value = -1;
};

struct MethodSpec {
  std::string name;  // "prefill", "decode"
  std::vector<ValueSpec> values;
  std::vector<ValueIndex> inputs;   // storage kInput, in call order (tokens, position)
  std::vector<ValueIndex> outputs;  // user outputs (logits), storage kPlanned host
  std::vector<Instruction> instructions;
  std::vector<MutationSpec> mutations;
  // Memory plan: bytes of each arena this method needs (planned values only).
  uint64_t device_arena_bytes = 0;
  uint64_t host_arena_bytes = 0;
};

struct ProgramSpec {
  std::vector<std::string> required_features;  // filled by the writer
  std::vector<WeightSpec> weights;
  std::vector<BufferSpec> buffers;
  std::vector<DelegateSpec> delegates;
  std::vector<MethodSpec> methods;
  nlohmann::json producer = nlohmann::json::object();  // free-form, never interpreted
};

// Produces the stored bytes of one weight (dtype conversion happens here) into `out`,
// which is exactly WeightSpec::nbytes long.
using WeightFiller = std::function<Status(std::span<std::byte> out)>;

// Where the writer gets one weight's stored bytes: `bytes` when they already exist as
// stored (e.g. a mapped checkpoint tensor of the right dtype; written to the file
// straight from that memory, never staged), else `fill` into a scratch buffer.
struct WeightSource {
  std::span<const std::byte> bytes;
  WeightFiller fill;

  WeightSource() = default;
  WeightSource(std::span<const std::byte> stored) : bytes(stored) {}  // NOLINT: implicit
  WeightSource(WeightFiller filler) : fill(std::move(filler)) {}      // NOLINT: implicit
};

struct ProgramWriteOptions {
  // Called after each weight with bytes written so far and the total weight bytes.
  std::function<void(uint64_t done, uint64_t total)> progress;
  bool sync = false;  // fsync the file before the rename
};

// Validates `spec` (as read_program would), assigns weight and blob offsets, writes a
// temporary file beside `path` and renames it over `path`. On any failure the
// temporary file is removed and `path` is untouched. `blobs` and `weights` are parallel
// to spec.delegates and spec.weights.
Status write_program(const std::string& path, const ProgramSpec& spec,
                     std::span<const std::vector<std::byte>> blobs,
                     std::span<const WeightSource> weights,
                     const ProgramWriteOptions& options = {});
// Same, every weight produced by a filler.
Status write_program(const std::string& path, const ProgramSpec& spec,
                     std::span<const std::vector<std::byte>> blobs,
                     std::span<const WeightFiller> fillers,
                     const ProgramWriteOptions& options = {});

// The checks write_program runs, without writing: for producers that want to fail
// before any I/O. Weight offsets are not checked (the writer assigns them).
Status validate_program(const ProgramSpec& spec, std::span<const std::vector<std::byte>> blobs);

// A parsed program whose views point into the bytes given to read_program.
struct ProgramView {
  uint16_t version_major = 0;
  uint16_t version_minor = 0;
  ProgramSpec spec;
  std::vector<std::span<const std::byte>> blobs;  // parallel to spec.delegates
  std::span<const std::byte> weight_segment;

  // Index of a weight/buffer/method/value by name, or -1.
  int find_weight(std::string_view name) const;
  int find_buffer(std::string_view name) const;
  int find_method(std::string_view name) const;
  // The stored bytes of weight `index` (no copy).
  std::span<const std::byte> weight_bytes(size_t index) const;
  // A read-only host view of the named weight; NotFound naming it otherwise. The view's
  // pointer is into the mapping and must not be written.
  Result<TensorView> weight(std::string_view name) const;
};

// Parses and validates everything: magic, version (major must match; minor may be
// newer), required features (unknown ones are refused), segment bounds and alignment,
// the metadata schema, every index and name reference, storage consistency, alias
// storage identity of delegate calls, plan bounds. Errors are InvalidProgram naming the
// field ("methods[1].instructions[3].args[2]: ...").
Result<ProgramView> read_program(std::span<const std::byte> bytes);

// A mapped program file and its parsed view; the view lives as long as the mapping.
class ProgramFile {
 public:
  static Result<ProgramFile> open(const std::string& path);

  const ProgramView& view() const { return view_; }
  const ProgramSpec& spec() const { return view_.spec; }
  const std::string& path() const { return file_.path(); }

 private:
  MappedFile file_;
  ProgramView view_;
};

// Bytes of a value at its maximum shape (dynamic dims at their max); error on overflow.
Result<uint64_t> max_nbytes(DType dtype, std::span<const graph::Dim> shape);

// Bytes per call of `method` copied between arenas for `buffer` (sum of copy
// instructions whose src or dst is stored in that buffer).
uint64_t buffer_copy_bytes(const MethodSpec& method, std::string_view buffer);

// The JSON metadata as stored (for inspect --json and tests).
nlohmann::json program_metadata_json(const ProgramSpec& spec);

}  // namespace kvrt::format
