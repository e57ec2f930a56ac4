! ABI test of the cc_coll module, no MPI needed: the bind(C) types have the
! size, field offsets and field sizes of the C structs (and an array of
! params the C array stride), every parameter has the value of
! its C enumerator (both as the C compiler sees include/cc_coll.h, through
! abi_values.c), status strings name their codes, the library names every
! method parameter, and the version parameters match the library.
program fortran_abi
  use, intrinsic :: iso_c_binding, only: c_int, c_int64_t, c_intptr_t, c_loc, c_sizeof
  use cc_coll
  implicit none

  interface
    function c_values(out, capacity) bind(C, name="cc_coll_ftest_abi_values") result(n)
      import :: c_int, c_int64_t
      integer(c_int64_t), intent(out) :: out(*)
      integer(c_int), value :: capacity
      integer(c_int) :: n
    end function c_values
  end interface

  integer, parameter :: maxn = 160
  type(cc_coll_params), target :: p, p2(2)
  type(cc_coll_stats), target :: s
  integer(c_int64_t) :: cv(maxn), fv(maxn)
  character(len=48) :: names(maxn)
  integer :: n, nc, i, nfail, first_status, last_status, first_method, last_method
  character(len=:), allocatable :: str, expected

  n = 0
  call add('sizeof(cc_coll_params)', int(c_sizeof(p), c_int64_t))
  call add('offset(params%mask)', offset_of(c_loc(p%mask), c_loc(p)))
  call add('offset(params%method)', offset_of(c_loc(p%method), c_loc(p)))
  call add('offset(params%density)', offset_of(c_loc(p%density), c_loc(p)))
  call add('offset(params%ef)', offset_of(c_loc(p%ef), c_loc(p)))
  call add('offset(params%ef_key)', offset_of(c_loc(p%ef_key), c_loc(p)))
  call add('offset(params%sparsifier)', offset_of(c_loc(p%sparsifier), c_loc(p)))
  call add('offset(params%zero_fraction)', offset_of(c_loc(p%zero_fraction), c_loc(p)))
  call add('offset(params%load_factor)', offset_of(c_loc(p%load_factor), c_loc(p)))
  call add('offset(params%seed)', offset_of(c_loc(p%seed), c_loc(p)))
  call add('offset(params%rows)', offset_of(c_loc(p%rows), c_loc(p)))
  call add('offset(params%cols)', offset_of(c_loc(p%cols), c_loc(p)))
  call add('offset(params%rank)', offset_of(c_loc(p%rank), c_loc(p)))
  call add('offset(params%warm_start)', offset_of(c_loc(p%warm_start), c_loc(p)))
  call add('offset(params%start_iter)', offset_of(c_loc(p%start_iter), c_loc(p)))
  call add('offset(params%min_compression_rate)', offset_of(c_loc(p%min_compression_rate), c_loc(p)))
  call add('sizeof(params%method)', int(c_sizeof(p%method), c_int64_t))
  call add('sizeof(params%sparsifier)', int(c_sizeof(p%sparsifier), c_int64_t))
  call add('sizeof(params%rows)', int(c_sizeof(p%rows), c_int64_t))
  call add('sizeof(params%cols)', int(c_sizeof(p%cols), c_int64_t))
  call add('sizeof(params%rank)', int(c_sizeof(p%rank), c_int64_t))
  call add('sizeof(params%warm_start)', int(c_sizeof(p%warm_start), c_int64_t))
  call add('sizeof(params%start_iter)', int(c_sizeof(p%start_iter), c_int64_t))
  call add('sizeof(params%min_compression_rate)', int(c_sizeof(p%min_compression_rate), c_int64_t))
  call add('sizeof(params[2])', int(c_sizeof(p2), c_int64_t))
  call add('sizeof(cc_coll_stats)', int(c_sizeof(s), c_int64_t))
  call add('offset(stats%mask)', offset_of(c_loc(s%mask), c_loc(s)))
  call add('offset(stats%calls)', offset_of(c_loc(s%calls), c_loc(s)))
  call add('offset(stats%bytes_uncompressed)', offset_of(c_loc(s%bytes_uncompressed), c_loc(s)))
  call add('offset(stats%bytes_wire)', offset_of(c_loc(s%bytes_wire), c_loc(s)))
  call add('offset(stats%time_compress)', offset_of(c_loc(s%time_compress), c_loc(s)))
  call add('offset(stats%time_communicate)', offset_of(c_loc(s%time_communicate), c_loc(s)))
  call add('offset(stats%time_decompress)', offset_of(c_loc(s%time_decompress), c_loc(s)))
  call add('offset(stats%sketch_elements)', offset_of(c_loc(s%sketch_elements), c_loc(s)))
  call add('offset(stats%sketch_peeled)', offset_of(c_loc(s%sketch_peeled), c_loc(s)))
  call add('offset(stats%time_total)', offset_of(c_loc(s%time_total), c_loc(s)))
  call add('offset(stats%auto_calls)', offset_of(c_loc(s%auto_calls), c_loc(s)))
  call add('offset(stats%auto_lossy_calls)', offset_of(c_loc(s%auto_lossy_calls), c_loc(s)))
  call add('offset(stats%auto_predicted)', offset_of(c_loc(s%auto_predicted), c_loc(s)))
  call add('offset(stats%auto_explored_calls)', offset_of(c_loc(s%auto_explored_calls), c_loc(s)))
  call add('offset(stats%auto_measured)', offset_of(c_loc(s%auto_measured), c_loc(s)))
  first_status = n + 1
  call add('CC_COLL_OK', int(CC_COLL_OK, c_int64_t))
  call add('CC_COLL_ERR_NULL_BUFFER', int(CC_COLL_ERR_NULL_BUFFER, c_int64_t))
  call add('CC_COLL_ERR_INVALID_DTYPE', int(CC_COLL_ERR_INVALID_DTYPE, c_int64_t))
  call add('CC_COLL_ERR_INVALID_OP', int(CC_COLL_ERR_INVALID_OP, c_int64_t))
  call add('CC_COLL_ERR_INVALID_METHOD', int(CC_COLL_ERR_INVALID_METHOD, c_int64_t))
  call add('CC_COLL_ERR_COUNT_OVERFLOW', int(CC_COLL_ERR_COUNT_OVERFLOW, c_int64_t))
  call add('CC_COLL_ERR_INVALID_COMM', int(CC_COLL_ERR_INVALID_COMM, c_int64_t))
  call add('CC_COLL_ERR_INVALID_PARAMS', int(CC_COLL_ERR_INVALID_PARAMS, c_int64_t))
  call add('CC_COLL_ERR_INVALID_ARG', int(CC_COLL_ERR_INVALID_ARG, c_int64_t))
  call add('CC_COLL_ERR_MPI', int(CC_COLL_ERR_MPI, c_int64_t))
  call add('CC_COLL_ERR_MPI_NOT_INITIALIZED', int(CC_COLL_ERR_MPI_NOT_INITIALIZED, c_int64_t))
  call add('CC_COLL_ERR_VERSION_MISMATCH', int(CC_COLL_ERR_VERSION_MISMATCH, c_int64_t))
  call add('CC_COLL_ERR_CONFIG', int(CC_COLL_ERR_CONFIG, c_int64_t))
  call add('CC_COLL_ERR_NOT_SUPPORTED', int(CC_COLL_ERR_NOT_SUPPORTED, c_int64_t))
  call add('CC_COLL_ERR_NO_MEMORY', int(CC_COLL_ERR_NO_MEMORY, c_int64_t))
  call add('CC_COLL_ERR_INTERNAL', int(CC_COLL_ERR_INTERNAL, c_int64_t))
  call add('CC_COLL_ERR_EF_LIMIT', int(CC_COLL_ERR_EF_LIMIT, c_int64_t))
  call add('CC_COLL_ERR_MISMATCH', int(CC_COLL_ERR_MISMATCH, c_int64_t))
  call add('CC_COLL_ERR_CUDA', int(CC_COLL_ERR_CUDA, c_int64_t))
  last_status = n
  call add('CC_COLL_F32', int(CC_COLL_F32, c_int64_t))
  call add('CC_COLL_F64', int(CC_COLL_F64, c_int64_t))
  call add('CC_COLL_F16', int(CC_COLL_F16, c_int64_t))
  call add('CC_COLL_BF16', int(CC_COLL_BF16, c_int64_t))
  call add('CC_COLL_SUM', int(CC_COLL_SUM, c_int64_t))
  call add('CC_COLL_AVG', int(CC_COLL_AVG, c_int64_t))
  ! Every CC_COLL_METHOD_<NAME> of the header (generated by the build, as
  ! are the module's parameters and abi_values.c's list).
  first_method = n + 1
#include "cc_coll_methods_abi.inc"
  last_method = n
  call add('CC_COLL_SPARSIFY_TOPK', int(CC_COLL_SPARSIFY_TOPK, c_int64_t))
  call add('CC_COLL_SPARSIFY_THRESHOLD', int(CC_COLL_SPARSIFY_THRESHOLD, c_int64_t))
  call add('CC_COLL_PARAMS_FIELD_METHOD', CC_COLL_PARAMS_FIELD_METHOD)
  call add('CC_COLL_PARAMS_FIELD_DENSITY', CC_COLL_PARAMS_FIELD_DENSITY)
  call add('CC_COLL_PARAMS_FIELD_EF', CC_COLL_PARAMS_FIELD_EF)
  call add('CC_COLL_PARAMS_FIELD_EF_KEY', CC_COLL_PARAMS_FIELD_EF_KEY)
  call add('CC_COLL_PARAMS_FIELD_SPARSIFIER', CC_COLL_PARAMS_FIELD_SPARSIFIER)
  call add('CC_COLL_PARAMS_FIELD_ZERO_FRACTION', CC_COLL_PARAMS_FIELD_ZERO_FRACTION)
  call add('CC_COLL_PARAMS_FIELD_LOAD_FACTOR', CC_COLL_PARAMS_FIELD_LOAD_FACTOR)
  call add('CC_COLL_PARAMS_FIELD_SEED', CC_COLL_PARAMS_FIELD_SEED)
  call add('CC_COLL_PARAMS_FIELD_SHAPE', CC_COLL_PARAMS_FIELD_SHAPE)
  call add('CC_COLL_PARAMS_FIELD_RANK', CC_COLL_PARAMS_FIELD_RANK)
  call add('CC_COLL_PARAMS_FIELD_WARM_START', CC_COLL_PARAMS_FIELD_WARM_START)
  call add('CC_COLL_PARAMS_FIELD_START_ITER', CC_COLL_PARAMS_FIELD_START_ITER)
  call add('CC_COLL_PARAMS_FIELD_MIN_COMPRESSION_RATE', CC_COLL_PARAMS_FIELD_MIN_COMPRESSION_RATE)
  call add('CC_COLL_STATS_FIELD_CALLS', CC_COLL_STATS_FIELD_CALLS)
  call add('CC_COLL_STATS_FIELD_BYTES_UNCOMPRESSED', CC_COLL_STATS_FIELD_BYTES_UNCOMPRESSED)
  call add('CC_COLL_STATS_FIELD_BYTES_WIRE', CC_COLL_STATS_FIELD_BYTES_WIRE)
  call add('CC_COLL_STATS_FIELD_TIME_COMPRESS', CC_COLL_STATS_FIELD_TIME_COMPRESS)
  call add('CC_COLL_STATS_FIELD_TIME_COMMUNICATE', CC_COLL_STATS_FIELD_TIME_COMMUNICATE)
  call add('CC_COLL_STATS_FIELD_TIME_DECOMPRESS', CC_COLL_STATS_FIELD_TIME_DECOMPRESS)
  call add('CC_COLL_STATS_FIELD_SKETCH_ELEMENTS', CC_COLL_STATS_FIELD_SKETCH_ELEMENTS)
  call add('CC_COLL_STATS_FIELD_SKETCH_PEELED', CC_COLL_STATS_FIELD_SKETCH_PEELED)
  call add('CC_COLL_STATS_FIELD_TIME_TOTAL', CC_COLL_STATS_FIELD_TIME_TOTAL)
  call add('CC_COLL_STATS_FIELD_AUTO_CALLS', CC_COLL_STATS_FIELD_AUTO_CALLS)
  call add('CC_COLL_STATS_FIELD_AUTO_LOSSY_CALLS', CC_COLL_STATS_FIELD_AUTO_LOSSY_CALLS)
  call add('CC_COLL_STATS_FIELD_AUTO_PREDICTED', CC_COLL_STATS_FIELD_AUTO_PREDICTED)
  call add('CC_COLL_STATS_FIELD_AUTO_EXPLORED_CALLS', CC_COLL_STATS_FIELD_AUTO_EXPLORED_CALLS)
  call add('CC_COLL_STATS_FIELD_AUTO_MEASURED', CC_COLL_STATS_FIELD_AUTO_MEASURED)
  call add('CC_COLL_BUILD_CUDA', int(CC_COLL_BUILD_CUDA, c_int64_t))
  call add('CC_COLL_BUILD_FORTRAN', int(CC_COLL_BUILD_FORTRAN, c_int64_t))
  call add('CC_COLL_VERSION_MAJOR', int(CC_COLL_VERSION_MAJOR, c_int64_t))
  call add('CC_COLL_VERSION_MINOR', int(CC_COLL_VERSION_MINOR, c_int64_t))
  call add('CC_COLL_VERSION_PATCH', int(CC_COLL_VERSION_PATCH, c_int64_t))

  nfail = 0
  nc = c_values(cv, int(maxn, c_int))
  if (nc /= n) then
    print '(a,i0,a,i0,a)', 'FAIL: abi_values.c lists ', nc, ' values, abi.F90 ', n, ' (keep them in step)'
    nfail = nfail + 1
  end if
  do i = 1, min(n, nc)
    if (fv(i) /= cv(i)) then
      print '(a,a,a,i0,a,i0,a)', 'FAIL: ', trim(names(i)), ' is ', fv(i), ' in Fortran but ', cv(i), ' in C'
      nfail = nfail + 1
    end if
  end do

  ! The stats mask convenience covers exactly the C bits.
  if (CC_COLL_STATS_FIELD_ALL /= ior(ior(ior(CC_COLL_STATS_FIELD_CALLS, CC_COLL_STATS_FIELD_BYTES_UNCOMPRESSED), &
                                         ior(CC_COLL_STATS_FIELD_BYTES_WIRE, CC_COLL_STATS_FIELD_TIME_COMPRESS)), &
                                     ior(ior(CC_COLL_STATS_FIELD_TIME_COMMUNICATE, CC_COLL_STATS_FIELD_TIME_DECOMPRESS), &
                                         ior(ior(CC_COLL_STATS_FIELD_SKETCH_ELEMENTS, CC_COLL_STATS_FIELD_SKETCH_PEELED), &
                                             ior(CC_COLL_STATS_FIELD_TIME_TOTAL, &
                                                 ior(CC_COLL_STATS_FIELD_AUTO_CALLS, &
                                                     ior(CC_COLL_STATS_FIELD_AUTO_LOSSY_CALLS, &
                                                         ior(CC_COLL_STATS_FIELD_AUTO_PREDICTED, &
                                                             ior(CC_COLL_STATS_FIELD_AUTO_EXPLORED_CALLS, &
                                                                 CC_COLL_STATS_FIELD_AUTO_MEASURED))))))))) then
    print '(a)', 'FAIL: CC_COLL_STATS_FIELD_ALL is not the OR of the stats bits'
    nfail = nfail + 1
  end if

  ! Default-initialised params mean "all defaults".
  if (p%mask /= 0 .or. p%method /= CC_COLL_METHOD_NONE .or. p%ef /= 0 .or. p%ef_key /= 0 .or. &
      p%sparsifier /= CC_COLL_SPARSIFY_TOPK .or. p%seed /= 0 .or. p%rows /= 0 .or. p%cols /= 0 .or. &
      p%rank /= 0 .or. p%warm_start /= 0 .or. p%start_iter /= 0 .or. p%min_compression_rate /= 0) then
    print '(a)', 'FAIL: type(cc_coll_params) is not zero-initialised'
    nfail = nfail + 1
  end if

  ! Status strings: "NAME: description", from the library, for every code.
  do i = first_status, last_status
    str = cc_coll_status_string(int(fv(i)))
    expected = trim(names(i)) // ':'
    if (len(str) <= len(expected)) then
      print '(a,i0,a,a,a)', 'FAIL: cc_coll_status_string(', fv(i), ') = "', str, '" is too short'
      nfail = nfail + 1
    else if (str(1:len(expected)) /= expected) then
      print '(a,i0,a,a,a,a)', 'FAIL: cc_coll_status_string(', fv(i), ') = "', str, '", expected a prefix ', expected
      nfail = nfail + 1
    end if
  end do
  str = cc_coll_status_string(12345)
  if (str(1:min(len(str), 20)) /= 'CC_COLL_ERR_UNKNOWN:') then
    print '(a,a)', 'FAIL: cc_coll_status_string(12345) = ', str
    nfail = nfail + 1
  end if

  ! Method names: the library names each CC_COLL_METHOD_<NAME> "<name>" (lower
  ! case). Ids may have gaps: that the library lists no method beyond the
  ! parameters is fortran_methods' check.
  if (last_method < first_method) then
    print '(a)', 'FAIL: the module has no CC_COLL_METHOD_* parameter'
    nfail = nfail + 1
  end if
  do i = first_method, last_method
    str = cc_coll_method_name(int(fv(i)))
    expected = lower(names(i)(len('CC_COLL_METHOD_') + 1:))
    if (str /= expected) then
      print '(a,i0,a,a,a,a)', 'FAIL: cc_coll_method_name(', fv(i), ') = "', str, '", expected ', expected
      nfail = nfail + 1
    end if
  end do
  if (cc_coll_method_name(-1) /= '') then
    print '(a)', 'FAIL: cc_coll_method_name(-1) is not empty'
    nfail = nfail + 1
  end if

  ! Version: the module's parameters, the library's string, the check.
  str = cc_coll_version_string()
  expected = itoa(CC_COLL_VERSION_MAJOR) // '.' // itoa(CC_COLL_VERSION_MINOR) // '.' // itoa(CC_COLL_VERSION_PATCH)
  if (str /= expected) then
    print '(a,a,a,a)', 'FAIL: cc_coll_version_string() = ', str, ', module version ', expected
    nfail = nfail + 1
  end if
  call cc_coll_check_version(i)
  if (i /= CC_COLL_OK) then
    print '(a,a)', 'FAIL: cc_coll_check_version: ', cc_coll_last_error()
    nfail = nfail + 1
  end if
  if (cc_coll_last_error() /= '') then
    print '(a,a)', 'FAIL: cc_coll_last_error() after a success = ', cc_coll_last_error()
    nfail = nfail + 1
  end if
  if (iand(cc_coll_build_flags(), CC_COLL_BUILD_FORTRAN) == 0) then
    print '(a)', 'FAIL: cc_coll_build_flags() lacks CC_COLL_BUILD_FORTRAN'
    nfail = nfail + 1
  end if

  deallocate(str, expected)
  if (nfail /= 0) then
    print '(i0,a)', nfail, ' check(s) failed'
    error stop 1
  end if
  print '(a,i0,a)', 'fortran_abi: ', n, ' values match the C header: passed'

contains

  subroutine add(name, value)
    character(len=*), intent(in) :: name
    integer(c_int64_t), intent(in) :: value
    n = n + 1
    names(n) = name
    fv(n) = value
  end subroutine add

  subroutine add_method(name, value)
    character(len=*), intent(in) :: name
    integer(c_int), intent(in) :: value
    call add(name, int(value, c_int64_t))
  end subroutine add_method

  function lower(s) result(t)
    character(len=*), intent(in) :: s
    character(len=:), allocatable :: t
    integer :: i
    t = trim(s)
    do i = 1, len(t)
      if (t(i:i) >= 'A' .and. t(i:i) <= 'Z') t(i:i) = achar(iachar(t(i:i)) + 32)
    end do
  end function lower

  function offset_of(field, base) result(off)
    use, intrinsic :: iso_c_binding, only: c_ptr
    type(c_ptr), intent(in) :: field, base
    integer(c_int64_t) :: off
    off = int(transfer(field, 0_c_intptr_t) - transfer(base, 0_c_intptr_t), c_int64_t)
  end function offset_of

  function itoa(v) result(s)
    integer(c_int), intent(in) :: v
    character(len=:), allocatable :: s
    character(len=16) :: buf
    write (buf, '(i0)') v
    s = trim(buf)
  end function itoa

end program fortran_abi
