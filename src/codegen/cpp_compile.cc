#include "codegen/cpp_compile.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

#include "codegen/cpp_render.h"
#include "codegen/embedded_files.h"
#include "codegen/hash.h"
#include "codegen/ubk_abi.h"
#include "ubfuse/error.h"

extern char** environ;

namespace ubfuse::cpp {

namespace {

#ifndef UBFUSE_CXX_COMPILER
#define UBFUSE_CXX_COMPILER "c++"
#endif
#ifndef UBFUSE_HWY_INCLUDE_DIRS
#define UBFUSE_HWY_INCLUDE_DIRS ""
#endif

std::atomic<int> g_compiles{0}, g_hits{0};

bool file_exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

void mkdirs(const std::string& path) {
  std::string cur;
  std::stringstream ss(path);
  std::string part;
  if (!path.empty() && path[0] == '/') cur = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += part + "/";
    ::mkdir(cur.c_str(), 0755);
  }
  if (!file_exists(path))
    throw Error("cannot create the kernel cache directory '" + path +
                "'; hint: set cache_dir or UBFUSE_CACHE_DIR to a writable one");
}

std::string read_file(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string unique_suffix() {
  static std::atomic<int> n{0};
  return std::to_string(::getpid()) + "-" + std::to_string(n++);
}

// Writes `text` to `path` through a temporary file and a rename (atomic for readers).
void write_atomic(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp-" + unique_suffix();
  {
    std::ofstream f(tmp, std::ios::binary);
    f << text;
    if (!f) throw Error("cannot write '" + tmp + "'; hint: check the kernel cache directory");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error("cannot rename '" + tmp + "' to '" + path + "'");
  }
}

// Runs argv with stdout and stderr into `log`; returns the exit status (-1: not started).
int run_process(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 2, 1);
  pid_t pid;
  int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::vector<std::string> hwy_include_dirs() {
  std::vector<std::string> dirs;
  std::stringstream ss(UBFUSE_HWY_INCLUDE_DIRS);
  std::string d;
  while (std::getline(ss, d, ';')) {
    if (!d.empty()) dirs.push_back(d);
  }
  return dirs;
}

const std::string& cpu_signature() {
  static const std::string sig = [] {
    std::ifstream f("/proc/cpuinfo");
    std::string line, model, flags;
    while (std::getline(f, line)) {
      if (model.empty() && line.rfind("model name", 0) == 0) model = line;
      if (flags.empty() && line.rfind("flags", 0) == 0) flags = line;
      if (!model.empty() && !flags.empty()) break;
    }
    return model + "\n" + flags;
  }();
  return sig;
}

const std::vector<std::string>& compile_flags() {
  // Generated code uses only Highway's static target (the -march=native one).
  static const std::vector<std::string> f = {
      "-O3", "-march=native", "-std=c++20", "-shared", "-fPIC", "-DHWY_COMPILE_ONLY_STATIC=1"};
  return f;
}

// Writes the embedded headers under <dir>/include-<hash>/ once; returns that include dir.
std::string ensure_headers(const std::string& dir, std::string* hash_out) {
  std::string all = std::string(kPreludeHeader) + kPreludeText;
  for (int i = 0; i < kNumEmbeddedFiles; i++) {
    all += kEmbeddedFiles[i].path;
    all += kEmbeddedFiles[i].text;
  }
  std::string h = hash_hex(all);
  *hash_out = h;
  std::string inc = dir + "/include-" + h;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  for (int i = 0; i < kNumEmbeddedFiles; i++) {
    std::string rel = kEmbeddedFiles[i].path;
    if (rel.rfind("src/", 0) == 0) rel = rel.substr(4);
    std::string path = inc + "/" + rel;
    if (file_exists(path)) continue;
    mkdirs(path.substr(0, path.rfind('/')));
    write_atomic(path, kEmbeddedFiles[i].text);
  }
  if (!file_exists(inc + "/" + kPreludeHeader))
    write_atomic(inc + "/" + kPreludeHeader, kPreludeText);
  return inc;
}

// Precompiles the prelude header next to it (GCC picks up `<header>.gch` when its flags match;
// an unusable one is ignored, so failure here only costs time). Saves most of a compile.
void ensure_pch(const std::string& inc, const std::vector<std::string>& argv) {
  const std::string hdr = inc + "/" + kPreludeHeader, gch = hdr + ".gch";
  if (file_exists(gch)) return;
  std::vector<std::string> a;
  for (auto& x : argv) {
    if (x != "-shared") a.push_back(x);
  }
  const std::string tmp = gch + ".tmp-" + unique_suffix();
  a.insert(a.end(), {"-x", "c++-header", hdr, "-o", tmp});
  if (run_process(a, tmp + ".log") == 0) {
    std::rename(tmp.c_str(), gch.c_str());
  } else {
    std::remove(tmp.c_str());
  }
  std::remove((tmp + ".log").c_str());
}

}  // namespace

namespace {

Toolchain probe(const std::string& compiler) {
  Toolchain t;
  t.compiler = compiler;
  bool found = false;
  if (t.compiler.find('/') != std::string::npos) {
    found = ::access(t.compiler.c_str(), X_OK) == 0;
  } else if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    std::string d;
    while (!found && std::getline(ss, d, ':')) {
      found = ::access((d + "/" + t.compiler).c_str(), X_OK) == 0;
    }
  }
  if (!found) {
    t.why_not = "the C++ compiler '" + t.compiler + "' was not found";
    return t;
  }
  std::vector<std::string> dirs = hwy_include_dirs();
  dirs.insert(dirs.end(), {"/usr/include", "/usr/local/include"});
  bool hwy = false;
  for (auto& d : dirs) hwy = hwy || file_exists(d + "/hwy/highway.h");
  if (!hwy) {
    t.why_not = "the Highway headers (hwy/highway.h) were not found";
    return t;
  }
  std::string log = "/tmp/ubfuse-cxx-version-" + unique_suffix();
  if (run_process({t.compiler, "--version"}, log) != 0) {
    std::remove(log.c_str());
    t.why_not = "'" + t.compiler + " --version' failed";
    return t;
  }
  std::string v = read_file(log);
  std::remove(log.c_str());
  t.version = v.substr(0, v.find('\n'));
  t.available = true;
  return t;
}

}  // namespace

const Toolchain& toolchain() {
  // Probed once per value of UBFUSE_CXX (tests switch it to check the interpreter fallback).
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Toolchain>> probed;
  const char* env = std::getenv("UBFUSE_CXX");
  std::string compiler = env && *env ? env : UBFUSE_CXX_COMPILER;
  std::lock_guard<std::mutex> lock(mu);
  auto& t = probed[compiler];
  if (!t) t = std::make_unique<Toolchain>(probe(compiler));
  return *t;
}

std::string kernel_cache_dir(const std::string& cache_dir) {
  if (!cache_dir.empty()) return cache_dir;
  if (const char* e = std::getenv("UBFUSE_CACHE_DIR"); e && *e) return e;
  if (const char* e = std::getenv("XDG_CACHE_HOME"); e && *e) return std::string(e) + "/ubfuse";
  if (const char* e = std::getenv("HOME"); e && *e) return std::string(e) + "/.cache/ubfuse";
  return "/tmp/ubfuse-cache-" + std::to_string(::getuid());
}

std::shared_ptr<void> build_library(const std::string& source, const std::string& cache_dir,
                                    const std::string& what) {
  const Toolchain& tc = toolchain();
  if (!tc.available) throw Error("cannot compile fused kernels: " + tc.why_not);
  const char* dump = std::getenv("UBFUSE_DUMP_KERNELS");
  if (dump && *dump && std::string(dump) != "0") {
    std::fprintf(stderr, "[ubfuse] generated kernels (%s):\n%s\n", what.c_str(), source.c_str());
  }
  const std::string dir = kernel_cache_dir(cache_dir);
  mkdirs(dir);
  std::string headers_hash;
  const std::string inc = ensure_headers(dir, &headers_hash);
  std::vector<std::string> argv = {tc.compiler};
  for (auto& f : compile_flags()) argv.push_back(f);
  argv.push_back("-I" + inc);
  for (auto& d : hwy_include_dirs()) argv.push_back("-I" + d);
  std::string key_text = source + "\n";
  for (size_t i = 1; i < argv.size(); i++) {
    if (argv[i] != "-I" + inc) key_text += argv[i] + " ";
  }
  key_text += "\n" + tc.version + "\n" + cpu_signature() + "\n" + headers_hash + "\nabi " +
              std::to_string(UBF_ABI_VERSION);
  const std::string key = hash_hex(key_text) + hash_hex(key_text + "#2");
  const std::string so = dir + "/ubk-" + key + ".so";

  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<void>> loaded;
  std::lock_guard<std::mutex> lock(mu);
  if (auto h = loaded[so].lock()) {
    g_hits++;
    return h;
  }
  if (file_exists(so)) {
    g_hits++;
  } else {
    ensure_pch(inc, argv);
    const std::string tmp = dir + "/tmp-" + key + "-" + unique_suffix();
    write_atomic(tmp + ".cc", source);
    argv.push_back("-o");
    argv.push_back(tmp + ".so");
    argv.push_back(tmp + ".cc");
    int rc = run_process(argv, tmp + ".log");
    g_compiles++;
    if (rc != 0) {
      std::string msg = read_file(tmp + ".log");
      if (msg.size() > 6000) msg = msg.substr(0, 6000) + "\n[...]";
      const std::string kept = dir + "/failed-" + key + ".cc";
      std::rename((tmp + ".cc").c_str(), kept.c_str());
      std::remove((tmp + ".log").c_str());
      std::remove((tmp + ".so").c_str());
      throw Error("compiling the generated kernels of " + what + " with '" + tc.compiler +
                  "' failed (exit " + std::to_string(rc) + "):\n" + msg + "\nsource: " + kept +
                  "\nhint: option codegen=interpreter runs fused groups without a compiler");
    }
    if (std::rename((tmp + ".so").c_str(), so.c_str()) != 0) {
      throw Error("cannot move the compiled kernels to '" + so + "'");
    }
    std::rename((tmp + ".cc").c_str(), (dir + "/ubk-" + key + ".cc").c_str());
    std::remove((tmp + ".log").c_str());
  }
  void* h = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* err = ::dlerror();
    throw Error("cannot load the generated kernels '" + so + "': " + (err ? err : "?") +
                "; hint: delete the file (a damaged cache entry) or set codegen=interpreter");
  }
  std::shared_ptr<void> lib(h, [](void* p) { ::dlclose(p); });
  loaded[so] = lib;
  return lib;
}

void* library_symbol(const std::shared_ptr<void>& lib, const std::string& symbol) {
  void* f = ::dlsym(lib.get(), symbol.c_str());
  if (!f) throw Error("generated library lacks kernel '" + symbol + "'");
  return f;
}

BuildCounters build_counters() { return {g_compiles.load(), g_hits.load()}; }

}  // namespace ubfuse::cpp
