#include "harness/process/driver_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace firemq::conform {
namespace {

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

int ms_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 60'000));
}

}  // namespace

Result<std::unique_ptr<DriverProcess>, std::string> DriverProcess::start(const std::vector<std::string>& argv) {
  if (argv.empty()) return std::string("no driver command");
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    return std::string("pipe: ") + std::strerror(errno);
  }
  // Everything the child needs is made before fork: other threads of the harness may hold locks (malloc's)
  // that the child would wait for forever.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const std::string cannot_run = "cannot run " + argv[0] + "\n";
  const pid_t pid = ::fork();
  if (pid < 0) return std::string("fork: ") + std::strerror(errno);
  if (pid == 0) {
    ::dup2(in[0], STDIN_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    ::execvp(args[0], args.data());
    (void)!::write(STDERR_FILENO, cannot_run.data(), cannot_run.size());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  // A driver that exits while the harness writes must not kill the harness with SIGPIPE.
  ::signal(SIGPIPE, SIG_IGN);
  ::fcntl(out[0], F_SETFL, O_NONBLOCK);
  ::fcntl(err[0], F_SETFL, O_NONBLOCK);
  return std::unique_ptr<DriverProcess>(new DriverProcess(pid, in[1], out[0], err[0]));
}

DriverProcess::~DriverProcess() {
  if (exit_status_ < 0 && pid_ > 0) finish(Clock::now());
  close_fd(stdin_);
  close_fd(stdout_);
  close_fd(stderr_);
}

bool DriverProcess::send(const nlohmann::json& command) {
  if (stdin_ < 0) return false;
  const std::string line = command.dump() + "\n";
  std::size_t written = 0;
  while (written < line.size()) {
    const ssize_t n = ::write(stdin_, line.data() + written, line.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    written += static_cast<std::size_t>(n);
  }
  return true;
}

void DriverProcess::drain_stderr() {
  char chunk[4096];
  for (;;) {
    const ssize_t n = stderr_ < 0 ? 0 : ::read(stderr_, chunk, sizeof chunk);
    if (n <= 0) {
      if (n == 0) close_fd(stderr_);
      break;
    }
    err_buffer_.append(chunk, static_cast<std::size_t>(n));
    if (err_buffer_.size() > kMaxDriverStderr) err_buffer_.erase(0, err_buffer_.size() - kMaxDriverStderr);
  }
}

std::optional<std::string> DriverProcess::take_line() {
  const auto end = out_buffer_.find('\n');
  if (end == std::string::npos) return std::nullopt;
  std::string line = out_buffer_.substr(0, end);
  out_buffer_.erase(0, end + 1);
  return line;
}

DriverProcess::Line DriverProcess::next_line(Clock::time_point deadline) {
  for (;;) {
    if (auto line = take_line()) {
      auto json = nlohmann::json::parse(*line, nullptr, false);
      if (json.is_discarded() || !json.is_object())
        return {std::nullopt, "the driver wrote a line that is no JSON object: " + line->substr(0, 200)};
      return {std::move(json), ""};
    }
    if (out_buffer_.size() > kMaxDriverLine) return {std::nullopt, "the driver wrote a line longer than 1 MiB"};
    if (out_closed_) return {std::nullopt, "the driver closed its stdout (it exited?)"};
    pollfd fds[2] = {{stdout_, POLLIN, 0}, {stderr_, POLLIN, 0}};
    const int ready = ::poll(fds, stderr_ < 0 ? 1 : 2, ms_until(deadline));
    drain_stderr();
    if (ready == 0 && Clock::now() >= deadline) return {std::nullopt, "the driver wrote nothing in time"};
    char chunk[4096];
    const ssize_t n = ::read(stdout_, chunk, sizeof chunk);
    if (n == 0) out_closed_ = true;
    if (n > 0) out_buffer_.append(chunk, static_cast<std::size_t>(n));
  }
}

std::string DriverProcess::finish(Clock::time_point deadline) {
  close_fd(stdin_);
  int status = 0;
  for (;;) {
    drain_stderr();
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) break;
    if (Clock::now() >= deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      exit_status_ = 128 + SIGKILL;
      return "killed: it did not exit after its stdin closed";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  drain_stderr();
  if (WIFSIGNALED(status)) {
    exit_status_ = 128 + WTERMSIG(status);
    return std::string("killed by signal ") + std::to_string(WTERMSIG(status)) + " (" + ::strsignal(WTERMSIG(status)) +
           ")";
  }
  exit_status_ = WEXITSTATUS(status);
  return "exit status " + std::to_string(exit_status_);
}

std::string DriverProcess::stderr_text() {
  drain_stderr();
  return err_buffer_;
}

}  // namespace firemq::conform
