# The shim's advice mode (CC_COLL_ADVISE=1) on advise_allreduce.c, whose
# calls are known: three runs of the program with NP ranks and STEPS steps,
#   plain     without the shim;
#   advice    the shim with CC_COLL_ADVISE=1 (and CC_COLL_METHOD=topk, which
#             advice mode overrides), CC_COLL_MIN_REPEATS=REPEATS;
#   compress  the shim compressing (CC_COLL_METHOD=topk), the same rule.
# Checks: advice's checksums (every byte every call returned, per rank) are
# plain's; compress's differ (so the checksums see compression); advice
# reports exactly the three call sites with STEPS - REPEATS calls per rank
# each and their bytes, 0 calls compressed; compress's summary reports the
# time saved or lost over its compressed MPI_Allreduce calls.
#
# -DLAUNCH=<launcher, its rank-count flag, NP and preflags, '|'-separated>
# -DPOST=<postflags, '|'-separated> -DPROGRAM=<preload_advise_allreduce>
# -DPLAIN=<env args of the plain run, may be empty> -DADVICE=<env args of
# the advice run> -DCOMPRESS=<env args of the compressing run> (in the
# launcher's syntax, '|'-separated)
# -DNP=<ranks> -DSTEPS=<steps> -DREPEATS=<CC_COLL_MIN_REPEATS>
foreach(_v LAUNCH POST PLAIN ADVICE COMPRESS)
  string(REPLACE "|" ";" _${_v} "${${_v}}")
endforeach()

function(_run name out_var err_var)
  execute_process(COMMAND ${_LAUNCH} ${ARGN} ${PROGRAM} ${STEPS} ${_POST}
    OUTPUT_VARIABLE _out ERROR_VARIABLE _err RESULT_VARIABLE _rc TIMEOUT 240)
  message(STATUS "--- ${name} run: stdout\n${_out}--- ${name} run: stderr\n${_err}")
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "the ${name} run exited with status ${_rc}")
  endif()
  if(NOT _out MATCHES "advise_allreduce: ${NP} ranks: done")
    message(FATAL_ERROR "the ${name} run did not finish: no \"advise_allreduce: ${NP} ranks: done\"")
  endif()
  set(${out_var} "${_out}" PARENT_SCOPE)
  set(${err_var} "${_err}" PARENT_SCOPE)
endfunction()

# The checksum lines of a run's stdout.
function(_checksums text out_var)
  string(REGEX MATCHALL "advise_allreduce: rank [0-9]+ of [0-9]+: checksum 0x[0-9a-f]+" _lines "${text}")
  list(LENGTH _lines _n)
  if(NOT _n EQUAL NP)
    message(FATAL_ERROR "${_n} checksum lines, expected ${NP}")
  endif()
  set(${out_var} "${_lines}" PARENT_SCOPE)
endfunction()

_run(plain plain_out plain_err ${_PLAIN})
_run(advice advice_out advice_err ${_ADVICE})
_run(compress compress_out compress_err ${_COMPRESS})
_checksums("${plain_out}" plain_sums)
_checksums("${advice_out}" advice_sums)
_checksums("${compress_out}" compress_sums)

if(NOT advice_sums STREQUAL plain_sums)
  message(FATAL_ERROR "advice mode changed the results:\n  without the shim: ${plain_sums}\n  advice mode:      ${advice_sums}")
endif()
if(compress_sums STREQUAL plain_sums)
  message(FATAL_ERROR "the compressing run gave plain MPI's results: the checksums do not see compression")
endif()

# The advice report: exactly these three sites, STEPS - REPEATS calls per rank.
math(EXPR _calls "(${STEPS} - ${REPEATS}) * ${NP}")
math(EXPR _bytes "${_calls} * 1200000")
math(EXPR _all_calls "3 * ${_calls}")
math(EXPR _all_bytes "3 * ${_bytes}")
set(_expect
  "\\[cc_coll\\] allreduce calls seen [0-9]+, compressed 0 "
  "\\[cc_coll\\] advice \\(CC_COLL_ADVISE=1\\): nothing was compressed; the rule in force would compress ${_all_calls} calls, ${_all_bytes} bytes \\(summed over ranks\\), at 3 call sites\n"
  "\\[cc_coll\\] advice: CC_COLL_METHOD=auto's cost model predicts these calls take [0-9.]+ s uncompressed and [0-9.]+ s with its choice per call: [0-9.]+ s saved \\(summed over ranks; [0-9.]+ s on the rank that saves most\\)\n"
  "\\[cc_coll\\]   preload_advise_allreduce\\+0x[0-9a-f]+ \\(gradient_step\\): 300000 x float on gradients \\(${NP} ranks\\): ${_calls} calls, ${_bytes} bytes, from ${NP} ranks; NONE [0-9.]+ ms, "
  "\\[cc_coll\\]   preload_advise_allreduce\\+0x[0-9a-f]+ \\(field_step\\): 150000 x double on MPI_COMM_WORLD \\(${NP} ranks\\): ${_calls} calls, ${_bytes} bytes, from ${NP} ranks; NONE [0-9.]+ ms, "
  "\\[cc_coll\\]   preload_advise_allreduce\\+0x[0-9a-f]+ \\(bucket_step\\): 300000 x float on gradients \\(${NP} ranks\\): ${_calls} calls, ${_bytes} bytes, from ${NP} ranks; NONE [0-9.]+ ms, ")
foreach(_re IN LISTS _expect)
  if(NOT advice_err MATCHES "${_re}")
    message(FATAL_ERROR "the advice report lacks a line matching\n  ${_re}")
  endif()
endforeach()
string(REGEX MATCHALL "\\[cc_coll\\]   [^\n;]*" _sites "${advice_err}")
list(LENGTH _sites _n)
if(NOT _n EQUAL 3)
  message(FATAL_ERROR "the advice report lists ${_n} call sites, expected 3")
endif()

# The compressing run's summary: the time saved or lost over its compressed
# blocking calls (gradient_step and field_step), NONE's time predicted.
math(EXPR _blocking "2 * ${_calls}")
set(_re "\\[cc_coll\\] time (saved|lost) by compression: [0-9.]+ s \\(summed over ranks\\): ${_blocking} compressed MPI_Allreduce calls took [0-9.]+ s, measured; uncompressed \\(NONE\\) they would take [0-9.]+ s, predicted by CC_COLL_METHOD=auto's cost model, not measured\n")
if(NOT compress_err MATCHES "${_re}")
  message(FATAL_ERROR "the compressing run's summary lacks a line matching\n  ${_re}")
endif()
message(STATUS "preload advice: ${NP} ranks: PASS")
