// Fuzzes the management API's routes, not only the HTTP parser in front of them (fuzz_http_request): each input
// becomes one request, with a method, a path and a body of the fuzzer's choosing, sent by a user it picks, to an
// API over a broker core of its own. Nothing may crash, leak or trip a sanitizer, whatever the path or body says
// (issue 27: a body nested 50,000 deep once overflowed the stack), and every answer must be a status the API
// documents, with a JSON body where the API answers JSON.
//
// Input layout: byte 0 picks the method (low 3 bits) and the user (next 2 bits: an administrator, a monitoring
// user, a management user of one vhost, or no credentials); up to the first '\n' is the path; the rest the body.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "protocol/bytes.h"
#include "reference-broker/core/time_source.h"
#include "reference-broker/management/management_api.h"

namespace http = boost::beast::http;

namespace {

const firemq::Definitions& definitions() {
  static const firemq::Definitions d = *firemq::Definitions::parse(R"({
      "users": [{"name": "admin", "password": "a", "tags": ["administrator"]},
                {"name": "watcher", "password": "w", "tags": ["monitoring"]},
                {"name": "dev", "password": "d", "tags": ["management"]}],
      "vhosts": [{"name": "/"}, {"name": "other"}],
      "permissions": [{"user": "admin", "vhost": "/"}, {"user": "dev", "vhost": "other"}]})");
  return d;
}

constexpr http::verb kMethods[] = {http::verb::get,  http::verb::put,   http::verb::post,    http::verb::delete_,
                                   http::verb::head, http::verb::patch, http::verb::options, http::verb::get};
constexpr const char* kCredentials[] = {"admin:a", "watcher:w", "dev:d", nullptr};

bool documented(http::status status) {
  switch (status) {
    case http::status::ok:
    case http::status::created:
    case http::status::no_content:
    case http::status::bad_request:
    case http::status::unauthorized:
    case http::status::not_found:
    case http::status::method_not_allowed:
    case http::status::unsupported_media_type: return true;
    default: return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::size_t newline = input.find('\n');
  const std::string_view path = input.substr(0, newline);
  const std::string_view body = newline == std::string_view::npos ? std::string_view() : input.substr(newline + 1);
  if (path.empty() || path.size() > 2048 || body.size() > firemq::kMaxRequestBodyBytes) return 0;

  firemq::HttpRequest request{kMethods[data[0] & 7], std::string("/api/") + std::string(path), 11};
  if (const char* credentials = kCredentials[(data[0] >> 3) & 3]) {
    request.set(http::field::authorization, "Basic " + firemq::to_base64(firemq::as_bytes(credentials)));
  }
  request.set(http::field::content_type, "application/json");
  request.set("X-Requested-With", "XMLHttpRequest");
  request.body() = std::string(body);
  request.prepare_payload();

  firemq::BrokerConfig config;
  firemq::Definitions accounts = definitions();
  firemq::ManualTime time;
  firemq::Core core(accounts, time);
  firemq::ConnectionRegistry connections(config.bounds.handshakes);
  firemq::Alarms alarms(firemq::AlarmLimits{});
  firemq::ManagementApi api(firemq::ManagementEnv{config, accounts, core, connections, alarms,
                                                  [] { return std::vector<firemq::ListenerInfo>{}; }});
  const firemq::HttpAnswer answer = api.handle(request, std::string("127.0.0.1"));
  if (!documented(answer.status)) std::abort();
  if (answer.content_type == "application/json" && !answer.text.empty() &&
      nlohmann::json::accept(answer.text) == false) {
    std::abort();
  }
  return 0;
}
