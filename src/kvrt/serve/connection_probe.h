// Tells whether the client of an HTTP request is still connected. cpp-httplib (0.11)
// gives a handler the connection's addresses but not its socket, and a request that is
// waiting for its turn or generating without streaming writes nothing that could fail.
// So the probe finds the socket by its two addresses among this process's descriptors
// (the connection's thread is inside the handler, so the descriptor stays open), and
// asks the kernel whether the peer has closed its side (POLLRDHUP): a client that
// disconnects cancels its generation instead of holding the model for nobody.
#pragma once

#include <optional>
#include <set>
#include <string>

namespace kvrt::serve {

class ConnectionProbe {
 public:
  // The probe of the TCP connection local_port <-> remote_addr:remote_port; a probe
  // that finds no socket always answers "connected".
  static ConnectionProbe find(int local_port, const std::string& remote_addr, int remote_port);
  // For tests: probe a descriptor directly.
  static ConnectionProbe of_socket(int fd) { return ConnectionProbe(fd); }

  // Shuts the reading side of every connection accepted on local_port but those in
  // `busy`: at shutdown, httplib's idle keep-alive connections would otherwise wait out
  // their timeout (5 s) before noticing. (httplib takes a socket with its reading side
  // shut for a dead one, so connections still answering must be left alone.)
  static void stop_reading_idle(int local_port, const std::set<int>& busy);

  // True once the peer has closed or reset the connection.
  bool peer_closed() const;
  bool found() const { return fd_.has_value(); }
  std::optional<int> fd() const { return fd_; }

 private:
  explicit ConnectionProbe(std::optional<int> fd) : fd_(fd) {}
  std::optional<int> fd_;
};

}  // namespace kvrt::serve
