# Included by docs_example.cmake (-DCHECK) for the advice example of
# docs/preload.md ("Advice mode"): the run's output (_out) against the
# sample the page shows after the command (the first fenced block of
# _after). Compared are the lines of the shim and the program's verdict,
# with what differs from one machine or build to another set aside: call
# site offsets, times, and what the cost model picks (each site line is
# kept up to its calls, bytes and ranks). The MPI_COMM_WORLD sum of `main`
# is left out line by line (an optimising compiler makes one copy of its
# loop for the even ranks and one for the odd ranks, so it is one call
# site or two); the first line of the report counts all its calls and
# bytes.
if(NOT _after MATCHES "```\n([^`]*)```")
  message(FATAL_ERROR "no sample output block after the example's command in ${DOC}")
endif()
set(_sample "${CMAKE_MATCH_1}")

function(_structure text out)
  string(REPLACE ";" "," text "${text}")
  string(REGEX MATCHALL "(\\[cc_coll\\][^\n]*|recurring_allreduce: [^\n]*)" _lines "${text}")
  set(_kept "")
  foreach(_l IN LISTS _lines)
    if(_l MATCHES " \\(main\\): ")
      continue()
    endif()
    string(REGEX REPLACE "\\+0x[0-9a-f]+ " "+0x_ " _l "${_l}")
    string(REGEX REPLACE "(from [0-9]+ ranks?), NONE .*" "\\1" _l "${_l}")
    string(REGEX REPLACE "[0-9]+\\.[0-9]+" "_" _l "${_l}")
    string(REGEX REPLACE "at [0-9]+ call sites" "at _ call sites" _l "${_l}")
    string(REGEX REPLACE "\\): [0-9]+, (all|top) [0-9]+$" "): _" _l "${_l}")
    list(APPEND _kept "${_l}")
  endforeach()
  list(SORT _kept)
  set(${out} "${_kept}" PARENT_SCOPE)
endfunction()

_structure("${_out}" _got)
_structure("${_sample}" _want)
if(NOT _got STREQUAL _want)
  string(REPLACE ";" "\n  " _got_text "${_got}")
  string(REPLACE ";" "\n  " _want_text "${_want}")
  message(FATAL_ERROR "the advice example's output differs from the sample in ${DOC}:\n"
                      "sample:\n  ${_want_text}\nrun:\n  ${_got_text}")
endif()
list(LENGTH _got _n)
if(_n LESS 6)
  message(FATAL_ERROR "the advice example's output has only ${_n} of the lines it should")
endif()
message(STATUS "the advice example's output matches the sample in ${DOC}")
