// The TLS settings of the fires:// and wss:// listeners: the server's certificate and key, TLS 1.2 and 1.3 only,
// TLS 1.2 with forward-secret AEAD suites only in the server's order (--tls-ciphers), and, when a CA is given,
// client certificates verified against it (off by default). The spec names no TLS
// parameters (docs/spec-notes.md, "TLS").
#pragma once

#include <memory>
#include <string>

#include <boost/asio/ssl.hpp>

#include "protocol/error.h"
#include "reference-broker/core/config.h"
#include "reference-broker/net/asio.h"

namespace firemq {

// The error names the file that could not be used and why.
Result<std::unique_ptr<asio::ssl::context>, std::string> make_tls_context(const TlsFiles& files);

}  // namespace firemq
