#include "profiler/roofline.h"

#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>

#include "ubfuse/error.h"
#include "util/env.h"
#include "util/machine_info.h"

namespace ubfuse::prof {

using nlohmann::json;

namespace {

Roofline measure_and_cache(const std::string& key, const std::string& path) {
  Roofline r;
  r.machine = key;
  r.cache_path = path;
  r.gb_per_s = measure_add_bandwidth(&r.threads);
  if (r.gb_per_s <= 0) {
    r.gb_per_s = 0;
    r.source = "unavailable";
    return r;
  }
  r.source = "measured";
  json j = read_machine_cache(path);  // re-read: another process may have added its machine
  if (!j.contains("machines")) j["machines"] = json::object();
  j["machines"][key] = {
      {"add_gb_per_s", r.gb_per_s}, {"threads", r.threads}, {"measured_unix", unix_now()}};
  write_machine_cache(path, j);
  return r;
}

}  // namespace

std::string bandwidth_cache_path() { return machine_cache_path("bandwidth.json"); }

Roofline machine_roofline(bool remeasure) {
  static std::mutex mu;
  static Roofline cached;
  static bool have = false, measured_here = false;
  static std::string cached_for;  // the cache file `cached` belongs to
  std::lock_guard<std::mutex> lock(mu);
  remeasure |= env_on("UBFUSE_REMEASURE_BANDWIDTH");
  if (const char* v = std::getenv("UBFUSE_BANDWIDTH_GBPS"); v && *v) {
    char* end = nullptr;
    double gbps = std::strtod(v, &end);
    if (*end != '\0' || !(gbps > 0)) {
      throw Error(std::string("UBFUSE_BANDWIDTH_GBPS='") + v +
                  "' is not a positive number of GB/s; hint: e.g. 27.5, or unset it to measure");
    }
    Roofline r;
    r.gb_per_s = gbps;
    r.machine = machine_info().key();
    r.source = "UBFUSE_BANDWIDTH_GBPS";
    return r;
  }
  // The figure is remembered per cache file: pointing UBFUSE_CACHE_DIR elsewhere reads that one.
  const std::string path = bandwidth_cache_path();
  if (have && cached_for == path && (!remeasure || measured_here)) return cached;

  // Bandwidth scales with threads, so the thread count is part of the key.
  std::string key = machine_key(threads_for_measurement());
  if (!remeasure && !path.empty()) {
    json j = read_machine_cache(path);
    if (j.contains("machines") && j["machines"].contains(key)) {
      const json& e = j["machines"][key];
      if (machine_cache_fresh(e) && e.contains("add_gb_per_s") && e["add_gb_per_s"].is_number() &&
          e["add_gb_per_s"].get<double>() > 0) {
        cached = {e["add_gb_per_s"].get<double>(), e.value("threads", 0), key, "cache", path};
        cached_for = path;
        have = true;
        measured_here = false;
        return cached;
      }
    }
  }
  cached = measure_and_cache(key, path);
  cached_for = path;
  have = measured_here = true;
  return cached;
}

}  // namespace ubfuse::prof
