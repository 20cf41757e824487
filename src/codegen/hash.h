// Content hashes for generated kernel names and cache keys (FNV-1a, 64-bit, as hex).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace ubfuse {

inline uint64_t fnv1a64(std::string_view s, uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

inline std::string hash_hex(std::string_view s) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(fnv1a64(s)));
  return buf;
}

}  // namespace ubfuse
