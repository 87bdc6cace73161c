// Runs the host C++ compiler as a child process in its own process group, with a time limit.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace pypto_pro::jit {

struct ProcessResult {
  bool started = false;    // false: the program could not be executed (see output)
  bool timed_out = false;  // killed (with its whole process group) at the limit
  bool interrupted = false;  // killed (with its whole process group) because `interrupted` fired
  int exit_code = -1;      // valid when started and not timed out
  std::string output;      // stdout and stderr, interleaved
  double seconds = 0;
};

// Runs argv[0] (searched on PATH) in `cwd`. On timeout, or when `interrupted` (polled every 50 ms)
// returns true, the process group gets SIGKILL and is reaped, so no compiler process outlives the call.
ProcessResult RunProcess(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                         double timeout_seconds, bool (*interrupted)() = nullptr);

}  // namespace pypto_pro::jit
