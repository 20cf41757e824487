// Identifies the machine a measurement belongs to (CPU model, logical CPUs, memory size), and the
// small JSON files such measurements are cached in, keyed by it: the profiler's bandwidth
// (profiler/roofline.h) and the fusion cost model's calibration (compiler/cost_calibration.h).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace ubfuse {

struct MachineInfo {
  std::string cpu_model;  // /proc/cpuinfo "model name" ("unknown" elsewhere)
  int cpus = 0;           // logical CPUs
  int64_t memory_bytes = 0;
  // "AMD EPYC | 2 cpus | 24 GiB": the key of the measurement caches.
  std::string key() const;
};

// Read once per process (the CPU, its count and the memory do not change while it runs).
const MachineInfo& machine_info();

// "<machine key> | <threads> threads": the key of a measurement that scales with threads.
std::string machine_key(int threads);

// user_cache_dir()/<file> (util/cache_dir.h); "" when it has no place.
std::string machine_cache_path(const std::string& file);

// {"machines": {...}} read from path; an empty object when missing or damaged (a damaged cache
// is ours to rebuild, not the user's problem).
nlohmann::json read_machine_cache(const std::string& path);

// Best effort, atomic (a rename: concurrent processes never see half a file); a read-only home
// only costs a measurement next time.
void write_machine_cache(const std::string& path, const nlohmann::json& j);

// Seconds since the epoch, as the entries' "measured_unix" holds it.
int64_t unix_now();

// An entry measured less than a week ago: a VM may have moved, or the machine was busy.
bool machine_cache_fresh(const nlohmann::json& entry);

}  // namespace ubfuse
