// Where firemq-conform and the tools find the reference broker and the suite's data when no flag names them:
// in the build tree as built, or installed (make install, the Debian package) at any prefix.
#pragma once

#include <filesystem>

namespace firemq::conform {

struct DefaultPaths {
  std::filesystem::path broker;           // the firemq-broker executable
  std::filesystem::path conformance_dir;  // cases/, client-cases/, requirements.json, definitions.json
};

// The built paths when the running executable is in the build tree, the installed ones otherwise.
DefaultPaths default_paths();

}  // namespace firemq::conform
