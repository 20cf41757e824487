#include "profiler/machine.h"

#include <cstdint>
#include <fstream>
#include <sstream>
#include <thread>

#include "kernels/cpu/store_policy.h"
#include "ubfuse/profiler.h"
#include "util/machine_memory.h"

namespace ubfuse::prof {

namespace {

std::string trim(std::string s) {
  size_t a = s.find_first_not_of(" \t");
  size_t b = s.find_last_not_of(" \t\r\n");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// The value of the first "key : value" line of a /proc file.
std::string proc_field(const char* path, const std::string& key) {
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    auto colon = line.find(':');
    if (colon != std::string::npos && trim(line.substr(0, colon)) == key) {
      return trim(line.substr(colon + 1));
    }
  }
  return "";
}

}  // namespace

std::string MachineInfo::key() const {
  // Rounded to GiB so a few MiB the kernel reserves differently do not change the key.
  int64_t gib = (memory_bytes + (int64_t(1) << 29)) >> 30;
  std::ostringstream s;
  s << cpu_model << " | " << cpus << " cpus | " << gib << " GiB";
  return s.str();
}

MachineInfo machine_info() {
  MachineInfo m;
  m.cpu_model = proc_field("/proc/cpuinfo", "model name");
  if (m.cpu_model.empty()) m.cpu_model = "unknown";
  m.cpus = int(std::thread::hardware_concurrency());
  m.memory_bytes = int64_t(machine_memory_bytes());
  return m;
}

}  // namespace ubfuse::prof

namespace ubfuse {

std::string store_profile_name() { return cpu::store_profile().name; }

}  // namespace ubfuse
