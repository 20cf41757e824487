#include "util/cache_dir.h"

#include <cstdlib>
#include <filesystem>

namespace ubfuse {

std::string user_cache_dir() {
  namespace fs = std::filesystem;
  auto set = [](const char* name) -> const char* {
    const char* v = std::getenv(name);
    return v && *v ? v : nullptr;
  };
  if (const char* d = set("UBFUSE_CACHE_DIR")) return d;
  if (const char* d = set("XDG_CACHE_HOME")) return (fs::path(d) / "ubfuse").string();
  if (const char* h = set("HOME")) return (fs::path(h) / ".cache" / "ubfuse").string();
  return "";
}

}  // namespace ubfuse
