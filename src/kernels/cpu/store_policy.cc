#include "kernels/cpu/store_policy.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/kernel_util.h"
#include "ubfuse/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace ubfuse::cpu {

namespace {

// Rows: {unary, softmax, fused} x {f32, bf16}. Figures: streamed against plain stores at
// [8,2048,4096], alternating in one process (docs/performance.md, Choices per CPU).
constexpr StoreProfile kProfiles[] = {
    // SiLU f32 1.10-1.14x faster streamed; Softmax and the fused seed block slower.
    {"zen3",
     "AMD Zen 3 (family 25, other models; measured on an EPYC, model 1)",
     {{true, false}, {false, false}, {false, false}}},
    // Streamed: SiLU f32 1.40x, bf16 1.11x; Softmax f32 1.20x (bf16 0.84x, so plain); the seed
    // block f32 1.17-1.31x (bf16 0.96-1.01x).
    {"zen4",
     "AMD Zen 4 (family 25, models 0x10-0x1f, 0x60-0x7f, 0xa0-0xaf; measured on an EPYC, model 17)",
     {{true, true}, {true, false}, {true, false}}},
    // Streamed: Softmax f32 1.28-1.57x, bf16 1.4x; SiLU f32 1.2-1.4x; seed block 1.05-1.29x. Older
    // kernels were 1.1-1.7x slower streamed here: re-measure after rewriting a loop.
    {"zen5",
     "AMD Zen 5 (family 26; measured on an EPYC, model 2)",
     {{true, true}, {true, true}, {true, true}}},
    // CPUs not measured: Zen 3's choices for AVX2; for AVX-512, what Zen 4 and Zen 5 agree on.
    {"avx2",
     "other x86 CPUs without AVX-512 (as Zen 3)",
     {{true, false}, {false, false}, {false, false}}},
    {"avx512",
     "other x86 CPUs with AVX-512 (where Zen 4 and Zen 5 agree: as Zen 4)",
     {{true, true}, {true, false}, {true, false}}},
    {"generic",
     "CPUs other than x86: plain stores in compute-bound loops",
     {{false, false}, {false, false}, {false, false}}},
    // For measuring a CPU the table lacks: one against the other, in one process.
    {"plain",
     "every compute-bound loop stores plainly",
     {{false, false}, {false, false}, {false, false}}},
    {"stream",
     "every compute-bound loop streams its f32 and bf16 outputs",
     {{true, true}, {true, true}, {true, true}}},
};

const StoreProfile* find_profile(const std::string& name) {
  for (const StoreProfile& p : kProfiles) {
    if (name == p.name) return &p;
  }
  return nullptr;
}

const StoreProfile& named(const char* name) {
  const StoreProfile* p = find_profile(name);
  UBF_CHECK(p != nullptr, std::string("no store profile named ") + name);
  return *p;
}

const StoreProfile& by_name_or_throw(const std::string& name, const std::string& where) {
  if (const StoreProfile* p = find_profile(name)) return *p;
  throw Error(where + ": '" + name + "' is not a store profile; valid: " + store_profile_names() +
              "; without one, this CPU gets '" + detected_store_profile().name + "'");
}

bool zen4_model(int model) {
  return (model >= 0x10 && model <= 0x1f) || (model >= 0x60 && model <= 0x7f) ||
         (model >= 0xa0 && model <= 0xaf);
}

std::atomic<const StoreProfile*> g_selected{nullptr};

#if defined(__x86_64__) || defined(__i386__)
// CPUID's vendor string ("AuthenticAMD", "GenuineIntel"); "" without CPUID.
std::string cpu_vendor() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return "";
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  return vendor;
}
#endif

}  // namespace

std::string store_profile_names() {
  std::string s;
  for (const StoreProfile& p : kProfiles) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

const StoreProfile& store_profile_for(const std::string& vendor, int family, int model,
                                      bool avx512) {
  if (vendor == "AuthenticAMD" && family == 25) return named(zen4_model(model) ? "zen4" : "zen3");
  if (vendor == "AuthenticAMD" && family == 26) return named("zen5");
  return named(avx512 ? "avx512" : "avx2");
}

int prefetch_locality_for(const std::string& vendor) { return vendor == "AuthenticAMD" ? 0 : 3; }

int prefetch_locality() {
  static const int locality = [] {
#if defined(__x86_64__) || defined(__i386__)
    return prefetch_locality_for(cpu_vendor());
#else
    return 3;
#endif
  }();
  return locality;
}

const StoreProfile& detected_store_profile() {
  static const StoreProfile& detected = []() -> const StoreProfile& {
#if defined(__x86_64__) || defined(__i386__)
    const std::string vendor = cpu_vendor();
    if (vendor.empty()) return named("avx2");  // no CPUID
    unsigned a = 0, b = 0, c = 0, d = 0;
    __get_cpuid(1, &a, &b, &c, &d);
    // Display family and model (the extended fields count from family 15 on).
    int family = int((a >> 8) & 0xf), model = int((a >> 4) & 0xf);
    if (family == 15) family += int((a >> 20) & 0xff);
    if (family >= 15 || family == 6) model += int((a >> 16) & 0xf) << 4;
    __builtin_cpu_init();
    return store_profile_for(vendor, family, model, __builtin_cpu_supports("avx512f") != 0);
#else
    return named("generic");
#endif
  }();
  return detected;
}

const StoreProfile& store_profile() {
  if (const StoreProfile* p = g_selected.load(std::memory_order_acquire)) return *p;
  const char* env = std::getenv("UBFUSE_STORE_PROFILE");
  const StoreProfile& p =
      env && *env ? by_name_or_throw(env, "UBFUSE_STORE_PROFILE") : detected_store_profile();
  const StoreProfile* expected = nullptr;
  g_selected.compare_exchange_strong(expected, &p, std::memory_order_acq_rel);
  return *g_selected.load(std::memory_order_acquire);
}

void set_store_profile(const std::string& name) {
  if (name.empty()) {
    g_selected.store(nullptr, std::memory_order_release);
    return;
  }
  g_selected.store(&by_name_or_throw(name, "store profile"), std::memory_order_release);
}

bool streams_compute_bound(ComputeLoop loop, DType out) {
  if (out != DType::f32 && out != DType::bf16) return false;
  return store_profile().streams[int(loop)][out == DType::bf16 ? 1 : 0];
}

bool stream_output(size_t out_bytes, ComputeLoop loop, bool compute_bound, DType out) {
  return use_stream(out_bytes) && (!compute_bound || streams_compute_bound(loop, out));
}

}  // namespace ubfuse::cpu
