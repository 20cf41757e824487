#include "profiler/summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "profiler/chrome_trace.h"

namespace ubfuse::prof {

std::string format_us(double us) {
  if (us >= 1e6) return fmt::format("{:.3f} s", us / 1e6);
  if (us >= 1e3) return fmt::format("{:.3f} ms", us / 1e3);
  return fmt::format("{:.1f} us", us);
}

std::string format_bytes(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.1f} KB", b / 1e3);
  return fmt::format("{:.0f} B", b);
}

ProfilerSummary summarize(const std::vector<TraceEvent>& events, double bandwidth, int steps) {
  ProfilerSummary s;
  s.bandwidth_gb_per_s = bandwidth;
  s.steps = steps;
  std::map<std::string, size_t> index;
  double all_us = 0;
  for (auto& e : events) {
    if (e.cat != "kernel" && e.cat != "host") continue;
    auto [it, fresh] = index.emplace(e.name, s.rows.size());
    if (fresh) {
      KernelSummaryRow r;
      r.name = e.name;
      r.cat = e.cat;
      r.ops = e.kernel.ops;
      r.min_us = 1e300;
      s.rows.push_back(r);
    }
    KernelSummaryRow& r = s.rows[it->second];
    double us = double(e.t1_ns - e.t0_ns) / 1e3;
    r.calls++;
    r.total_us += us;
    r.min_us = std::min(r.min_us, us);
    r.max_us = std::max(r.max_us, us);
    r.bytes += e.kernel.bytes_read + e.kernel.bytes_written;
    all_us += us;
  }
  for (auto& r : s.rows) {
    r.mean_us = r.total_us / double(r.calls);
    r.pct_of_time = all_us > 0 ? 100 * r.total_us / all_us : 0;
    r.gb_per_s = gb_per_s(r.bytes, int64_t(r.total_us * 1e3));
    r.pct_of_bandwidth = bandwidth > 0 ? 100 * r.gb_per_s / bandwidth : 0;
  }
  std::stable_sort(s.rows.begin(), s.rows.end(),
                   [](auto& a, auto& b) { return a.total_us > b.total_us; });
  return s;
}

}  // namespace ubfuse::prof

namespace ubfuse {

std::string ProfilerSummary::table() const {
  size_t w = 6;
  for (auto& r : rows) w = std::max(w, r.name.size());
  std::string out =
      fmt::format("{:<{}}  {:>6}  {:>11}  {:>11}  {:>6}  {:>10}  {:>7}  {:>6}  {}\n", "Kernel", w,
                  "Calls", "Total", "Mean", "% time", "Bytes/call", "GB/s", "% BW", "Ops");
  out += std::string(out.size() - 1, '-') + "\n";
  int64_t calls = 0;
  double total = 0;
  for (auto& r : rows) {
    std::string ops;
    for (auto& o : r.ops) ops += (ops.empty() ? "" : " ") + o;
    std::string bw = bandwidth_gb_per_s > 0 ? fmt::format("{:.0f}%", r.pct_of_bandwidth) : "-";
    out += fmt::format("{:<{}}  {:>6}  {:>11}  {:>11}  {:>5.1f}%  {:>10}  {:>7.1f}  {:>6}  {}\n",
                       r.name, w, r.calls, prof::format_us(r.total_us), prof::format_us(r.mean_us),
                       r.pct_of_time, prof::format_bytes(double(r.bytes) / double(r.calls)),
                       r.gb_per_s, bw, ops);
    calls += r.calls;
    total += r.total_us;
  }
  out += fmt::format("{:<{}}  {:>6}  {:>11}\n", "Total", w, calls, prof::format_us(total));
  if (steps > 0) {
    out += fmt::format("{} step(s), {} per step\n", steps, prof::format_us(total / steps));
  }
  out += bandwidth_gb_per_s > 0
             ? fmt::format("% BW: of the measured STREAM add bandwidth, {:.1f} GB/s\n",
                           bandwidth_gb_per_s)
             : "% BW: bandwidth not measured\n";
  return out;
}

}  // namespace ubfuse
