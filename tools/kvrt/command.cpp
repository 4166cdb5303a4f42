#include "command.h"

namespace kvrt::cli {
namespace {
std::vector<Command>& commands() {
  static std::vector<Command> storage;
  return storage;
}
int& exit_code_storage() {
  static int code = 0;
  return code;
}
}  // namespace

bool register_command(Command command) {
  commands().push_back(std::move(command));
  return true;
}
const std::vector<Command>& registered_commands() {
  return commands();
}
void set_exit_code(int code) {
  exit_code_storage() = code;
}
int exit_code() {
  return exit_code_storage();
}

}  // namespace kvrt::cli
