#include "tools/tool_client.h"

#include <unistd.h>

#include <exception>
#include <iostream>
#include <variant>

#include "harness/process/test_certificates.h"
#include "protocol/ops.h"
#include "protocol/url.h"

namespace firemq::tools {
namespace po = boost::program_options;
using namespace std::chrono;

std::optional<int> parse_flags(const std::string& tool, const po::options_description& flags, int argc, char** argv,
                               po::variables_map& vm) {
  try {
    po::store(po::parse_command_line(argc, argv, flags), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    std::cerr << tool << ": " << e.what() << "\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << flags << "\n";
    return 0;
  }
  return std::nullopt;
}

std::filesystem::path tool_work_dir(const std::string& tool) {
  return std::filesystem::temp_directory_path() / (tool + "-" + std::to_string(::getpid()));
}

Endpoint local_endpoint(std::uint16_t port) {
  Endpoint e;
  e.host = "127.0.0.1";
  e.port = port;
  e.user = e.password = "guest";
  e.vhost = "/";
  return e;
}

Result<Measured, std::string> open_target(const std::string& url, EmbeddedOptions options, Transport transport,
                                          const conform::TlsOptions& tls) {
  Measured target;
  if (!url.empty()) {
    auto parsed = parse_url(url);
    if (!parsed) return "--url " + url + ": " + parsed.error();
    target.endpoint = conform::target_at(*parsed, tls);
    return target;
  }
  options.listeners = {transport};
  std::optional<conform::TestCertificates> certificates;
  if (conform::uses_tls(transport)) {
    auto made = conform::make_test_certificates(options.work_dir.string() + "-tls");
    if (!made) return "cannot make the TLS certificates: " + made.error();
    certificates = *made;
    options.tls_cert = made->cert_file;
    options.tls_key = made->key_file;
  }
  auto started = EmbeddedBroker::start(options);
  if (!started) return started.error();
  target.embedded = std::move(*started);
  target.endpoint = local_endpoint(target.embedded->port(transport));
  target.endpoint.transport = transport;
  if (certificates) target.endpoint.tls.ca_file = certificates->ca_file.string();
  return target;
}

std::unique_ptr<WireConnection> ToolClient::connect(const Endpoint& endpoint) const {
  const Map client{{Value("name"), Value(tool_)}};
  auto wire = conform::open_session(endpoint.address(), endpoint.user, endpoint.password, endpoint.vhost, client,
                                    Clock::now() + seconds(5));
  if (!wire) {
    complain(wire.error());
    return nullptr;
  }
  return std::move(*wire);
}

std::optional<op::Ok> ToolClient::request(WireConnection& wire, const Message& request, seconds timeout) const {
  const auto deadline = Clock::now() + timeout;
  const std::string what(op_name(op_of(request)));
  if (!wire.send(encode_frame(request), deadline)) {
    complain("the connection broke before " + what + " was sent");
    return std::nullopt;
  }
  while (true) {
    conform::WireEvent event = wire.receive(deadline);
    auto* frame = std::get_if<conform::FrameEvent>(&event);
    if (frame == nullptr) break;
    auto decoded = decode_frame(frame->frame);
    if (!decoded) break;
    if (auto* ok = std::get_if<op::Ok>(&*decoded)) return *ok;
    if (auto* error = std::get_if<op::Error>(&*decoded)) {
      complain("error " + std::to_string(error->code) + ": " + error->msg);
      return std::nullopt;
    }
  }
  complain("no ok for " + what);
  return std::nullopt;
}

void ToolClient::complain(const std::string& text) const { std::cerr << tool_ << ": " << text << "\n"; }

std::optional<op::Ok> declare_durable_queue(const ToolClient& client, WireConnection& wire, const std::string& queue,
                                            bool passive, seconds timeout) {
  op::DeclareQueue declare;
  declare.rid = 1;
  declare.name = queue;
  declare.durable = true;
  declare.passive = passive;
  return client.request(wire, declare, timeout);
}

}  // namespace firemq::tools
