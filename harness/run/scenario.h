// Runs one case's steps against a target and gives its verdict (docs/case-format.md lists the verbs).
// One Scenario per case, on one thread; every wait is bounded by the step's and the case's deadlines.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "harness/client/target.h"
#include "harness/client/wire.h"
#include "harness/model/case_model.h"
#include "harness/model/verdict.h"
#include "harness/rules/matcher.h"
#include "protocol/messages.h"

namespace firemq::conform {

// A step's code argument: one code or a list of them (expect_error's "code", amqp_*'s "expect_close").
std::vector<std::uint64_t> codes_of(const nlohmann::json& codes);

class Scenario;
class AmqpSide;
// A named check: a property steps cannot express, implemented in C++ (checks.cpp).
using Check = std::function<StepOutcome(Scenario&, const nlohmann::json& args)>;
const std::map<std::string, Check>& named_checks();

class Scenario {
 public:
  Scenario(const CaseSpec& spec, const Target& target, std::string unique_prefix);
  ~Scenario();
  // For cases on a broker of their own: stops it with SIGTERM and returns its exit status (stop_broker step).
  void set_broker_stopper(std::function<int()> stop) { stop_broker_ = std::move(stop); }
  // Restarts the broker (restart_broker step): gracefully (SIGTERM), or at once (kill -9) when `kill`; returns
  // once it accepts connections again, at the latest by `deadline`. Calls `signalled` (when it can) once the
  // broker was told to stop gracefully, so that the case's connections answer its close as clients do. Set
  // for cases that require the feature "restart": on a broker of the case's own, or through
  // --restart-command against a --url target.
  using Restarter =
      std::function<StepOutcome(bool kill, Clock::time_point deadline, const std::function<void()>& signalled)>;
  void set_broker_restarter(Restarter restart) { restart_broker_ = std::move(restart); }
  // Raises (true) or clears (false) a resource alarm on the broker (alarm step), through --alarm-command; set
  // for cases that require the feature "alarm".
  using AlarmSwitch = std::function<StepOutcome(bool raise, Clock::time_point deadline)>;
  void set_alarm_switch(AlarmSwitch alarm) { alarm_ = std::move(alarm); }
  CaseResult run();

  // For named checks ----------------------------------------------------------------------------------
  struct Conn {
    std::string name;
    WireConnection wire;
    bool auto_pong = true;  // answer the broker's pings and hide them from expect steps
    bool dead = false;      // closed by restart_broker: a step on it is an error until it is connected again
  };
  struct Received {
    enum class Kind { frame, closed, timeout, bad_framing } kind;
    RawFrame frame;                              // kind == frame
    Value header;                                // the header as a Value (a Map), when it decodes
    std::string detail;                          // closed: how; bad_framing: the decoder's error
    std::optional<std::uint16_t> ws_close_code;  // closed by a WebSocket close frame with a code
  };
  Conn* conn(const std::string& name);
  // The next frame on `c` (pings answered and skipped when auto_pong, unless want_ping), or why none came.
  Received next(Conn& c, Clock::time_point deadline, bool want_ping = false);
  bool send_message(Conn& c, const Message& m, ByteView payload = {});
  Clock::time_point deadline_after(const nlohmann::json& args, const char* key, int default_ms) const;
  void note(const std::string& conn, const std::string& text);
  Vars& vars() { return vars_; }

 private:
  StepOutcome run_step(const std::string& verb, const nlohmann::json& args);
  StepOutcome step_connect(const nlohmann::json& args);
  StepOutcome step_hello(const nlohmann::json& args);
  StepOutcome step_handshake(const nlohmann::json& args);
  StepOutcome step_send(const nlohmann::json& args);
  StepOutcome step_send_raw(const nlohmann::json& args);
  StepOutcome step_expect(const nlohmann::json& args);
  StepOutcome step_expect_error(const nlohmann::json& args);
  StepOutcome step_expect_close(const nlohmann::json& args);
  StepOutcome step_expect_none(const nlohmann::json& args);
  StepOutcome step_sleep(const nlohmann::json& args);
  StepOutcome step_disconnect(const nlohmann::json& args);
  StepOutcome step_auto_pong(const nlohmann::json& args);
  StepOutcome step_check(const nlohmann::json& args);
  StepOutcome step_stop_broker(const nlohmann::json& args);
  StepOutcome step_restart_broker(const nlohmann::json& args);
  StepOutcome step_alarm(const nlohmann::json& args);
  void clear_alarm_left_raised();
  StepOutcome step_ws_send(const nlohmann::json& args);
  StepOutcome step_expect_ws_pong(const nlohmann::json& args);
  StepOutcome step_expect_http_status(const nlohmann::json& args);
  StepOutcome step_http(const nlohmann::json& args);

  void retire(const std::string& name);
  std::vector<MonitorViolation> all_violations() const;
  double ms_since_start() const;
  void close_after_shutdown(Clock::time_point deadline);
  StepOutcome expect_closed_after_fatal(Conn& c, const std::string& what, Clock::time_point deadline);
  StepOutcome expect_still_open(Conn& c, Clock::time_point deadline);
  Result<Conn*, std::string> conn_for(const nlohmann::json& args);
  WireAddress address_for(const nlohmann::json& args) const;
  StepOutcome sent(Conn& c, bool ok, const nlohmann::json& args);
  nlohmann::json substitute(const nlohmann::json& j) const;
  bool send_bytes(Conn& c, const Bytes& bytes, const std::string& op, const std::string& header_text, ByteView payload);
  bool send_framed(Conn& c, std::uint8_t op, ByteView header, ByteView payload, const std::string& header_text);
  void log_frame(const std::string& conn, const std::string& direction, std::uint8_t op, ByteView header,
                 ByteView payload);
  std::string describe(const Received& r) const;

  const CaseSpec& spec_;
  const Target& target_;
  Clock::time_point started_;
  Clock::time_point case_deadline_;
  std::map<std::string, std::unique_ptr<Conn>> conns_;
  Vars vars_;
  std::vector<TranscriptLine> transcript_;
  std::function<int()> stop_broker_;
  Restarter restart_broker_;
  AlarmSwitch alarm_;
  bool alarm_raised_ = false;                         // by this case's alarm step, and not cleared yet
  std::vector<MonitorViolation> retired_violations_;  // of connections replaced by one of the same name
  std::unique_ptr<AmqpSide> amqp_;  // the case's AMQP connections (amqp_* steps, harness/run/amqp_side.h)
};

}  // namespace firemq::conform
