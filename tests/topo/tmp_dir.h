// A scratch directory for one test process (removed at exit), and running a command with its
// exit status, stdout and stderr.
#pragma once
#include <string>

namespace mkccl {
namespace test {

const std::string& scratchDir();
// Writes text to scratchDir()/name and returns the path.
std::string writeScratch(const std::string& name, const std::string& text);

struct CommandResult {
  int status = -1;  // exit status, or -1 if it did not exit normally
  std::string out, err;
};
CommandResult runCommand(const std::string& cmd);

}  // namespace test
}  // namespace mkccl
