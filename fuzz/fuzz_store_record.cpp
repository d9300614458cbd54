// Fuzzes the message store's record reader on arbitrary segment bytes, as recovery reads a segment file that a
// crash, a bad disk or a person may have damaged. It must never crash; a record it accepts must encode again to
// bytes it reads back the same way (the encoding is stable), and a skipped or whole record never claims bytes
// past the end.
//
// Input layout: the segment file's bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "reference-broker/store/store_record.h"

namespace {

using firemq::Bytes;
using firemq::ByteView;
using namespace firemq::store;

Bytes encoded(const Record& record) {
  Bytes bytes;
  append_record(bytes, record);
  return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ByteView rest(data, size);
  while (!rest.empty()) {
    ReadOutcome outcome = read_record(rest);
    if (outcome.size > rest.size()) std::abort();
    if (outcome.kind == ReadOutcome::Kind::record) {
      if (!outcome.record || outcome.size == 0) std::abort();
      const Bytes once = encoded(*outcome.record);
      ReadOutcome again = read_record(once);
      if (again.kind != ReadOutcome::Kind::record || again.size != once.size()) std::abort();
      if (encoded(*again.record) != once) std::abort();
    } else if (outcome.kind == ReadOutcome::Kind::corrupt && outcome.problem.empty()) {
      std::abort();  // recovery reports what was wrong
    }
    if (outcome.size == 0) break;  // torn, or a size that cannot be trusted: recovery stops here too
    rest = rest.subspan(outcome.size);
  }
  return 0;
}
