#include "reference-broker/tls_context.h"

#include <openssl/ssl.h>

namespace firemq {

Result<std::unique_ptr<asio::ssl::context>, std::string> make_tls_context(const TlsFiles& files) {
  auto context = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  // TLS 1.0 and 1.1 are deprecated (RFC 8996): a client offering only those fails the handshake.
  context->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                       asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                       asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use);
  SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION);
  boost::system::error_code ec;
  context->use_certificate_chain_file(files.certificate, ec);
  if (ec) return "--tls-cert " + files.certificate + ": " + ec.message();
  context->use_private_key_file(files.private_key, asio::ssl::context::pem, ec);
  if (ec) return "--tls-key " + files.private_key + ": " + ec.message();
  if (SSL_CTX_check_private_key(context->native_handle()) != 1) {
    return "--tls-key " + files.private_key + " does not match the certificate in --tls-cert " + files.certificate;
  }
  if (!files.client_ca.empty()) {
    context->load_verify_file(files.client_ca, ec);
    if (ec) return "--tls-ca " + files.client_ca + ": " + ec.message();
    context->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
  }
  return context;
}

}  // namespace firemq
