// Whole-file reads for the loaders (.npy, rules files, compiler logs, model files that cannot be
// mapped). One read of
// the file's size: streaming into a stringstream grew its buffer by doubling, copying and
// faulting in every size on the way (a 180 MB model took 2 s to read that way).
#pragma once

#include <optional>
#include <string>

namespace ubfuse {

// The bytes of the file at `path`, or nullopt when it cannot be opened or read.
std::optional<std::string> read_whole_file(const std::string& path);

// The bytes from an open file's current position to its end (a pipe's, to its writer's close).
std::optional<std::string> read_whole_fd(int fd);

}  // namespace ubfuse
