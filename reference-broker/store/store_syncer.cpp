#include "reference-broker/store/store_syncer.h"

#include <algorithm>

namespace firemq::store {

IoStatus SyncLedger::sync(std::uint64_t position, const std::function<IoStatus()>& fsyncs) {
  std::lock_guard lock(mutex_);
  if (!outcome_) return outcome_;
  outcome_ = fsyncs();
  if (outcome_) durable_ = std::max(durable_, position);
  return outcome_;
}

std::uint64_t SyncLedger::durable() const {
  std::lock_guard lock(mutex_);
  return durable_;
}

IoStatus SyncLedger::failure() const {
  std::lock_guard lock(mutex_);
  return outcome_;
}

Syncer::Syncer(std::filesystem::path directory, Post post, Done done)
    : directory_(std::move(directory)), post_(std::move(post)), done_(std::move(done)), thread_([this] { run(); }) {}

Syncer::~Syncer() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void Syncer::request(std::uint64_t position, const std::shared_ptr<AppendFile>& file, bool new_file) {
  {
    std::lock_guard lock(mutex_);
    pending_.position = std::max(pending_.position, position);
    if (std::find(pending_.files.begin(), pending_.files.end(), file) == pending_.files.end()) {
      pending_.files.push_back(file);
    }
    pending_.directory = pending_.directory || new_file;
  }
  wake_.notify_one();
}

void Syncer::run() {
  for (;;) {
    Work work;
    bool stopping = false;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !pending_.files.empty(); });
      if (pending_.files.empty()) return;  // stopping, and nothing left to sync
      work = std::exchange(pending_, Work{});
      stopping = stopping_;
    }
    // Group commit: whatever was appended while the previous fsync ran is covered by this one.
    const IoStatus synced = ledger_.sync(work.position, [&]() -> IoStatus {
      for (const auto& file : work.files) {
        if (IoStatus file_synced = file->sync(); !file_synced) return file_synced;
      }
      return work.directory ? sync_directory(directory_) : IoStatus::done();
    });
    // Once stopping, the store that would hear of it is going away: the last fsync is done, and told no one.
    if (!stopping) post_([this, position = work.position, synced] { done_(position, synced); });
  }
}

}  // namespace firemq::store
