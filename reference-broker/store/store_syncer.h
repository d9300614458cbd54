// The storage thread: fsyncs what the broker thread has appended, many appends per fsync (group commit), and
// tells the broker thread how far the log is durable. The broker thread writes (write() is a copy into the page
// cache and is all a kill -9 needs); only the slow part, fsync, runs here. This is the one piece of the broker
// that runs on a second thread, and it shares nothing with the core but the small hand-off below.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "reference-broker/store/storage_io.h"

namespace firemq::store {

// What the fsyncs of the log have said, whichever thread made them. Linux reports a writeback error once per
// file, to whichever fsync comes first: if the storage thread's fsync takes the error, an fsync the broker thread
// makes next of the same file returns 0 although the pages are lost. So every fsync of the log runs here, one at
// a time, and once one fails none is made or believed again (PostgreSQL's fsync lesson): the failure is sticky
// until a restart, which reads back what is really on disk.
class SyncLedger {
 public:
  // Runs `fsyncs` (which make everything appended up to `position` durable) unless an earlier call failed.
  // Returns the failure: this call's, or the earlier one's.
  IoStatus sync(std::uint64_t position, const std::function<IoStatus()>& fsyncs);
  // How far a successful fsync has made the log durable.
  std::uint64_t durable() const;
  IoStatus failure() const;

 private:
  mutable std::mutex mutex_;  // held across the fsyncs themselves: no fsync can succeed past another's failure
  std::uint64_t durable_ = 0;
  IoStatus outcome_;  // done until an fsync fails; then that failure, for good
};

class Syncer {
 public:
  // `done` runs on the broker thread (through `post`) with the position now durable, or the error that
  // prevented it; `post` hands a function to the broker thread (asio::post in the broker, a queue in tests).
  using Done = std::function<void(std::uint64_t position, const IoStatus& synced)>;
  using Post = std::function<void(std::function<void()>)>;
  Syncer(std::filesystem::path directory, Post post, Done done);
  ~Syncer();  // syncs what was requested, then stops the thread
  Syncer(const Syncer&) = delete;
  Syncer& operator=(const Syncer&) = delete;

  // Everything appended to `file` (and to files handed over before) up to `position` is to be made durable.
  // `new_file`: the file was just created, so its directory entry must be synced too.
  void request(std::uint64_t position, const std::shared_ptr<AppendFile>& file, bool new_file);
  // Every fsync of the log, this thread's and the broker thread's (MessageStore::sync_now), goes through it.
  SyncLedger& ledger() { return ledger_; }

 private:
  void run();

  struct Work {
    std::uint64_t position = 0;
    std::vector<std::shared_ptr<AppendFile>> files;  // each synced once, in order
    bool directory = false;
  };

  std::filesystem::path directory_;
  SyncLedger ledger_;
  Post post_;
  Done done_;
  std::mutex mutex_;
  std::condition_variable wake_;
  Work pending_;           // guarded by mutex_
  bool stopping_ = false;  // guarded by mutex_
  std::thread thread_;
};

}  // namespace firemq::store
