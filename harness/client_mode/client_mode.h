// Client mode (docs/client-certification.md): certifies a client library through its driver program. Each
// client case starts the driver (driver_process.h), puts the harness's proxy (client_proxy.h) between it and
// the reference broker, and runs the case's steps: commands to the driver with the replies they expect,
// events the driver must report, frames the proxy sends as the server, frames the client must send. The proxy
// judges every frame the client sends; any violation fails the case, as in broker mode.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/client_mode/client_proxy_stream.h"
#include "harness/model/case_model.h"
#include "harness/model/run_result.h"
#include "harness/rules/wire_monitor.h"

namespace firemq::conform {

// The version of the driver protocol the harness speaks: a driver says its own in its "ready" line.
inline constexpr int kDriverProtocolVersion = 2;
// Version 2 adds publish_batch (several publishes in flight); a version 1 driver still runs every case that does
// not need it, and the others are skipped, saying so.
inline constexpr int kOldestDriverProtocolVersion = 1;

// The verbs of client cases (docs/client-certification.md, "Client cases").
const std::vector<std::string>& client_step_verbs();

// The wire monitor's rules that bind a client, and the client-only rules: what a client run covers.
std::vector<MonitorRule> rules_judging_clients();

struct ClientRunOptions {
  std::vector<std::string> driver;  // the driver's command line: the program and its arguments
  std::string broker_host = "127.0.0.1";
  std::uint16_t broker_port = 0;  // the reference broker's fire listener
  // The transport the driver connects over, to the proxy (the proxy speaks fire:// to the broker). A case
  // whose "transports" leave it out is skipped.
  Transport transport = Transport::fire;
  std::shared_ptr<ProxyTls> tls;      // fires and wss: the proxy's certificate
  std::string ca_file;                // fires and wss: the CA that signed it, given to the driver on connect
  std::filesystem::path vectors_dir;  // urls.json is read from here
  int jobs = 2;
  std::vector<std::string> known_failures;
  std::string run_id;  // makes the names cases create unique
  std::function<void(const CaseResult&, std::size_t done, std::size_t total)> on_case_done;
};

// The transports the driver declares in its ready line ("transports"; fire alone when it names none), asked
// of a driver started for the purpose. None when it did not start or said no valid ready line: its cases
// will fail and say why.
std::optional<std::set<Transport>> driver_transports(const std::vector<std::string>& driver);

std::vector<CaseResult> run_client_cases(const std::vector<const CaseSpec*>& cases, const ClientRunOptions& options);

// Whether `actual` has everything `pattern` has (docs/client-certification.md, "Matching"): objects by their
// keys (extra keys allowed), arrays element by element, "$any" for any value present, numbers by value. Empty
// when it matches; otherwise what differs, with its path.
std::string subset_mismatch(const nlohmann::json& pattern, const nlohmann::json& actual, const std::string& path = "");

}  // namespace firemq::conform
