#include "harness/model/case_model.h"

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>

namespace firemq::conform {
namespace {

using Json = nlohmann::json;
using CasesResult = Result<std::vector<CaseSpec>, std::string>;

const std::regex kIdPattern("^[a-z0-9]+(-[a-z0-9]+)*(\\.[a-z0-9]+(-[a-z0-9]+)*)+$");

Result<Json, std::string> read_json(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) return "cannot read " + file.string();
  Json json = Json::parse(in, nullptr, false);
  if (json.is_discarded()) return file.string() + ": not valid JSON";
  return json;
}

std::vector<std::string> strings(const Json& object, const char* key) {
  std::vector<std::string> out;
  if (!object.contains(key)) return out;
  for (const Json& s : object.at(key)) out.push_back(s.get<std::string>());
  return out;
}

std::string check_steps(const Json& steps, const std::vector<std::string>& verbs) {
  if (!steps.is_array() || steps.empty()) return "\"steps\" must be a non-empty array";
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const Json& step = steps[i];
    if (!step.is_object() || step.size() != 1) return "step " + std::to_string(i) + " must be {\"verb\": {...}}";
    const std::string verb = step.begin().key();
    if (std::find(verbs.begin(), verbs.end(), verb) == verbs.end()) {
      return "step " + std::to_string(i) + ": unknown verb \"" + verb + "\"";
    }
    if (!step.begin().value().is_object()) return "step " + std::to_string(i) + ": the arguments must be an object";
  }
  return "";
}

Result<CaseSpec, std::string> parse_case(const Json& j, const std::string& group, const std::set<std::string>& known,
                                         const std::vector<std::string>& verbs) {
  CaseSpec c;
  c.id = j.at("id").get<std::string>();
  if (!std::regex_match(c.id, kIdPattern)) return "id \"" + c.id + "\" is not dotted kebab-case";
  c.title = j.at("title").get<std::string>();
  c.group = group;
  c.level = j.at("level").get<std::string>();
  if (c.level != "MUST" && c.level != "SHOULD" && c.level != "MAY") return c.id + ": level must be MUST, SHOULD or MAY";
  c.spec = {j.at("spec").at("section").get<std::string>(), j.at("spec").at("quote").get<std::string>()};
  c.requirements = strings(j, "requirements");
  if (c.requirements.empty()) return c.id + ": lists no requirement";
  for (const std::string& r : c.requirements) {
    if (!known.count(r)) return c.id + ": unknown requirement id \"" + r + "\"";
  }
  c.tags = strings(j, "tags");
  if (j.contains("requires")) {
    c.required_caps = strings(j.at("requires"), "caps");
    c.required_features = strings(j.at("requires"), "features");
  }
  c.timeout_ms = j.value("timeout_ms", 10'000);
  c.broker_args = strings(j, "broker_args");
  c.own_broker = j.contains("broker_args");
  if (j.contains("transports")) {
    c.transports.clear();
    for (const std::string& name : strings(j, "transports")) {
      const auto t = transport_from_name(name);
      if (!t) return c.id + ": unknown transport \"" + name + "\" (fire, fires, ws, wss)";
      c.transports.insert(*t);
    }
    if (c.transports.empty()) return c.id + ": \"transports\" lists none";
  }
  c.steps = j.at("steps");
  if (std::string bad = check_steps(c.steps, verbs); !bad.empty()) return c.id + ": " + bad;
  c.speaks_fire = std::any_of(c.steps.begin(), c.steps.end(), [](const Json& s) {
    const std::string& verb = s.begin().key();
    return !verb.starts_with("amqp_") && verb != "sleep";
  });
  // A case that restarts its broker or raises an alarm on it must say so, so that it runs alone and is skipped
  // where the target cannot do it.
  for (const auto& [verb, feature] : {std::pair{"restart_broker", "restart"}, std::pair{"alarm", "alarm"}}) {
    const bool uses = std::any_of(c.steps.begin(), c.steps.end(), [&](const Json& s) { return s.contains(verb); });
    const bool declared = std::count(c.required_features.begin(), c.required_features.end(), feature) > 0;
    if (uses && !declared) {
      return c.id + ": uses " + verb + ", so it must declare \"requires\": {\"features\": [\"" + feature + "\"]}";
    }
  }
  return c;
}

}  // namespace

CaseResult result_for(const CaseSpec& spec) {
  CaseResult r;
  r.id = spec.id;
  r.title = spec.title;
  r.group = spec.group;
  r.level = spec.level;
  r.spec = spec.spec;
  r.requirements = spec.requirements;
  r.tags = spec.tags;
  return r;
}

bool glob_match(std::string_view pattern, std::string_view text) {
  if (pattern.empty()) return text.empty();
  if (pattern[0] == '*') {
    for (std::size_t i = 0; i <= text.size(); ++i) {
      if (glob_match(pattern.substr(1), text.substr(i))) return true;
    }
    return false;
  }
  if (text.empty()) return false;
  if (pattern[0] != '?' && pattern[0] != text[0]) return false;
  return glob_match(pattern.substr(1), text.substr(1));
}

std::vector<Requirement> binding(const std::vector<Requirement>& catalog, const std::string& judged) {
  std::vector<Requirement> out;
  for (const Requirement& r : catalog) {
    if (r.applies_to == "both" || r.applies_to == judged) out.push_back(r);
  }
  return out;
}

Result<std::vector<Requirement>, std::string> load_requirements(const std::filesystem::path& file) {
  auto json = read_json(file);
  if (!json) return json.error();
  std::vector<Requirement> out;
  try {
    for (const Json& r : json->at("requirements")) {
      out.push_back({r.at("id"), r.at("section"), r.at("level"), r.at("text"), r.value("untested_because", ""),
                     r.value("applies_to", "both")});
    }
  } catch (const Json::exception& e) {
    return file.string() + ": " + e.what();
  }
  return out;
}

CasesResult load_cases(const std::filesystem::path& dir, const std::vector<Requirement>& catalog,
                       const std::vector<std::string>& verbs) {
  std::set<std::string> known;
  for (const Requirement& r : catalog) known.insert(r.id);
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  if (ec) return "cannot list " + dir.string() + ": " + ec.message();
  std::sort(files.begin(), files.end());
  std::vector<CaseSpec> cases;
  std::set<std::string> ids;
  for (const auto& file : files) {
    auto json = read_json(file);
    if (!json) return json.error();
    try {
      const std::string group = json->at("group").get<std::string>();
      for (const Json& j : json->at("cases")) {
        auto c = parse_case(j, group, known, verbs);
        if (!c) return file.string() + ": " + c.error();
        if (!ids.insert(c->id).second) return file.string() + ": duplicate case id \"" + c->id + "\"";
        c->file = file.filename().string();
        cases.push_back(std::move(*c));
      }
    } catch (const Json::exception& e) {
      return file.string() + ": " + e.what();
    }
  }
  return cases;
}

}  // namespace firemq::conform
