#include "harness/process/default_paths.h"

#include <algorithm>

namespace fs = std::filesystem;

namespace firemq::conform {

namespace {

bool is_inside(const fs::path& path, const fs::path& dir) {
  return std::mismatch(dir.begin(), dir.end(), path.begin(), path.end()).first == dir.end();
}

}  // namespace

// Two layouts, told apart by where the running executable is. In the build tree (build/harness/firemq-conform,
// build/tools/...) the defaults are the ones compiled in: this build's broker and the source tree's
// conformance/, so built binaries behave as they always did. Anywhere else the executable is installed: the
// broker is beside it in bin/ and the data in share/firemq/, found relative to the executable so that any
// prefix works. An installed copy never falls back to the source tree, even when one is on the machine: a file
// missing from the install is then an error, not hidden.
DefaultPaths default_paths() {
  const fs::path exe = fs::read_symlink("/proc/self/exe");
  if (is_inside(exe, fs::weakly_canonical(FIREMQ_BUILD_TREE))) {
    return {FIREMQ_BUILT_BROKER, FIREMQ_SOURCE_CONFORMANCE_DIR};
  }
  const fs::path bin = exe.parent_path();
  return {bin / "firemq-broker", (bin / FIREMQ_INSTALLED_CONFORMANCE_DIR).lexically_normal()};
}

}  // namespace firemq::conform
