// The broker's model: its vhosts, each with its exchanges, queues and bindings. No I/O; runs on the broker
// thread only, so it needs no locks. Sessions find their vhost here after welcome.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "reference-broker/definitions.h"
#include "reference-broker/vhost.h"

namespace firemq {

class Core {
 public:
  explicit Core(const Definitions& definitions) {
    for (const std::string& name : definitions.vhost_names()) vhosts_.emplace(name, std::make_unique<Vhost>(name));
  }
  // nullptr for a vhost that does not exist.
  Vhost* vhost(const std::string& name) {
    auto it = vhosts_.find(name);
    return it == vhosts_.end() ? nullptr : it->second.get();
  }

 private:
  std::map<std::string, std::unique_ptr<Vhost>> vhosts_;
};

}  // namespace firemq
