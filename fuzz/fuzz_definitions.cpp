// Fuzzes the definitions import: arbitrary text as a --definitions file (Definitions::parse: users, vhosts,
// permissions, limits) and as the topology of a data directory's definitions.json, restored into a broker core
// through the same checks a client's declares meet (DurableTopology::restore), in both of its argument formats.
// Nothing may crash, leak or trip a sanitizer (issue 27: a file nested 50,000 deep overflowed the stack); what
// cannot be imported is an error or a listed problem, never an exception that escapes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "protocol/bounded_json.h"
#include "reference-broker/access/definitions.h"
#include "reference-broker/core/core.h"
#include "reference-broker/core/time_source.h"
#include "reference-broker/store/durable_topology.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto accounts = firemq::Definitions::parse(text);
  firemq::Definitions definitions = accounts ? std::move(*accounts) : *firemq::Definitions::defaults();
  auto stored = firemq::parse_bounded_json(text, firemq::kMaxDefinitionsNesting);
  if (!stored) return 0;
  for (auto format : {firemq::DurableTopology::Arguments::plain, firemq::DurableTopology::Arguments::typed}) {
    firemq::ManualTime time;
    firemq::Core core(definitions, time);
    (void)firemq::DurableTopology::restore(*stored, core, format);
  }
  return 0;
}
