#include "util/omp_env.h"

#include <unistd.h>

#include <cstdlib>

namespace ubfuse {

void reexec_with_passive_omp_wait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("UBFUSE_KEEP_OMP_WAIT") != nullptr) {
    return;
  }
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  const bool spin = std::getenv("GOMP_SPINCOUNT") == nullptr;
  if (spin) setenv("GOMP_SPINCOUNT", kGompSpinCount, 1);
  execv("/proc/self/exe", argv);
  unsetenv("OMP_WAIT_POLICY");  // no /proc (or no exec): run as started
  if (spin) unsetenv("GOMP_SPINCOUNT");
}

}  // namespace ubfuse
