// Runs the host C++ compiler as a child process in its own process group, with a time limit.
#pragma once

#include <filesystem>
#include <memory>
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

// The process's environment ("NAME=value" entries), copied. Taken on the thread that asks for a
// compile: a compile in the background must not read `environ` while another thread's setenv (Python's
// os.environ, a test's monkeypatch) reallocates it, which made a background compiler fail to start
// with EFAULT ("cannot run 'g++': Bad address").
using Environment = std::shared_ptr<const std::vector<std::string>>;
Environment CaptureEnvironment();

// Runs argv[0] (searched on the PATH of `environment`, or of the process when null) in `cwd`, with
// `environment` (or the process's). On timeout, or when `interrupted` (polled every 50 ms) returns
// true, the process group gets SIGKILL and is reaped, so no compiler process outlives the call.
ProcessResult RunProcess(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                         double timeout_seconds, bool (*interrupted)() = nullptr,
                         const Environment& environment = nullptr);

}  // namespace pypto_pro::jit
