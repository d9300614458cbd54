// The reference broker as a child process, for runs without --url: started on free ports (one per listener
// asked for: fire, fires, ws, wss) with a fresh working directory, stopped with SIGTERM (SIGKILL if it does
// not exit) when the run ends. It keeps its durable state in <work_dir>/data, so that restart() brings it back
// with what it stored, on the same ports.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "harness/model/transport.h"
#include "protocol/error.h"

namespace firemq::conform {

struct EmbeddedOptions {
  std::string broker_path;         // the firemq-broker executable
  std::string definitions_file;    // conformance/definitions.json
  std::filesystem::path work_dir;  // created fresh; the broker's log, port file and data dir go here
  std::vector<std::string> extra_args;
  bool keep_work_dir = false;      // reuse what is there (the data dir of an earlier run) instead
  std::filesystem::path data_dir;  // the broker's --data-dir; empty: <work_dir>/data
  // The listeners to start; the others are off. fires and wss need tls_cert and tls_key
  // (test_certificates.h makes a pair).
  std::set<Transport> listeners = {Transport::fire};
  std::filesystem::path tls_cert, tls_key;
  // The AMQP 0-9-1 listener, on a free port: the AMQP side of the interop cases; with fires or wss, amqps too.
  bool amqp = true;
};

class EmbeddedBroker {
 public:
  // Starts the broker and waits (up to 60 s: recovering a large store takes time) until it reports its port;
  // the error includes its log's tail.
  static Result<std::unique_ptr<EmbeddedBroker>, std::string> start(const EmbeddedOptions& options);
  ~EmbeddedBroker();

  std::uint16_t port() const { return port(Transport::fire); }
  // The listener's port; 0 when it was not asked for.
  std::uint16_t port(Transport t) const {
    auto it = ports_.find(t);
    return it == ports_.end() ? 0 : it->second;
  }
  // The AMQP listener's port; 0 when it is off.
  std::uint16_t amqp_port() const { return amqp_port_; }
  // The amqps listener's port (AMQP inside TLS, with the certificate of fires and wss); 0 when it is off.
  std::uint16_t amqps_port() const { return amqps_port_; }
  const std::filesystem::path& log_file() const { return log_; }
  const std::filesystem::path& data_dir() const { return data_dir_; }
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }  // for a tool that reads the broker's /proc/PID/status
  // SIGTERM, then SIGKILL after `grace_ms`; returns the exit status as `wait` reports it (-1 if killed).
  // `signalled`, when given, runs once SIGTERM is sent (a client answering the broker's close, say).
  int stop(int grace_ms = 10'000, const std::function<void()>& signalled = {});
  // SIGKILL at once (kill -9): the broker gets no chance to write anything more.
  void kill();
  // Stops the broker (SIGTERM and wait, or SIGKILL at once when `kill`) and starts it again with the same
  // flags, data dir and port, waiting until it reports the port again. The log is kept: the new process
  // appends to it after a line that says why. The error says what failed and includes the log's tail.
  struct Restarted {
    int exit_status;   // of the stopped process: as stop() returns it; -1 when killed
    std::string what;  // for transcripts: "SIGTERM: exit status 0; started again on port 40123"
  };
  Result<Restarted, std::string> restart(bool kill, const std::function<void()>& signalled = {});

 private:
  EmbeddedBroker(std::vector<std::string> args, std::filesystem::path work_dir, std::filesystem::path data_dir,
                 std::set<Transport> listeners, bool amqp, bool amqps)
      : args_(std::move(args)),
        work_dir_(std::move(work_dir)),
        log_(work_dir_ / "broker.log"),
        data_dir_(std::move(data_dir)),
        listeners_(std::move(listeners)),
        amqp_(amqp),
        amqps_(amqps) {}
  // Spawns the broker with args_ (and each listener's port: ports_, or free ones the first time) and waits until it
  // reports them.
  IoStatus spawn(bool append_log);
  std::vector<std::string> port_flags() const;

  std::vector<std::string> args_;  // every flag but the ports
  std::filesystem::path work_dir_;
  std::filesystem::path log_;
  std::filesystem::path data_dir_;
  std::set<Transport> listeners_;
  pid_t pid_ = 0;
  std::map<Transport, std::uint16_t> ports_;  // empty until the first start reports them; then kept across restarts
  bool amqp_ = false;
  std::uint16_t amqp_port_ = 0;  // as ports_
  bool amqps_ = false;
  std::uint16_t amqps_port_ = 0;  // as ports_
};

std::string tail_of(const std::filesystem::path& file, std::size_t max_bytes = 2000);

}  // namespace firemq::conform
