// A TCP proxy between the harness and the broker that alters the broker's frames in one deliberate way: a
// "broken broker" made from a working one, to show that the cases catch what they claim to
// (conformance/faults.json lists, for each fault, exactly the cases that must fail; docs/case-format.md).
//
// Broker-to-client frames go through the fault's `rewrite`; client-to-broker bytes pass untouched unless the
// fault also has a `rewrite_upward` (a broker that misreads what it is sent, e.g. a wrong topic match).
// Faults that break one of the wire monitor's rules (faults.json's must_fail_rule) may answer a client's frame
// themselves (`back`). The frames of one rewrite leave in one write, so that the client reads them together.
// Two threads per proxied connection, blocking sockets; stopped (and joined) by its destructor.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "protocol/error.h"
#include "protocol/frame.h"

namespace firemq::conform {

// What a fault does with one frame from the broker: the frames to pass on instead (none, it, or others), and
// whether to cut the connection after them.
struct Rewrite {
  std::vector<Bytes> frames;  // TCP-framed
  bool cut = false;
  std::vector<Bytes> back;            // TCP-framed, to the frame's sender instead of onward
  std::chrono::milliseconds hold{0};  // how long the frames wait before they go on (a late frame)
};

using Rewriter = std::function<Rewrite(const RawFrame&)>;

struct Fault {
  std::string name;
  std::string description;
  Rewriter rewrite;
  Rewriter rewrite_upward = nullptr;  // none: client bytes pass as they are
  // A fault that remembers what it saw on one connection (the negotiated heartbeat, say) makes a fresh `rewrite`
  // for each connection; it replaces `rewrite` when set.
  std::function<Rewriter()> rewrite_per_connection = nullptr;
};

const std::vector<Fault>& faults();
const Fault* find_fault(const std::string& name);

class FaultProxy {
 public:
  // Listens on 127.0.0.1 (a free port) and forwards to upstream_host:upstream_port.
  static Result<std::unique_ptr<FaultProxy>, std::string> start(const Fault& fault, const std::string& upstream_host,
                                                                std::uint16_t upstream_port);
  ~FaultProxy();
  std::uint16_t port() const { return port_; }

 private:
  FaultProxy(const Fault& fault, int listener, std::uint16_t port, std::string host, std::uint16_t upstream)
      : fault_(fault), listener_(listener), port_(port), upstream_host_(std::move(host)), upstream_port_(upstream) {}
  void accept_loop();
  void serve(int client);

  const Fault& fault_;
  int listener_;
  std::uint16_t port_;
  std::string upstream_host_;
  std::uint16_t upstream_port_;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::mutex mutex_;
  std::vector<std::thread> workers_;
  std::vector<int> sockets_;
};

}  // namespace firemq::conform
