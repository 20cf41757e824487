#include "compiler/progress_line.h"

#include <fmt/format.h>
#include <unistd.h>

namespace ubfuse {

ProgressLine::ProgressLine(const std::string& mode, std::FILE* out) : out_(out) {
  tty_ = ::isatty(::fileno(out)) == 1;
  always_ = mode == "on";
  enabled_ = always_ || (mode == "auto" && tty_);
}

ProgressLine::~ProgressLine() {
  if (open_) {
    std::fputs("\n", out_);
    std::fflush(out_);
  }
}

void ProgressLine::update(const CompileProgress& p) {
  if (!enabled_) return;
  const bool compiling = p.kernels_total > p.kernels_cached;
  if (!compiling && (!always_ || !p.finished)) return;
  std::string line;
  if (p.finished) {
    if (compiling) {
      line = fmt::format(
          "[ubfuse] compiled {} fused kernel{} in {:.1f} s ({} job{}, {} from the "
          "cache)",
          p.kernels_total - p.kernels_cached, p.kernels_total == 1 ? "" : "s", p.elapsed_ms / 1000,
          p.jobs, p.jobs == 1 ? "" : "s", p.kernels_cached);
    } else {
      line = fmt::format("[ubfuse] {} fused kernel{} from the cache", p.kernels_total,
                         p.kernels_total == 1 ? "" : "s");
    }
  } else {
    // A plain stream gets a line only when the count moves; a terminal also sees the seconds.
    if (!tty_ && p.kernels_done == last_done_) return;
    line =
        fmt::format("[ubfuse] compiling fused kernels {}/{} ({} cached, {} job{})", p.kernels_done,
                    p.kernels_total, p.kernels_cached, p.jobs, p.jobs == 1 ? "" : "s");
    if (tty_ && p.elapsed_ms >= 1000) line += fmt::format(" {} s", int(p.elapsed_ms / 1000));
  }
  last_done_ = p.kernels_done;
  if (tty_ && line == last_) return;
  last_ = line;
  if (tty_) {
    std::fputs(("\r\x1b[K" + line + (p.finished ? "\n" : "")).c_str(), out_);
    open_ = !p.finished;
  } else {
    std::fputs((line + "\n").c_str(), out_);
  }
  std::fflush(out_);
}

}  // namespace ubfuse
