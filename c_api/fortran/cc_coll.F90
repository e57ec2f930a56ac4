! cc_coll — the Fortran interface to libcc_coll.
!
! `use cc_coll` gives the C ABI of include/cc_coll.h through ISO_C_BINDING:
! the enumerators as integer(c_int) parameters, the params and stats structs
! as bind(C) derived types, and Fortran procedures that take arrays and
! Fortran (integer) MPI communicator handles. Every procedure returns the C
! status in `ierr` (CC_COLL_OK = 0, negative on error). See docs/fortran.md.
!
! The module is compiled into libcc_coll_fortran, which calls libcc_coll.
! CMake passes the project version as CC_COLL_FORTRAN_VERSION_MAJOR / _MINOR
! / _PATCH, so communicator creation checks libcc_coll against the version
! this module was built for.
!
! SPDX-License-Identifier: BSD-3-Clause

#if !defined(CC_COLL_FORTRAN_VERSION_MAJOR) || !defined(CC_COLL_FORTRAN_VERSION_MINOR) || !defined(CC_COLL_FORTRAN_VERSION_PATCH)
#error "define CC_COLL_FORTRAN_VERSION_MAJOR, _MINOR and _PATCH (the build does, from PROJECT_VERSION)"
#endif

module cc_coll
  use, intrinsic :: iso_c_binding, only: c_int, c_int64_t, c_size_t, c_float, c_double, c_char, &
                                         c_ptr, c_null_ptr, c_loc, c_associated, c_f_pointer
  implicit none
  private

  ! --- version of the header this module mirrors ------------------------------
  integer(c_int), parameter, public :: CC_COLL_VERSION_MAJOR = CC_COLL_FORTRAN_VERSION_MAJOR
  integer(c_int), parameter, public :: CC_COLL_VERSION_MINOR = CC_COLL_FORTRAN_VERSION_MINOR
  integer(c_int), parameter, public :: CC_COLL_VERSION_PATCH = CC_COLL_FORTRAN_VERSION_PATCH

  ! --- cc_coll_status_t -------------------------------------------------------
  integer(c_int), parameter, public :: CC_COLL_OK                      = 0
  integer(c_int), parameter, public :: CC_COLL_ERR_NULL_BUFFER         = -1
  integer(c_int), parameter, public :: CC_COLL_ERR_INVALID_DTYPE       = -2
  integer(c_int), parameter, public :: CC_COLL_ERR_INVALID_OP          = -3
  integer(c_int), parameter, public :: CC_COLL_ERR_INVALID_METHOD      = -4
  integer(c_int), parameter, public :: CC_COLL_ERR_COUNT_OVERFLOW      = -5
  integer(c_int), parameter, public :: CC_COLL_ERR_INVALID_COMM        = -6
  integer(c_int), parameter, public :: CC_COLL_ERR_INVALID_PARAMS      = -7
  integer(c_int), parameter, public :: CC_COLL_ERR_INVALID_ARG         = -8
  integer(c_int), parameter, public :: CC_COLL_ERR_MPI                 = -9
  integer(c_int), parameter, public :: CC_COLL_ERR_MPI_NOT_INITIALIZED = -10
  integer(c_int), parameter, public :: CC_COLL_ERR_VERSION_MISMATCH    = -11
  integer(c_int), parameter, public :: CC_COLL_ERR_CONFIG              = -12
  integer(c_int), parameter, public :: CC_COLL_ERR_NOT_SUPPORTED       = -13
  integer(c_int), parameter, public :: CC_COLL_ERR_NO_MEMORY           = -14
  integer(c_int), parameter, public :: CC_COLL_ERR_INTERNAL            = -15
  integer(c_int), parameter, public :: CC_COLL_ERR_EF_LIMIT            = -16
  integer(c_int), parameter, public :: CC_COLL_ERR_MISMATCH            = -17

  ! --- cc_coll_dtype_t, cc_coll_op_t, cc_coll_method_t, cc_coll_sparsifier_t ---
  integer(c_int), parameter, public :: CC_COLL_F32  = 0
  integer(c_int), parameter, public :: CC_COLL_F64  = 1
  integer(c_int), parameter, public :: CC_COLL_F16  = 2
  integer(c_int), parameter, public :: CC_COLL_BF16 = 3
  integer(c_int), parameter, public :: CC_COLL_SUM = 0
  integer(c_int), parameter, public :: CC_COLL_AVG = 1
  integer(c_int), parameter, public :: CC_COLL_METHOD_NONE = 0
  integer(c_int), parameter, public :: CC_COLL_METHOD_TOPK = 1
  integer(c_int), parameter, public :: CC_COLL_METHOD_SKETCH = 2
  integer(c_int), parameter, public :: CC_COLL_SPARSIFY_TOPK      = 0
  integer(c_int), parameter, public :: CC_COLL_SPARSIFY_THRESHOLD = 1

  ! --- bits of cc_coll_params%mask and cc_coll_stats%mask ---------------------
  integer(c_int64_t), parameter, public :: CC_COLL_PARAMS_FIELD_METHOD  = 1_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_PARAMS_FIELD_DENSITY = 2_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_PARAMS_FIELD_EF      = 4_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_PARAMS_FIELD_EF_KEY  = 8_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_PARAMS_FIELD_SPARSIFIER    = 16_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_PARAMS_FIELD_ZERO_FRACTION = 32_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_PARAMS_FIELD_LOAD_FACTOR   = 64_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_PARAMS_FIELD_SEED          = 128_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_STATS_FIELD_CALLS              = 1_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_STATS_FIELD_BYTES_UNCOMPRESSED = 2_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_STATS_FIELD_BYTES_WIRE         = 4_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_STATS_FIELD_TIME_COMPRESS      = 8_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_STATS_FIELD_TIME_COMMUNICATE   = 16_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_STATS_FIELD_TIME_DECOMPRESS    = 32_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_STATS_FIELD_SKETCH_ELEMENTS    = 64_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_STATS_FIELD_SKETCH_PEELED      = 128_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_STATS_FIELD_ALL                = 255_c_int64_t

  ! --- bits of cc_coll_build_flags() -----------------------------------------
  integer(c_int), parameter, public :: CC_COLL_BUILD_CUDA    = 1
  integer(c_int), parameter, public :: CC_COLL_BUILD_FORTRAN = 2

  ! --- structs ----------------------------------------------------------------
  ! cc_coll_params_t. A field counts only when its bit is set in `mask`; the
  ! default-initialised value (mask = 0) means "all defaults". uint64_t fields
  ! are integer(c_int64_t) (same bits).
  type, bind(C), public :: cc_coll_params
    integer(c_int64_t) :: mask          = 0  ! OR (ior) of CC_COLL_PARAMS_FIELD_* bits
    integer(c_int)     :: method        = 0  ! CC_COLL_METHOD_*
    real(c_double)     :: density       = 0  ! TOPK, SKETCH: 0 < density <= 1
    integer(c_int)     :: ef            = 0  ! 1 = error feedback on, 0 = off
    integer(c_int64_t) :: ef_key        = 0  ! names the tensor's residual
    integer(c_int)     :: sparsifier    = 0  ! SKETCH: CC_COLL_SPARSIFY_*
    real(c_double)     :: zero_fraction = 0  ! THRESHOLD: target zeroed fraction, [0, 1)
    real(c_double)     :: load_factor   = 0  ! SKETCH: support / cells, (0, 16]
    integer(c_int64_t) :: seed          = 0  ! SKETCH: hash seed, the same on every rank
  end type cc_coll_params

  ! cc_coll_stats_t. Set `mask` to the fields wanted (CC_COLL_STATS_FIELD_ALL).
  type, bind(C), public :: cc_coll_stats
    integer(c_int64_t) :: mask               = 0
    integer(c_int64_t) :: calls              = 0
    integer(c_int64_t) :: bytes_uncompressed = 0
    integer(c_int64_t) :: bytes_wire         = 0
    real(c_double)     :: time_compress      = 0
    real(c_double)     :: time_communicate   = 0
    real(c_double)     :: time_decompress    = 0
    integer(c_int64_t) :: sketch_elements    = 0  ! SKETCH: support elements decoded
    integer(c_int64_t) :: sketch_peeled      = 0  ! SKETCH: of those, recovered exactly
  end type cc_coll_stats

  ! A libcc_coll communicator: the C cc_coll_comm_h. `ptr` is that handle, for
  ! calling C functions this module does not wrap.
  type, public :: cc_coll_comm
    type(c_ptr) :: ptr = c_null_ptr
  end type cc_coll_comm

  ! --- procedures ---------------------------------------------------------------
  public :: cc_coll_comm_create, cc_coll_comm_destroy, cc_coll_comm_rank, cc_coll_comm_size
  public :: cc_coll_allreduce, cc_coll_allreduce_inplace, cc_coll_allreduce_raw
  public :: cc_coll_reduce_scatter, cc_coll_reduce_scatter_inplace, cc_coll_reduce_scatter_raw
  public :: cc_coll_status_string, cc_coll_last_error, cc_coll_version_string, cc_coll_check_version
  public :: cc_coll_ef_bytes, cc_coll_ef_reset_all
  public :: cc_coll_comm_get_stats, cc_coll_comm_reset_stats, cc_coll_build_flags

  ! cc_coll_allreduce(sendbuf, recvbuf, count, op, handle, ierr [, params])
  interface cc_coll_allreduce
    module procedure cc_coll_allreduce_f32, cc_coll_allreduce_f64
  end interface cc_coll_allreduce

  ! cc_coll_allreduce_inplace(buf, count, op, handle, ierr [, params])
  interface cc_coll_allreduce_inplace
    module procedure cc_coll_allreduce_inplace_f32, cc_coll_allreduce_inplace_f64
  end interface cc_coll_allreduce_inplace

  ! cc_coll_reduce_scatter(sendbuf, recvbuf, recvcount, op, handle, ierr [, params])
  interface cc_coll_reduce_scatter
    module procedure cc_coll_reduce_scatter_f32, cc_coll_reduce_scatter_f64
  end interface cc_coll_reduce_scatter

  ! cc_coll_reduce_scatter_inplace(buf, recvcount, op, handle, ierr [, params])
  interface cc_coll_reduce_scatter_inplace
    module procedure cc_coll_reduce_scatter_inplace_f32, cc_coll_reduce_scatter_inplace_f64
  end interface cc_coll_reduce_scatter_inplace

  ! --- the C functions (include/cc_coll.h) --------------------------------------
  interface
    function c_status_string(status) bind(C, name="cc_coll_status_string") result(s)
      import :: c_int, c_ptr
      integer(c_int), value :: status
      type(c_ptr) :: s
    end function c_status_string

    function c_last_error() bind(C, name="cc_coll_last_error") result(s)
      import :: c_ptr
      type(c_ptr) :: s
    end function c_last_error

    function c_version_string() bind(C, name="cc_coll_version_string") result(s)
      import :: c_ptr
      type(c_ptr) :: s
    end function c_version_string

    function c_check_version_numbers(header_major, header_minor) &
        bind(C, name="cc_coll_check_version_numbers") result(status)
      import :: c_int
      integer(c_int), value :: header_major, header_minor
      integer(c_int) :: status
    end function c_check_version_numbers

    function c_comm_create_fint_versioned(mpi_comm, comm, header_major, header_minor) &
        bind(C, name="cc_coll_comm_create_fint_versioned") result(status)
      import :: c_int, c_ptr
      integer(c_int), value :: mpi_comm             ! MPI_Fint
      type(c_ptr), intent(out) :: comm              ! cc_coll_comm_h *
      integer(c_int), value :: header_major, header_minor
      integer(c_int) :: status
    end function c_comm_create_fint_versioned

    function c_comm_destroy(comm) bind(C, name="cc_coll_comm_destroy") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: comm
      integer(c_int) :: status
    end function c_comm_destroy

    function c_comm_rank(comm, rank) bind(C, name="cc_coll_comm_rank") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: comm
      integer(c_int), intent(out) :: rank
      integer(c_int) :: status
    end function c_comm_rank

    function c_comm_size(comm, size) bind(C, name="cc_coll_comm_size") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: comm
      integer(c_int), intent(out) :: size
      integer(c_int) :: status
    end function c_comm_size

    function c_allreduce(sendbuf, recvbuf, count, dtype, op, params, comm, stream) &
        bind(C, name="cc_coll_allreduce") result(status)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: sendbuf, recvbuf
      integer(c_size_t), value :: count
      integer(c_int), value :: dtype, op
      type(c_ptr), value :: params, comm, stream
      integer(c_int) :: status
    end function c_allreduce

    function c_reduce_scatter(sendbuf, recvbuf, recvcount, dtype, op, params, comm, stream) &
        bind(C, name="cc_coll_reduce_scatter") result(status)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: sendbuf, recvbuf
      integer(c_size_t), value :: recvcount
      integer(c_int), value :: dtype, op
      type(c_ptr), value :: params, comm, stream
      integer(c_int) :: status
    end function c_reduce_scatter

    function c_ef_bytes(comm, bytes) bind(C, name="cc_coll_ef_bytes") result(status)
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: comm
      integer(c_int64_t), intent(out) :: bytes
      integer(c_int) :: status
    end function c_ef_bytes

    function c_ef_reset_all(comm) bind(C, name="cc_coll_ef_reset_all") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: comm
      integer(c_int) :: status
    end function c_ef_reset_all

    function c_comm_get_stats(comm, stats) bind(C, name="cc_coll_comm_get_stats") result(status)
      import :: c_int, c_ptr, cc_coll_stats
      type(c_ptr), value :: comm
      type(cc_coll_stats), intent(inout) :: stats
      integer(c_int) :: status
    end function c_comm_get_stats

    function c_comm_reset_stats(comm) bind(C, name="cc_coll_comm_reset_stats") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: comm
      integer(c_int) :: status
    end function c_comm_reset_stats

    function c_build_flags() bind(C, name="cc_coll_build_flags") result(flags)
      import :: c_int
      integer(c_int) :: flags                       ! unsigned
    end function c_build_flags

    function c_strlen(s) bind(C, name="strlen") result(n)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: n
    end function c_strlen
  end interface

contains

  ! --- strings ------------------------------------------------------------------

  ! A copy of the NUL-terminated C string at p ('' for NULL).
  function c_to_f_string(p) result(s)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: s
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n

    if (.not. c_associated(p)) then
      s = ''
      return
    end if
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: s)
    do i = 1, n
      s(i:i) = chars(i)
    end do
  end function c_to_f_string

  ! "CC_COLL_ERR_NAME: description" for a status code (also for unknown codes).
  function cc_coll_status_string(code) result(s)
    integer, intent(in) :: code
    character(len=:), allocatable :: s
    s = c_to_f_string(c_status_string(int(code, c_int)))
  end function cc_coll_status_string

  ! The calling thread's message for its most recent libcc_coll call: '' after
  ! a success, else which argument or MPI call failed and why.
  function cc_coll_last_error() result(s)
    character(len=:), allocatable :: s
    s = c_to_f_string(c_last_error())
  end function cc_coll_last_error

  ! "MAJOR.MINOR.PATCH" of the libcc_coll the program runs with.
  function cc_coll_version_string() result(s)
    character(len=:), allocatable :: s
    s = c_to_f_string(c_version_string())
  end function cc_coll_version_string

  ! CC_COLL_OK when libcc_coll can serve this module's version (same major,
  ! library minor >= the module's), else CC_COLL_ERR_VERSION_MISMATCH.
  subroutine cc_coll_check_version(ierr)
    integer, intent(out) :: ierr
    ierr = c_check_version_numbers(CC_COLL_VERSION_MAJOR, CC_COLL_VERSION_MINOR)
  end subroutine cc_coll_check_version

  ! CC_COLL_BUILD_CUDA / CC_COLL_BUILD_FORTRAN bits of the library build.
  function cc_coll_build_flags() result(flags)
    integer :: flags
    flags = int(c_build_flags())
  end function cc_coll_build_flags

  ! --- communicator ---------------------------------------------------------------

  ! Creates a libcc_coll communicator over the MPI communicator `comm`, an
  ! integer handle as `use mpi` gives (with mpi_f08, pass comm%MPI_VAL).
  ! Collective over comm.
  subroutine cc_coll_comm_create(comm, handle, ierr)
    integer, intent(in) :: comm
    type(cc_coll_comm), intent(out) :: handle
    integer, intent(out) :: ierr
    type(c_ptr) :: h

    h = c_null_ptr
    ierr = c_comm_create_fint_versioned(int(comm, c_int), h, CC_COLL_VERSION_MAJOR, CC_COLL_VERSION_MINOR)
    handle%ptr = c_null_ptr
    if (ierr == CC_COLL_OK) handle%ptr = h
  end subroutine cc_coll_comm_create

  ! Frees the communicator (local, before MPI_Finalize). On success the handle
  ! is reset to null; destroying it again returns CC_COLL_ERR_INVALID_COMM.
  subroutine cc_coll_comm_destroy(handle, ierr)
    type(cc_coll_comm), intent(inout) :: handle
    integer, intent(out) :: ierr
    ierr = c_comm_destroy(handle%ptr)
    if (ierr == CC_COLL_OK) handle%ptr = c_null_ptr
  end subroutine cc_coll_comm_destroy

  subroutine cc_coll_comm_rank(handle, rank, ierr)
    type(cc_coll_comm), intent(in) :: handle
    integer, intent(out) :: rank, ierr
    integer(c_int) :: r
    r = -1
    ierr = c_comm_rank(handle%ptr, r)
    rank = int(r)
  end subroutine cc_coll_comm_rank

  subroutine cc_coll_comm_size(handle, size, ierr)
    type(cc_coll_comm), intent(in) :: handle
    integer, intent(out) :: size, ierr
    integer(c_int) :: s
    s = -1
    ierr = c_comm_size(handle%ptr, s)
    size = int(s)
  end subroutine cc_coll_comm_size

  ! --- allreduce ----------------------------------------------------------------------

  ! The one place the C allreduce is called. Argument errors found here (a
  ! negative count, a count larger than a buffer) return
  ! CC_COLL_ERR_INVALID_ARG without calling the library; its last-error
  ! message is then cleared rather than left from an earlier call.
  function allreduce_c(sendbuf, recvbuf, count, dtype, op, handle, params) result(status)
    type(c_ptr), intent(in) :: sendbuf, recvbuf
    integer, intent(in) :: count
    integer(c_int), intent(in) :: dtype
    integer, intent(in) :: op
    type(cc_coll_comm), intent(in) :: handle
    type(cc_coll_params), intent(in), optional, target :: params
    integer :: status
    type(c_ptr) :: p

    if (count < 0) then
      status = fortran_arg_error()
      return
    end if
    p = c_null_ptr
    if (present(params)) p = c_loc(params)
    status = c_allreduce(sendbuf, recvbuf, int(count, c_size_t), dtype, int(op, c_int), p, handle%ptr, c_null_ptr)
  end function allreduce_c

  ! CC_COLL_ERR_INVALID_ARG for an argument error the Fortran layer finds.
  function fortran_arg_error() result(status)
    integer :: status
    ! Any successful library call clears the calling thread's message.
    status = c_check_version_numbers(CC_COLL_VERSION_MAJOR, CC_COLL_VERSION_MINOR)
    status = CC_COLL_ERR_INVALID_ARG
  end function fortran_arg_error

  ! The buffers are assumed-rank and contiguous: an array of any rank (or a
  ! scalar) of the element type is accepted, and `count` elements, at most
  ! size(buffer), are reduced. A non-contiguous actual argument (an array
  ! section with strides) is passed as a compiler temporary, copied in and
  ! (for recvbuf / buf) back out.
  subroutine cc_coll_allreduce_f32(sendbuf, recvbuf, count, op, handle, ierr, params)
    real(c_float), intent(in), target, contiguous :: sendbuf(..)
    real(c_float), intent(inout), target, contiguous :: recvbuf(..)
    integer, intent(in) :: count, op
    type(cc_coll_comm), intent(in) :: handle
    integer, intent(out) :: ierr
    type(cc_coll_params), intent(in), optional :: params
    if (count > size(sendbuf) .or. count > size(recvbuf)) then
      ierr = fortran_arg_error()
    else if (count <= 0) then
      ierr = allreduce_c(c_null_ptr, c_null_ptr, count, CC_COLL_F32, op, handle, params)
    else
      ierr = allreduce_c(c_loc(sendbuf), c_loc(recvbuf), count, CC_COLL_F32, op, handle, params)
    end if
  end subroutine cc_coll_allreduce_f32

  subroutine cc_coll_allreduce_f64(sendbuf, recvbuf, count, op, handle, ierr, params)
    real(c_double), intent(in), target, contiguous :: sendbuf(..)
    real(c_double), intent(inout), target, contiguous :: recvbuf(..)
    integer, intent(in) :: count, op
    type(cc_coll_comm), intent(in) :: handle
    integer, intent(out) :: ierr
    type(cc_coll_params), intent(in), optional :: params
    if (count > size(sendbuf) .or. count > size(recvbuf)) then
      ierr = fortran_arg_error()
    else if (count <= 0) then
      ierr = allreduce_c(c_null_ptr, c_null_ptr, count, CC_COLL_F64, op, handle, params)
    else
      ierr = allreduce_c(c_loc(sendbuf), c_loc(recvbuf), count, CC_COLL_F64, op, handle, params)
    end if
  end subroutine cc_coll_allreduce_f64

  ! In place: buf is both the input and the result (sendbuf == recvbuf in C).
  subroutine cc_coll_allreduce_inplace_f32(buf, count, op, handle, ierr, params)
    real(c_float), intent(inout), target, contiguous :: buf(..)
    integer, intent(in) :: count, op
    type(cc_coll_comm), intent(in) :: handle
    integer, intent(out) :: ierr
    type(cc_coll_params), intent(in), optional :: params
    if (count > size(buf)) then
      ierr = fortran_arg_error()
    else if (count <= 0) then
      ierr = allreduce_c(c_null_ptr, c_null_ptr, count, CC_COLL_F32, op, handle, params)
    else
      ierr = allreduce_c(c_loc(buf), c_loc(buf), count, CC_COLL_F32, op, handle, params)
    end if
  end subroutine cc_coll_allreduce_inplace_f32

  subroutine cc_coll_allreduce_inplace_f64(buf, count, op, handle, ierr, params)
    real(c_double), intent(inout), target, contiguous :: buf(..)
    integer, intent(in) :: count, op
    type(cc_coll_comm), intent(in) :: handle
    integer, intent(out) :: ierr
    type(cc_coll_params), intent(in), optional :: params
    if (count > size(buf)) then
      ierr = fortran_arg_error()
    else if (count <= 0) then
      ierr = allreduce_c(c_null_ptr, c_null_ptr, count, CC_COLL_F64, op, handle, params)
    else
      ierr = allreduce_c(c_loc(buf), c_loc(buf), count, CC_COLL_F64, op, handle, params)
    end if
  end subroutine cc_coll_allreduce_inplace_f64

  ! The C call with explicit dtype and C addresses (c_loc), for element types
  ! Fortran has no kind for: CC_COLL_F16 / CC_COLL_BF16 data held in
  ! integer(c_int16_t) arrays. sendbuf == recvbuf reduces in place.
  subroutine cc_coll_allreduce_raw(sendbuf, recvbuf, count, dtype, op, handle, ierr, params)
    type(c_ptr), intent(in) :: sendbuf, recvbuf
    integer, intent(in) :: count, dtype, op
    type(cc_coll_comm), intent(in) :: handle
    integer, intent(out) :: ierr
    type(cc_coll_params), intent(in), optional :: params
    ierr = allreduce_c(sendbuf, recvbuf, count, int(dtype, c_int), op, handle, params)
  end subroutine cc_coll_allreduce_raw

  ! --- reduce-scatter ------------------------------------------------------------------

  ! The one place the C reduce-scatter is called; a negative recvcount is
  ! CC_COLL_ERR_INVALID_ARG from the Fortran layer.
  function reduce_scatter_c(sendbuf, recvbuf, recvcount, dtype, op, handle, params) result(status)
    type(c_ptr), intent(in) :: sendbuf, recvbuf
    integer, intent(in) :: recvcount
    integer(c_int), intent(in) :: dtype
    integer, intent(in) :: op
    type(cc_coll_comm), intent(in) :: handle
    type(cc_coll_params), intent(in), optional, target :: params
    integer :: status
    type(c_ptr) :: p

    if (recvcount < 0) then
      status = fortran_arg_error()
      return
    end if
    p = c_null_ptr
    if (present(params)) p = c_loc(params)
    status = c_reduce_scatter(sendbuf, recvbuf, int(recvcount, c_size_t), dtype, int(op, c_int), p, &
                              handle%ptr, c_null_ptr)
  end function reduce_scatter_c

  ! Whether `recvcount` times the communicator size fits in `nsend` elements
  ! and `recvcount` in `nrecv`. An invalid handle passes (the C call then
  ! reports it, with its message).
  function reduce_scatter_fits(handle, recvcount, nsend, nrecv) result(ok)
    type(cc_coll_comm), intent(in) :: handle
    integer, intent(in) :: recvcount
    integer(c_int64_t), intent(in) :: nsend, nrecv
    logical :: ok
    integer(c_int) :: nranks

    ok = .true.
    if (recvcount <= 0) return
    nranks = -1
    if (c_comm_size(handle%ptr, nranks) /= CC_COLL_OK) return
    ok = int(recvcount, c_int64_t) * int(nranks, c_int64_t) <= nsend .and. int(recvcount, c_int64_t) <= nrecv
  end function reduce_scatter_fits

  ! Like MPI_Reduce_scatter_block: sendbuf holds recvcount x P elements (P =
  ! the communicator size), P blocks of recvcount in array element order;
  ! rank r gets the reduction of every rank's block r in the first recvcount
  ! elements of recvbuf. Buffers are assumed-rank and contiguous as for
  ! cc_coll_allreduce; a sendbuf shorter than recvcount x P or a recvbuf
  ! shorter than recvcount is CC_COLL_ERR_INVALID_ARG.
  subroutine cc_coll_reduce_scatter_f32(sendbuf, recvbuf, recvcount, op, handle, ierr, params)
    real(c_float), intent(in), target, contiguous :: sendbuf(..)
    real(c_float), intent(inout), target, contiguous :: recvbuf(..)
    integer, intent(in) :: recvcount, op
    type(cc_coll_comm), intent(in) :: handle
    integer, intent(out) :: ierr
    type(cc_coll_params), intent(in), optional :: params
    if (.not. reduce_scatter_fits(handle, recvcount, size(sendbuf, kind=c_int64_t), &
                                  size(recvbuf, kind=c_int64_t))) then
      ierr = fortran_arg_error()
    else if (recvcount <= 0) then
      ierr = reduce_scatter_c(c_null_ptr, c_null_ptr, recvcount, CC_COLL_F32, op, handle, params)
    else
      ierr = reduce_scatter_c(c_loc(sendbuf), c_loc(recvbuf), recvcount, CC_COLL_F32, op, handle, params)
    end if
  end subroutine cc_coll_reduce_scatter_f32

  subroutine cc_coll_reduce_scatter_f64(sendbuf, recvbuf, recvcount, op, handle, ierr, params)
    real(c_double), intent(in), target, contiguous :: sendbuf(..)
    real(c_double), intent(inout), target, contiguous :: recvbuf(..)
    integer, intent(in) :: recvcount, op
    type(cc_coll_comm), intent(in) :: handle
    integer, intent(out) :: ierr
    type(cc_coll_params), intent(in), optional :: params
    if (.not. reduce_scatter_fits(handle, recvcount, size(sendbuf, kind=c_int64_t), &
                                  size(recvbuf, kind=c_int64_t))) then
      ierr = fortran_arg_error()
    else if (recvcount <= 0) then
      ierr = reduce_scatter_c(c_null_ptr, c_null_ptr, recvcount, CC_COLL_F64, op, handle, params)
    else
      ierr = reduce_scatter_c(c_loc(sendbuf), c_loc(recvbuf), recvcount, CC_COLL_F64, op, handle, params)
    end if
  end subroutine cc_coll_reduce_scatter_f64

  ! In place: buf holds recvcount x P elements on entry and this rank's
  ! reduced block in its first recvcount elements on return (sendbuf ==
  ! recvbuf in C); the rest of buf is unspecified.
  subroutine cc_coll_reduce_scatter_inplace_f32(buf, recvcount, op, handle, ierr, params)
    real(c_float), intent(inout), target, contiguous :: buf(..)
    integer, intent(in) :: recvcount, op
    type(cc_coll_comm), intent(in) :: handle
    integer, intent(out) :: ierr
    type(cc_coll_params), intent(in), optional :: params
    if (.not. reduce_scatter_fits(handle, recvcount, size(buf, kind=c_int64_t), size(buf, kind=c_int64_t))) then
      ierr = fortran_arg_error()
    else if (recvcount <= 0) then
      ierr = reduce_scatter_c(c_null_ptr, c_null_ptr, recvcount, CC_COLL_F32, op, handle, params)
    else
      ierr = reduce_scatter_c(c_loc(buf), c_loc(buf), recvcount, CC_COLL_F32, op, handle, params)
    end if
  end subroutine cc_coll_reduce_scatter_inplace_f32

  subroutine cc_coll_reduce_scatter_inplace_f64(buf, recvcount, op, handle, ierr, params)
    real(c_double), intent(inout), target, contiguous :: buf(..)
    integer, intent(in) :: recvcount, op
    type(cc_coll_comm), intent(in) :: handle
    integer, intent(out) :: ierr
    type(cc_coll_params), intent(in), optional :: params
    if (.not. reduce_scatter_fits(handle, recvcount, size(buf, kind=c_int64_t), size(buf, kind=c_int64_t))) then
      ierr = fortran_arg_error()
    else if (recvcount <= 0) then
      ierr = reduce_scatter_c(c_null_ptr, c_null_ptr, recvcount, CC_COLL_F64, op, handle, params)
    else
      ierr = reduce_scatter_c(c_loc(buf), c_loc(buf), recvcount, CC_COLL_F64, op, handle, params)
    end if
  end subroutine cc_coll_reduce_scatter_inplace_f64

  ! The C call with explicit dtype and C addresses (c_loc), as
  ! cc_coll_allreduce_raw: for CC_COLL_F16 / CC_COLL_BF16 data in
  ! integer(c_int16_t) arrays. sendbuf == recvbuf reduces in place. No size
  ! checks: sendbuf must hold recvcount x P elements, recvbuf recvcount.
  subroutine cc_coll_reduce_scatter_raw(sendbuf, recvbuf, recvcount, dtype, op, handle, ierr, params)
    type(c_ptr), intent(in) :: sendbuf, recvbuf
    integer, intent(in) :: recvcount, dtype, op
    type(cc_coll_comm), intent(in) :: handle
    integer, intent(out) :: ierr
    type(cc_coll_params), intent(in), optional :: params
    ierr = reduce_scatter_c(sendbuf, recvbuf, recvcount, int(dtype, c_int), op, handle, params)
  end subroutine cc_coll_reduce_scatter_raw

  ! --- error-feedback store and statistics ---------------------------------------------

  ! Bytes held by all residuals of the communicator on this rank.
  subroutine cc_coll_ef_bytes(handle, bytes, ierr)
    type(cc_coll_comm), intent(in) :: handle
    integer(c_int64_t), intent(out) :: bytes
    integer, intent(out) :: ierr
    bytes = 0
    ierr = c_ef_bytes(handle%ptr, bytes)
  end subroutine cc_coll_ef_bytes

  ! Drops every residual of the communicator.
  subroutine cc_coll_ef_reset_all(handle, ierr)
    type(cc_coll_comm), intent(in) :: handle
    integer, intent(out) :: ierr
    ierr = c_ef_reset_all(handle%ptr)
  end subroutine cc_coll_ef_reset_all

  ! Fills the fields of `stats` whose bits are set in stats%mask.
  subroutine cc_coll_comm_get_stats(handle, stats, ierr)
    type(cc_coll_comm), intent(in) :: handle
    type(cc_coll_stats), intent(inout) :: stats
    integer, intent(out) :: ierr
    ierr = c_comm_get_stats(handle%ptr, stats)
  end subroutine cc_coll_comm_get_stats

  subroutine cc_coll_comm_reset_stats(handle, ierr)
    type(cc_coll_comm), intent(in) :: handle
    integer, intent(out) :: ierr
    ierr = c_comm_reset_stats(handle%ptr)
  end subroutine cc_coll_comm_reset_stats

end module cc_coll
