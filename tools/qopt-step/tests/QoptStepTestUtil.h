//===- QoptStepTestUtil.h - Running qopt-step in a test -------------------===//
//
// Temporary directories, whole-file reads and writes, and qopt-step (or a
// copy of it) run as a child process with its output captured: what both
// qopt-step suites share.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_TOOLS_QOPTSTEP_TESTS_QOPTSTEPTESTUTIL_H
#define QOPT_TOOLS_QOPTSTEP_TESTS_QOPTSTEPTESTUTIL_H

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

extern char **environ;

namespace qopt::steptest {

inline std::string kernelDir() {
  const char *dir = std::getenv("QOPT_TEST_KERNEL_DIR");
  return dir && *dir ? dir : QOPT_DEFAULT_KERNEL_DIR;
}

/// A fresh directory for one test's files.
inline std::string makeTempDir() {
  char tmpl[] = "/tmp/qopt_step_test_XXXXXX";
  char *d = ::mkdtemp(tmpl);
  return d ? std::string(d) : std::string("/tmp");
}

inline std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

inline std::vector<std::string> listDir(const std::string &dir) {
  std::vector<std::string> names;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (dirent *e = ::readdir(d))
      if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, ".."))
        names.push_back(e->d_name);
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

struct Result {
  int status = -1;    ///< exit status
  std::string output; ///< stdout and stderr together
};

/// The binary under test ($QOPT_STEP_BINARY overrides the build's, e.g. in a
/// build tree copied to another machine).
inline std::string stepBinary() {
  const char *bin = std::getenv("QOPT_STEP_BINARY");
  return bin && *bin ? bin : QOPT_STEP_BINARY;
}

/// Runs the program `binary` with `args`, its output captured.
inline Result runProgram(const std::string &binary, const std::vector<std::string> &args) {
  std::string logPath = makeTempDir() + "/log";
  std::vector<std::string> all = {binary};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char *> argv;
  for (std::string &a : all)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, logPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  Result r;
  int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    r.output = std::string("posix_spawn failed: ") + std::strerror(rc);
    return r;
  }
  int wstatus = 0;
  ::waitpid(pid, &wstatus, 0);
  r.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  r.output = readBytes(logPath);
  ::unlink(logPath.c_str());
  ::rmdir(logPath.substr(0, logPath.size() - 4).c_str());
  return r;
}

/// Runs qopt-step with `args`, its output captured.
inline Result runStep(const std::vector<std::string> &args) { return runProgram(stepBinary(), args); }

/// Appends `more` to `args` (strings, so that no pointer outlives its string).
inline void append(std::vector<std::string> &args, std::initializer_list<std::string> more) {
  args.insert(args.end(), more.begin(), more.end());
}

} // namespace qopt::steptest

#endif // QOPT_TOOLS_QOPTSTEP_TESTS_QOPTSTEPTESTUTIL_H
