#include "kvrt/serve/connection_probe.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>

namespace kvrt::serve {
namespace {

// Port and printable address of a socket address (IPv4 or IPv6).
bool describe(const sockaddr_storage& address, int& port, std::string& text) {
  char buffer[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(address);
    port = ntohs(in.sin_port);
    inet_ntop(AF_INET, &in.sin_addr, buffer, sizeof(buffer));
  } else if (address.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(address);
    port = ntohs(in6.sin6_port);
    inet_ntop(AF_INET6, &in6.sin6_addr, buffer, sizeof(buffer));
  } else {
    return false;
  }
  text = buffer;
  return true;
}

// A connected socket whose local port is local_port; its peer's address and port.
bool connected_on(int fd, int local_port, std::string& remote_addr, int& remote_port) {
  struct stat info {};
  if (fstat(fd, &info) != 0 || !S_ISSOCK(info.st_mode)) return false;
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  int port = 0;
  std::string text;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0 ||
      !describe(address, port, text) || port != local_port) {
    return false;
  }
  length = sizeof(address);
  return getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0 &&
         describe(address, remote_port, remote_addr);
}

// Calls visit(fd) for each of this process's descriptors until it returns true.
template <typename Visit>
void for_each_descriptor(Visit visit) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    if (visit(static_cast<int>(fd))) break;
  }
  closedir(dir);
}

}  // namespace

ConnectionProbe ConnectionProbe::find(int local_port, const std::string& remote_addr,
                                      int remote_port) {
  std::optional<int> found;
  for_each_descriptor([&](int fd) {
    std::string addr;
    int port = 0;
    if (connected_on(fd, local_port, addr, port) && port == remote_port && addr == remote_addr) {
      found = fd;
    }
    return found.has_value();
  });
  return ConnectionProbe(found);
}

void ConnectionProbe::stop_reading_idle(int local_port, const std::set<int>& busy) {
  for_each_descriptor([&](int fd) {
    std::string addr;
    int port = 0;
    if (!busy.contains(fd) && connected_on(fd, local_port, addr, port)) shutdown(fd, SHUT_RD);
    return false;
  });
}

bool ConnectionProbe::peer_closed() const {
  if (!fd_) return false;
  pollfd entry{*fd_, POLLRDHUP, 0};
  if (poll(&entry, 1, 0) <= 0) return false;
  return (entry.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace kvrt::serve
