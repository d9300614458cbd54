// The one clock of the harness: every deadline, every frame's time and every timing rule use it.
#pragma once

#include <chrono>

namespace firemq::conform {

using Clock = std::chrono::steady_clock;

}  // namespace firemq::conform
