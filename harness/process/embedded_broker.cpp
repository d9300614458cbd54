#include "harness/process/embedded_broker.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

extern char** environ;

namespace firemq::conform {
namespace {

using namespace std::chrono;

// Long enough for a broker recovering a large store (about 2.7 s per million messages here); a broker that
// exits at start is noticed at once, so this only bounds one that hangs.
constexpr auto kStartTimeout = seconds(60);

// The ports the broker wrote ({"fire": P, "fires": P, "ws": P, "wss": P, "amqp": P, "amqps": P}, the listeners
// that are on), or nothing while the file is not there yet or lacks one of `wanted`, or "amqp" ("amqps") when
// `amqp_port` (`amqps_port`) is given to take its port.
std::map<Transport, std::uint16_t> read_ports(const std::filesystem::path& file, const std::set<Transport>& wanted,
                                              std::uint16_t* amqp_port, std::uint16_t* amqps_port) {
  std::ifstream in(file);
  if (!in) return {};
  auto json = nlohmann::json::parse(in, nullptr, false);
  for (auto [name, port] : {std::pair{"amqp", amqp_port}, std::pair{"amqps", amqps_port}}) {
    if (port == nullptr) continue;
    if (json.is_discarded() || !json.contains(name) || !json.at(name).is_number_unsigned()) return {};
    *port = json.at(name).get<std::uint16_t>();
  }
  std::map<Transport, std::uint16_t> ports;
  for (Transport t : wanted) {
    const std::string name(transport_name(t));
    if (json.is_discarded() || !json.contains(name) || !json.at(name).is_number_unsigned()) return {};
    ports[t] = json.at(name).get<std::uint16_t>();
  }
  return ports;
}

// The broker's flag for each listener.
const char* port_flag(Transport t) {
  switch (t) {
    case Transport::fire: return "--port";
    case Transport::fires: return "--tls-port";
    case Transport::ws: return "--ws-port";
    case Transport::wss: return "--wss-port";
  }
  return "--port";
}

bool exited(pid_t pid, int& status) { return ::waitpid(pid, &status, WNOHANG) == pid; }

bool loopback_port_is_free(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const int yes = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);  // as the broker binds: TIME_WAIT is no obstacle
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool free = ::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return free;
}

// A free loopback port below the kernel's ephemeral range (net.ipv4.ip_local_port_range). The kernel hands the
// ports of that range to outgoing connections: while a broker restarts on the port it had, a client of another
// test could hold it as its local port, and the restart would find it taken for as long as that connection lasts.
std::uint16_t free_port_below_ephemeral_range() {
  int ephemeral_low = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> ephemeral_low;
  static std::mt19937 random{std::random_device{}()};
  std::uniform_int_distribution<int> below(10000, std::max(10001, ephemeral_low - 1));
  for (int attempt = 0; attempt < 100; ++attempt) {
    const auto port = static_cast<std::uint16_t>(below(random));
    if (loopback_port_is_free(port)) return port;
  }
  return 0;  // the kernel's choice, as before
}

void append_line(const std::filesystem::path& file, const std::string& line) {
  std::ofstream out(file, std::ios::app);
  out << line << "\n";
}

}  // namespace

std::string tail_of(const std::filesystem::path& file, std::size_t max_bytes) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  return s.size() > max_bytes ? "..." + s.substr(s.size() - max_bytes) : s;
}

Result<std::unique_ptr<EmbeddedBroker>, std::string> EmbeddedBroker::start(const EmbeddedOptions& options) {
  std::error_code ec;
  if (!options.keep_work_dir) std::filesystem::remove_all(options.work_dir, ec);
  std::filesystem::create_directories(options.work_dir, ec);
  if (ec) return "cannot create " + options.work_dir.string() + ": " + ec.message();

  const auto data_dir = options.data_dir.empty() ? options.work_dir / "data" : options.data_dir;
  // The AMQP listener, when asked for, on a free port (port_flags): 5672 would keep brokers from running side by side.
  std::vector<std::string> args = {
      options.broker_path, "--bind",         "127.0.0.1", "--port-file", (options.work_dir / "ports.json").string(),
      "--data-dir",        data_dir.string()};
  if (!options.definitions_file.empty()) args.insert(args.end(), {"--definitions", options.definitions_file});
  const bool tls = options.listeners.count(Transport::fires) || options.listeners.count(Transport::wss);
  if (tls && (options.tls_cert.empty() || options.tls_key.empty()))
    return std::string("fires and wss need a certificate");
  if (tls) args.insert(args.end(), {"--tls-cert", options.tls_cert.string(), "--tls-key", options.tls_key.string()});
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  // AMQP inside TLS (amqps) beside AMQP whenever there is a certificate: the AMQP side of a fires or wss run.
  std::unique_ptr<EmbeddedBroker> broker(new EmbeddedBroker(std::move(args), options.work_dir, data_dir,
                                                            options.listeners, options.amqp, options.amqp && tls));
  auto spawned = broker->spawn(options.keep_work_dir);
  if (!spawned) return spawned.error();
  return broker;
}

IoStatus EmbeddedBroker::spawn(bool append_log) {
  const auto port_file = work_dir_ / "ports.json";
  std::error_code ec;
  std::filesystem::remove(port_file, ec);
  const auto deadline = steady_clock::now() + kStartTimeout;
  int attempt = 0;
  while (true) {
    // Chosen again at each attempt of a first start (a port another process took meanwhile is not tried twice);
    // a restart keeps them.
    std::vector<std::string> args = args_;
    const std::vector<std::string> ports = port_flags();
    args.insert(args.begin() + 1, ports.begin(), ports.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    const int flags = O_WRONLY | O_CREAT | (append_log || attempt > 0 ? O_APPEND : O_TRUNC);
    posix_spawn_file_actions_addopen(&actions, 1, log_.c_str(), flags, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) return "cannot start " + args_.front() + ": " + std::strerror(rc);
    ++attempt;

    bool gone = false;
    while (steady_clock::now() < deadline) {
      if (auto reported = read_ports(port_file, listeners_, amqp_ ? &amqp_port_ : nullptr,
                                     amqps_ ? &amqps_port_ : nullptr);
          !reported.empty()) {
        pid_ = pid;
        ports_ = std::move(reported);
        return IoStatus::done();
      }
      int status = 0;
      if (exited(pid, status)) {
        gone = true;
        break;
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    if (!gone) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      return "the reference broker did not report its port within " + std::to_string(kStartTimeout.count()) + " s:\n" +
             tail_of(log_);
    }
    // On a restart the old port may still be held for a moment (a socket of the killed process being torn
    // down): try again until the deadline. A first start that exits has a reason in its log; when the reason is
    // a port taken between its choice and the broker's bind, it tries other ports.
    const bool port_taken = tail_of(log_).find("Address already in use") != std::string::npos;
    if ((ports_.empty() && !port_taken) || steady_clock::now() >= deadline) {
      return std::string(ports_.empty()
                             ? "the reference broker exited at start:\n"
                             : "the reference broker exited at restart on port " + std::to_string(port()) + ":\n") +
             tail_of(log_);
    }
    append_line(log_, ports_.empty() ? "--- firemq-conform: a port was taken; starting the broker on others ---"
                                     : "--- firemq-conform: the broker exited at restart; starting it again ---");
    std::this_thread::sleep_for(milliseconds(100));
  }
}

int EmbeddedBroker::stop(int grace_ms, const std::function<void()>& signalled) {
  if (pid_ <= 0) return 0;
  ::kill(pid_, SIGTERM);
  if (signalled) signalled();
  int status = 0;
  const auto deadline = steady_clock::now() + milliseconds(grace_ms);
  while (steady_clock::now() < deadline) {
    if (exited(pid_, status)) {
      pid_ = 0;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, &status, 0);
  pid_ = 0;
  return -1;
}

void EmbeddedBroker::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = 0;
}

Result<EmbeddedBroker::Restarted, std::string> EmbeddedBroker::restart(bool kill_it,
                                                                       const std::function<void()>& signalled) {
  std::string what;
  int status = -1;
  if (kill_it) {
    kill();
    what = "killed with SIGKILL";
  } else {
    status = stop(10'000, signalled);
    what = status < 0 ? "did not exit within 10 s of SIGTERM, killed"
                      : "SIGTERM: exit status " + std::to_string(status);
  }
  append_line(log_, "--- firemq-conform: restart (" + what + "); the restarted broker's log follows ---");
  auto spawned = spawn(true);
  if (!spawned) return "after the broker " + what + ", it did not come back: " + spawned.error();
  return Restarted{status, what + "; started again on port " + std::to_string(port())};
}

// Every listener's flag, so that none starts on its default port beside a parallel broker: the ones asked
// for on their port (a free one below the ephemeral range at the first start; the same again at a restart),
// the others off.
std::vector<std::string> EmbeddedBroker::port_flags() const {
  std::vector<std::string> flags;
  for (Transport t : kAllTransports) {
    flags.push_back(port_flag(t));
    const std::uint16_t chosen = ports_.empty() ? free_port_below_ephemeral_range() : port(t);
    flags.push_back(listeners_.count(t) ? std::to_string(chosen) : "off");
  }
  const std::uint16_t amqp_port = ports_.empty() ? free_port_below_ephemeral_range() : amqp_port_;
  const std::uint16_t amqps_port = ports_.empty() ? free_port_below_ephemeral_range() : amqps_port_;
  flags.insert(flags.end(), {"--amqp-port", amqp_ ? std::to_string(amqp_port) : "off"});
  flags.insert(flags.end(), {"--amqps-port", amqps_ ? std::to_string(amqps_port) : "off"});
  return flags;
}

EmbeddedBroker::~EmbeddedBroker() { stop(); }

}  // namespace firemq::conform
