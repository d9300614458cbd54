// Cross-check (b), C++ half: decodes every frames.json vector with the C++ decoder, encodes it again with the
// C++ encoder, and writes the frames to a JSON file for check_encoded.py to decode with Python's msgpack.
// Usage: encode_vectors OUT.json
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "protocol/frame.h"
#include "protocol/messages.h"

int main(int argc, char** argv) {
  using Json = nlohmann::json;
  if (argc != 2) {
    std::cerr << "usage: encode_vectors OUT.json\n";
    return 2;
  }
  std::ifstream in(std::string(FIREMQ_VECTORS_DIR) + "/frames.json");
  const Json frames = Json::parse(in);
  Json out = {{"vectors", Json::array()}};
  for (const Json& v : frames.at("vectors")) {
    const firemq::Bytes bytes = *firemq::from_hex(v.at("frame").get<std::string>());
    firemq::FrameDecoder decoder(firemq::StreamSide::client, firemq::kDefaultMaxFrame);
    if (decoder.feed(bytes).state != firemq::FrameDecoder::State::frame) {
      std::cerr << v.at("name") << ": not one frame\n";
      return 1;
    }
    const firemq::RawFrame frame = decoder.take_frame();
    auto message = firemq::decode_frame(frame);
    if (!message) {
      std::cerr << v.at("name") << ": " << message.error().msg << "\n";
      return 1;
    }
    const firemq::Bytes encoded = firemq::encode_frame(*message, frame.payload());
    out["vectors"].push_back({{"file", "frames.json"}, {"name", v.at("name")}, {"frame", firemq::to_hex(encoded)}});
  }
  std::ofstream(argv[1]) << out.dump(2) << "\n";
  std::cout << "encode_vectors: " << out["vectors"].size() << " frames encoded by the C++ encoder\n";
  return 0;
}
