! cc_coll — the Fortran interface to libcc_coll.
!
! `use cc_coll` gives the C ABI of include/cc_coll.h through ISO_C_BINDING:
! the enumerators as integer(c_int) parameters, the params and stats structs
! as bind(C) derived types, and Fortran procedures that take arrays and
! Fortran (integer) MPI communicator handles. Every procedure returns the C
! status in `ierr` (CC_COLL_OK = 0, negative on error). The non-blocking
! collectives (cc_coll_iallreduce and the others) return a
! type(cc_coll_request), completed with cc_coll_wait, cc_coll_test or
! cc_coll_waitall and freed with cc_coll_request_free. See docs/fortran.md.
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
  use, intrinsic :: iso_c_binding, only: c_int, c_int8_t, c_int64_t, c_size_t, c_float, c_double, c_char, &
                                         c_null_char, c_ptr, c_null_ptr, c_loc, c_associated, c_f_pointer
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
  integer(c_int), parameter, public :: CC_COLL_ERR_CUDA                = -18

  ! --- cc_coll_dtype_t, cc_coll_op_t, cc_coll_method_t, cc_coll_sparsifier_t ---
  integer(c_int), parameter, public :: CC_COLL_F32  = 0
  integer(c_int), parameter, public :: CC_COLL_F64  = 1
  integer(c_int), parameter, public :: CC_COLL_F16  = 2
  integer(c_int), parameter, public :: CC_COLL_BF16 = 3
  integer(c_int), parameter, public :: CC_COLL_SUM = 0
  integer(c_int), parameter, public :: CC_COLL_AVG = 1
  ! CC_COLL_METHOD_<NAME>, one for each enumerator of cc_coll_method_t: the
  ! build generates this file from include/cc_coll.h (c_api/fortran/CMakeLists.txt).
#include "cc_coll_methods.inc"
  ! cc_coll_method_cap_t: the bits of cc_coll_method_caps(method).
  integer(c_int), parameter, public :: CC_COLL_METHOD_CAP_LOSSY          = 1   ! results may differ from MPI's
  integer(c_int), parameter, public :: CC_COLL_METHOD_CAP_REDUCE_SCATTER = 2   ! reduce-scatter runs it
  integer(c_int), parameter, public :: CC_COLL_METHOD_CAP_P2P            = 4   ! cc_coll_send compresses with it
  integer(c_int), parameter, public :: CC_COLL_METHOD_CAP_MATRIX         = 8   ! views a tensor as rows x cols
  integer(c_int), parameter, public :: CC_COLL_METHOD_CAP_STATE          = 16  ! per-tensor state besides residuals
  integer(c_int), parameter, public :: CC_COLL_METHOD_CAP_SELECTS        = 32  ! picks another method per call
  integer(c_int), parameter, public :: CC_COLL_METHOD_CAP_AUTO_CANDIDATE = 64  ! CC_COLL_AUTO_METHOD may name it
  integer(c_int), parameter, public :: CC_COLL_METHOD_CAP_DENSITY        = 128 ! takes density; 1 keeps everything
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
  integer(c_int64_t), parameter, public :: CC_COLL_PARAMS_FIELD_SHAPE         = 256_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_PARAMS_FIELD_RANK          = 512_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_PARAMS_FIELD_WARM_START    = 1024_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_PARAMS_FIELD_START_ITER    = 2048_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_PARAMS_FIELD_MIN_COMPRESSION_RATE = 4096_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_STATS_FIELD_CALLS              = 1_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_STATS_FIELD_BYTES_UNCOMPRESSED = 2_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_STATS_FIELD_BYTES_WIRE         = 4_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_STATS_FIELD_TIME_COMPRESS      = 8_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_STATS_FIELD_TIME_COMMUNICATE   = 16_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_STATS_FIELD_TIME_DECOMPRESS    = 32_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_STATS_FIELD_SKETCH_ELEMENTS    = 64_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_STATS_FIELD_SKETCH_PEELED      = 128_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_STATS_FIELD_TIME_TOTAL         = 256_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_STATS_FIELD_AUTO_CALLS         = 512_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_STATS_FIELD_AUTO_LOSSY_CALLS   = 1024_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_STATS_FIELD_AUTO_PREDICTED     = 2048_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_STATS_FIELD_AUTO_EXPLORED_CALLS = 4096_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_STATS_FIELD_AUTO_MEASURED      = 8192_c_int64_t
  integer(c_int64_t), parameter, public :: CC_COLL_STATS_FIELD_ALL                = 16383_c_int64_t

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
    integer(c_int64_t) :: seed          = 0  ! SKETCH hash seed, LOWRANK Gaussian seed; same on every rank
    ! LOWRANK (PowerSGD). The library views the buffer as a row-major (C
    ! order) rows x cols matrix: a Fortran array a(n, m) is the m x n matrix
    ! a^T. cc_coll_set_lowrank_shape(params, shape(a)) sets rows = m, cols = n.
    ! Without SHAPE an allreduce sends the tensor densely (1-D, a bias).
    integer(c_int64_t) :: rows          = 0  ! SHAPE: rows of the matrix, >= 1; 0 (cols 0): near-square
    integer(c_int64_t) :: cols          = 0  ! SHAPE: columns; 0 = count / rows
    integer(c_int)     :: rank          = 0  ! RANK: target rank r >= 1 (r = min(rows, cols, rank))
    integer(c_int)     :: warm_start    = 0  ! WARM_START: 1 = start from the previous Q, 0 = fresh
    integer(c_int64_t) :: start_iter    = 0  ! START_ITER: the first start_iter calls are dense
    real(c_double)     :: min_compression_rate = 0  ! MIN_COMPRESSION_RATE: compress when
                                                    ! (rows + cols) r rate < rows cols; >= 1
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
    real(c_double)     :: time_total         = 0  ! entry to return of every call
    integer(c_int64_t) :: auto_calls         = 0  ! calls with method AUTO
    integer(c_int64_t) :: auto_lossy_calls   = 0  ! of those, compressed by the cost model's choice
    real(c_double)     :: auto_predicted     = 0  ! the model's predicted seconds of those choices
    integer(c_int64_t) :: auto_explored_calls = 0  ! of those, run with the runner-up to check the model
    real(c_double)     :: auto_measured      = 0  ! the seconds those calls took on this rank
  end type cc_coll_stats

  ! A libcc_coll communicator: the C cc_coll_comm_h. `ptr` is that handle, for
  ! calling C functions this module does not wrap.
  type, public :: cc_coll_comm
    type(c_ptr) :: ptr = c_null_ptr
  end type cc_coll_comm

  ! A non-blocking collective in flight: the C cc_coll_request_h. `ptr` is
  ! that handle; null before a collective is posted into it and after
  ! cc_coll_request_free.
  type, public :: cc_coll_request
    type(c_ptr) :: ptr = c_null_ptr
  end type cc_coll_request

  ! --- procedures ---------------------------------------------------------------
  public :: cc_coll_comm_create, cc_coll_comm_destroy, cc_coll_comm_rank, cc_coll_comm_size
  public :: cc_coll_allreduce, cc_coll_allreduce_inplace, cc_coll_allreduce_raw
  public :: cc_coll_reduce_scatter, cc_coll_reduce_scatter_inplace, cc_coll_reduce_scatter_raw
  public :: cc_coll_status_string, cc_coll_last_error, cc_coll_version_string, cc_coll_check_version
  public :: cc_coll_method_name, cc_coll_method_count, cc_coll_method_at, cc_coll_method_caps
  public :: cc_coll_method_summary, cc_coll_method_from_name
  public :: cc_coll_ef_bytes, cc_coll_ef_reset_all, cc_coll_state_bytes
  public :: cc_coll_state_size, cc_coll_state_export, cc_coll_state_import
  public :: cc_coll_comm_get_stats, cc_coll_comm_reset_stats, cc_coll_build_flags
  public :: cc_coll_allreduce_group, cc_coll_allreduce_group_inplace
  public :: cc_coll_set_lowrank_shape
  public :: cc_coll_lowrank_get_state, cc_coll_lowrank_get_state_raw
  public :: cc_coll_lowrank_set_q, cc_coll_lowrank_set_q_raw
  public :: cc_coll_send, cc_coll_send_raw, cc_coll_recv, cc_coll_recv_raw, cc_coll_p2p_tag_ub
  public :: cc_coll_lep_get_residual, cc_coll_lep_reset
  public :: cc_coll_iallreduce, cc_coll_iallreduce_inplace, cc_coll_iallreduce_raw
  public :: cc_coll_ireduce_scatter, cc_coll_ireduce_scatter_inplace, cc_coll_ireduce_scatter_raw
  public :: cc_coll_iallreduce_group, cc_coll_iallreduce_group_inplace
  public :: cc_coll_wait, cc_coll_test, cc_coll_waitall, cc_coll_request_status, cc_coll_request_free

  ! The generic procedures over real(c_float) and real(c_double) buffers: their
  ! specific procedures (_f32, _f64) come from one template each
  ! (cc_coll_typed.inc.in, cc_coll_group.inc.in), instantiated by the build.

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

  ! cc_coll_allreduce_group(sendbufs, recvbufs, counts, dtypes, op, handle, ierr [, params])
  ! counts: integer(c_size_t) or default integer.
  interface cc_coll_allreduce_group
    module procedure cc_coll_allreduce_group_size_t, cc_coll_allreduce_group_int
  end interface cc_coll_allreduce_group

  ! cc_coll_allreduce_group_inplace(bufs, counts, dtypes, op, handle, ierr [, params])
  interface cc_coll_allreduce_group_inplace
    module procedure cc_coll_allreduce_group_inplace_size_t, cc_coll_allreduce_group_inplace_int
  end interface cc_coll_allreduce_group_inplace

  ! cc_coll_iallreduce(sendbuf, recvbuf, count, op, handle, request, ierr [, params])
  interface cc_coll_iallreduce
    module procedure cc_coll_iallreduce_f32, cc_coll_iallreduce_f64
  end interface cc_coll_iallreduce

  ! cc_coll_iallreduce_inplace(buf, count, op, handle, request, ierr [, params])
  interface cc_coll_iallreduce_inplace
    module procedure cc_coll_iallreduce_inplace_f32, cc_coll_iallreduce_inplace_f64
  end interface cc_coll_iallreduce_inplace

  ! cc_coll_ireduce_scatter(sendbuf, recvbuf, recvcount, op, handle, request, ierr [, params])
  interface cc_coll_ireduce_scatter
    module procedure cc_coll_ireduce_scatter_f32, cc_coll_ireduce_scatter_f64
  end interface cc_coll_ireduce_scatter

  ! cc_coll_ireduce_scatter_inplace(buf, recvcount, op, handle, request, ierr [, params])
  interface cc_coll_ireduce_scatter_inplace
    module procedure cc_coll_ireduce_scatter_inplace_f32, cc_coll_ireduce_scatter_inplace_f64
  end interface cc_coll_ireduce_scatter_inplace

  ! cc_coll_iallreduce_group(sendbufs, recvbufs, counts, dtypes, op, handle, request, ierr [, params])
  interface cc_coll_iallreduce_group
    module procedure cc_coll_iallreduce_group_size_t, cc_coll_iallreduce_group_int
  end interface cc_coll_iallreduce_group

  ! cc_coll_iallreduce_group_inplace(bufs, counts, dtypes, op, handle, request, ierr [, params])
  interface cc_coll_iallreduce_group_inplace
    module procedure cc_coll_iallreduce_group_inplace_size_t, cc_coll_iallreduce_group_inplace_int
  end interface cc_coll_iallreduce_group_inplace

  ! cc_coll_lowrank_get_state(recvbuf, count, handle, ierr [, params, rows, cols, rank, calls, p, q])
  interface cc_coll_lowrank_get_state
    module procedure cc_coll_lowrank_get_state_f32, cc_coll_lowrank_get_state_f64
  end interface cc_coll_lowrank_get_state

  ! cc_coll_lowrank_set_q(recvbuf, count, q, handle, ierr [, params])
  interface cc_coll_lowrank_set_q
    module procedure cc_coll_lowrank_set_q_f32, cc_coll_lowrank_set_q_f64
  end interface cc_coll_lowrank_set_q

  ! cc_coll_send(buf, count, dest, tag, compress, handle, ierr [, params])
  interface cc_coll_send
    module procedure cc_coll_send_f32, cc_coll_send_f64
  end interface cc_coll_send

  ! cc_coll_recv(buf, count, source, tag, handle, ierr [, params])
  interface cc_coll_recv
    module procedure cc_coll_recv_f32, cc_coll_recv_f64
  end interface cc_coll_recv

  ! --- the C functions (include/cc_coll.h) --------------------------------------
  interface
    function c_status_string(status) bind(C, name="cc_coll_status_string") result(s)
      import :: c_int, c_ptr
      integer(c_int), value :: status
      type(c_ptr) :: s
    end function c_status_string

    function c_method_name(method) bind(C, name="cc_coll_method_name") result(s)
      import :: c_int, c_ptr
      integer(c_int), value :: method
      type(c_ptr) :: s
    end function c_method_name

    function c_method_count() bind(C, name="cc_coll_method_count") result(n)
      import :: c_int
      integer(c_int) :: n
    end function c_method_count

    function c_method_at(index, method) bind(C, name="cc_coll_method_at") result(status)
      import :: c_int
      integer(c_int), value :: index
      integer(c_int), intent(out) :: method         ! cc_coll_method_t *
      integer(c_int) :: status
    end function c_method_at

    function c_method_caps(method) bind(C, name="cc_coll_method_caps") result(caps)
      import :: c_int
      integer(c_int), value :: method
      integer(c_int) :: caps                        ! unsigned
    end function c_method_caps

    function c_method_summary(method) bind(C, name="cc_coll_method_summary") result(s)
      import :: c_int, c_ptr
      integer(c_int), value :: method
      type(c_ptr) :: s
    end function c_method_summary

    function c_method_from_name(name, method) bind(C, name="cc_coll_method_from_name") result(status)
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: name(*)  ! NUL-terminated
      integer(c_int), intent(out) :: method
      integer(c_int) :: status
    end function c_method_from_name

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

    ! Arrays travel as c_loc addresses, so that sendbufs and params can be NULL.
    function c_allreduce_group(ntensors, sendbufs, recvbufs, counts, dtypes, op, params, comm, stream) &
        bind(C, name="cc_coll_allreduce_group") result(status)
      import :: c_int, c_ptr, c_size_t
      integer(c_size_t), value :: ntensors
      type(c_ptr), value :: sendbufs, recvbufs, counts, dtypes   ! void **, void **, size_t *, int *
      integer(c_int), value :: op
      type(c_ptr), value :: params, comm, stream
      integer(c_int) :: status
    end function c_allreduce_group

    ! The non-blocking forms: the arguments of the blocking ones and the
    ! request (cc_coll_request_h *).
    function c_iallreduce(sendbuf, recvbuf, count, dtype, op, params, comm, stream, request) &
        bind(C, name="cc_coll_iallreduce") result(status)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: sendbuf, recvbuf
      integer(c_size_t), value :: count
      integer(c_int), value :: dtype, op
      type(c_ptr), value :: params, comm, stream
      type(c_ptr), intent(out) :: request
      integer(c_int) :: status
    end function c_iallreduce

    function c_ireduce_scatter(sendbuf, recvbuf, recvcount, dtype, op, params, comm, stream, request) &
        bind(C, name="cc_coll_ireduce_scatter") result(status)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: sendbuf, recvbuf
      integer(c_size_t), value :: recvcount
      integer(c_int), value :: dtype, op
      type(c_ptr), value :: params, comm, stream
      type(c_ptr), intent(out) :: request
      integer(c_int) :: status
    end function c_ireduce_scatter

    function c_iallreduce_group(ntensors, sendbufs, recvbufs, counts, dtypes, op, params, comm, stream, request) &
        bind(C, name="cc_coll_iallreduce_group") result(status)
      import :: c_int, c_ptr, c_size_t
      integer(c_size_t), value :: ntensors
      type(c_ptr), value :: sendbufs, recvbufs, counts, dtypes
      integer(c_int), value :: op
      type(c_ptr), value :: params, comm, stream
      type(c_ptr), intent(out) :: request
      integer(c_int) :: status
    end function c_iallreduce_group

    function c_test(request, done) bind(C, name="cc_coll_test") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: request
      integer(c_int), intent(out) :: done
      integer(c_int) :: status
    end function c_test

    function c_wait(request) bind(C, name="cc_coll_wait") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: request
      integer(c_int) :: status
    end function c_wait

    function c_waitall(n, requests, statuses) bind(C, name="cc_coll_waitall") result(status)
      import :: c_int, c_ptr, c_size_t
      integer(c_size_t), value :: n
      type(c_ptr), value :: requests, statuses   ! const cc_coll_request_h *, cc_coll_status_t *
      integer(c_int) :: status
    end function c_waitall

    function c_request_status(request, done, req_status, message) &
        bind(C, name="cc_coll_request_status") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: request
      integer(c_int), intent(out) :: done, req_status
      type(c_ptr), intent(out) :: message          ! const char **
      integer(c_int) :: status
    end function c_request_status

    function c_request_free(request) bind(C, name="cc_coll_request_free") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: request
      integer(c_int) :: status
    end function c_request_free

    function c_send(buf, count, dtype, dest, tag, compress, params, comm, stream) &
        bind(C, name="cc_coll_send") result(status)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: buf
      integer(c_size_t), value :: count
      integer(c_int), value :: dtype, dest, tag, compress
      type(c_ptr), value :: params, comm, stream
      integer(c_int) :: status
    end function c_send

    function c_recv(buf, count, dtype, source, tag, params, comm, stream) &
        bind(C, name="cc_coll_recv") result(status)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: buf
      integer(c_size_t), value :: count
      integer(c_int), value :: dtype, source, tag
      type(c_ptr), value :: params, comm, stream
      integer(c_int) :: status
    end function c_recv

    function c_p2p_tag_ub(comm, tag_ub) bind(C, name="cc_coll_p2p_tag_ub") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: comm
      integer(c_int), intent(out) :: tag_ub
      integer(c_int) :: status
    end function c_p2p_tag_ub

    function c_lep_get_residual(comm, dest, tag, params, count, dtype, out) &
        bind(C, name="cc_coll_lep_get_residual") result(status)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: comm
      integer(c_int), value :: dest, tag
      type(c_ptr), value :: params
      integer(c_size_t), value :: count
      integer(c_int), value :: dtype
      type(c_ptr), value :: out                     ! double *
      integer(c_int) :: status
    end function c_lep_get_residual

    function c_lep_reset(comm, dest, tag, params) bind(C, name="cc_coll_lep_reset") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: comm
      integer(c_int), value :: dest, tag
      type(c_ptr), value :: params
      integer(c_int) :: status
    end function c_lep_reset

    function c_lowrank_get_state(comm, params, recvbuf, count, dtype, rows, cols, rank, calls, p, q) &
        bind(C, name="cc_coll_lowrank_get_state") result(status)
      import :: c_int, c_int64_t, c_ptr, c_size_t
      type(c_ptr), value :: comm, params, recvbuf
      integer(c_size_t), value :: count
      integer(c_int), value :: dtype
      integer(c_int64_t), intent(out) :: rows, cols  ! uint64_t *
      integer(c_int), intent(out) :: rank
      integer(c_int64_t), intent(out) :: calls       ! uint64_t *
      type(c_ptr), value :: p, q                     ! double *, may be NULL
      integer(c_int) :: status
    end function c_lowrank_get_state

    function c_lowrank_set_q(comm, params, recvbuf, count, dtype, q) &
        bind(C, name="cc_coll_lowrank_set_q") result(status)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: comm, params, recvbuf
      integer(c_size_t), value :: count
      integer(c_int), value :: dtype
      type(c_ptr), value :: q                        ! const double *
      integer(c_int) :: status
    end function c_lowrank_set_q

    function c_ef_bytes(comm, bytes) bind(C, name="cc_coll_ef_bytes") result(status)
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: comm
      integer(c_int64_t), intent(out) :: bytes
      integer(c_int) :: status
    end function c_ef_bytes

    function c_state_bytes(comm, bytes) bind(C, name="cc_coll_state_bytes") result(status)
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: comm
      integer(c_int64_t), intent(out) :: bytes
      integer(c_int) :: status
    end function c_state_bytes

    function c_state_export(comm, buf, size) bind(C, name="cc_coll_state_export") result(status)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: comm
      type(c_ptr), value :: buf
      integer(c_size_t), intent(inout) :: size
      integer(c_int) :: status
    end function c_state_export

    function c_state_import(comm, buf, size) bind(C, name="cc_coll_state_import") result(status)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: comm
      type(c_ptr), value :: buf
      integer(c_size_t), value :: size
      integer(c_int) :: status
    end function c_state_import

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

  ! --- methods ------------------------------------------------------------------
  ! The library lists its methods: their ids are stable but may have gaps,
  ! so visit them as
  !   do i = 0, cc_coll_method_count() - 1
  !     call cc_coll_method_at(i, m, ierr)
  ! and ask cc_coll_method_caps(m) what a method can do rather than testing
  ! for particular ids.

  ! Lower-case name of a method ("none" for CC_COLL_METHOD_NONE), '' for a
  ! value that is not a method.
  function cc_coll_method_name(method) result(s)
    integer, intent(in) :: method
    character(len=:), allocatable :: s
    s = c_to_f_string(c_method_name(int(method, c_int)))
  end function cc_coll_method_name

  ! Number of methods of the library the program runs with, AUTO included.
  function cc_coll_method_count() result(n)
    integer :: n
    n = int(c_method_count())
  end function cc_coll_method_count

  ! The method at `index`, 0 <= index < cc_coll_method_count(), in id order
  ! (the C index). An index out of range is CC_COLL_ERR_INVALID_ARG, and
  ! method is then -1.
  subroutine cc_coll_method_at(index, method, ierr)
    integer, intent(in) :: index
    integer, intent(out) :: method, ierr
    integer(c_int) :: m
    m = -1
    ierr = c_method_at(int(index, c_int), m)
    method = -1
    if (ierr == CC_COLL_OK) method = int(m)
  end subroutine cc_coll_method_at

  ! The method's CC_COLL_METHOD_CAP_* bits (test one with iand), 0 for a
  ! value that is not a method.
  function cc_coll_method_caps(method) result(caps)
    integer, intent(in) :: method
    integer :: caps
    caps = int(c_method_caps(int(method, c_int)))
  end function cc_coll_method_caps

  ! One line that says what the method does, '' for a value that is not a
  ! method.
  function cc_coll_method_summary(method) result(s)
    integer, intent(in) :: method
    character(len=:), allocatable :: s
    s = c_to_f_string(c_method_summary(int(method, c_int)))
  end function cc_coll_method_summary

  ! The method named `name` ("topk", case-insensitive; trailing blanks are
  ! ignored). A name that is no method is CC_COLL_ERR_INVALID_METHOD, with
  ! the names in cc_coll_last_error(), and method is then -1.
  subroutine cc_coll_method_from_name(name, method, ierr)
    character(len=*), intent(in) :: name
    integer, intent(out) :: method, ierr
    character(kind=c_char), allocatable :: cname(:)
    integer(c_int) :: m
    integer :: i, n

    n = len_trim(name)
    allocate(cname(n + 1))
    do i = 1, n
      cname(i) = name(i:i)
    end do
    cname(n + 1) = c_null_char
    m = -1
    ierr = c_method_from_name(cname, m)
    method = -1
    if (ierr == CC_COLL_OK) method = int(m)
  end subroutine cc_coll_method_from_name

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

  ! The one place the C allreduce is called, blocking or, with `request`,
  ! non-blocking. Argument errors found here (a negative count, a count
  ! larger than a buffer) return CC_COLL_ERR_INVALID_ARG without calling the
  ! library; its last-error message is then cleared rather than left from
  ! an earlier call.
  function allreduce_c(sendbuf, recvbuf, count, dtype, op, handle, params, request) result(status)
    type(c_ptr), intent(in) :: sendbuf, recvbuf
    integer, intent(in) :: count
    integer(c_int), intent(in) :: dtype
    integer, intent(in) :: op
    type(cc_coll_comm), intent(in) :: handle
    type(cc_coll_params), intent(in), optional, target :: params
    type(cc_coll_request), intent(inout), optional :: request
    integer :: status
    type(c_ptr) :: p, r

    if (count < 0) then
      status = fortran_arg_error()
      return
    end if
    p = c_null_ptr
    if (present(params)) p = c_loc(params)
    if (present(request)) then
      r = c_null_ptr
      status = c_iallreduce(sendbuf, recvbuf, int(count, c_size_t), dtype, int(op, c_int), p, handle%ptr, &
                            c_null_ptr, r)
      request%ptr = r
    else
      status = c_allreduce(sendbuf, recvbuf, int(count, c_size_t), dtype, int(op, c_int), p, handle%ptr, c_null_ptr)
    end if
  end function allreduce_c

  ! CC_COLL_ERR_INVALID_ARG for an argument error the Fortran layer finds.
  function fortran_arg_error() result(status)
    integer :: status
    ! Any successful library call clears the calling thread's message.
    status = c_check_version_numbers(CC_COLL_VERSION_MAJOR, CC_COLL_VERSION_MINOR)
    status = CC_COLL_ERR_INVALID_ARG
  end function fortran_arg_error

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

  ! --- non-blocking allreduce ------------------------------------------------------------

  ! cc_coll_allreduce_raw started: C addresses and an explicit dtype.
  subroutine cc_coll_iallreduce_raw(sendbuf, recvbuf, count, dtype, op, handle, request, ierr, params)
    type(c_ptr), intent(in) :: sendbuf, recvbuf
    integer, intent(in) :: count, dtype, op
    type(cc_coll_comm), intent(in) :: handle
    type(cc_coll_request), intent(out) :: request
    integer, intent(out) :: ierr
    type(cc_coll_params), intent(in), optional :: params
    ierr = allreduce_c(sendbuf, recvbuf, count, int(dtype, c_int), op, handle, params, request)
  end subroutine cc_coll_iallreduce_raw

  ! --- reduce-scatter ------------------------------------------------------------------

  ! The one place the C reduce-scatter is called (non-blocking with
  ! `request`); a negative recvcount is CC_COLL_ERR_INVALID_ARG from the
  ! Fortran layer.
  function reduce_scatter_c(sendbuf, recvbuf, recvcount, dtype, op, handle, params, request) result(status)
    type(c_ptr), intent(in) :: sendbuf, recvbuf
    integer, intent(in) :: recvcount
    integer(c_int), intent(in) :: dtype
    integer, intent(in) :: op
    type(cc_coll_comm), intent(in) :: handle
    type(cc_coll_params), intent(in), optional, target :: params
    type(cc_coll_request), intent(inout), optional :: request
    integer :: status
    type(c_ptr) :: p, r

    if (recvcount < 0) then
      status = fortran_arg_error()
      return
    end if
    p = c_null_ptr
    if (present(params)) p = c_loc(params)
    if (present(request)) then
      r = c_null_ptr
      status = c_ireduce_scatter(sendbuf, recvbuf, int(recvcount, c_size_t), dtype, int(op, c_int), p, &
                                 handle%ptr, c_null_ptr, r)
      request%ptr = r
    else
      status = c_reduce_scatter(sendbuf, recvbuf, int(recvcount, c_size_t), dtype, int(op, c_int), p, &
                                handle%ptr, c_null_ptr)
    end if
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

  ! --- non-blocking reduce-scatter -------------------------------------------------------

  ! cc_coll_reduce_scatter_raw started.
  subroutine cc_coll_ireduce_scatter_raw(sendbuf, recvbuf, recvcount, dtype, op, handle, request, ierr, params)
    type(c_ptr), intent(in) :: sendbuf, recvbuf
    integer, intent(in) :: recvcount, dtype, op
    type(cc_coll_comm), intent(in) :: handle
    type(cc_coll_request), intent(out) :: request
    integer, intent(out) :: ierr
    type(cc_coll_params), intent(in), optional :: params
    ierr = reduce_scatter_c(sendbuf, recvbuf, recvcount, int(dtype, c_int), op, handle, params, request)
  end subroutine cc_coll_ireduce_scatter_raw

  ! --- grouped allreduce ---------------------------------------------------------------

  ! The one place the C grouped allreduce is called (non-blocking with
  ! `request`). Without sendbufs every tensor is reduced in place. Arrays of
  ! different sizes, a negative count or a params array of another size are
  ! CC_COLL_ERR_INVALID_ARG from the Fortran layer. The arrays are copied
  ! into contiguous C arrays (the descriptors of a few tensors, not their
  ! data), which the library copies in turn when it posts a request.
  function allreduce_group_c(recvbufs, counts, dtypes, op, handle, params, sendbufs, request) result(status)
    type(c_ptr), intent(in) :: recvbufs(:)
    integer(c_int64_t), intent(in) :: counts(:)
    integer(c_int), intent(in) :: dtypes(:)
    integer, intent(in) :: op
    type(cc_coll_comm), intent(in) :: handle
    type(cc_coll_params), intent(in), optional :: params(:)
    type(c_ptr), intent(in), optional :: sendbufs(:)
    type(cc_coll_request), intent(inout), optional :: request
    integer :: status
    type(c_ptr), allocatable, target :: sb(:), rb(:)
    integer(c_size_t), allocatable, target :: cn(:)
    integer(c_int), allocatable, target :: dt(:)
    type(cc_coll_params), allocatable, target :: pa(:)
    type(c_ptr) :: psend, precv, pcounts, pdtypes, pparams, r
    integer :: n

    n = size(recvbufs)
    if (size(counts) /= n .or. size(dtypes) /= n) then
      status = fortran_arg_error()
      return
    end if
    if (present(sendbufs)) then
      if (size(sendbufs) /= n) then
        status = fortran_arg_error()
        return
      end if
    end if
    if (present(params)) then
      if (size(params) /= n) then
        status = fortran_arg_error()
        return
      end if
    end if
    if (any(counts < 0)) then
      status = fortran_arg_error()
      return
    end if
    ! No tensors: every array NULL.
    psend = c_null_ptr
    precv = c_null_ptr
    pcounts = c_null_ptr
    pdtypes = c_null_ptr
    pparams = c_null_ptr
    if (n > 0) then
      rb = recvbufs
      cn = int(counts, c_size_t)
      dt = dtypes
      precv = c_loc(rb)
      pcounts = c_loc(cn)
      pdtypes = c_loc(dt)
      if (present(sendbufs)) then
        sb = sendbufs
        psend = c_loc(sb)
      end if
      if (present(params)) then
        pa = params
        pparams = c_loc(pa)
      end if
    end if
    if (present(request)) then
      r = c_null_ptr
      status = c_iallreduce_group(int(n, c_size_t), psend, precv, pcounts, pdtypes, int(op, c_int), pparams, &
                                  handle%ptr, c_null_ptr, r)
      request%ptr = r
    else
      status = c_allreduce_group(int(n, c_size_t), psend, precv, pcounts, pdtypes, int(op, c_int), pparams, &
                                 handle%ptr, c_null_ptr)
    end if
  end function allreduce_group_c

  ! The grouped forms, one set for each kind of counts: integer(c_size_t)
  ! (the _size_t procedures) and default integer (_int), written once in
  ! cc_coll_group.inc.in, which the build instantiates for each.
#include "cc_coll_group_size_t.inc"

#include "cc_coll_group_int.inc"

  ! --- requests --------------------------------------------------------------------------

  ! Until the collective of `request` has completed (cc_coll_wait); ierr is
  ! its status (its message in cc_coll_last_error()). Waiting again returns
  ! at once. A null or freed request is CC_COLL_ERR_INVALID_ARG.
  subroutine cc_coll_wait(request, ierr)
    type(cc_coll_request), intent(in) :: request
    integer, intent(out) :: ierr
    ierr = c_wait(request%ptr)
  end subroutine cc_coll_wait

  ! done = .true. once the collective has completed, and ierr is then its
  ! status; while it runs done = .false. and ierr = CC_COLL_OK (cc_coll_test;
  ! with caller-driven progress this advances the requests in flight).
  subroutine cc_coll_test(request, done, ierr)
    type(cc_coll_request), intent(in) :: request
    logical, intent(out) :: done
    integer, intent(out) :: ierr
    integer(c_int) :: d
    d = 0
    ierr = c_test(request%ptr, d)
    done = d /= 0
  end subroutine cc_coll_test

  ! Waits for every request (cc_coll_waitall); null ones are skipped. ierr:
  ! CC_COLL_OK when all succeeded, else the status of the first that failed
  ! (a freed one: CC_COLL_ERR_INVALID_ARG), once all have completed.
  ! statuses(i), when present (at least size(requests) elements), receives
  ! the status of requests(i).
  subroutine cc_coll_waitall(requests, ierr, statuses)
    type(cc_coll_request), intent(in) :: requests(:)
    integer, intent(out) :: ierr
    integer, intent(out), optional :: statuses(:)
    type(c_ptr), allocatable, target :: handles(:)
    integer(c_int), allocatable, target :: st(:)
    integer :: i, n

    n = size(requests)
    if (present(statuses)) then
      if (size(statuses) < n) then
        ierr = fortran_arg_error()
        return
      end if
    end if
    if (n == 0) then
      ierr = c_waitall(0_c_size_t, c_null_ptr, c_null_ptr)
      return
    end if
    allocate(handles(n), st(n))
    do i = 1, n
      handles(i) = requests(i)%ptr
    end do
    st = CC_COLL_OK
    ierr = c_waitall(int(n, c_size_t), c_loc(handles), c_loc(st))
    if (present(statuses)) statuses(1:n) = int(st)
  end subroutine cc_coll_waitall

  ! The request's state without advancing it (cc_coll_request_status): done,
  ! and once done its status and message ('' on success); while it runs
  ! status = CC_COLL_OK and message = ''.
  subroutine cc_coll_request_status(request, done, status, ierr, message)
    type(cc_coll_request), intent(in) :: request
    logical, intent(out) :: done
    integer, intent(out) :: status, ierr
    character(len=:), allocatable, intent(out), optional :: message
    integer(c_int) :: d, st
    type(c_ptr) :: m

    d = 0
    st = CC_COLL_OK
    m = c_null_ptr
    ierr = c_request_status(request%ptr, d, st, m)
    done = d /= 0
    status = int(st)
    if (present(message)) message = c_to_f_string(m)
  end subroutine cc_coll_request_status

  ! Frees the request (cc_coll_request_free); on success request%ptr is reset
  ! to null, and freeing it again is CC_COLL_ERR_INVALID_ARG. Freeing does
  ! not cancel: a request still in flight runs to its end, and its buffers
  ! stay in use until then (a blocking call on its communicator,
  ! cc_coll_comm_destroy or MPI_Finalize completes it).
  subroutine cc_coll_request_free(request, ierr)
    type(cc_coll_request), intent(inout) :: request
    integer, intent(out) :: ierr
    ierr = c_request_free(request%ptr)
    if (ierr == CC_COLL_OK) request%ptr = c_null_ptr
  end subroutine cc_coll_request_free

  ! --- LOWRANK ---------------------------------------------------------------------------

  ! Sets the LOWRANK matrix of `params` (CC_COLL_PARAMS_FIELD_SHAPE, rows and
  ! cols) to the one libcc_coll sees in an array of shape `extents`. The
  ! library reads the buffer in C order (row-major), so the last Fortran
  ! extent is the number of rows and the product of the others the number
  ! of columns: for a(n, m), rows = m and cols = n, the matrix is a^T. That
  ! is torch's view(shape[0], -1) of the same memory. Pass shape(a). A
  ! rank-1 array b(n) gives n x 1, which the compression test never
  ! compresses; leaving SHAPE unset sends it densely as well (1-D).
  subroutine cc_coll_set_lowrank_shape(params, extents)
    type(cc_coll_params), intent(inout) :: params
    integer, intent(in) :: extents(:)
    integer :: d

    params%mask = ior(params%mask, CC_COLL_PARAMS_FIELD_SHAPE)
    params%rows = 1
    params%cols = 1
    d = size(extents)
    if (d == 0) return
    params%rows = int(extents(d), c_int64_t)
    if (d > 1) params%cols = product(int(extents(1:d - 1), c_int64_t))
  end subroutine cc_coll_set_lowrank_shape

  ! The one place the C state query is called. p and q come back as the
  ! library's matrices, p(rows, rank) and q(cols, rank) with p(i, k) the C
  ! P[i - 1][k - 1] (the C arrays are row-major: they are transposed here).
  function lowrank_get_state_c(recvbuf, count, dtype, handle, params, rows, cols, rank, calls, p, q) result(status)
    type(c_ptr), intent(in) :: recvbuf
    integer, intent(in) :: count
    integer(c_int), intent(in) :: dtype
    type(cc_coll_comm), intent(in) :: handle
    type(cc_coll_params), intent(in), optional, target :: params
    integer(c_int64_t), intent(out), optional :: rows, cols, calls
    integer, intent(out), optional :: rank
    real(c_double), allocatable, intent(out), optional :: p(:, :), q(:, :)
    integer :: status
    integer(c_int64_t) :: r_rows, r_cols, r_calls
    integer(c_int) :: r_rank
    real(c_double), allocatable, target :: praw(:, :), qraw(:, :)
    type(c_ptr) :: pp

    r_rows = 0
    r_cols = 0
    r_calls = 0
    r_rank = 0
    if (present(rows)) rows = 0
    if (present(cols)) cols = 0
    if (present(calls)) calls = 0
    if (present(rank)) rank = 0
    if (count < 0) then
      status = fortran_arg_error()
      return
    end if
    pp = c_null_ptr
    if (present(params)) pp = c_loc(params)
    status = c_lowrank_get_state(handle%ptr, pp, recvbuf, int(count, c_size_t), dtype, r_rows, r_cols, r_rank, &
                                 r_calls, c_null_ptr, c_null_ptr)
    if (status /= CC_COLL_OK) return
    if ((present(p) .or. present(q)) .and. r_rank > 0) then
      ! Row-major rows x rank is column-major rank x rows.
      allocate(praw(r_rank, r_rows), qraw(r_rank, r_cols))
      praw = 0
      qraw = 0
      status = c_lowrank_get_state(handle%ptr, pp, recvbuf, int(count, c_size_t), dtype, r_rows, r_cols, r_rank, &
                                   r_calls, c_loc(praw), c_loc(qraw))
      if (status /= CC_COLL_OK) return
      if (present(p)) p = transpose(praw)
      if (present(q)) q = transpose(qraw)
    else
      if (present(p)) allocate(p(r_rows, 0))
      if (present(q)) allocate(q(r_cols, 0))
    end if
    if (present(rows)) rows = r_rows
    if (present(cols)) cols = r_cols
    if (present(calls)) calls = r_calls
    if (present(rank)) rank = int(r_rank)
  end function lowrank_get_state_c

  ! The same with a C address and an explicit dtype (tensors of a grouped
  ! call, F16 / BF16 data).
  subroutine cc_coll_lowrank_get_state_raw(recvbuf, count, dtype, handle, ierr, params, rows, cols, rank, calls, p, q)
    type(c_ptr), intent(in) :: recvbuf
    integer, intent(in) :: count, dtype
    type(cc_coll_comm), intent(in) :: handle
    integer, intent(out) :: ierr
    type(cc_coll_params), intent(in), optional :: params
    integer(c_int64_t), intent(out), optional :: rows, cols, calls
    integer, intent(out), optional :: rank
    real(c_double), allocatable, intent(out), optional :: p(:, :), q(:, :)
    ierr = lowrank_get_state_c(recvbuf, count, int(dtype, c_int), handle, params, rows, cols, rank, calls, p, q)
  end subroutine cc_coll_lowrank_get_state_raw

  ! Whether params fix the shape of a tensor's Q (SHAPE and RANK set and
  ! consistent with count), and if so that shape: cols x r.
  function lowrank_q_shape(count, params, cols, r) result(known)
    integer, intent(in) :: count
    type(cc_coll_params), intent(in), optional :: params
    integer(c_int64_t), intent(out) :: cols, r
    logical :: known
    integer(c_int64_t) :: rows

    known = .false.
    cols = 0
    r = 0
    if (.not. present(params)) return
    if (iand(params%mask, CC_COLL_PARAMS_FIELD_SHAPE) == 0 .or. iand(params%mask, CC_COLL_PARAMS_FIELD_RANK) == 0) &
      return
    rows = params%rows
    cols = params%cols
    if (rows <= 0 .or. cols < 0 .or. params%rank < 1 .or. count <= 0) return
    if (cols == 0) then
      if (mod(int(count, c_int64_t), rows) /= 0) return
      cols = int(count, c_int64_t) / rows
    end if
    if (rows * cols /= int(count, c_int64_t)) return
    r = min(rows, cols, int(params%rank, c_int64_t))
    known = .true.
  end function lowrank_q_shape

  ! The one place the C set_q is called: q(cols, r) is the library's Q
  ! matrix, passed to C row-major. When params set both the shape and the
  ! rank, a q of another shape is CC_COLL_ERR_INVALID_ARG here; otherwise q
  ! must be cols x r as the call resolves them (cc_coll_lowrank_get_state
  ! reports them), as in C.
  function lowrank_set_q_c(recvbuf, count, dtype, q, handle, params) result(status)
    type(c_ptr), intent(in) :: recvbuf
    integer, intent(in) :: count
    integer(c_int), intent(in) :: dtype
    real(c_double), intent(in) :: q(:, :)
    type(cc_coll_comm), intent(in) :: handle
    type(cc_coll_params), intent(in), optional, target :: params
    integer :: status
    real(c_double), allocatable, target :: qraw(:, :)
    integer(c_int64_t) :: kcols, kr
    type(c_ptr) :: pp

    if (count < 0 .or. size(q) == 0) then
      status = fortran_arg_error()
      return
    end if
    if (lowrank_q_shape(count, params, kcols, kr)) then
      if (size(q, 1, kind=c_int64_t) /= kcols .or. size(q, 2, kind=c_int64_t) /= kr) then
        status = fortran_arg_error()
        return
      end if
    end if
    pp = c_null_ptr
    if (present(params)) pp = c_loc(params)
    qraw = transpose(q)
    status = c_lowrank_set_q(handle%ptr, pp, recvbuf, int(count, c_size_t), dtype, c_loc(qraw))
  end function lowrank_set_q_c

  subroutine cc_coll_lowrank_set_q_raw(recvbuf, count, dtype, q, handle, ierr, params)
    type(c_ptr), intent(in) :: recvbuf
    integer, intent(in) :: count, dtype
    real(c_double), intent(in) :: q(:, :)
    type(cc_coll_comm), intent(in) :: handle
    integer, intent(out) :: ierr
    type(cc_coll_params), intent(in), optional :: params
    ierr = lowrank_set_q_c(recvbuf, count, int(dtype, c_int), q, handle, params)
  end subroutine cc_coll_lowrank_set_q_raw

  ! --- compressed point-to-point ----------------------------------------------------------

  ! The one place the C send is called; a negative count is
  ! CC_COLL_ERR_INVALID_ARG from the Fortran layer.
  function send_c(buf, count, dtype, dest, tag, compress, handle, params) result(status)
    type(c_ptr), intent(in) :: buf
    integer, intent(in) :: count, dest, tag
    integer(c_int), intent(in) :: dtype
    logical, intent(in) :: compress
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
    status = c_send(buf, int(count, c_size_t), dtype, int(dest, c_int), int(tag, c_int), &
                    merge(1_c_int, 0_c_int, compress), p, handle%ptr, c_null_ptr)
  end function send_c

  function recv_c(buf, count, dtype, source, tag, handle, params) result(status)
    type(c_ptr), intent(in) :: buf
    integer, intent(in) :: count, source, tag
    integer(c_int), intent(in) :: dtype
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
    status = c_recv(buf, int(count, c_size_t), dtype, int(source, c_int), int(tag, c_int), p, handle%ptr, c_null_ptr)
  end function recv_c

  subroutine cc_coll_send_raw(buf, count, dtype, dest, tag, compress, handle, ierr, params)
    type(c_ptr), intent(in) :: buf
    integer, intent(in) :: count, dtype, dest, tag
    logical, intent(in) :: compress
    type(cc_coll_comm), intent(in) :: handle
    integer, intent(out) :: ierr
    type(cc_coll_params), intent(in), optional :: params
    ierr = send_c(buf, count, int(dtype, c_int), dest, tag, compress, handle, params)
  end subroutine cc_coll_send_raw

  subroutine cc_coll_recv_raw(buf, count, dtype, source, tag, handle, ierr, params)
    type(c_ptr), intent(in) :: buf
    integer, intent(in) :: count, dtype, source, tag
    type(cc_coll_comm), intent(in) :: handle
    integer, intent(out) :: ierr
    type(cc_coll_params), intent(in), optional :: params
    ierr = recv_c(buf, count, int(dtype, c_int), source, tag, handle, params)
  end subroutine cc_coll_recv_raw

  ! The largest tag cc_coll_send / cc_coll_recv accept on the communicator.
  subroutine cc_coll_p2p_tag_ub(handle, tag_ub, ierr)
    type(cc_coll_comm), intent(in) :: handle
    integer, intent(out) :: tag_ub, ierr
    integer(c_int) :: t
    t = 0
    ierr = c_p2p_tag_ub(handle%ptr, t)
    tag_ub = int(t)
  end subroutine cc_coll_p2p_tag_ub

  ! Copies the lazy-error-propagation residual of the channel (dest,
  ! params%ef_key or tag) of `count` elements of `dtype` into the first
  ! `count` elements of residual (zeros when the channel has none).
  subroutine cc_coll_lep_get_residual(handle, dest, tag, count, dtype, residual, ierr, params)
    type(cc_coll_comm), intent(in) :: handle
    integer, intent(in) :: dest, tag, count, dtype
    real(c_double), intent(inout), target, contiguous :: residual(..)
    integer, intent(out) :: ierr
    type(cc_coll_params), intent(in), optional, target :: params
    type(c_ptr) :: p, out

    if (count < 0 .or. count > size(residual)) then
      ierr = fortran_arg_error()
      return
    end if
    p = c_null_ptr
    if (present(params)) p = c_loc(params)
    out = c_null_ptr
    if (count > 0) out = c_loc(residual)
    ierr = c_lep_get_residual(handle%ptr, int(dest, c_int), int(tag, c_int), p, int(count, c_size_t), &
                              int(dtype, c_int), out)
  end subroutine cc_coll_lep_get_residual

  ! Drops the residual (and warm-start Q) of the channel (dest, params%ef_key or tag).
  subroutine cc_coll_lep_reset(handle, dest, tag, ierr, params)
    type(cc_coll_comm), intent(in) :: handle
    integer, intent(in) :: dest, tag
    integer, intent(out) :: ierr
    type(cc_coll_params), intent(in), optional, target :: params
    type(c_ptr) :: p
    p = c_null_ptr
    if (present(params)) p = c_loc(params)
    ierr = c_lep_reset(handle%ptr, int(dest, c_int), int(tag, c_int), p)
  end subroutine cc_coll_lep_reset

  ! --- error-feedback store and statistics ---------------------------------------------

  ! Bytes held by all residuals of the communicator on this rank.
  subroutine cc_coll_ef_bytes(handle, bytes, ierr)
    type(cc_coll_comm), intent(in) :: handle
    integer(c_int64_t), intent(out) :: bytes
    integer, intent(out) :: ierr
    bytes = 0
    ierr = c_ef_bytes(handle%ptr, bytes)
  end subroutine cc_coll_ef_bytes

  ! Bytes held by the methods' per-tensor state other than residuals on this
  ! rank (LOWRANK's call counts and factors, of tensors and point-to-point
  ! channels), bounded by CC_COLL_STATE_MAX_BYTES.
  subroutine cc_coll_state_bytes(handle, bytes, ierr)
    type(cc_coll_comm), intent(in) :: handle
    integer(c_int64_t), intent(out) :: bytes
    integer, intent(out) :: ierr
    bytes = 0
    ierr = c_state_bytes(handle%ptr, bytes)
  end subroutine cc_coll_state_bytes

  ! Checkpoints (cc_coll_state_export / cc_coll_state_import): this rank's
  ! whole compression state as a blob of bytes. cc_coll_state_size gives the
  ! blob's size; cc_coll_state_export writes it into `blob` (at least that
  ! many elements; nbytes: the bytes written); cc_coll_state_import replaces
  ! the communicator's state with blob(1:nbytes), all or nothing.
  subroutine cc_coll_state_size(handle, nbytes, ierr)
    type(cc_coll_comm), intent(in) :: handle
    integer(c_int64_t), intent(out) :: nbytes
    integer, intent(out) :: ierr
    integer(c_size_t) :: n
    n = 0
    ierr = c_state_export(handle%ptr, c_null_ptr, n)
    nbytes = int(n, c_int64_t)
  end subroutine cc_coll_state_size

  ! A blob too small is CC_COLL_ERR_INVALID_ARG with the size needed in nbytes.
  subroutine cc_coll_state_export(handle, blob, nbytes, ierr)
    type(cc_coll_comm), intent(in) :: handle
    integer(c_int8_t), intent(inout), target, contiguous :: blob(:)
    integer(c_int64_t), intent(out) :: nbytes
    integer, intent(out) :: ierr
    integer(c_size_t) :: n
    if (size(blob) == 0) then
      ! Never big enough: a blob has a header.
      call cc_coll_state_size(handle, nbytes, ierr)
      if (ierr == CC_COLL_OK) ierr = fortran_arg_error()
      return
    end if
    n = int(size(blob), c_size_t)
    ierr = c_state_export(handle%ptr, c_loc(blob), n)
    nbytes = int(n, c_int64_t)
  end subroutine cc_coll_state_export

  subroutine cc_coll_state_import(handle, blob, nbytes, ierr)
    type(cc_coll_comm), intent(in) :: handle
    integer(c_int8_t), intent(in), target, contiguous :: blob(:)
    integer(c_int64_t), intent(in) :: nbytes
    integer, intent(out) :: ierr
    if (nbytes < 0 .or. nbytes > size(blob, kind=c_int64_t)) then
      ierr = fortran_arg_error()
      return
    end if
    if (nbytes == 0) then
      ierr = c_state_import(handle%ptr, c_null_ptr, 0_c_size_t)
    else
      ierr = c_state_import(handle%ptr, c_loc(blob), int(nbytes, c_size_t))
    end if
  end subroutine cc_coll_state_import

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

  ! --- the typed forms -------------------------------------------------------------------

  ! The specific procedures of the generic interfaces cc_coll_allreduce,
  ! cc_coll_iallreduce, cc_coll_reduce_scatter, cc_coll_ireduce_scatter
  ! (and their _inplace forms), cc_coll_lowrank_get_state,
  ! cc_coll_lowrank_set_q, cc_coll_send and cc_coll_recv: each written once in
  ! cc_coll_typed.inc.in, which the build instantiates for every real kind
  ! the module takes, real(c_float) data as CC_COLL_F32 (the _f32 procedures)
  ! and real(c_double) data as CC_COLL_F64 (_f64). The element type of an
  ! actual argument thus picks the dtype at compile time, and a buffer of
  ! another type does not compile; the _raw forms take any other dtype.
#include "cc_coll_typed_f32.inc"

#include "cc_coll_typed_f64.inc"

end module cc_coll
