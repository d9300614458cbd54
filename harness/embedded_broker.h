// The reference broker as a child process, for runs without --url: started on a free port with a fresh
// working directory, stopped with SIGTERM (SIGKILL if it does not exit) when the run ends.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "protocol/error.h"

namespace firemq::conform {

struct EmbeddedOptions {
  std::string broker_path;                 // the firemq-broker executable
  std::string definitions_file;            // conformance/definitions.json
  std::filesystem::path work_dir;          // created fresh; the broker's log and port file go here
  std::vector<std::string> extra_args;
};

class EmbeddedBroker {
 public:
  // Starts the broker and waits (up to 10 s) until it reports its port; the error includes its log's tail.
  static Result<std::unique_ptr<EmbeddedBroker>, std::string> start(const EmbeddedOptions& options);
  ~EmbeddedBroker();

  std::uint16_t port() const { return port_; }
  const std::filesystem::path& log_file() const { return log_; }
  // SIGTERM, then SIGKILL after `grace_ms`; returns the exit status as `wait` reports it (-1 if killed).
  int stop(int grace_ms = 10'000);

 private:
  EmbeddedBroker(pid_t pid, std::uint16_t port, std::filesystem::path log) : pid_(pid), port_(port), log_(std::move(log)) {}
  pid_t pid_;
  std::uint16_t port_;
  std::filesystem::path log_;
};

std::string tail_of(const std::filesystem::path& file, std::size_t max_bytes = 2000);

}  // namespace firemq::conform
