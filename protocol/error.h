// Errors are values on the data path: a reply code, a message that says what was wrong, and whether the
// connection ends after it. Nothing a peer sends may throw or assert; it produces an Error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace firemq {

struct Error {
  std::uint16_t code = 0;  // a reply code of the spec's table (reply_codes.h)
  std::string msg;         // human-readable, names the offending field or limit
  bool fatal = false;      // true when the connection closes after the error frame
  std::uint64_t rid = 0;   // the request the error answers, 0 when none could be read

  bool operator==(const Error&) const = default;
};

// Either a value or the error that prevented it (a protocol Error unless E says otherwise).
template <class T, class E = Error>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit on purpose, as std::expected
  Result(E error) : v_(std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const E& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, E> v_;
};

// The outcome of an operation that yields nothing: no value means success.
using Status = std::optional<Error>;

// The outcome of an I/O step that yields nothing (bind a port, open or sync a file, a transport's handshake):
// done, or a message that says why not. (Steps that yield a value are Result<T, std::string>.) Its sense is
// Result's: true when done.
class [[nodiscard]] IoStatus {
 public:
  IoStatus() = default;                                // done
  IoStatus(std::string why) : why_(std::move(why)) {}  // NOLINT: implicit, as Result's error
  IoStatus(const char* why) : why_(why) {}             // NOLINT
  static IoStatus done() { return {}; }
  bool ok() const { return !why_; }
  explicit operator bool() const { return ok(); }
  const std::string& error() const { return *why_; }

 private:
  std::optional<std::string> why_;
};

}  // namespace firemq
