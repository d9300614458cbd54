// Passwords at rest, as RabbitMQ keeps them: a salted hash that its definitions export and import read.
//
//   password_hash = base64(salt ++ SHA-256(salt ++ UTF-8 password)), salt = 4 random bytes
//   hashing_algorithm = "rabbit_password_hashing_sha256"   (RabbitMQ's default since 3.6)
//
// The broker keeps only this hash in memory and on disk; a clear password in a definitions file is hashed when
// the file is read (docs/security.md, "Passwords at rest").
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "protocol/error.h"

namespace firemq {

inline constexpr const char* kSha256HashingAlgorithm = "rabbit_password_hashing_sha256";

struct PasswordHash {
  std::array<std::uint8_t, 4> salt{};
  std::array<std::uint8_t, 32> digest{};
};

// The hash of `password` under `salt`.
PasswordHash hash_password(const std::array<std::uint8_t, 4>& salt, std::string_view password);
// The hash of `password` under a fresh random salt; the error says the random generator failed.
Result<PasswordHash, std::string> hash_new_password(std::string_view password);
// Whether `password` hashes to `hash` under its salt; the digests are compared in constant time.
bool password_matches(const PasswordHash& hash, std::string_view password);

// RabbitMQ's text form: base64 of salt ++ digest.
std::string encode_password_hash(const PasswordHash& hash);
// Reads a definitions file's password_hash under its hashing_algorithm; the error names what is wrong (another
// algorithm is refused by name: only SHA-256 is implemented).
Result<PasswordHash, std::string> decode_password_hash(std::string_view base64, std::string_view algorithm);

}  // namespace firemq
