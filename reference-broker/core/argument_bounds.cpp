#include "reference-broker/core/argument_bounds.h"

#include "protocol/msgpack_codec.h"
#include "protocol/reply_codes.h"

namespace firemq {

Status check_arguments_size(const Map& args, const std::string& owner) {
  if (args.empty()) return std::nullopt;
  Bytes encoded;
  encode_map(args, encoded);
  if (encoded.size() <= kMaxArgumentsBytes) return std::nullopt;
  // "506 resource-error: Server out of a resource", as for the other bounds no client can push past.
  return make_error(ReplyCode::resource_error, "the arguments of " + owner + " are " + std::to_string(encoded.size()) +
                                                   " bytes, over the limit of " + std::to_string(kMaxArgumentsBytes) +
                                                   " (MessagePack-encoded)");
}

}  // namespace firemq
