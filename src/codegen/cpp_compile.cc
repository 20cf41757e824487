#include "codegen/cpp_compile.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "codegen/cpp_render.h"
#include "codegen/embedded_files.h"
#include "codegen/hash.h"
#include "codegen/ubk_abi.h"
#include "ubfuse/error.h"
#include "util/cache_dir.h"
#include "util/env.h"
#include "util/read_file.h"

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

// The file's text, or "" when it cannot be read (a log the compiler did not write).
std::string read_file(const std::string& p) { return read_whole_file(p).value_or(""); }

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

// Runs argv with stdout and stderr into `log`; returns the exit status (-1: not started or
// killed). `*pid_out`, when given, holds the child's pid while it runs (a cancel kills it).
int run_process(const std::vector<std::string>& argv, const std::string& log,
                std::atomic<pid_t>* pid_out = nullptr) {
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 2, 1);
  // Its own process group, so a cancel can stop the compiler driver and the compiler proper it
  // runs (kill_tree). The terminal's Ctrl-C then reaches only this process, whose progress
  // callback cancels the build (the CLI and the Python package do).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid;
  int rc = posix_spawnp(&pid, args[0], &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return -1;
  if (pid_out) pid_out->store(pid);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) break;
  }
  if (pid_out) pid_out->store(0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Stops a process started by run_process and whatever it started.
void kill_tree(pid_t pid) {
  if (pid > 0) ::kill(-pid, SIGTERM);
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
void ensure_pch(const std::string& inc, const std::vector<std::string>& argv,
                std::atomic<pid_t>* pid) {
  const std::string hdr = inc + "/" + kPreludeHeader, gch = hdr + ".gch";
  if (file_exists(gch)) return;
  std::vector<std::string> a;
  for (auto& x : argv) {
    if (x != "-shared") a.push_back(x);
  }
  const std::string tmp = gch + ".tmp-" + unique_suffix();
  a.insert(a.end(), {"-x", "c++-header", hdr, "-o", tmp});
  if (run_process(a, tmp + ".log", pid) == 0) {
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
  if (std::string dir = user_cache_dir(); !dir.empty()) return dir;
  return "/tmp/ubfuse-cache-" + std::to_string(::getuid());
}

namespace {

// A unit's cache key and file names, and what building it needs.
struct UnitBuild {
  std::string key, so;
  bool cached = false;        // the .so was on disk (or loaded) already
  std::atomic<pid_t> pid{0};  // the compiler process while it runs
};

std::mutex g_loaded_mu;
std::map<std::string, std::weak_ptr<void>> g_loaded;  // .so path -> the handle in use

std::shared_ptr<void> load_library(const std::string& so) {
  std::lock_guard<std::mutex> lock(g_loaded_mu);
  if (auto h = g_loaded[so].lock()) return h;
  void* h = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* err = ::dlerror();
    throw Error("cannot load the generated kernels '" + so + "': " + (err ? err : "?") +
                "; hint: delete the file (a damaged cache entry) or set codegen=interpreter");
  }
  std::shared_ptr<void> lib(h, [](void* p) { ::dlclose(p); });
  g_loaded[so] = lib;
  return lib;
}

bool is_loaded(const std::string& so) {
  std::lock_guard<std::mutex> lock(g_loaded_mu);
  auto it = g_loaded.find(so);
  return it != g_loaded.end() && !it->second.expired();
}

// An exclusive flock on a unit's lock file, so that processes building the same key at once
// (two services starting one model, tests side by side) compile it once: the others wait, then
// find the .so. Waits in steps of 20 ms while not cancelled. The holder removes the file when it
// is done: whoever waited on it, or opens a new one by that name, checks for the .so after
// locking, and at worst (the compile failed) two processes both try it.
class KeyLock {
 public:
  KeyLock(const std::string& path, const std::atomic<bool>& cancelled) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) return;  // a read-only cache dir: compiles unlocked, as before
    while (!cancelled) {
      if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
        held_ = true;
        return;
      }
      if (errno != EWOULDBLOCK && errno != EINTR) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~KeyLock() {
    if (held_) ::unlink(path_.c_str());
    if (fd_ >= 0) ::close(fd_);
  }
  KeyLock(const KeyLock&) = delete;
  KeyLock& operator=(const KeyLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
  bool held_ = false;
};

// Runs the compiler on one unit into its .so (through a temporary name, so that a reader never
// sees a partial file), unless another process built it while this one waited for the key's
// lock. Throws with the compiler's message.
void compile_unit(const UnitSource& u, UnitBuild& b, std::vector<std::string> argv,
                  const std::string& dir, const std::string& compiler,
                  const std::atomic<bool>& cancelled) {
  KeyLock lock(dir + "/ubk-" + b.key + ".lock", cancelled);
  if (file_exists(b.so)) {
    g_hits++;
    return;
  }
  if (cancelled) throw Error("compiling the generated kernels of " + u.what + " was cancelled");
  const std::string tmp = dir + "/tmp-" + b.key + "-" + unique_suffix();
  write_atomic(tmp + ".cc", u.source);
  argv.insert(argv.end(), {"-o", tmp + ".so", tmp + ".cc"});
  int rc = run_process(argv, tmp + ".log", &b.pid);
  g_compiles++;
  if (rc != 0 || cancelled) {
    std::string msg = read_file(tmp + ".log");
    std::remove((tmp + ".log").c_str());
    std::remove((tmp + ".so").c_str());
    if (cancelled) {
      std::remove((tmp + ".cc").c_str());
      throw Error("compiling the generated kernels of " + u.what + " was cancelled");
    }
    if (msg.size() > 6000) msg = msg.substr(0, 6000) + "\n[...]";
    const std::string kept = dir + "/failed-" + b.key + ".cc";
    std::rename((tmp + ".cc").c_str(), kept.c_str());
    throw Error("compiling the generated kernels of " + u.what + " with '" + compiler +
                "' failed (exit " + std::to_string(rc) + "):\n" + msg + "\nsource: " + kept +
                "\nhint: option codegen=interpreter runs fused groups without a compiler");
  }
  if (std::rename((tmp + ".so").c_str(), b.so.c_str()) != 0) {
    throw Error("cannot move the compiled kernels to '" + b.so + "'");
  }
  std::rename((tmp + ".cc").c_str(), (dir + "/ubk-" + b.key + ".cc").c_str());
  std::remove((tmp + ".log").c_str());
}

}  // namespace

std::vector<std::shared_ptr<void>> build_libraries(const std::vector<UnitSource>& units,
                                                   const std::string& cache_dir, int jobs,
                                                   const BuildProgressFn& progress,
                                                   BuildProgress* final_state) {
  auto t0 = std::chrono::steady_clock::now();
  const Toolchain& tc = toolchain();
  if (!tc.available) throw Error("cannot compile fused kernels: " + tc.why_not);
  const bool dumping = env_on("UBFUSE_DUMP_KERNELS");
  const std::string dir = kernel_cache_dir(cache_dir);
  mkdirs(dir);
  std::string headers_hash;
  const std::string inc = ensure_headers(dir, &headers_hash);
  std::vector<std::string> argv = {tc.compiler};
  for (auto& f : compile_flags()) argv.push_back(f);
  argv.push_back("-I" + inc);
  for (auto& d : hwy_include_dirs()) argv.push_back("-I" + d);
  std::string flags_text;
  for (size_t i = 1; i < argv.size(); i++) {
    if (argv[i] != "-I" + inc) flags_text += argv[i] + " ";
  }
  flags_text += "\n" + tc.version + "\n" + cpu_signature() + "\n" + headers_hash + "\nabi " +
                std::to_string(UBF_ABI_VERSION);

  std::vector<std::unique_ptr<UnitBuild>> builds;
  std::vector<size_t> todo;
  BuildProgress p;
  for (size_t i = 0; i < units.size(); i++) {
    if (dumping) {
      std::fprintf(stderr, "[ubfuse] generated kernels (%s):\n%s\n", units[i].what.c_str(),
                   units[i].source.c_str());
    }
    auto b = std::make_unique<UnitBuild>();
    const std::string key_text = units[i].source + "\n" + flags_text;
    b->key = hash_hex(key_text) + hash_hex(key_text + "#2");
    b->so = dir + "/ubk-" + b->key + ".so";
    b->cached = is_loaded(b->so) || file_exists(b->so);
    p.kernels_total += units[i].kernels;
    if (b->cached) {
      g_hits++;
      p.kernels_done += units[i].kernels;
      p.kernels_cached += units[i].kernels;
    } else {
      todo.push_back(i);
    }
    builds.push_back(std::move(b));
  }
  auto elapsed = [&t0] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  p.jobs = int(std::min<size_t>(std::max(jobs, 1), todo.size()));
  if (progress) progress(p);

  if (!todo.empty()) {
    // The first worker precompiles the header (once per cache) while the others wait for it;
    // workers take units in order; this thread reports progress (and lets a callback cancel,
    // killing the compilers still running) until every unit is done or one failed.
    std::mutex mu;
    std::condition_variable cv;
    size_t next = 0, finished = 0;
    std::exception_ptr failure;
    std::atomic<bool> cancelled{false};
    std::once_flag pch_once;
    std::atomic<pid_t> pch_pid{0};
    auto worker = [&] {
      std::call_once(pch_once, [&] { ensure_pch(inc, argv, &pch_pid); });
      for (;;) {
        size_t t;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (next >= todo.size() || failure || cancelled) return;
          t = todo[next++];
        }
        std::exception_ptr err;
        try {
          compile_unit(units[t], *builds[t], argv, dir, tc.compiler, cancelled);
        } catch (...) {
          err = std::current_exception();
        }
        std::lock_guard<std::mutex> lock(mu);
        if (err && !failure) failure = err;
        if (!err) {
          finished++;
          p.kernels_done += units[t].kernels;
        }
        cv.notify_all();
      }
    };
    std::vector<std::thread> threads;
    for (int i = 0; i < p.jobs; i++) threads.emplace_back(worker);
    std::exception_ptr cancel_error;
    {
      std::unique_lock<std::mutex> lock(mu);
      while (finished < todo.size() && !failure) {
        cv.wait_for(lock, std::chrono::milliseconds(100));
        if (!progress || cancel_error) continue;
        BuildProgress now = p;
        now.elapsed_ms = elapsed();
        lock.unlock();
        try {
          progress(now);
        } catch (...) {
          cancel_error = std::current_exception();
        }
        lock.lock();
        if (cancel_error) {
          cancelled = true;
          kill_tree(pch_pid.load());
          for (size_t t : todo) kill_tree(builds[t]->pid.load());
          break;
        }
      }
    }
    for (auto& t : threads) t.join();
    if (cancel_error) std::rethrow_exception(cancel_error);
    if (failure) std::rethrow_exception(failure);
  }
  std::vector<std::shared_ptr<void>> libs;
  for (auto& b : builds) libs.push_back(load_library(b->so));
  p.elapsed_ms = elapsed();
  p.finished = true;
  if (final_state) *final_state = p;
  if (progress) progress(p);
  return libs;
}

std::shared_ptr<void> build_library(const std::string& source, const std::string& cache_dir,
                                    const std::string& what) {
  return build_libraries({{source, what, 1}}, cache_dir, 1, {}, nullptr).at(0);
}

void* library_symbol(const std::shared_ptr<void>& lib, const std::string& symbol) {
  void* f = ::dlsym(lib.get(), symbol.c_str());
  if (!f) throw Error("generated library lacks kernel '" + symbol + "'");
  return f;
}

BuildCounters build_counters() { return {g_compiles.load(), g_hits.load()}; }

}  // namespace ubfuse::cpp
