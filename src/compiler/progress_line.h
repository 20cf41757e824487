// The line compile() prints on stderr while it builds generated kernels:
//   [ubfuse] compiling fused kernels 12/42 (3 cached, 2 jobs)
// redrawn in place on a terminal, then replaced by a summary. Option `progress`: auto prints only
// on a terminal and only when a compiler runs; on prints always (plain lines when stderr is not a
// terminal, and a summary even when every kernel came from the cache); off never.
#pragma once

#include <cstdio>
#include <string>

#include "ubfuse/model.h"

namespace ubfuse {

class ProgressLine {
 public:
  ProgressLine(const std::string& mode, std::FILE* out);
  ~ProgressLine();  // ends a line left open on a terminal (a cancelled or failed build)
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  void update(const CompileProgress& p);

 private:
  std::FILE* out_;
  bool enabled_ = false, tty_ = false, always_ = false;
  int last_done_ = -1;
  bool open_ = false;  // a redrawn line without its newline yet
  std::string last_;   // what the terminal shows: not redrawn unchanged
};

}  // namespace ubfuse
