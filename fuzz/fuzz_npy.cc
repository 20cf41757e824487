// Fuzzes the .npy reader: bytes either parse or throw ubfuse::Error naming the field. A tensor
// that parses must survive a write/read round trip bit for bit.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "ubfuse/error.h"
#include "ubfuse/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  ubfuse::Tensor t;
  try {
    t = ubfuse::parse_npy(bytes, "fuzz.npy");
  } catch (const ubfuse::Error&) {
    return 0;
  }
  ubfuse::Tensor back = ubfuse::parse_npy(ubfuse::to_npy_bytes(t), "round-trip");
  if (back.dtype() != t.dtype() || back.sizes() != t.sizes() ||
      (t.nbytes() && std::memcmp(back.data(), t.data(), t.nbytes()) != 0)) {
    __builtin_trap();
  }
  return 0;
}
