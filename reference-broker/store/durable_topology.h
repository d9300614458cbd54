// The durable topology on disk: <data-dir>/definitions.json, in a shape close to RabbitMQ's definitions export
// (users, vhosts, permissions, exchanges, queues, bindings), rewritten atomically (write, fsync, rename, fsync
// the directory) whenever a durable exchange, queue or binding changes, before the change's reply is sent.
// Arguments are written in the typed JSON of the vector files, so that a restart gives back the very values
// (an int stays an int) that redeclares are compared with.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference-broker/access/definitions.h"
#include "reference-broker/core/core.h"
#include "reference-broker/core/journal.h"

namespace firemq {

class DurableTopology final : public TopologyStore {
 public:
  // `core` and `definitions` must outlive it.
  DurableTopology(std::filesystem::path file, const Core& core, const Definitions& definitions)
      : file_(std::move(file)), core_(core), definitions_(definitions) {}

  Status save() override;

  // The file's contents, or null when there is none yet; the error names the file and what is wrong.
  static Result<nlohmann::json, std::string> read(const std::filesystem::path& file);
  // How "arguments" are written: in the typed JSON of this file, or as plain JSON (RabbitMQ's export, which the
  // management API imports).
  enum class Arguments { typed, plain };
  // Declares the stored exchanges, queues and bindings in `core` (their vhosts must exist). Returns what could
  // not be restored, one line each; the rest is restored regardless. Entries are durable unless they say not.
  static std::vector<std::string> restore(const nlohmann::json& stored, Core& core,
                                          Arguments format = Arguments::typed);

 private:
  nlohmann::json snapshot() const;

  std::filesystem::path file_;
  const Core& core_;
  const Definitions& definitions_;
};

}  // namespace firemq
