// Source files compiled into the library for the code generator: the headers generated kernels
// include (vecmath.h, vec_storage-inl.h, ubk_vec-inl.h, ubk_abi.h). Written to the kernel cache
// before compiling, so installed builds need no source tree. Generated at build time by
// cmake/EmbedFiles.cmake.
#pragma once

namespace ubfuse {

struct EmbeddedFile {
  const char* path;  // relative to src/, as generated code includes it
  const char* text;
};

extern const EmbeddedFile kEmbeddedFiles[];
extern const int kNumEmbeddedFiles;

}  // namespace ubfuse
