#include "pypto_pro/jit/compiler.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

extern char** environ;

namespace pypto_pro::jit {

Environment CaptureEnvironment() {
  auto copy = std::make_shared<std::vector<std::string>>();
  for (char** entry = environ; entry && *entry; ++entry) copy->emplace_back(*entry);
  return copy;
}

namespace {

// argv0 as execvp would find it on `environment`'s PATH (unset: the default search path).
std::string FindOnPath(const std::string& argv0, const std::vector<std::string>& environment) {
  if (argv0.find('/') != std::string::npos) return argv0;
  std::string path = "/bin:/usr/bin";
  for (const std::string& entry : environment) {
    if (entry.rfind("PATH=", 0) == 0) path = entry.substr(5);
  }
  size_t begin = 0;
  while (begin <= path.size()) {
    size_t end = path.find(':', begin);
    if (end == std::string::npos) end = path.size();
    const std::string dir = end > begin ? path.substr(begin, end - begin) : ".";
    const std::string candidate = dir + "/" + argv0;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    begin = end + 1;
  }
  return argv0;  // not found: posix_spawn reports ENOENT
}

}  // namespace

ProcessResult RunProcess(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                         double timeout_seconds, bool (*interrupted)(), const Environment& environment) {
  ProcessResult result;
  auto start = std::chrono::steady_clock::now();
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    result.output = std::string("pipe failed: ") + std::strerror(errno);
    return result;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::string dir = cwd.string();
  posix_spawn_file_actions_addchdir_np(&actions, dir.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);  // its own group: a timeout kills the compiler and its children
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);

  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc;
  if (environment) {
    std::vector<char*> envp;
    for (const std::string& entry : *environment) envp.push_back(const_cast<char*>(entry.c_str()));
    envp.push_back(nullptr);
    const std::string program = FindOnPath(argv[0], *environment);
    rc = posix_spawn(&pid, program.c_str(), &actions, &attr, args.data(), envp.data());
  } else {
    rc = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  }
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(pipe_fds[1]);
  if (rc != 0) {
    ::close(pipe_fds[0]);
    result.output = "cannot run '" + argv[0] + "': " + std::strerror(rc);
    return result;
  }
  result.started = true;

  auto deadline = start + std::chrono::duration<double>(timeout_seconds);
  auto next_check = start;
  char buf[4096];
  bool open = true;
  while (open) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      result.timed_out = true;
      break;
    }
    int wait_ms = int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count()) + 1;
    if (interrupted) wait_ms = std::min(wait_ms, 50);
    pollfd pfd{pipe_fds[0], POLLIN, 0};
    int ready = ::poll(&pfd, 1, wait_ms);
    if (interrupted && std::chrono::steady_clock::now() >= next_check) {
      if (interrupted()) {
        result.interrupted = true;
        break;
      }
      next_check = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    }
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    ssize_t n = ::read(pipe_fds[0], buf, sizeof buf);
    if (n > 0) result.output.append(buf, size_t(n));
    else if (n == 0 || errno != EINTR) open = false;
  }
  ::close(pipe_fds[0]);
  const bool killed = result.timed_out || result.interrupted;
  if (killed) ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (killed) {
    ::kill(-pid, SIGKILL);  // children that outlived the group leader
  } else if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace pypto_pro::jit
