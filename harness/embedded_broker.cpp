#include "harness/embedded_broker.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

extern char** environ;

namespace firemq::conform {
namespace {

using namespace std::chrono;

// The port the broker wrote, or 0 while the file is not there yet.
std::uint16_t read_port(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) return 0;
  auto json = nlohmann::json::parse(in, nullptr, false);
  if (json.is_discarded() || !json.contains("fire")) return 0;
  return json.at("fire").get<std::uint16_t>();
}

bool exited(pid_t pid, int& status) { return ::waitpid(pid, &status, WNOHANG) == pid; }

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
  std::filesystem::remove_all(options.work_dir, ec);
  std::filesystem::create_directories(options.work_dir, ec);
  if (ec) return "cannot create " + options.work_dir.string() + ": " + ec.message();
  const auto port_file = options.work_dir / "ports.json";
  const auto log = options.work_dir / "broker.log";

  std::vector<std::string> args = {options.broker_path, "--bind", "127.0.0.1", "--port", "0",
                                   "--port-file", port_file.string(), "--data-dir", (options.work_dir / "data").string()};
  if (!options.definitions_file.empty()) args.insert(args.end(), {"--definitions", options.definitions_file});
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return "cannot start " + options.broker_path + ": " + std::strerror(rc);

  const auto deadline = steady_clock::now() + seconds(10);
  while (steady_clock::now() < deadline) {
    if (const std::uint16_t port = read_port(port_file)) {
      return std::unique_ptr<EmbeddedBroker>(new EmbeddedBroker(pid, port, log));
    }
    int status = 0;
    if (exited(pid, status)) return "the reference broker exited at start:\n" + tail_of(log);
    std::this_thread::sleep_for(milliseconds(20));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return "the reference broker did not report its port within 10 s:\n" + tail_of(log);
}

int EmbeddedBroker::stop(int grace_ms) {
  if (pid_ <= 0) return 0;
  ::kill(pid_, SIGTERM);
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

EmbeddedBroker::~EmbeddedBroker() { stop(); }

}  // namespace firemq::conform
