// User errors (bad graphs, bad inputs, bad options and files) throw ubfuse::Error with a message
// that names the node, op, shapes or field and gives a hint. Internal invariants use UBF_CHECK,
// which aborts loudly: a broken invariant is our bug, not the user's.
#pragma once

#include <stdexcept>
#include <string>

namespace ubfuse {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

[[noreturn]] void internal_check_failed(const char* cond, const char* file, int line,
                                        const std::string& msg);

}  // namespace ubfuse

#define UBF_CHECK(cond, msg)                                                      \
  do {                                                                            \
    if (!(cond)) ::ubfuse::internal_check_failed(#cond, __FILE__, __LINE__, msg); \
  } while (0)
