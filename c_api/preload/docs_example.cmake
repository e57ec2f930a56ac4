# Runs the example of docs/preload.md exactly as written: the shell lines of
# the fenced block that follows the "<!-- preload-example -->" marker, from
# the build directory. Run with -DDOC=<docs/preload.md> -DBUILD_DIR=<build>
# [-DSANITIZER_PRELOAD=<ASan runtime>].
file(READ "${DOC}" _doc)
string(FIND "${_doc}" "<!-- preload-example -->" _at)
if(_at LESS 0)
  message(FATAL_ERROR "${DOC} has no <!-- preload-example --> marker")
endif()
string(SUBSTRING "${_doc}" ${_at} -1 _rest)
if(NOT _rest MATCHES "```sh\n(.*)")
  message(FATAL_ERROR "no ```sh block after the marker in ${DOC}")
endif()
set(_rest "${CMAKE_MATCH_1}")
string(FIND "${_rest}" "```" _end)
string(SUBSTRING "${_rest}" 0 ${_end} _script)
# The block starts with "cd build" (the reader's build directory).
string(REGEX REPLACE "^cd build\n" "" _script "${_script}")
# An ASan build (-DSANITIZER_PRELOAD=<the ASan runtime>): the runtime goes
# before the shim in LD_PRELOAD, as it must come first.
if(SANITIZER_PRELOAD)
  string(REPLACE "LD_PRELOAD=" "LD_PRELOAD=${SANITIZER_PRELOAD}:" _script "${_script}")
endif()
message(STATUS "running in ${BUILD_DIR}:\n${_script}")
execute_process(COMMAND sh -c "${_script}" WORKING_DIRECTORY "${BUILD_DIR}" RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "the example exited with status ${_rc}")
endif()
