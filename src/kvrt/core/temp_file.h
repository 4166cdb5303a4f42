// Temporary files written beside their destination and renamed into place. They must
// not outlive the write: every error path removes them (the owner's destructor), a
// SIGINT, SIGTERM or SIGHUP during the write removes them before the process ends, and
// a temporary left by a process killed outright (SIGKILL, power loss) is removed by the
// next write to the same destination.
#pragma once

#include <string>

#include "kvrt/core/result.h"

namespace kvrt {

// "<target>.tmp.XXXXXX": the names every kvrt writer uses for `target`.
std::string temp_pattern_for(const std::string& target);

// Creates a temporary for `target` (mode 0666 less the umask), locked while open so
// that remove_stale_temporaries() can tell it from a dead writer's, and registered for
// removal on SIGINT/SIGTERM/SIGHUP. Closes and unlinks it on destruction unless
// release() was called after a successful rename.
class TempFile {
 public:
  static Result<TempFile> create(const std::string& target);
  TempFile(TempFile&& other) noexcept;
  TempFile& operator=(TempFile&&) = delete;
  TempFile(const TempFile&) = delete;
  ~TempFile();

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  // Closes the descriptor (errors are reported) and fsyncs first when `sync`; the file
  // stays on disk and registered until commit() or destruction.
  Status close(bool sync);
  // Renames the (closed) temporary onto the target; on success nothing is removed later.
  Status commit();

 private:
  TempFile() = default;
  std::string target_;
  std::string path_;
  int fd_ = -1;
  int slot_ = -1;  // signal-cleanup slot, -1 when none was free
  bool committed_ = false;
};

// Removes "<target>.tmp.XXXXXX" files that no live writer holds (a writer keeps its
// temporary locked). Returns how many were removed; errors are ignored, since a
// temporary that cannot be removed is no reason to refuse the write.
int remove_stale_temporaries(const std::string& target);

}  // namespace kvrt
