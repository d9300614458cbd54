// The broker's model: its vhosts, each with its exchanges, queues and bindings. No I/O; runs on the broker
// thread only, so it needs no locks. Sessions find their vhost here after welcome.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "protocol/reply_codes.h"

#include "reference-broker/access/definitions.h"
#include "reference-broker/access/limits.h"
#include "reference-broker/core/journal.h"
#include "reference-broker/core/time_source.h"
#include "reference-broker/core/vhost.h"

namespace firemq {

class Core {
 public:
  // `time` must outlive the core: every expiry and timestamp in it comes from there.
  Core(const Definitions& definitions, const TimeSource& time) : time_(time) {
    for (const std::string& name : definitions.vhost_names()) add_vhost(name);
  }
  // A vhost the definitions gained at run time (the management API); nothing when it exists.
  void add_vhost(const std::string& name) {
    if (vhosts_.count(name)) return;
    auto vhost = std::make_unique<Vhost>(name, time_);
    vhost->set_journal(journal_);
    vhost->set_pager(pager_);
    vhost->set_churn(&churn_);
    vhosts_.emplace(name, std::move(vhost));
  }
  // A vhost deleted at run time: its queues are deleted (their stored messages with them), then the vhost. Its
  // connections must have ended first (their sessions refer to it until then).
  void remove_vhost(const std::string& name) {
    Vhost* vhost = this->vhost(name);
    if (vhost == nullptr) return;
    std::vector<std::pair<std::string, std::string>> queues;  // name, exclusive owner
    for (const auto& [qname, q] : vhost->queues()) queues.emplace_back(qname, q->settings().exclusive_owner);
    for (const auto& [qname, owner] : queues) (void)vhost->delete_queue(op::DeleteQueue{0, qname, false, false}, owner);
    vhosts_.erase(name);
  }
  // Saves the definitions file whatever changed (users, vhosts, permissions changed at run time).
  Status save_definitions() { return topology_ == nullptr ? Status() : write_topology(); }
  // The disk behind durability (message_store.h, durable_topology.h); without it nothing is persisted. Called
  // once, before any client connects.
  void attach_storage(Journal* journal, TopologyStore* topology) {
    journal_ = journal;
    topology_ = topology;
    for (auto& [name, vhost] : vhosts_) vhost->set_journal(journal);
  }
  Journal* journal() const { return journal_; }
  // Paging (paging.h): the queues declared from now on may page bodies out. Called once, before any queue is.
  void attach_pager(Pager* pager) {
    pager_ = pager;
    for (auto& [name, vhost] : vhosts_) vhost->set_pager(pager);
  }

  // Saves the durable topology if it changed (after a declare, delete, bind or unbind, before its reply).
  Status save_topology() {
    std::vector<Vhost*> changed;
    for (auto& [name, vhost] : vhosts_) {
      if (vhost->take_durable_change()) changed.push_back(vhost.get());
    }
    if (changed.empty() || topology_ == nullptr) return std::nullopt;
    Status failed = write_topology();
    // Not saved: still due. Every later declare (and the tick) tries again, and fails while the disk does, so no
    // client is told ok for a queue the file does not hold.
    if (failed)
      for (Vhost* vhost : changed) vhost->keep_durable_change();
    return failed;
  }

  // Time passes (the broker calls this every few tens of milliseconds): TTLs and x-expires take effect.
  void tick() {
    for (auto& [name, vhost] : vhosts_) vhost->tick();
  }
  const std::map<std::string, std::unique_ptr<Vhost>>& vhosts() const { return vhosts_; }

  // The connections open per vhost and per user, for their max-connections limits.
  ConnectionCounts& connection_counts() { return connection_counts_; }
  const ConnectionCounts& connection_counts() const { return connection_counts_; }
  MessageCounters& counters() { return counters_; }
  const MessageCounters& counters() const { return counters_; }
  ChurnCounters& churn() { return churn_; }
  const ChurnCounters& churn() const { return churn_; }

  // nullptr for a vhost that does not exist.
  Vhost* vhost(const std::string& name) {
    auto it = vhosts_.find(name);
    return it == vhosts_.end() ? nullptr : it->second.get();
  }

 private:
  // The log first: a queue's deletion is on disk before the file that no longer lists the queue, so that a
  // queue declared again by that name never gets the old one's messages back.
  Status write_topology() {
    if (journal_ != nullptr) {
      if (IoStatus synced = journal_->sync_now(); !synced) {
        return make_error(ReplyCode::internal_error,
                          "durable definitions not saved: the message store failed: " + synced.error());
      }
    }
    return topology_->save();
  }

  const TimeSource& time_;
  std::map<std::string, std::unique_ptr<Vhost>> vhosts_;
  ConnectionCounts connection_counts_;
  MessageCounters counters_;
  ChurnCounters churn_;
  Journal* journal_ = nullptr;
  Pager* pager_ = nullptr;
  TopologyStore* topology_ = nullptr;
};

}  // namespace firemq
