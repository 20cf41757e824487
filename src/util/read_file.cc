#include "util/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace ubfuse {

std::optional<std::string> read_whole_fd(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) return std::nullopt;
  // The size the file says it has, then whatever follows it: pipes and /proc files say 0.
  std::string bytes(S_ISREG(st.st_mode) ? size_t(st.st_size) : 0, '\0');
  size_t done = 0;
  for (;;) {
    char more[1 << 14];
    const bool in_place = done < bytes.size();
    char* to = in_place ? bytes.data() + done : more;
    const size_t room = in_place ? bytes.size() - done : sizeof more;
    const ssize_t n = ::read(fd, to, room);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    if (in_place) {
      done += size_t(n);
    } else {
      bytes.append(more, size_t(n));
      done = bytes.size();
    }
  }
  bytes.resize(done);
  return bytes;
}

std::optional<std::string> read_whole_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<std::string> bytes = read_whole_fd(fd);
  ::close(fd);
  return bytes;
}

}  // namespace ubfuse
