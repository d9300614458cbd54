#include "reference-broker/store/durable_topology.h"

#include "protocol/bounded_json.h"
#include "protocol/plain_json.h"
#include "protocol/reply_codes.h"
#include "protocol/typed_json.h"
#include "reference-broker/store/storage_io.h"

namespace firemq {
namespace {

using Json = nlohmann::json;

Json arguments_json(const Map& args) { return typed_json_from_value(Value(args)); }

Result<Map, std::string> arguments_from(const Json& object, DurableTopology::Arguments format) {
  if (!object.contains("arguments")) return Map{};
  if (format == DurableTopology::Arguments::plain) return map_from_plain_json(object.at("arguments"));
  Result<Value, std::string> value = value_from_typed_json(object.at("arguments"));
  if (!value) return value.error();
  const Map* map = value->get_if<Map>();
  if (map == nullptr) return std::string("arguments is not a map");
  return *map;
}

// A queue survives a restart when durable and not exclusive; a binding when both of its ends do.
bool kept(const Queue& q) { return q.settings().durable && !q.exclusive(); }

bool binding_kept(const Vhost& vhost, const Binding& b) {
  if (b.to_exchange) {
    auto e = vhost.exchanges().find(b.destination);
    return e != vhost.exchanges().end() && e->second.durable;
  }
  auto q = vhost.queues().find(b.destination);
  return q != vhost.queues().end() && kept(*q->second);
}

std::string describe(const Error& e) { return std::to_string(e.code) + " " + e.msg; }

// The "policies" (or "operator_policies") entries, in RabbitMQ's shape ({"vhost", "name", "pattern", "apply-to",
// "priority", "definition"}), each set in its vhost; what cannot be is a problem that names the entry.
void restore_policies(const Json& stored, Core& core, PolicyKind kind, std::vector<std::string>& problems) {
  const char* list = kind == PolicyKind::user ? "policies" : "operator_policies";
  const auto text = [](const Json& entry, const char* key) {
    const auto it = entry.is_object() ? entry.find(key) : entry.end();
    return entry.is_object() && it != entry.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  const auto it = stored.find(list);
  if (it == stored.end()) return;
  if (!it->is_array()) return problems.push_back(std::string(list) + " is not a list");
  for (const Json& entry : *it) {
    Vhost* vhost = core.vhost(text(entry, "vhost"));
    Result<Policy, std::string> policy = parse_policy(text(entry, "vhost"), text(entry, "name"), entry, kind);
    if (vhost != nullptr && policy) {
      vhost->set_policy(std::move(*policy));
    } else {
      problems.push_back(std::string(list) + " entry " + entry.dump() + ": " +
                         (vhost ? policy.error() : "its vhost is missing"));
    }
  }
}

}  // namespace

Json DurableTopology::snapshot() const {
  Json root = definitions_.to_json();
  root["exchanges"] = Json::array();
  root["queues"] = Json::array();
  root["bindings"] = Json::array();
  root["policies"] = Json::array();
  root["operator_policies"] = Json::array();
  for (const auto& [vhost_name, vhost] : core_.vhosts()) {
    for (const auto& [name, policy] : vhost->policies()) root["policies"].push_back(to_json(policy));
    for (const auto& [name, policy] : vhost->policies(PolicyKind::operator_policy)) {
      root["operator_policies"].push_back(to_json(policy));
    }
    for (const auto& [name, e] : vhost->exchanges()) {
      if (!e.durable) continue;
      if (!e.builtin) {
        root["exchanges"].push_back({{"name", name},
                                     {"vhost", vhost_name},
                                     {"type", exchange_type_name(e.type)},
                                     {"durable", true},
                                     {"auto_delete", e.auto_delete},
                                     {"internal", e.internal},
                                     {"arguments", arguments_json(e.args)}});
      }
      for (const Binding& b : e.bindings) {
        if (!binding_kept(*vhost, b)) continue;
        root["bindings"].push_back({{"source", name},
                                    {"vhost", vhost_name},
                                    {"destination", b.destination},
                                    {"destination_type", b.to_exchange ? "exchange" : "queue"},
                                    {"routing_key", b.key},
                                    {"arguments", arguments_json(b.args)}});
      }
    }
    for (const auto& [name, q] : vhost->queues()) {
      if (!kept(*q)) continue;
      root["queues"].push_back({{"name", name},
                                {"vhost", vhost_name},
                                {"durable", true},
                                {"auto_delete", q->settings().auto_delete},
                                {"arguments", arguments_json(q->settings().args)}});
    }
  }
  return root;
}

Status DurableTopology::save() {
  // Compact, so that the file grows with what was accepted and no more (pretty-printing a deeply nested argument
  // costs its depth in spaces on every line of it).
  const std::string text = snapshot().dump() + "\n";
  if (IoStatus replaced = replace_file_atomically(file_, as_bytes(text)); !replaced) {
    return make_error(ReplyCode::internal_error, "durable definitions not saved: " + replaced.error());
  }
  return std::nullopt;
}

Result<Json, std::string> DurableTopology::read(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return Json();
  Result<Bytes, std::string> bytes = read_whole_file(file);
  if (!bytes) return bytes.error();
  Result<Json, std::string> parsed = parse_bounded_json(
      std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()), kMaxDefinitionsNesting);
  if (!parsed) return file.string() + ": " + parsed.error();
  if (!parsed->is_object()) return file.string() + ": not a JSON object";
  return std::move(*parsed);
}

std::vector<std::string> DurableTopology::restore(const Json& stored, Core& core, Arguments format) {
  std::vector<std::string> problems;
  if (!stored.is_object()) return problems;  // no file yet
  // Each entry is restored through the same checks a client's declare goes through.
  auto each = [&](const char* kind, auto&& declare) {
    const Json& items = stored.contains(kind) ? stored.at(kind) : Json::array();
    if (!items.is_array()) return problems.push_back(std::string(kind) + " is not a list");
    for (const Json& item : items) {
      std::string problem;
      try {
        Vhost* vhost = core.vhost(item.at("vhost").get<std::string>());
        Result<Map, std::string> args = arguments_from(item, format);
        if (vhost == nullptr) {
          problem = "its vhost is gone";
        } else if (!args) {
          problem = args.error();
        } else if (Status refused = declare(*vhost, item, *args)) {
          problem = describe(*refused);
        }
      } catch (const Json::exception& e) {
        problem = e.what();
      }
      if (!problem.empty()) problems.push_back(std::string(kind) + " entry " + item.dump() + ": " + problem);
    }
  };
  // First: the queues and exchanges declared next are given theirs.
  restore_policies(stored, core, PolicyKind::user, problems);
  restore_policies(stored, core, PolicyKind::operator_policy, problems);
  each("exchanges", [](Vhost& vhost, const Json& e, const Map& args) {
    op::DeclareExchange r;
    r.name = e.at("name").get<std::string>();
    r.type = e.at("type").get<std::string>();
    r.durable = e.value("durable", true);
    r.auto_delete = e.value("auto_delete", false);
    r.internal = e.value("internal", false);
    r.args = args;
    return vhost.declare_exchange(r);
  });
  each("queues", [](Vhost& vhost, const Json& q, const Map& args) -> Status {
    op::DeclareQueue r;
    r.name = q.at("name").get<std::string>();
    r.durable = q.value("durable", true);
    r.auto_delete = q.value("auto_delete", false);
    r.args = args;
    Result<op::Ok> ok = vhost.declare_queue(r, "");
    return ok ? Status() : Status(ok.error());
  });
  each("bindings", [](Vhost& vhost, const Json& b, const Map& args) {
    op::BindFields r;
    r.exchange = b.at("source").get<std::string>();
    const std::string destination = b.at("destination").get<std::string>();
    (b.value("destination_type", "queue") == "exchange" ? r.to_exchange : r.queue) = destination;
    r.key = b.value("routing_key", "");
    r.args = args;
    return vhost.bind(r, "");
  });
  for (auto& [name, vhost] : core.vhosts()) vhost->take_durable_change();  // what was just read needs no save
  return problems;
}

}  // namespace firemq
