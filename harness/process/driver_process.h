// A client's driver program as a child process (docs/client-certification.md, "The driver protocol"): the
// harness writes commands to its stdin and reads results and events from its stdout, one JSON object a line.
// Its stderr is kept (bounded) for the report when the driver crashes, hangs or says something is wrong.
//
// Every read has a deadline; the destructor kills a driver still running. One case, one thread.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "harness/client/byte_stream.h"
#include "protocol/error.h"

namespace firemq::conform {

// What a driver may print on stderr that the report keeps: its tail, beyond this many bytes.
inline constexpr std::size_t kMaxDriverStderr = 8192;
// The longest line a driver may write: a message body of the cases is small, a line this long is a bug.
inline constexpr std::size_t kMaxDriverLine = 1 << 20;

class DriverProcess {
 public:
  // Starts `argv[0]` with the rest as its arguments; the error says why it could not start.
  static Result<std::unique_ptr<DriverProcess>, std::string> start(const std::vector<std::string>& argv);
  ~DriverProcess();
  DriverProcess(const DriverProcess&) = delete;
  DriverProcess& operator=(const DriverProcess&) = delete;

  // Writes one command line; false when the driver no longer reads (it exited).
  bool send(const nlohmann::json& command);

  // The next line the driver wrote, parsed. `error` says why there is none: the deadline passed, the driver
  // closed its stdout (exited), or the line is no JSON object.
  struct Line {
    std::optional<nlohmann::json> json;
    std::string error;
  };
  Line next_line(Clock::time_point deadline);

  // Closes its stdin (the end of the commands), waits until `deadline` for it to exit, then kills it.
  // Returns a description of how it ended: "exit status 0", "killed by signal 11", "killed: did not exit".
  std::string finish(Clock::time_point deadline);
  bool exited_cleanly() const { return exit_status_ == 0; }

  // What it wrote on stderr so far (the last kMaxDriverStderr bytes).
  std::string stderr_text();

 private:
  DriverProcess(pid_t pid, int in, int out, int err) : pid_(pid), stdin_(in), stdout_(out), stderr_(err) {}
  void drain_stderr();
  std::optional<std::string> take_line();

  pid_t pid_;
  int stdin_, stdout_, stderr_;
  std::string out_buffer_;
  std::string err_buffer_;
  bool out_closed_ = false;
  int exit_status_ = -1;
};

}  // namespace firemq::conform
