#include "profiler/roofline.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>

#include "profiler/machine.h"
#include "ubfuse/error.h"

namespace ubfuse::prof {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::string(v) != "0";
}

json read_cache(const std::string& path) {
  std::ifstream f(path);
  if (!f) return json::object();
  json j = json::parse(f, nullptr, /*allow_exceptions=*/false);
  // A damaged cache is ours to rebuild, not the user's problem.
  if (!j.is_object() || !j.contains("machines") || !j["machines"].is_object()) {
    return json::object();
  }
  return j;
}

// Best effort: a read-only home only costs a measurement next time.
void write_cache(const std::string& path, const json& j) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream f(tmp);
    if (!f) return;
    f << j.dump(2) << "\n";
    if (!f) return;
  }
  fs::rename(tmp, path, ec);  // atomic: concurrent processes never see half a file
  if (ec) fs::remove(tmp, ec);
}

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
  json j = read_cache(path);  // re-read: another process may have added its machine
  if (!j.contains("machines")) j["machines"] = json::object();
  j["machines"][key] = {{"add_gb_per_s", r.gb_per_s},
                        {"threads", r.threads},
                        {"measured_unix", std::chrono::duration_cast<std::chrono::seconds>(
                                              std::chrono::system_clock::now().time_since_epoch())
                                              .count()}};
  if (!path.empty()) write_cache(path, j);
  return r;
}

}  // namespace

constexpr int64_t kCacheMaxAgeSeconds = 7 * 24 * 3600;

std::string bandwidth_cache_path() {
  if (const char* d = std::getenv("UBFUSE_CACHE_DIR"); d && *d) {
    return (fs::path(d) / "bandwidth.json").string();
  }
  if (const char* h = std::getenv("HOME"); h && *h) {
    return (fs::path(h) / ".cache" / "ubfuse" / "bandwidth.json").string();
  }
  return "";
}

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
  std::string key =
      machine_info().key() + " | " + std::to_string(threads_for_measurement()) + " threads";
  if (!remeasure && !path.empty()) {
    json j = read_cache(path);
    if (j.contains("machines") && j["machines"].contains(key)) {
      const json& e = j["machines"][key];
      // A week-old figure is measured again: the machine under a VM may have moved or been
      // busy when it was taken.
      const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
      const bool fresh = e.contains("measured_unix") && e["measured_unix"].is_number_integer() &&
                         now - e["measured_unix"].get<int64_t>() < kCacheMaxAgeSeconds;
      if (fresh && e.contains("add_gb_per_s") && e["add_gb_per_s"].is_number() &&
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
