// A user's permissions on one vhost, as RabbitMQ's: three regular expressions over resource names, for
// configure (declare, delete), write (publish to an exchange, bind to a destination) and read (consume, get,
// purge, bind from a source exchange). An empty pattern grants nothing. The default exchange "" is matched as
// "amq.default", as RabbitMQ does. Refusals are 403 access-refused, not fatal.
#pragma once

#include <regex>
#include <string>

#include "protocol/error.h"
#include "reference-broker/access/definitions.h"

namespace firemq {

enum class Access { configure, write, read };

class Permissions {
 public:
  Permissions() = default;  // grants nothing
  // The patterns were checked when the definitions were loaded.
  explicit Permissions(const Permission& p);

  // 403 naming the resource, the vhost and the user when `access` to `resource` is not granted.
  Status check(Access access, std::string_view kind, const std::string& resource, const std::string& vhost,
               const std::string& user) const;

 private:
  struct Pattern {
    bool any = false;         // empty pattern: nothing matches
    bool everything = false;  // ".*": no need to run the regex on every publish
    std::regex regex;
  };
  static Pattern compile(const std::string& pattern);
  Pattern configure_, write_, read_;
};

// Whether `pattern` is a valid regular expression; the error says why not (for loading definitions).
Status check_permission_pattern(const std::string& pattern);

}  // namespace firemq
