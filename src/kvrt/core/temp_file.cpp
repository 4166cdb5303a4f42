#include "kvrt/core/temp_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <mutex>
#include <utility>

namespace kvrt {
namespace {

// Paths the signal handler unlinks. Fixed storage, because a handler may not allocate;
// a write beyond kSlots concurrent temporaries is still cleaned on every other path.
constexpr int kSlots = 32;
struct Slot {
  std::atomic<bool> used{false};
  char path[PATH_MAX] = {};
};
Slot g_slots[kSlots];

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_previous[std::size(kSignals)];
bool g_installed[std::size(kSignals)] = {};
int g_live = 0;  // registered temporaries, under g_mutex
std::mutex g_mutex;

void on_signal(int signal) {
  const int saved_errno = errno;
  for (Slot& slot : g_slots) {
    if (slot.used.load(std::memory_order_acquire)) ::unlink(slot.path);
  }
  // End the process the way the signal would have without us.
  for (size_t i = 0; i < std::size(kSignals); ++i) {
    if (kSignals[i] == signal) ::sigaction(signal, &g_previous[i], nullptr);
  }
  errno = saved_errno;
  ::raise(signal);
}

// Installs the handler for signals whose disposition is the default (terminate): a
// program that handles or ignores them keeps its own behaviour.
void install_locked() {
  for (size_t i = 0; i < std::size(kSignals); ++i) {
    struct sigaction current {};
    if (::sigaction(kSignals[i], nullptr, &current) != 0) continue;
    if ((current.sa_flags & SA_SIGINFO) != 0 || current.sa_handler != SIG_DFL) continue;
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    for (int other : kSignals) sigaddset(&action.sa_mask, other);
    if (::sigaction(kSignals[i], &action, &g_previous[i]) == 0) g_installed[i] = true;
  }
}

void uninstall_locked() {
  for (size_t i = 0; i < std::size(kSignals); ++i) {
    if (!g_installed[i]) continue;
    ::sigaction(kSignals[i], &g_previous[i], nullptr);
    g_installed[i] = false;
  }
}

int register_path(const std::string& path) {
  std::lock_guard lock(g_mutex);
  if (path.size() >= PATH_MAX) return -1;
  for (int i = 0; i < kSlots; ++i) {
    Slot& slot = g_slots[i];
    if (slot.used.load(std::memory_order_relaxed)) continue;
    std::memcpy(slot.path, path.c_str(), path.size() + 1);
    slot.used.store(true, std::memory_order_release);
    if (g_live++ == 0) install_locked();
    return i;
  }
  return -1;
}

void unregister_path(int index) {
  if (index < 0) return;
  std::lock_guard lock(g_mutex);
  g_slots[index].used.store(false, std::memory_order_release);
  if (--g_live == 0) uninstall_locked();
}

std::string errno_text() {
  return std::strerror(errno);
}

}  // namespace

std::string temp_pattern_for(const std::string& target) {
  return target + ".tmp.XXXXXX";
}

Result<TempFile> TempFile::create(const std::string& target) {
  TempFile file;
  file.target_ = target;
  std::string path = temp_pattern_for(target);
  const int fd = ::mkostemp(path.data(), O_CLOEXEC);
  if (fd < 0) return invalid_argument("cannot write '", target, "': ", errno_text());
  file.fd_ = fd;
  file.path_ = std::move(path);
  file.slot_ = register_path(file.path_);
  // A live writer's lock tells remove_stale_temporaries() to leave the file alone.
  (void)::flock(fd, LOCK_EX | LOCK_NB);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  (void)::fchmod(fd, 0666 & ~mask);
  return file;
}

TempFile::TempFile(TempFile&& other) noexcept
    : target_(std::move(other.target_)),
      path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      slot_(std::exchange(other.slot_, -1)),
      committed_(std::exchange(other.committed_, true)) {}

TempFile::~TempFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !path_.empty()) ::unlink(path_.c_str());
  unregister_path(slot_);
}

Status TempFile::close(bool sync) {
  if (fd_ < 0) return Status();
  if (sync && ::fsync(fd_) != 0) return internal_error("fsync '", path_, "': ", errno_text());
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) return internal_error("cannot close '", path_, "': ", errno_text());
  return Status();
}

Status TempFile::commit() {
  KVRT_RETURN_IF_ERROR(close(/*sync=*/false));
  if (::rename(path_.c_str(), target_.c_str()) != 0) {
    return invalid_argument("cannot rename '", path_, "' to '", target_, "': ", errno_text());
  }
  committed_ = true;
  return Status();
}

int remove_stale_temporaries(const std::string& target) {
  namespace fs = std::filesystem;
  const fs::path target_path(target);
  const std::string prefix = target_path.filename().string() + ".tmp.";
  fs::path dir = target_path.parent_path();
  if (dir.empty()) dir = ".";
  std::error_code error;
  int removed = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    // Exactly mkstemp's six characters after the prefix: nothing else is ours.
    if (name.size() != prefix.size() + 6 || name.compare(0, prefix.size(), prefix) != 0) {
      continue;
    }
    if (!entry.is_regular_file(error)) continue;
    const int fd = ::open(entry.path().c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    // Locked: a live writer (this process or another) still owns it.
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && ::unlink(entry.path().c_str()) == 0) ++removed;
    ::close(fd);
  }
  return removed;
}

}  // namespace kvrt
