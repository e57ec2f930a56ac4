# Runs an example of docs/preload.md exactly as written: the shell lines of
# the fenced block that follows the "<!-- MARKER -->" line, from the build
# directory, with the build's launcher first on PATH as both `mpirun` and
# `mpiexec` (on a machine with two MPIs the bare names may be the other
# one's). Run with -DDOC=<docs/preload.md> -DBUILD_DIR=<build>
# -DMARKER=<preload-example or preload-example-hydra> -DMPIEXEC=<launcher>
# [-DSANITIZER_PRELOAD=<ASan runtime>] [-DCHECK=<script>: the block's
# output, stdout and stderr, in _out and the text after the block in
# _after, is handed to that script, which fails the test on a difference].
if(NOT MARKER)
  set(MARKER preload-example)
endif()
file(READ "${DOC}" _doc)
string(FIND "${_doc}" "<!-- ${MARKER} -->" _at)
if(_at LESS 0)
  message(FATAL_ERROR "${DOC} has no <!-- ${MARKER} --> marker")
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
if(MPIEXEC)
  set(_bin "${BUILD_DIR}/c_api/preload/docs_example_launcher")
  file(MAKE_DIRECTORY "${_bin}")
  # Scripts, not links: a launcher may look for its helpers beside the path
  # it was started as (Hydra's hydra_pmi_proxy).
  foreach(_name mpirun mpiexec)
    file(WRITE "${_bin}/${_name}.tmp" "#!/bin/sh\nexec \"${MPIEXEC}\" \"$@\"\n")
    file(COPY "${_bin}/${_name}.tmp" DESTINATION "${_bin}/x"
         FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
    file(RENAME "${_bin}/x/${_name}.tmp" "${_bin}/${_name}")
    file(REMOVE "${_bin}/${_name}.tmp")
  endforeach()
  file(REMOVE_RECURSE "${_bin}/x")
  set(ENV{PATH} "${_bin}:$ENV{PATH}")
endif()
# An ASan build (-DSANITIZER_PRELOAD=<the ASan runtime>): the runtime goes
# before the shim in LD_PRELOAD, as it must come first.
if(SANITIZER_PRELOAD)
  string(REPLACE "LD_PRELOAD=" "LD_PRELOAD=${SANITIZER_PRELOAD}:" _script "${_script}")
endif()
message(STATUS "running in ${BUILD_DIR} (mpirun, mpiexec: ${MPIEXEC}):\n${_script}")
if(CHECK)
  execute_process(COMMAND sh -c "${_script}" WORKING_DIRECTORY "${BUILD_DIR}" RESULT_VARIABLE _rc
    OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  message(STATUS "output:\n${_out}")
else()
  execute_process(COMMAND sh -c "${_script}" WORKING_DIRECTORY "${BUILD_DIR}" RESULT_VARIABLE _rc)
endif()
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "the example exited with status ${_rc}")
endif()
if(CHECK)
  math(EXPR _end "${_end} + 3")
  string(SUBSTRING "${_rest}" ${_end} -1 _after)
  include("${CHECK}")
endif()
