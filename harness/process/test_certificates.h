// A throwaway certificate authority and a server certificate signed by it, for the embedded broker's TLS
// listeners (fires://, wss://): made in the run's work directory with the openssl command line, trusted by
// the harness (TlsOptions::ca_file) and by nothing else. The server certificate names 127.0.0.1 and
// localhost (subjectAltName IP:127.0.0.1, DNS:localhost), so the harness checks the host name as for any
// broker, rather than turning verification off.
#pragma once

#include <filesystem>
#include <string>

#include "protocol/error.h"

namespace firemq::conform {

struct TestCertificates {
  std::filesystem::path ca_file;    // the CA's certificate (PEM): what the client trusts
  std::filesystem::path cert_file;  // the server's certificate (PEM)
  std::filesystem::path key_file;   // the server's private key (PEM)
};

// Writes ca.pem, server.pem and server.key under `dir` (created if needed), valid from now for two days; the
// error names the openssl command that failed and its output.
Result<TestCertificates, std::string> make_test_certificates(const std::filesystem::path& dir);

}  // namespace firemq::conform
