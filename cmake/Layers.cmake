# One library per layer, each naming the layers it may use; docs/architecture.md draws them.
#
# ubfuse_layer(<name> DIRS <folders> [DEPS <layers>] [LIBS <external targets>]
#              [HEADERS <public headers in include/ubfuse it implements>])
#
# Each layer is an OBJECT library whose usage requirements come from its DEPS. Two checks keep
# a layer from reaching up, both part of every normal build:
#   - includes: cmake/CheckLayers.cmake reads every source and fails the build on an #include
#     of a layer (or a public header) that is not among the layer's transitive DEPS;
#   - symbols: each layer is also linked as a shared library against only its DEPS, with
#     -Wl,--no-undefined, so a call into a higher layer fails to link (ubfuse_<name>_linkcheck;
#     left out of sanitizer builds, whose runtimes the executable provides).
# The installed library, libubfuse, holds the objects of every layer.

set(UBFUSE_LAYERS "")
set(UBFUSE_LAYER_TABLE "")

# With UBFUSE_UNITY, <target> is built as a unity build: its sources compiled in batches of
# UBFUSE_UNITY_BATCH, one translation unit each, so the headers and templates they share are
# parsed and instantiated once per batch. Sources that compile themselves once per Highway target
# (foreach_target.h) stay alone; CMake leaves out sources with their own compile definitions.
function(ubfuse_unity target)
  if(NOT UBFUSE_UNITY)
    return()
  endif()
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON
                        UNITY_BUILD_BATCH_SIZE ${UBFUSE_UNITY_BATCH})
  get_target_property(srcs ${target} SOURCES)
  foreach(src ${srcs})
    if(src MATCHES "\\.cc$" AND EXISTS "${src}")
      file(STRINGS "${src}" per_target REGEX "foreach_target\\.h")
      if(per_target)
        set_source_files_properties(${src} TARGET_DIRECTORY ${target} PROPERTIES
                                    SKIP_UNITY_BUILD_INCLUSION ON)
      endif()
    endif()
  endforeach()
endfunction()

# The object files of the layers in ARGN into <objects_var>, and the external libraries they link
# (their LIBS, each once) into <libs_var>: what an archive or binary built from them needs.
function(ubfuse_layer_parts objects_var libs_var)
  set(objects "")
  set(libs "")
  foreach(layer ${ARGN})
    list(APPEND objects $<TARGET_OBJECTS:ubfuse_${layer}>)
    get_property(l GLOBAL PROPERTY UBFUSE_LAYER_LIBS_${layer})
    list(APPEND libs ${l})
  endforeach()
  list(REMOVE_DUPLICATES libs)
  set(${objects_var} ${objects} PARENT_SCOPE)
  set(${libs_var} ${libs} PARENT_SCOPE)
endfunction()

function(ubfuse_layer name)
  cmake_parse_arguments(L "" "" "DIRS;DEPS;LIBS;HEADERS" ${ARGN})
  set(srcs "")
  foreach(d ${L_DIRS})
    file(GLOB s CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${d}/*.cc)
    list(APPEND srcs ${s})
  endforeach()
  set(t ubfuse_${name})
  add_library(${t} OBJECT ${srcs})
  target_include_directories(${t} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src>)
  foreach(dep ${L_DEPS})
    target_link_libraries(${t} PUBLIC ubfuse_${dep})
  endforeach()
  target_link_libraries(${t} PRIVATE ${L_LIBS})
  add_dependencies(${t} ubfuse_layer_check)
  ubfuse_unity(${t})

  # Transitive closure of the deps, for the include check.
  set(closure ${L_DEPS})
  foreach(dep ${L_DEPS})
    get_property(c GLOBAL PROPERTY UBFUSE_LAYER_CLOSURE_${dep})
    list(APPEND closure ${c})
  endforeach()
  list(REMOVE_DUPLICATES closure)
  set_property(GLOBAL PROPERTY UBFUSE_LAYER_CLOSURE_${name} "${closure}")
  set_property(GLOBAL PROPERTY UBFUSE_LAYER_LIBS_${name} "${L_LIBS}")
  string(REPLACE ";" "," dirs_csv "${L_DIRS}")
  string(REPLACE ";" "," deps_csv "${closure}")
  string(REPLACE ";" "," headers_csv "${L_HEADERS}")
  set(UBFUSE_LAYER_TABLE "${UBFUSE_LAYER_TABLE}${name}|${dirs_csv}|${deps_csv}|${headers_csv}\n"
      PARENT_SCOPE)
  set(UBFUSE_LAYERS ${UBFUSE_LAYERS} ${name} PARENT_SCOPE)

  if(NOT (UBFUSE_SANITIZE OR UBFUSE_TSAN OR UBFUSE_FUZZ))
    add_library(${t}_linkcheck SHARED $<TARGET_OBJECTS:${t}>)
    foreach(dep ${L_DEPS})
      target_link_libraries(${t}_linkcheck PUBLIC ubfuse_${dep}_linkcheck)
    endforeach()
    target_link_libraries(${t}_linkcheck PRIVATE ${L_LIBS} Threads::Threads ${CMAKE_DL_LIBS})
    target_link_options(${t}_linkcheck PRIVATE -Wl,--no-undefined)
    set_target_properties(${t}_linkcheck PROPERTIES LIBRARY_OUTPUT_DIRECTORY
                          ${PROJECT_BINARY_DIR}/linkcheck)
  endif()
endfunction()

# Writes the layer table the include check reads, and the custom command that runs it whenever
# a source changes. Call after the last ubfuse_layer(). ARGN: folders outside any library whose
# includes are checked too, as "folder:layer,layer" (the layers each may use).
function(ubfuse_layer_check_setup)
  set(table "${UBFUSE_LAYER_TABLE}")
  foreach(entry ${ARGN})
    string(REPLACE ":" ";" parts "${entry}")
    list(GET parts 0 dir)
    list(GET parts 1 deps)
    string(REPLACE "," ";" deps "${deps}")
    set(closure ${deps})
    foreach(dep ${deps})
      get_property(c GLOBAL PROPERTY UBFUSE_LAYER_CLOSURE_${dep})
      list(APPEND closure ${c})
    endforeach()
    list(REMOVE_DUPLICATES closure)
    string(REPLACE ";" "," deps_csv "${closure}")
    string(APPEND table "${dir}|${dir}|${deps_csv}|\n")
  endforeach()
  file(WRITE ${PROJECT_BINARY_DIR}/layers.txt "${table}")
  file(GLOB_RECURSE all_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/*.cc
       ${PROJECT_SOURCE_DIR}/src/*.h ${PROJECT_SOURCE_DIR}/tools/*.cc
       ${PROJECT_SOURCE_DIR}/tools/*.h ${PROJECT_SOURCE_DIR}/python/*.cc
       ${PROJECT_SOURCE_DIR}/include/ubfuse/*.h)
  add_custom_command(OUTPUT ${PROJECT_BINARY_DIR}/layers.ok
    COMMAND ${CMAKE_COMMAND} -DROOT=${PROJECT_SOURCE_DIR} -DTABLE=${PROJECT_BINARY_DIR}/layers.txt
            -DSTAMP=${PROJECT_BINARY_DIR}/layers.ok -P ${PROJECT_SOURCE_DIR}/cmake/CheckLayers.cmake
    DEPENDS ${all_sources} ${PROJECT_BINARY_DIR}/layers.txt
            ${PROJECT_SOURCE_DIR}/cmake/CheckLayers.cmake
    COMMENT "Checking that no layer includes a layer above it" VERBATIM)
endfunction()
