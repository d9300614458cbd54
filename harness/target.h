// The broker under test, as the cases see it.
#pragma once

#include <cstdint>
#include <set>
#include <string>

namespace firemq::conform {

struct Target {
  std::string description;  // for reports: the URL, or the embedded broker and its port
  std::string host;
  std::uint16_t port = 0;
  std::string user;
  std::string password;
  std::string vhost;
  // What the target has beyond the spec's basics, declared (never inferred): "conform-definitions" (the users
  // and vhosts of conformance/definitions.json are loaded), ... Cases that need a missing one are skipped.
  std::set<std::string> features;
};

}  // namespace firemq::conform
