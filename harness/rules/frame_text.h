// Frames as the reports show them: the header in typed JSON (vectors/README.md) with passwords redacted, and a
// short printable preview of a payload. Shared by the scenario's transcript and the wire monitor's context.
#pragma once

#include <cstdint>
#include <string>

#include "protocol/bytes.h"

namespace firemq::conform {

// The op's spec name, or "op N" for a byte version 1 does not define.
std::string op_label(std::uint8_t code);
// The header as typed JSON, "{}" when empty, or a note with its hex when it is not MessagePack.
std::string header_text(ByteView header);
// header_text, or only its size when it is over 4 KiB (a frame padded to a limit): a report line stays
// readable, and a 16 MiB header is not turned into JSON for it.
std::string header_summary(ByteView header);
// At most 64 bytes: printable ASCII kept, others as \xNN, "..." when cut.
std::string preview(ByteView bytes);

}  // namespace firemq::conform
