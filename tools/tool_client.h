// What firemq-bench, firemq-bench-durable and firemq-killtest share: their command line's common steps, the
// broker they measure (the reference broker started by EmbeddedBroker, or --url), and a small client over the
// harness's wire connection (open_session in harness/client/wire.h): connect, send a request and wait for its reply.
// Every wait has a deadline, as in the harness: a tool reports a broker that stops answering, never hangs.
#pragma once

#include <boost/program_options.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "harness/client/target.h"
#include "harness/client/wire.h"
#include "harness/process/embedded_broker.h"
#include "protocol/error.h"
#include "protocol/messages.h"

namespace firemq::tools {

using conform::Clock;
using conform::EmbeddedBroker;
using conform::EmbeddedOptions;
using conform::Transport;
using conform::WireConnection;
// Where a tool connects, over which transport, and as whom.
using Endpoint = conform::Target;

// ---- the command line ----

// Parses the flags into `vm`. Returns the exit code when the tool should stop here: 0 after --help (printed),
// 2 after a bad flag (the error on stderr as "<tool>: why"); nullopt to go on.
std::optional<int> parse_flags(const std::string& tool, const boost::program_options::options_description& flags,
                               int argc, char** argv, boost::program_options::variables_map& vm);

// <temp dir>/<tool>-<pid>: where a tool's embedded broker keeps its log and data dir.
std::filesystem::path tool_work_dir(const std::string& tool);

// ---- the broker under test ----

// The reference broker on this machine, as the embedded broker listens: 127.0.0.1, guest/guest, vhost /.
Endpoint local_endpoint(std::uint16_t port);

// What a tool measures: the embedded reference broker (`embedded` set), or a broker at --url.
struct Measured {
  std::unique_ptr<EmbeddedBroker> embedded;
  Endpoint endpoint;
};

// With an empty `url`, starts the reference broker with `options` and connects over `transport` (for fires and
// wss with a throwaway certificate of its own); otherwise parses `url`, of any scheme, its TLS checked as `tls`
// says. The error says why, ready to print after "<tool>: ".
Result<Measured, std::string> open_target(const std::string& url, EmbeddedOptions options,
                                          Transport transport = Transport::fire, const conform::TlsOptions& tls = {});

// ---- the client ----

class ToolClient {
 public:
  // `tool` names the program: it is each connection's client.name and the prefix of what goes to stderr.
  explicit ToolClient(std::string tool) : tool_(std::move(tool)) {}

  const std::string& tool() const { return tool_; }

  // A connection after hello and welcome (within 5 s), or nullptr with the reason on stderr.
  std::unique_ptr<WireConnection> connect(const Endpoint& endpoint) const;

  // Sends a request and waits up to `timeout` for its reply, skipping other frames (deliveries, confirms, flow)
  // meanwhile: the ok, or nullopt with the reason (an error frame, no reply, a closed connection) on stderr.
  std::optional<op::Ok> request(WireConnection& wire, const Message& request,
                                std::chrono::seconds timeout = std::chrono::seconds(10)) const;

  // Prints "<tool>: <text>" on stderr.
  void complain(const std::string& text) const;

 private:
  std::string tool_;
};

// A durable queue declared (or, `passive`, checked): the ok, whose `messages` is the queue's count.
std::optional<op::Ok> declare_durable_queue(const ToolClient& client, WireConnection& wire, const std::string& queue,
                                            bool passive, std::chrono::seconds timeout = std::chrono::seconds(10));

// Milliseconds, as a double: the unit the tools report in.
inline double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace firemq::tools
