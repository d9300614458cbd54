#include "harness/run/runner.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "harness/run/amqp_side.h"
#include "harness/run/scenario.h"
#include "protocol/msgpack_codec.h"

extern char** environ;

namespace firemq::conform {
namespace {

bool any_glob(const std::vector<std::string>& globs, const std::string& id) {
  return std::any_of(globs.begin(), globs.end(), [&](const std::string& g) { return glob_match(g, id); });
}

std::string transports_text(const std::set<Transport>& transports) {
  std::string out;
  for (Transport t : transports) out += (out.empty() ? "" : ", ") + std::string(transport_name(t));
  return out;
}

std::string missing_requirement(const CaseSpec& spec, const Target& target, const ServerInfo& server) {
  if (spec.speaks_fire && !target.speaks_fire) {
    return "opens FireMQ connections, and the target is AMQP 0-9-1 only (--url amqp://...): give the broker's "
           "FireMQ URL as --url and this one as --amqp-url to run it";
  }
  if (!spec.transports.count(target.transport)) {
    return "runs over " + transports_text(spec.transports) + " only; this run is over " +
           std::string(transport_name(target.transport));
  }
  for (const std::string& f : spec.required_features) {
    if (f == "restart" && !target.features.count(f)) {
      return "restarts the broker: pass --restart-command CMD, a command that restarts the target (README, "
             "'Testing another broker')";
    }
    if (f == "alarm" && !target.features.count(f)) {
      return "raises a resource alarm: pass --alarm-command CMD, a command that raises and clears one on the target "
             "(README, 'Testing another broker')";
    }
    if (f == "amqp" && !target.features.count(f)) {
      return "speaks AMQP 0-9-1 too: pass --amqp-url amqp://user:pass@host:port/vhost, the target's AMQP listener";
    }
    if (!target.features.count(f)) return "needs the target feature '" + f + "' (declare it with --features " + f + ")";
  }
  for (const std::string& cap : spec.required_caps) {
    if (std::find(server.caps.begin(), server.caps.end(), cap) == server.caps.end()) {
      return "needs the capability '" + cap + "', which the broker's welcome does not list";
    }
  }
  return "";
}

CaseResult skipped(const CaseSpec& spec, std::string why) {
  CaseResult r = result_for(spec);
  r.verdict = Verdict::skipped;
  r.message = std::move(why);
  return r;
}

// A case with broker_args runs against a reference broker of its own, started with those flags.
CaseResult run_on_own_broker(const CaseSpec& spec, const Target& target, const RunOptions& options,
                             const std::string& prefix) {
  if (!options.start_broker) {
    return skipped(spec, "needs a reference broker started with its own flags (runs without --url only)");
  }
  auto broker = options.start_broker(spec.broker_args);
  if (!broker) {
    CaseResult r = result_for(spec);
    r.verdict = Verdict::error;
    r.message = "could not start the case's own broker: " + broker.error();
    return r;
  }
  Target own = target;
  own.port = (*broker)->port(target.transport);
  if (own.amqp) own.amqp->port = own.amqp->tls ? (*broker)->amqps_port() : (*broker)->amqp_port();
  own.description = "the case's own reference broker";
  const std::shared_ptr<void> proxy = options.through ? options.through(own) : nullptr;
  Scenario scenario(spec, own, prefix);
  EmbeddedBroker& process = **broker;
  scenario.set_broker_stopper([&process] { return process.stop(); });
  scenario.set_broker_restarter([&process](bool kill, Clock::time_point, const std::function<void()>& signalled) {
    auto restarted = process.restart(kill, signalled);
    if (!restarted) return StepOutcome::fail(restarted.error());
    if (!kill && restarted->exit_status != 0) {
      return StepOutcome::fail("after SIGTERM the broker exited with status " + std::to_string(restarted->exit_status) +
                               ", expected 0 (" + restarted->what + ")");
    }
    return StepOutcome{StepOutcome::Kind::ok, restarted->what};
  });
  CaseResult r = scenario.run();
  process.stop();  // a no-op when a stop_broker step already stopped it
  return r;
}

}  // namespace

// A known-failures entry is an id glob, for every transport, or "GLOB@TRANSPORT" for one (e.g. "websocket.*@wss").
static bool listed(const std::vector<std::string>& known, const CaseResult& r) {
  return std::any_of(known.begin(), known.end(), [&r](const std::string& entry) {
    const std::size_t at = entry.rfind('@');
    if (at == std::string::npos) return glob_match(entry, r.id);
    return entry.compare(at + 1, std::string::npos, r.transport) == 0 && glob_match(entry.substr(0, at), r.id);
  });
}

void apply_known_failures(CaseResult& r, const std::vector<std::string>& known) {
  if (!listed(known, r)) return;
  if (r.verdict == Verdict::fail) {
    r.verdict = Verdict::expected_fail;
    r.message = "known failure: " + r.message;
  } else if (r.verdict == Verdict::pass) {
    r.verdict = Verdict::unexpected_pass;
    r.message = "remove it from the known-failures file";  // the reports say it was listed and passed
  }
}

bool restarts_broker(const CaseSpec& spec) {
  return std::count(spec.required_features.begin(), spec.required_features.end(), "restart") > 0;
}

namespace {

// Runs a target command (--restart-command, --alarm-command) under /bin/sh -c, in the harness's environment
// changed by `env` ("NAME=value" sets NAME, a bare "NAME" unsets it), bounded by `deadline`; `started` runs
// while it works. Its output goes to a file, shown when it fails.
IoStatus run_target_command(const std::string& what, const std::string& command, const std::vector<std::string>& env,
                            Clock::time_point deadline, const std::function<void()>& started) {
  const std::filesystem::path output = std::filesystem::temp_directory_path() /
                                       ("firemq-conform-" + what + "-" + std::to_string(::getpid()) + ".log");
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const bool replaced = std::any_of(env.begin(), env.end(), [&](const std::string& mine) {
      return entry.starts_with(mine.substr(0, mine.find('=')) + "=");
    });
    if (!replaced) environment.emplace_back(entry);
  }
  std::copy_if(env.begin(), env.end(), std::back_inserter(environment),
               [](const std::string& e) { return e.find('=') != std::string::npos; });
  std::vector<char*> envp;
  for (std::string& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string sh = "/bin/sh", dash_c = "-c", text = command;
  char* argv[] = {sh.data(), dash_c.data(), text.data(), nullptr};

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);  // its own group: killed whole if it hangs
  posix_spawnattr_setpgroup(&attributes, 0);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, argv[0], &actions, &attributes, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (rc != 0) return "cannot run the " + what + " command: " + std::string(std::strerror(rc));
  if (started) started();
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) != pid) {
    if (Clock::now() >= deadline) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return "the " + what + " command '" + command + "' did not finish within the case's timeout:\n" + tail_of(output);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return "the " + what + " command '" + command + "' failed (status " +
           std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + "):\n" + tail_of(output);
  }
  return IoStatus::done();
}

}  // namespace

StepOutcome restart_with_command(const RestartCommand& how, bool kill, Clock::time_point deadline,
                                 const std::function<void()>& signalled) {
  // While the command stops the broker gracefully, the case's connections answer its close as clients do, so
  // that it need not wait for them.
  const std::string kill_flag = kill ? "FIREMQ_RESTART_KILL=1" : "FIREMQ_RESTART_KILL";  // bare: unset
  const IoStatus ran = run_target_command("restart", how.command, {kill_flag}, deadline,
                                          kill ? std::function<void()>() : signalled);
  if (!ran) return StepOutcome::error(ran.error());
  // The command has returned: the old broker is gone; wait for the new one to listen.
  while (true) {
    WireConnection probe;
    if (probe.connect(how.host, how.port, std::min(deadline, Clock::now() + std::chrono::seconds(1))).ok()) {
      return StepOutcome{StepOutcome::Kind::ok, "'" + how.command + "' ran" +
                                                    (kill ? " with FIREMQ_RESTART_KILL=1" : "") + "; " + how.host +
                                                    ":" + std::to_string(how.port) + " accepts connections again"};
    }
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return StepOutcome::fail("after the restart command, the broker did not accept connections on " + how.host + ":" +
                           std::to_string(how.port) + " again within the case's timeout");
}

StepOutcome alarm_with_command(const std::string& command, bool raise, Clock::time_point deadline) {
  const IoStatus ran = run_target_command("alarm", command,
                                          {std::string("FIREMQ_ALARM=") + (raise ? "raise" : "clear")}, deadline, {});
  if (!ran) return StepOutcome::error(ran.error());
  return StepOutcome{StepOutcome::Kind::ok, "'" + command + "' ran with FIREMQ_ALARM=" + (raise ? "raise" : "clear")};
}

bool raises_alarm(const CaseSpec& spec) {
  return std::count(spec.required_features.begin(), spec.required_features.end(), "alarm") > 0;
}

std::vector<const CaseSpec*> select_cases(const std::vector<CaseSpec>& cases, const Selection& sel) {
  std::vector<const CaseSpec*> out;
  for (const CaseSpec& c : cases) {
    if (!sel.id_globs.empty() && !any_glob(sel.id_globs, c.id)) continue;
    if (!sel.groups.empty() && !sel.groups.count(c.group)) continue;
    if (!sel.levels.empty() && !sel.levels.count(c.level)) continue;
    if (!sel.tags.empty() &&
        std::none_of(c.tags.begin(), c.tags.end(), [&](const auto& t) { return sel.tags.count(t); })) {
      continue;
    }
    out.push_back(&c);
  }
  return out;
}

Result<std::vector<std::string>, std::string> load_known_failures(const std::string& file) {
  std::ifstream in(file);
  if (!in) return "cannot read known-failures file '" + file + "'";
  std::vector<std::string> ids;
  for (std::string line; std::getline(in, line);) {
    line = line.substr(0, line.find('#'));
    line.erase(0, line.find_first_not_of(" \t"));
    line.erase(line.find_last_not_of(" \t\r") + 1);
    if (!line.empty()) ids.push_back(line);
  }
  return ids;
}

Result<ServerInfo, std::string> probe_server(const Target& target) {
  if (!target.speaks_fire) {
    auto amqp = probe_amqp(*target.amqp);
    if (!amqp) return amqp.error();
    return ServerInfo{amqp->product, amqp->version, {}};
  }
  WireConnection wire;
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  auto connected = wire.connect(target.address(), deadline);
  if (!connected) return connected.error().message;
  op::Hello hello;
  hello.ver = 1;
  hello.vhost = target.vhost;
  hello.auth = {"plain", target.user, target.password};
  hello.client = Map{{Value("name"), Value("firemq-conform")}, {Value("purpose"), Value("probe")}};
  Bytes bytes(kPreamble.begin(), kPreamble.end());  // dropped on WebSocket, with the len of the frame
  const Bytes frame = encode_frame(hello);
  bytes.insert(bytes.end(), frame.begin(), frame.end());
  wire.send(bytes, deadline);
  WireEvent event = wire.receive(deadline);
  auto* got = std::get_if<FrameEvent>(&event);
  if (got == nullptr) return std::string("the target did not answer hello with a frame");
  Result<Message> message = decode_frame(got->frame);
  if (message && std::holds_alternative<op::Error>(*message)) {
    return "the target refused the harness's hello: " + std::get<op::Error>(*message).msg;
  }
  if (!message || !std::holds_alternative<op::Welcome>(*message))
    return std::string("the target did not answer hello with welcome");
  const op::Welcome& welcome = std::get<op::Welcome>(*message);
  const Bytes close = encode_frame(op::Close{200, "probe done"});
  wire.send(close, deadline);
  return ServerInfo{welcome.server.name, welcome.server.version, welcome.caps};
}

std::vector<CaseResult> run_cases(const std::vector<const CaseSpec*>& cases, const Target& target,
                                  const ServerInfo& server, const RunOptions& options) {
  std::vector<CaseResult> results(cases.size());
  std::size_t done = 0;
  std::mutex progress;
  auto run_one = [&](std::size_t i) {
    const CaseSpec& spec = *cases[i];
    // Names a case creates start with this prefix, so parallel cases never meet.
    const std::string prefix = "conform-" + options.run_id + "-" + std::to_string(i);
    CaseResult r;
    if (std::string missing = missing_requirement(spec, target, server); !missing.empty()) {
      r = skipped(spec, missing);
    } else if (spec.own_broker || (restarts_broker(spec) && options.start_broker)) {
      r = run_on_own_broker(spec, target, options, prefix);
    } else {
      Scenario scenario(spec, target, prefix);
      if (restarts_broker(spec) && options.restart_command) {
        scenario.set_broker_restarter([&how = *options.restart_command](bool kill, Clock::time_point deadline,
                                                                        const std::function<void()>& signalled) {
          return restart_with_command(how, kill, deadline, signalled);
        });
      }
      if (raises_alarm(spec) && options.alarm_command) {
        scenario.set_alarm_switch([&command = *options.alarm_command](bool raise, Clock::time_point deadline) {
          return alarm_with_command(command, raise, deadline);
        });
      }
      r = scenario.run();
    }
    r.transport = target.speaks_fire ? std::string(transport_name(target.transport)) : "amqp";
    apply_known_failures(r, options.known_failures);
    results[i] = std::move(r);
    std::lock_guard lock(progress);
    ++done;
    if (options.on_case_done) options.on_case_done(results[i], done, cases.size());
  };
  // A case that restarts a --url target, or raises an alarm on it (which pauses every publisher of the broker),
  // runs after the others, alone.
  std::vector<std::size_t> side_by_side, alone;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const CaseSpec& spec = *cases[i];
    const bool disturbs_shared_target = (restarts_broker(spec) || raises_alarm(spec)) && !spec.own_broker &&
                                        !options.start_broker && missing_requirement(spec, target, server).empty();
    (disturbs_shared_target ? alone : side_by_side).push_back(i);
  }
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t n = next++; n < side_by_side.size(); n = next++) run_one(side_by_side[n]);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < std::max(1, options.jobs); ++t) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  for (std::size_t i : alone) run_one(i);
  return results;
}

}  // namespace firemq::conform
