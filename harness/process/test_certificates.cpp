#include "harness/process/test_certificates.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <fstream>
#include <vector>

#include "harness/process/embedded_broker.h"

extern char** environ;

namespace firemq::conform {
namespace {

namespace fs = std::filesystem;

// Runs `openssl args...` with its output in `log`; the error says which command failed and what it wrote.
IoStatus openssl(std::vector<std::string> args, const fs::path& log) {
  args.insert(args.begin(), "openssl");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, "openssl", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  std::string command;
  for (const std::string& a : args) command += (command.empty() ? "" : " ") + a;
  if (rc != 0) return "cannot run '" + command + "' (is openssl installed?)";
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "'" + command + "' failed:\n" + tail_of(log);
  return IoStatus::done();
}

}  // namespace

Result<TestCertificates, std::string> make_test_certificates(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return "cannot create " + dir.string() + ": " + ec.message();
  const TestCertificates files{dir / "ca.pem", dir / "server.pem", dir / "server.key"};
  const fs::path ca_key = dir / "ca.key", csr = dir / "server.csr", extensions = dir / "server.ext";
  const fs::path log = dir / "openssl.log";
  std::ofstream(extensions) << "subjectAltName = IP:127.0.0.1, DNS:localhost\n"
                               "basicConstraints = critical, CA:FALSE\n"
                               "keyUsage = critical, digitalSignature, keyEncipherment\n"
                               "extendedKeyUsage = serverAuth\n";
  const std::vector<std::string> ec_key = {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"};
  std::vector<std::string> make_ca = {"req",     "-x509",
                                      "-days",   "2",
                                      "-subj",   "/CN=firemq-conform throwaway CA",
                                      "-keyout", ca_key.string(),
                                      "-out",    files.ca_file.string(),
                                      "-addext", "basicConstraints=critical,CA:TRUE",
                                      "-addext", "keyUsage=critical,keyCertSign,cRLSign"};
  make_ca.insert(make_ca.begin() + 2, ec_key.begin(), ec_key.end());
  std::vector<std::string> make_csr = {"req",  "-subj",     "/CN=localhost", "-keyout", files.key_file.string(),
                                       "-out", csr.string()};
  make_csr.insert(make_csr.begin() + 1, ec_key.begin(), ec_key.end());
  const std::vector<std::string> sign = {"x509",
                                         "-req",
                                         "-in",
                                         csr.string(),
                                         "-CA",
                                         files.ca_file.string(),
                                         "-CAkey",
                                         ca_key.string(),
                                         "-CAcreateserial",
                                         "-days",
                                         "2",
                                         "-extfile",
                                         extensions.string(),
                                         "-out",
                                         files.cert_file.string()};
  for (const auto& command : {make_ca, make_csr, sign}) {
    if (auto ran = openssl(command, log); !ran) return ran.error();
  }
  return files;
}

}  // namespace firemq::conform
