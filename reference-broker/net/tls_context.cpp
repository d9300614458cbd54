#include "reference-broker/net/tls_context.h"

#include <openssl/ssl.h>

namespace firemq {

Result<std::unique_ptr<asio::ssl::context>, std::string> make_tls_context(const TlsFiles& files) {
  auto context = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  // TLS 1.0 and 1.1 are deprecated (RFC 8996): a client offering only those fails the handshake.
  context->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                       asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1 |
                       asio::ssl::context::single_dh_use);
  SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION);
  // TLS 1.2: only the suites of --tls-ciphers, and the server's order of them rather than the client's, so that a
  // client preferring a weaker suite it shares with the server does not get it (RFC 9325, section 4.2).
  if (SSL_CTX_set_cipher_list(context->native_handle(), files.ciphers.c_str()) != 1) {
    return "--tls-ciphers " + files.ciphers +
           ": OpenSSL knows no TLS 1.2 cipher suite in it (OpenSSL cipher-list "
           "syntax: ECDHE-RSA-AES128-GCM-SHA256:...)";
  }
  SSL_CTX_set_options(context->native_handle(), SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_dh_auto(context->native_handle(), 1);  // DHE's parameters from the key's size (OpenSSL's built-in groups)
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
