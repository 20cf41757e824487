# libFuzzer targets, included by the top-level CMakeLists.txt when UBFUSE_FUZZ=ON. Needs clang.
# The library gets coverage instrumentation (fuzzer-no-link) plus ASan+UBSan; each target links
# libFuzzer's main. The tests, when built, get ASan+UBSan too: scripts/sanitize.sh asan and
# scripts/fuzz.sh share this one configuration (build-asan), so the library is built once.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "UBFUSE_FUZZ=ON needs clang: -DCMAKE_CXX_COMPILER=clang++-14")
endif()

set(UBFUSE_FUZZ_SAN -fsanitize=address,undefined -fno-sanitize-recover=undefined
    -fno-omit-frame-pointer)
foreach(layer ${UBFUSE_LAYERS})
  target_compile_options(ubfuse_${layer} PRIVATE -fsanitize=fuzzer-no-link ${UBFUSE_FUZZ_SAN})
endforeach()
# Whatever links the instrumented library (the CLI too) needs the sanitizer runtimes.
target_link_options(ubfuse PUBLIC -fsanitize=address,undefined)

if(TARGET ubfuse_tests)
  target_compile_options(ubfuse_tests PRIVATE ${UBFUSE_FUZZ_SAN})
endif()

set(UBFUSE_FUZZ_TARGETS rules options npy onnx graph)
foreach(t ${UBFUSE_FUZZ_TARGETS})
  add_executable(fuzz_${t} ${PROJECT_SOURCE_DIR}/fuzz/fuzz_${t}.cc)
  target_include_directories(fuzz_${t} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/fuzz)
  target_compile_options(fuzz_${t} PRIVATE -fsanitize=fuzzer ${UBFUSE_FUZZ_SAN})
  target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
  target_link_libraries(fuzz_${t} PRIVATE ubfuse)
endforeach()
add_custom_target(fuzz_all)
foreach(t ${UBFUSE_FUZZ_TARGETS})
  add_dependencies(fuzz_all fuzz_${t})
endforeach()
