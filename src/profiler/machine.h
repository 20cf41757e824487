// Identifies the machine a bandwidth measurement belongs to: CPU model, logical CPUs, memory size.
#pragma once

#include <string>

namespace ubfuse::prof {

struct MachineInfo {
  std::string cpu_model;  // /proc/cpuinfo "model name" ("unknown" elsewhere)
  int cpus = 0;           // logical CPUs
  int64_t memory_bytes = 0;
  // "AMD EPYC | 2 cpus | 24 GiB": the key of the bandwidth cache.
  std::string key() const;
};

MachineInfo machine_info();

}  // namespace ubfuse::prof
