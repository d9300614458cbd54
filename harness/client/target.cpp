#include "harness/client/target.h"

namespace firemq::conform {

Target target_at(const Url& url, const TlsOptions& tls) {
  Target t;
  t.transport = *transport_from_name(url.scheme);  // parse_url accepts the four schemes only
  t.host = url.host;
  t.port = url.port;
  t.user = url.user;
  t.password = url.password;
  t.vhost = url.vhost;
  if (url.websocket) t.ws_path = url.path;
  t.tls = tls;
  return t;
}

}  // namespace firemq::conform
