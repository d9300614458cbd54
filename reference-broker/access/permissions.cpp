#include "reference-broker/access/permissions.h"

#include "protocol/reply_codes.h"

namespace firemq {

Permissions::Pattern Permissions::compile(const std::string& pattern) {
  if (pattern.empty()) return Pattern{};
  const bool everything = pattern == ".*" || pattern == "^.*" || pattern == "^.*$";
  return Pattern{true, everything, std::regex(pattern, std::regex::ECMAScript | std::regex::optimize)};
}

Permissions::Permissions(const Permission& p)
    : configure_(compile(p.configure)), write_(compile(p.write)), read_(compile(p.read)) {}

Status Permissions::check(Access access, std::string_view kind, const std::string& resource, const std::string& vhost,
                          const std::string& user) const {
  const Pattern& pattern = access == Access::configure ? configure_ : access == Access::write ? write_ : read_;
  const std::string name = resource.empty() && kind == "exchange" ? "amq.default" : resource;
  if (pattern.everything || (pattern.any && std::regex_search(name, pattern.regex))) return std::nullopt;
  static constexpr const char* kAccess[] = {"configure", "write", "read"};
  return make_error(ReplyCode::access_refused, std::string(kAccess[static_cast<int>(access)]) + " access to " +
                                                   std::string(kind) + " '" + resource + "' in vhost '" + vhost +
                                                   "' refused for user '" + user + "'");
}

Status check_permission_pattern(const std::string& pattern) {
  try {
    std::regex(pattern, std::regex::ECMAScript);
    return std::nullopt;
  } catch (const std::regex_error& e) {
    return Error{0, "invalid permission pattern '" + pattern + "': " + e.what(), true, 0};
  }
}

}  // namespace firemq
