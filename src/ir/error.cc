#include "ubfuse/error.h"

#include <cstdio>
#include <cstdlib>

namespace ubfuse {

void internal_check_failed(const char* cond, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "ubfuse internal error: %s:%d: check '%s' failed: %s\n", file, line, cond,
               msg.c_str());
  std::abort();
}

}  // namespace ubfuse
