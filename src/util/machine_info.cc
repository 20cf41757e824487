#include "util/machine_info.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "util/cache_dir.h"
#include "util/machine_memory.h"

namespace ubfuse {

namespace fs = std::filesystem;
using nlohmann::json;

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

constexpr int64_t kCacheMaxAgeSeconds = 7 * 24 * 3600;

}  // namespace

std::string MachineInfo::key() const {
  // Rounded to GiB so a few MiB the kernel reserves differently do not change the key.
  int64_t gib = (memory_bytes + (int64_t(1) << 29)) >> 30;
  std::ostringstream s;
  s << cpu_model << " | " << cpus << " cpus | " << gib << " GiB";
  return s.str();
}

const MachineInfo& machine_info() {
  static const MachineInfo info = [] {
    MachineInfo m;
    m.cpu_model = proc_field("/proc/cpuinfo", "model name");
    if (m.cpu_model.empty()) m.cpu_model = "unknown";
    m.cpus = int(std::thread::hardware_concurrency());
    m.memory_bytes = int64_t(machine_memory_bytes());
    return m;
  }();
  return info;
}

std::string machine_key(int threads) {
  return machine_info().key() + " | " + std::to_string(threads) + " threads";
}

std::string machine_cache_path(const std::string& file) {
  std::string dir = user_cache_dir();
  return dir.empty() ? "" : (fs::path(dir) / file).string();
}

json read_machine_cache(const std::string& path) {
  if (path.empty()) return json::object();
  std::ifstream f(path);
  if (!f) return json::object();
  json j = json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("machines") || !j["machines"].is_object()) {
    return json::object();
  }
  return j;
}

void write_machine_cache(const std::string& path, const json& j) {
  if (path.empty()) return;
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream f(tmp);
    if (!f) return;
    f << j.dump(2) << "\n";
    if (!f) return;
  }
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ec);
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool machine_cache_fresh(const json& e) {
  return e.is_object() && e.contains("measured_unix") && e["measured_unix"].is_number_integer() &&
         unix_now() - e["measured_unix"].get<int64_t>() < kCacheMaxAgeSeconds;
}

}  // namespace ubfuse
