// ?columns=, and the filtering, sorting and paging of lists, as RabbitMQ's management API does them
// (management_query.h).
#include "reference-broker/management/management_query.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <regex>

#include "protocol/url.h"
#include "reference-broker/management/management_api.h"

namespace firemq {
namespace {

using Json = nlohmann::json;
namespace http = boost::beast::http;

// "a.b.c" as {"a", "b", "c"}: RabbitMQ's columns and sort name nested fields so.
std::vector<std::string> path_of(std::string_view dotted) {
  std::vector<std::string> path;
  while (true) {
    const auto dot = dotted.find('.');
    path.emplace_back(dotted.substr(0, dot));
    if (dot == std::string_view::npos) return path;
    dotted.remove_prefix(dot + 1);
  }
}

// A form value: '+' is a space, then the %XX escapes (a value that does not decode is taken as it is).
std::string form_decoded(std::string_view raw) {
  std::string text(raw);
  std::replace(text.begin(), text.end(), '+', ' ');
  auto decoded = percent_decode(text);
  return decoded ? *decoded : text;
}

std::optional<std::uint64_t> positive(const std::string& text) {
  std::uint64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n == 0) return std::nullopt;
  return n;
}

const Json* at_path(const Json& item, const std::vector<std::string>& path) {
  const Json* at = &item;
  for (const std::string& key : path) {
    if (!at->is_object() || !at->contains(key)) return nullptr;
    at = &(*at)[key];
  }
  return at;
}

// The item with only the columns asked for, nested as they were; a column it lacks is left out, as RabbitMQ's.
Json with_columns(const Json& item, const std::vector<std::vector<std::string>>& columns) {
  if (columns.empty() || !item.is_object()) return item;
  Json out = Json::object();
  for (const auto& path : columns) {
    if (const Json* value = at_path(item, path)) {
      Json* into = &out;
      for (std::size_t i = 0; i + 1 < path.size(); ++i) into = &(*into)[path[i]];
      (*into)[path.back()] = *value;
    }
  }
  return out;
}

bool name_matches(const ListQuery& query, const std::regex* pattern, const Json& item) {
  const std::string name = item.is_object() ? item.value("name", "") : "";
  if (pattern != nullptr) return std::regex_search(name, *pattern);
  // Without use_regex, RabbitMQ's UI filter is a case-insensitive substring.
  auto lower = [](std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
  };
  return lower(name).find(lower(*query.name)) != std::string::npos;
}

// RabbitMQ's PREFIX_age and PREFIX_incr, in seconds; nullopt without both, as RabbitMQ's no_range. Whole seconds
// above 0, at most kMaxRangePoints increments in the age; anything else is refused with the reason.
Result<std::optional<StatsRange>, HttpAnswer> stats_range(const std::string& prefix,
                                                          const std::optional<std::string>& age,
                                                          const std::optional<std::string>& incr) {
  if (!age && !incr) return std::optional<StatsRange>();
  const std::optional<std::uint64_t> a = age ? positive(*age) : std::nullopt;
  const std::optional<std::uint64_t> i = incr ? positive(*incr) : std::nullopt;
  if (!a || !i || *a > 86'400 || *a / *i > static_cast<std::uint64_t>(ListQuery::kMaxRangePoints)) {
    return api_error(http::status::bad_request, "bad_request",
                     "Invalid range: " + prefix + "_age and " + prefix +
                         "_incr must both be whole seconds above 0, "
                         "at most 86400 and " +
                         std::to_string(ListQuery::kMaxRangePoints) + " increments");
  }
  return std::optional<StatsRange>(
      StatsRange{static_cast<std::int64_t>(*a) * 1000, static_cast<std::int64_t>(*i) * 1000});
}

}  // namespace

Result<ListQuery, HttpAnswer> list_query(std::string_view query) {
  ListQuery out;
  std::optional<std::string> page, page_size;
  std::map<std::string, std::string> ranges;  // msg_rates_age and the like, checked once all are read
  while (!query.empty()) {
    const std::string_view pair = query.substr(0, query.find('&'));
    query.remove_prefix(std::min(query.size(), pair.size() + 1));
    const auto equals = pair.find('=');
    const std::string key = form_decoded(pair.substr(0, equals));
    const std::string value = equals == std::string_view::npos ? std::string() : form_decoded(pair.substr(equals + 1));
    if (key == "columns") {
      for (std::string_view rest = value; !rest.empty();) {
        const std::string_view column = rest.substr(0, rest.find(','));
        if (!column.empty()) out.columns.push_back(path_of(column));
        rest.remove_prefix(std::min(rest.size(), column.size() + 1));
      }
    } else if (key == "name" && !value.empty()) {
      out.name = value;
    } else if (key == "use_regex") {
      out.use_regex = value == "true";
    } else if (key == "sort" && !value.empty()) {
      out.sort = path_of(value);
    } else if (key == "sort_reverse") {
      out.sort_reverse = value == "true";
    } else if (key == "page") {
      page = value;
    } else if (key == "page_size") {
      page_size = value;
    } else if (key.starts_with("msg_rates_") || key.starts_with("lengths_")) {
      ranges[key] = value;
    }
    // Anything else (RabbitMQ's data_rates_age, disable_stats, ...) is tolerated and ignored.
  }
  auto given = [&](const std::string& key) {
    const auto found = ranges.find(key);
    return found == ranges.end() ? std::optional<std::string>() : found->second;
  };
  auto msg_rates = stats_range("msg_rates", given("msg_rates_age"), given("msg_rates_incr"));
  if (!msg_rates) return msg_rates.error();
  auto lengths = stats_range("lengths", given("lengths_age"), given("lengths_incr"));
  if (!lengths) return lengths.error();
  out.msg_rates = *msg_rates;
  out.lengths = *lengths;
  if (page) {
    out.page = positive(*page);
    const std::optional<std::uint64_t> size = page_size ? positive(*page_size) : std::optional<std::uint64_t>(100);
    if (!out.page || !size || *size > ListQuery::kMaxPageSize) {
      // RabbitMQ's words for the same refusal.
      return api_error(http::status::bad_request, "bad_request",
                       "Invalid pagination parameters: page number " + *page + ", page size " +
                           page_size.value_or("100"));
    }
    out.page_size = *size;
  }
  if (out.name && out.use_regex) {
    try {
      std::regex check(*out.name, std::regex::ECMAScript | std::regex::icase);
    } catch (const std::regex_error&) {
      return api_error(http::status::bad_request, "bad_request", "'name' is not a valid regular expression");
    }
  }
  return out;
}

Result<Json, HttpAnswer> shaped(const ListQuery& query, Json body) {
  if (!body.is_array()) return with_columns(body, query.columns);
  const std::size_t total = body.size();
  if (query.name) {
    std::optional<std::regex> pattern;
    if (query.use_regex) pattern.emplace(*query.name, std::regex::ECMAScript | std::regex::icase);
    Json kept = Json::array();
    for (Json& item : body) {
      if (name_matches(query, pattern ? &*pattern : nullptr, item)) kept.push_back(std::move(item));
    }
    body = std::move(kept);
  }
  if (!query.sort.empty()) {
    // Json's own order: numbers by value, strings by bytes; an item without the field first.
    static const Json kAbsent;
    auto key = [&](const Json& item) -> const Json& {  // a reference: no copy of the field per comparison
      const Json* v = at_path(item, query.sort);
      return v ? *v : kAbsent;
    };
    std::stable_sort(body.begin(), body.end(), [&](const Json& a, const Json& b) {
      return query.sort_reverse ? key(b) < key(a) : key(a) < key(b);
    });
  }
  Json items = Json::array();
  const std::size_t filtered = body.size();
  const std::uint64_t size = query.page ? query.page_size : std::max<std::uint64_t>(filtered, 1);
  const std::uint64_t first = query.page ? (*query.page - 1) * size : 0;
  for (std::size_t i = first; i < filtered && i < first + size; ++i)
    items.push_back(with_columns(body[i], query.columns));
  if (!query.page) return items;
  const std::uint64_t page_count = (filtered + size - 1) / size;
  if (*query.page > std::max<std::uint64_t>(page_count, 1)) {
    return api_error(http::status::bad_request, "bad_request", "page_out_of_range");
  }
  return Json{{"filtered_count", filtered}, {"item_count", items.size()}, {"items", items},      {"page", *query.page},
              {"page_count", page_count},   {"page_size", size},          {"total_count", total}};
}

}  // namespace firemq
