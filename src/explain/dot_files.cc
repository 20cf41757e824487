// Writes the explain pictures and, when Graphviz is installed, renders them to SVG by running
// `dot` as a subprocess (argv, no shell). A missing `dot` is not an error: the .dot files remain.
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include "ubfuse/error.h"
#include "ubfuse/explain.h"

extern char** environ;

namespace ubfuse {

namespace fs = std::filesystem;

namespace {

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream f(p);
  f << text;
  if (!f) throw Error("cannot write '" + p.string() + "'; hint: choose a writable --dot directory");
}

// Runs `dot -Tsvg -o svg in`; returns "" on success, else why not.
std::string run_dot(const fs::path& in, const fs::path& svg) {
  std::string a0 = "dot", a1 = "-Tsvg", a2 = "-o", a3 = svg.string(), a4 = in.string();
  char* argv[] = {a0.data(), a1.data(), a2.data(), a3.data(), a4.data(), nullptr};
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, "dot", nullptr, nullptr, argv, environ);
  if (rc == ENOENT) return "Graphviz `dot` is not on PATH, so no SVG (install graphviz)";
  if (rc != 0) return "cannot run Graphviz `dot`: " + std::string(std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return "waiting for `dot` failed";
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return "`dot` rejected " + in.string() + " (exit status " +
           std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")";
  }
  return "";
}

}  // namespace

DotFiles write_dot_files(const ExplainReport& r, const std::string& dir) {
  DotFiles out;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    throw Error("cannot create --dot directory '" + dir + "': " + ec.message());
  }
  for (auto [stem, text] : {std::pair{"before", before_dot(r)}, std::pair{"after", after_dot(r)}}) {
    fs::path dot = fs::path(dir) / (std::string(stem) + ".dot");
    write_file(dot, text);
    out.written.push_back(dot.string());
    if (!out.note.empty()) continue;  // no Graphviz: do not try again
    fs::path svg = fs::path(dir) / (std::string(stem) + ".svg");
    out.note = run_dot(dot, svg);
    if (out.note.empty()) out.written.push_back(svg.string());
  }
  return out;
}

}  // namespace ubfuse
