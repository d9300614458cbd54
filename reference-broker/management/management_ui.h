// The management UI: one HTML page with its script and styles (reference-broker/management/ui/index.html), compiled into the
// broker (ui/embed.cmake) and served at / on the HTTP listeners. It uses the management API from the browser.
#pragma once

#include <string_view>

namespace firemq {

extern const std::string_view kManagementPage;

}  // namespace firemq
