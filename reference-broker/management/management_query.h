// The query options of RabbitMQ's management API on a GET: ?columns= (a comma list of fields, dotted paths for
// nested ones, as rabbitmqadmin asks for), and on lists the server-side filtering, sorting and paging its UI uses:
// name, use_regex, sort, sort_reverse, page and page_size. With page, a list answers in RabbitMQ's paged shape
// {filtered_count, item_count, items, page, page_count, page_size, total_count}.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/error.h"
#include "reference-broker/management/message_history.h"
#include "reference-broker/net/http_routes.h"

namespace firemq {

struct ListQuery {
  std::vector<std::vector<std::string>> columns;  // each a path: "message_stats.publish" is {message_stats, publish}
  std::optional<std::string> name;                // keep the items whose name matches
  bool use_regex = false;                         // name is a regular expression, not a substring
  std::vector<std::string> sort;                  // the field to sort by, as a path
  bool sort_reverse = false;
  std::optional<std::uint64_t> page;                  // 1-based; unset: the whole list, not paged
  std::uint64_t page_size = 100;                      // RabbitMQ's default; at most kMaxPageSize
  static constexpr std::uint64_t kMaxPageSize = 500;  // RabbitMQ's bound on one page
  // RabbitMQ's msg_rates_age and _incr (message_stats), lengths_age and _incr (messages, messages_ready,
  // messages_unacknowledged): with both of a pair, the *_details carry samples (message_history.h).
  std::optional<StatsRange> msg_rates;
  std::optional<StatsRange> lengths;
  static constexpr std::int64_t kMaxRangePoints = 1000;  // age / incr: a longer range is refused
};

// The options of a query string ("a=1&b=2", without the '?'); a bad page, page_size or regex is a 400.
Result<ListQuery, HttpAnswer> list_query(std::string_view query);

// An answer's body shaped as the query asks: a list filtered, sorted, paged and cut to its columns; an object cut
// to its columns. A page past the last is a 400, as RabbitMQ's.
Result<nlohmann::json, HttpAnswer> shaped(const ListQuery& query, nlohmann::json body);

}  // namespace firemq
