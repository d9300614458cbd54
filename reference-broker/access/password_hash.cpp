#include "reference-broker/access/password_hash.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <vector>

namespace firemq {

PasswordHash hash_password(const std::array<std::uint8_t, 4>& salt, std::string_view password) {
  // RabbitMQ's rabbit_password:salted_hash/3: the hash of salt ++ password, kept after the salt.
  PasswordHash hash{salt, {}};
  std::vector<std::uint8_t> input(salt.begin(), salt.end());
  input.insert(input.end(), password.begin(), password.end());
  unsigned int size = 0;
  EVP_Digest(input.data(), input.size(), hash.digest.data(), &size, EVP_sha256(), nullptr);
  OPENSSL_cleanse(input.data(), input.size());
  return hash;
}

Result<PasswordHash, std::string> hash_new_password(std::string_view password) {
  std::array<std::uint8_t, 4> salt{};
  if (RAND_bytes(salt.data(), static_cast<int>(salt.size())) != 1) {
    return std::string("cannot hash a password: the random generator failed");
  }
  return hash_password(salt, password);
}

bool password_matches(const PasswordHash& hash, std::string_view password) {
  const PasswordHash offered = hash_password(hash.salt, password);
  return CRYPTO_memcmp(offered.digest.data(), hash.digest.data(), hash.digest.size()) == 0;
}

std::string encode_password_hash(const PasswordHash& hash) {
  std::array<std::uint8_t, 36> raw{};
  std::copy(hash.salt.begin(), hash.salt.end(), raw.begin());
  std::copy(hash.digest.begin(), hash.digest.end(), raw.begin() + 4);
  std::array<unsigned char, 4 * 36 / 3 + 1> text{};  // 48 characters and EVP_EncodeBlock's NUL
  const int n = EVP_EncodeBlock(text.data(), raw.data(), static_cast<int>(raw.size()));
  return std::string(reinterpret_cast<const char*>(text.data()), static_cast<std::size_t>(n));
}

Result<PasswordHash, std::string> decode_password_hash(std::string_view base64, std::string_view algorithm) {
  if (algorithm != kSha256HashingAlgorithm) {
    return "hashing_algorithm '" + std::string(algorithm) + "' is not supported: use " + kSha256HashingAlgorithm +
           " (or give the password in clear text and let the broker hash it)";
  }
  // 36 bytes (4 of salt, 32 of digest) are 48 base64 characters without padding.
  std::array<unsigned char, 36> raw{};
  if (base64.size() != 48 ||
      EVP_DecodeBlock(raw.data(), reinterpret_cast<const unsigned char*>(base64.data()), 48) != 36) {
    return std::string("password_hash is not the base64 of a 4-byte salt and a SHA-256 digest");
  }
  PasswordHash hash;
  std::copy(raw.begin(), raw.begin() + 4, hash.salt.begin());
  std::copy(raw.begin() + 4, raw.end(), hash.digest.begin());
  return hash;
}

}  // namespace firemq
