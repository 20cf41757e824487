// Which kind of store suits this CPU's compute-bound loops (kernels/cpu/store_policy.h): runs
// eager Softmax, SiLU and GELU and the fused seed block under two store profiles in alternating
// rounds, one process, beside a STREAM add, and prints how much faster the first profile is.
// A row for a CPU the table lacks starts here.
//
//   bench_store_profile_bench [--profiles stream,plain] [--batch 8] [--rounds 9]
//
// Shapes are [batch, 2048, 4096]; f32, bf16 and f16 each (f16 always stores plainly, so its
// ratio shows the host's noise).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "kernels/cpu/store_policy.h"
#include "profiler/bandwidth.h"
#include "runtime/thread_pool.h"
#include "seed_block.h"
#include "ubfuse/ubfuse.h"
#include "util/omp_env.h"
#include "wall_time.h"

namespace ubfuse {
namespace {

constexpr int64_t kSeq = 2048, kHidden = 4096;

Graph loop_graph(const std::string& kind, DType t) {
  if (kind == "SeedBlock") return bench::seed_block(t, kHidden);
  GraphBuilder b;
  auto x = b.input("x", t, {"batch", kSeq, kHidden});
  if (kind == "Softmax") {
    b.output("y", b.softmax(x));
  } else if (kind == "Silu") {
    b.output("y", b.silu(x));
  } else {
    b.output("y", b.gelu(x));
  }
  return b.build();
}

using bench::seconds;

int run(const std::string& first, const std::string& second, int64_t batch, int rounds) {
  cpu::set_store_profile(first);  // fails early, listing the names, on a bad one
  cpu::set_store_profile(second);
  const Sizes s{batch, kSeq, kHidden};
  StreamAdd add(ThreadPool::global(), size_t(batch * kSeq * kHidden) * 4);
  std::printf(
      "store profiles '%s' vs '%s' (this CPU's own: '%s'), shape [%lld,%lld,%lld], "
      "best of %d alternating rounds\n",
      first.c_str(), second.c_str(), cpu::detected_store_profile().name, (long long)batch,
      (long long)kSeq, (long long)kHidden, rounds);
  std::printf("%-12s %-5s %10s %10s %9s %12s\n", "loop", "dtype", first.c_str(), second.c_str(),
              "speedup", "STREAM GB/s");
  for (const char* kind : {"Softmax", "Silu", "Gelu", "SeedBlock"}) {
    for (DType t : {DType::f32, DType::bf16, DType::f16}) {
      std::map<std::string, Tensor> in =
          std::strcmp(kind, "SeedBlock") == 0
              ? bench::seed_inputs(t, s)
              : std::map<std::string, Tensor>{{"x", Tensor::random(t, s, 1)}};
      std::map<std::string, Tensor> out{{"y", Tensor::zeros(t, s)}};
      CompiledModel m = compile(loop_graph(kind, t), {{"ge.exec.enableOperatorFusion", "1"}});
      m.run_into(in, out);
      double a = 1e30, b = 1e30, stream = 1e30;
      for (int i = 0; i < rounds; i++) {
        cpu::set_store_profile(first);
        a = std::min(a, seconds([&] { m.run_into(in, out); }));
        cpu::set_store_profile(second);
        b = std::min(b, seconds([&] { m.run_into(in, out); }));
        stream = std::min(stream, add.pass_seconds());
      }
      std::printf("%-12s %-5s %8.2fms %8.2fms %8.2fx %12.1f\n", kind,
                  std::string(dtype_name(t)).c_str(), a * 1e3, b * 1e3, b / a,
                  add.bytes_moved() / stream / 1e9);
      std::fflush(stdout);
    }
  }
  cpu::set_store_profile("");
  return 0;
}

}  // namespace
}  // namespace ubfuse

int main(int argc, char** argv) {
  ubfuse::reexec_with_passive_omp_wait(argv);
  std::string profiles = "stream,plain";
  long long batch = 8, rounds = 9;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 == argc) {
      std::fprintf(stderr, "%s wants a value\n", argv[i]);
      return 2;
    }
    if (std::strcmp(argv[i], "--profiles") == 0) {
      profiles = argv[i + 1];
    } else if (std::strcmp(argv[i], "--batch") == 0) {
      batch = std::atoll(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--rounds") == 0) {
      rounds = std::atoll(argv[i + 1]);
    } else {
      std::fprintf(stderr,
                   "unknown option %s; usage: %s [--profiles A,B] [--batch N] [--rounds R]\n",
                   argv[i], argv[0]);
      return 2;
    }
  }
  const size_t comma = profiles.find(',');
  if (comma == std::string::npos || batch < 1 || rounds < 1) {
    std::fprintf(stderr, "want --profiles A,B (two names), --batch >= 1, --rounds >= 1\n");
    return 2;
  }
  try {
    return ubfuse::run(profiles.substr(0, comma), profiles.substr(comma + 1), batch, int(rounds));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
