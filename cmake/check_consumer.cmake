# Installs ubfuse into a scratch prefix, builds examples/consumer against it and runs it.
set(prefix ${BUILD_DIR}/consumer-check/prefix)
set(cbuild ${BUILD_DIR}/consumer-check/build)
file(REMOVE_RECURSE ${BUILD_DIR}/consumer-check)
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix}
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "install failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/consumer -B ${cbuild}
                -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the consumer failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${cbuild} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the consumer failed")
endif()
execute_process(COMMAND ${cbuild}/seed_block RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "the consumer's seed_block failed")
endif()
# The Python package, when built: the installed copy imports from the prefix's dist-packages
# (the folder Debian's python3 searches for that prefix) and runs a model.
if(PYTHON AND PYTHON_DIR)
  set(site ${prefix}/${PYTHON_DIR})
  execute_process(COMMAND ${CMAKE_COMMAND} -E env PYTHONPATH=${site} PYTHONDONTWRITEBYTECODE=1
                  ${PYTHON} -c "import numpy, ubfuse, sys; \
assert ubfuse.__file__.startswith(sys.argv[1]), ubfuse.__file__; \
m = ubfuse.load_onnx(sys.argv[2]); \
out = m.run({'features': numpy.zeros((1, 16, 8), numpy.float32)}); \
print('installed ubfuse:', ubfuse.__file__, [v.shape for v in out.values()])"
                  ${site} ${SOURCE_DIR}/tests/models/conv_stem.onnx
                  WORKING_DIRECTORY ${BUILD_DIR} RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "the installed Python package failed")
  endif()
endif()
