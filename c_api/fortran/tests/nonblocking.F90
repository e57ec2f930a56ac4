! The cc_coll module's non-blocking collectives with real ranks, with the
! progress thread (CC_COLL_PROGRESS=thread in the environment: MPI is then
! initialised with MPI_THREAD_MULTIPLE, and the run is skipped without it)
! or without (caller: requests advance inside wait and test):
!  - each step, cc_coll_iallreduce (real(4) TOPK, real(8) NONE),
!    cc_coll_iallreduce_inplace (a 2-D real(4) TOPK, real(8) NONE AVG),
!    cc_coll_ireduce_scatter (real(4) TOPK) and
!    cc_coll_iallreduce_group_inplace (a LOWRANK matrix and a NONE bias) on
!    one communicator, completed in a rank- and step-dependent order by
!    cc_coll_wait, cc_coll_test loops and cc_coll_waitall, give the results
!    of the same calls made blocking on another communicator, bit for bit,
!    for three steps; so do the residuals;
!  - cc_coll_request_status, cc_coll_request_free (the handle reset, a
!    freed request CC_COLL_ERR_INVALID_ARG), a request freed in flight
!    still completes, Fortran-side argument errors (a strided section, a
!    count larger than the buffer, a short statuses array), and requests
!    the ranks post in different orders (CC_COLL_ERR_MISMATCH, the message
!    kept by the request).
program fortran_nonblocking
  use mpi
  use, intrinsic :: iso_c_binding, only: c_int, c_int32_t, c_int64_t, c_size_t, c_double, c_ptr, c_loc, &
                                         c_null_ptr, c_associated
  use cc_coll
  use cc_coll_test_checks
  implicit none

  ! cc_coll_ef_get_residual, which the module does not wrap.
  interface
    function ef_get_residual(comm, params, recvbuf, count, dtype, out) &
        bind(C, name="cc_coll_ef_get_residual") result(status)
      import :: c_int, c_ptr, c_size_t, c_double, cc_coll_params
      type(c_ptr), value :: comm
      type(cc_coll_params), intent(in) :: params
      type(c_ptr), value :: recvbuf
      integer(c_size_t), value :: count
      integer(c_int), value :: dtype
      real(c_double), intent(out) :: out(*)
      integer(c_int) :: status
    end function ef_get_residual
  end interface

  integer, parameter :: n = 3000, rows = 40, cols = 25, nb_bias = 30, nsteps = 3, nreq = 6
  type(cc_coll_comm) :: nb, bl
  type(cc_coll_request) :: req(nreq), extra(3)
  type(cc_coll_params) :: ptopk, pnone, pinplace, prs, pgroup(2)
  real(4), target, asynchronous :: x4(n), y4(n), z4(n), m_nb(rows, cols), m_bl(rows, cols)
  real(4), target, asynchronous :: g_nb(cols, rows), g_bl(cols, rows)
  real(4), allocatable, target, asynchronous :: rs_in(:), rs_out(:), rs_ref(:)
  real(8), target, asynchronous :: a8(n), b8(n), c8(n), v_nb(n), v_bl(n), bias_nb(nb_bias), bias_bl(nb_bias)
  integer :: statuses(nreq), short(2), order(nreq)
  integer :: ierr, mpierr, nranks, provided, step, i, k, st, envst
  logical :: done
  character(len=16) :: mode
  character(len=:), allocatable :: message

  call get_environment_variable('CC_COLL_PROGRESS', mode, status=envst)
  if (envst /= 0) mode = 'auto'
  if (trim(mode) == 'thread') then
    call MPI_Init_thread(MPI_THREAD_MULTIPLE, provided, mpierr)
  else
    call MPI_Init(mpierr)
    provided = MPI_THREAD_SINGLE
  end if
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, mpierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, mpierr)
  if (trim(mode) == 'thread' .and. provided < MPI_THREAD_MULTIPLE) then
    if (rank == 0) print '(a)', 'fortran_nonblocking: MPI has no MPI_THREAD_MULTIPLE: skipped'
    call MPI_Finalize(mpierr)
    stop 77
  end if
  nfail = 0

  call cc_coll_comm_create(MPI_COMM_WORLD, nb, ierr)
  call expect('cc_coll_comm_create', ierr, CC_COLL_OK)
  call cc_coll_comm_create(MPI_COMM_WORLD, bl, ierr)
  call expect('cc_coll_comm_create', ierr, CC_COLL_OK)
  if (nfail /= 0) call MPI_Abort(MPI_COMM_WORLD, 1, mpierr)

  ptopk = cc_coll_params(mask=ior(ior(CC_COLL_PARAMS_FIELD_METHOD, CC_COLL_PARAMS_FIELD_DENSITY), &
                                  CC_COLL_PARAMS_FIELD_EF_KEY), method=CC_COLL_METHOD_TOPK, density=0.05d0, ef_key=1)
  pnone = cc_coll_params(mask=CC_COLL_PARAMS_FIELD_METHOD, method=CC_COLL_METHOD_NONE)
  pinplace = ptopk
  pinplace%density = 0.02d0
  pinplace%ef_key = 2
  prs = ptopk
  prs%density = 0.1d0
  prs%ef_key = 3
  pgroup(1) = cc_coll_params(mask=ior(ior(CC_COLL_PARAMS_FIELD_METHOD, CC_COLL_PARAMS_FIELD_RANK), &
                                      CC_COLL_PARAMS_FIELD_EF_KEY), method=CC_COLL_METHOD_LOWRANK, rank=2, ef_key=4)
  call cc_coll_set_lowrank_shape(pgroup(1), shape(g_nb))
  pgroup(2) = pnone
  allocate(rs_in(n * nranks), rs_out(n), rs_ref(n))

  ! --- three steps: non-blocking on nb, blocking on bl, equal bit for bit ---------
  do step = 1, nsteps
    call fill4(x4, 1, step)
    call fill8(a8, 2, step)
    call fill4_2d(m_nb, 3, step)
    m_bl = m_nb
    call fill8(v_nb, 4, step)
    v_bl = v_nb
    call fill4(rs_in, 5, step)
    call fill4_2d(g_nb, 6, step)
    g_bl = g_nb
    call fill8(bias_nb, 7, step)
    bias_bl = bias_nb
    y4 = -1
    b8 = -1
    rs_out = -1

    call cc_coll_iallreduce(x4, y4, n, CC_COLL_AVG, nb, req(1), ierr, ptopk)
    call expect('iallreduce real(4) TOPK', ierr, CC_COLL_OK)
    call cc_coll_iallreduce(a8, b8, n, CC_COLL_SUM, nb, req(2), ierr, pnone)
    call expect('iallreduce real(8) NONE', ierr, CC_COLL_OK)
    call cc_coll_iallreduce_inplace(m_nb, size(m_nb), CC_COLL_SUM, nb, req(3), ierr, pinplace)
    call expect('iallreduce_inplace 2-D real(4) TOPK', ierr, CC_COLL_OK)
    call cc_coll_iallreduce_inplace(v_nb, n, CC_COLL_AVG, nb, req(4), ierr, pnone)
    call expect('iallreduce_inplace real(8) NONE', ierr, CC_COLL_OK)
    call cc_coll_ireduce_scatter(rs_in, rs_out, n, CC_COLL_SUM, nb, req(5), ierr, prs)
    call expect('ireduce_scatter real(4) TOPK', ierr, CC_COLL_OK)
    call cc_coll_iallreduce_group_inplace([c_loc(g_nb), c_loc(bias_nb)], [size(g_nb), nb_bias], &
                                          [CC_COLL_F32, CC_COLL_F64], CC_COLL_AVG, nb, req(6), ierr, pgroup)
    call expect('iallreduce_group_inplace LOWRANK + NONE', ierr, CC_COLL_OK)
    do i = 1, nreq
      call check('a posted request has a handle', c_associated(req(i)%ptr))
    end do

    ! Completion order: rotated by rank and step, reversed.
    do i = 1, nreq
      order(i) = nreq - mod(i - 1 + rank + step, nreq)
    end do
    call cc_coll_wait(req(order(1)), ierr)
    call expect('cc_coll_wait', ierr, CC_COLL_OK)
    call cc_coll_wait(req(order(2)), ierr)
    call expect('cc_coll_wait', ierr, CC_COLL_OK)
    do k = 3, 4
      done = .false.
      do while (.not. done)
        call cc_coll_test(req(order(k)), done, ierr)
        call expect('cc_coll_test', ierr, CC_COLL_OK)
        if (ierr /= CC_COLL_OK) exit
      end do
    end do
    statuses = -1
    call cc_coll_waitall(req, ierr, statuses)  ! order(5), order(6), and again the others
    call expect('cc_coll_waitall', ierr, CC_COLL_OK)
    call check('waitall: every status CC_COLL_OK', all(statuses == CC_COLL_OK))
    do i = 1, nreq
      call cc_coll_request_status(req(i), done, st, ierr, message)
      call check('request_status after completion: done, OK, no message', &
                 ierr == CC_COLL_OK .and. done .and. st == CC_COLL_OK .and. message == '')
      call cc_coll_request_free(req(i), ierr)
      call expect('cc_coll_request_free', ierr, CC_COLL_OK)
      call check('request_free resets the handle', .not. c_associated(req(i)%ptr))
    end do

    call cc_coll_allreduce(x4, z4, n, CC_COLL_AVG, bl, ierr, ptopk)
    call expect('allreduce real(4) TOPK', ierr, CC_COLL_OK)
    call cc_coll_allreduce(a8, c8, n, CC_COLL_SUM, bl, ierr, pnone)
    call expect('allreduce real(8) NONE', ierr, CC_COLL_OK)
    call cc_coll_allreduce_inplace(m_bl, size(m_bl), CC_COLL_SUM, bl, ierr, pinplace)
    call expect('allreduce_inplace 2-D real(4) TOPK', ierr, CC_COLL_OK)
    call cc_coll_allreduce_inplace(v_bl, n, CC_COLL_AVG, bl, ierr, pnone)
    call expect('allreduce_inplace real(8) NONE', ierr, CC_COLL_OK)
    call cc_coll_reduce_scatter(rs_in, rs_ref, n, CC_COLL_SUM, bl, ierr, prs)
    call expect('reduce_scatter real(4) TOPK', ierr, CC_COLL_OK)
    call cc_coll_allreduce_group_inplace([c_loc(g_bl), c_loc(bias_bl)], [size(g_bl), nb_bias], &
                                         [CC_COLL_F32, CC_COLL_F64], CC_COLL_AVG, bl, ierr, pgroup)
    call expect('allreduce_group_inplace LOWRANK + NONE', ierr, CC_COLL_OK)

    call check('real(4) TOPK: equal to the blocking call', same4(y4, z4))
    call check('real(8) NONE: equal to the blocking call', same8(b8, c8))
    call check('2-D real(4) TOPK in place: equal to the blocking call', &
               same4(reshape(m_nb, [size(m_nb)]), reshape(m_bl, [size(m_bl)])))
    call check('real(8) NONE AVG in place: equal to the blocking call', same8(v_nb, v_bl))
    call check('reduce-scatter: equal to the blocking call', same4(rs_out, rs_ref))
    call check('group LOWRANK matrix: equal to the blocking call', &
               same4(reshape(g_nb, [size(g_nb)]), reshape(g_bl, [size(g_bl)])))
    call check('group NONE bias: equal to the blocking call', same8(bias_nb, bias_bl))
  end do
  call compare_residual(1, n, CC_COLL_F32, 'TOPK residual')
  call compare_residual(2, rows * cols, CC_COLL_F32, 'TOPK in place residual')
  call compare_residual(3, n * nranks, CC_COLL_F32, 'reduce-scatter residual')
  call compare_residual(4, rows * cols, CC_COLL_F32, 'LOWRANK residual')

  ! --- handles: freed, null, freed in flight ----------------------------------------
  call cc_coll_wait(req(1), ierr)
  call expect('wait on a freed (null) request', ierr, CC_COLL_ERR_INVALID_ARG)
  call cc_coll_test(req(1), done, ierr)
  call expect('test on a freed (null) request', ierr, CC_COLL_ERR_INVALID_ARG)
  call check('test on a freed request: not done', .not. done)
  call cc_coll_request_free(req(1), ierr)
  call expect('request_free of a freed (null) request', ierr, CC_COLL_ERR_INVALID_ARG)
  call cc_coll_waitall(req, ierr, statuses)
  call expect('waitall of null requests (skipped)', ierr, CC_COLL_OK)
  ! A handle copied before the free names a dead request: the library says so.
  call cc_coll_iallreduce(a8, b8, n, CC_COLL_SUM, nb, extra(1), ierr)
  call expect('iallreduce', ierr, CC_COLL_OK)
  extra(2) = extra(1)
  call cc_coll_request_free(extra(1), ierr)
  call expect('request_free in flight or done', ierr, CC_COLL_OK)
  call cc_coll_wait(extra(2), ierr)
  call expect('wait on a stale copy of a freed handle', ierr, CC_COLL_ERR_INVALID_ARG)
  call check('the message says the request is not live', index(cc_coll_last_error(), 'not a live request') > 0)
  call cc_coll_request_status(extra(2), done, st, ierr, message)
  call expect('request_status of a freed handle', ierr, CC_COLL_ERR_INVALID_ARG)
  ! The freed request still ran to its end: a blocking call completes it.
  call cc_coll_allreduce(a8, c8, n, CC_COLL_SUM, nb, ierr)
  call expect('blocking allreduce after a freed request', ierr, CC_COLL_OK)
  call check('a request freed in flight still completes', same8(b8, c8))

  ! --- Fortran-side argument errors: nothing posted ----------------------------------
  call cc_coll_iallreduce(x4(1:n:2), y4(1:n / 2), n / 2, CC_COLL_SUM, nb, extra(1), ierr)
  call expect('iallreduce of a strided section', ierr, CC_COLL_ERR_INVALID_ARG)
  call check('no request on an error', .not. c_associated(extra(1)%ptr))
  call cc_coll_iallreduce_inplace(m_nb(1:rows:2, :), 10, CC_COLL_SUM, nb, extra(1), ierr)
  call expect('iallreduce_inplace of a strided section', ierr, CC_COLL_ERR_INVALID_ARG)
  call cc_coll_iallreduce(x4, y4, n + 1, CC_COLL_SUM, nb, extra(1), ierr)
  call expect('iallreduce: count larger than the buffers', ierr, CC_COLL_ERR_INVALID_ARG)
  call cc_coll_ireduce_scatter(rs_in, rs_out, n + 1, CC_COLL_SUM, nb, extra(1), ierr)
  call expect('ireduce_scatter: recvcount x P larger than sendbuf', ierr, CC_COLL_ERR_INVALID_ARG)
  call cc_coll_iallreduce(x4, y4, n, CC_COLL_SUM, nb, extra(1), ierr, &
                          cc_coll_params(mask=CC_COLL_PARAMS_FIELD_DENSITY, density=2.0d0))
  call expect('iallreduce: density 2 (the library)', ierr, CC_COLL_ERR_INVALID_ARG)
  call check('no request on a library error', .not. c_associated(extra(1)%ptr))
  call cc_coll_iallreduce(x4, y4, n, CC_COLL_SUM, nb, extra(1), ierr)
  call expect('iallreduce', ierr, CC_COLL_OK)
  call cc_coll_waitall(extra(1:1), ierr, short(1:0))
  call expect('waitall with a short statuses array', ierr, CC_COLL_ERR_INVALID_ARG)
  call cc_coll_waitall(extra(1:1), ierr, short)
  call expect('waitall', ierr, CC_COLL_OK)
  call cc_coll_request_free(extra(1), ierr)
  call expect('request_free', ierr, CC_COLL_OK)

  ! --- ranks that post in different orders: both requests fail ------------------------
  if (nranks > 1) then
    y4 = -7
    z4 = -7
    if (rank == 0) then
      call cc_coll_iallreduce(x4, y4, n, CC_COLL_SUM, nb, extra(1), ierr, ptopk)
      call cc_coll_iallreduce(x4, z4, n, CC_COLL_SUM, nb, extra(2), ierr, pnone)
    else
      call cc_coll_iallreduce(x4, y4, n, CC_COLL_SUM, nb, extra(1), ierr, pnone)
      call cc_coll_iallreduce(x4, z4, n, CC_COLL_SUM, nb, extra(2), ierr, ptopk)
    end if
    call expect('posting requests in another order than the other ranks', ierr, CC_COLL_OK)
    short = -1
    call cc_coll_waitall(extra(1:2), ierr, short)
    call expect('waitall of requests posted in different orders', ierr, CC_COLL_ERR_MISMATCH)
    call check('waitall: both requests MISMATCH', all(short == CC_COLL_ERR_MISMATCH))
    call cc_coll_wait(extra(2), ierr)
    call expect('wait on a failed request', ierr, CC_COLL_ERR_MISMATCH)
    call cc_coll_request_status(extra(2), done, st, ierr, message)
    call check('request_status: done, MISMATCH, the message names the method', ierr == CC_COLL_OK .and. done &
               .and. st == CC_COLL_ERR_MISMATCH .and. index(message, 'method') > 0)
    call check('failed requests: the buffers untouched', all(y4 == -7) .and. all(z4 == -7))
    do i = 1, 2
      call cc_coll_request_free(extra(i), ierr)
      call expect('request_free of a failed request', ierr, CC_COLL_OK)
    end do
  end if

  call cc_coll_comm_destroy(nb, ierr)
  call expect('cc_coll_comm_destroy', ierr, CC_COLL_OK)
  call cc_coll_comm_destroy(bl, ierr)
  call expect('cc_coll_comm_destroy', ierr, CC_COLL_OK)

  deallocate(rs_in, rs_out, rs_ref)
  ! A main program's allocatables are not freed at its end.
  if (allocated(message)) deallocate(message)
  call MPI_Allreduce(MPI_IN_PLACE, nfail, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, mpierr)
  if (rank == 0 .and. nfail == 0) print '(a,a,a,i0,a)', 'fortran_nonblocking (', trim(mode), ' progress): ', &
                                        nranks, ' ranks: passed'
  call MPI_Finalize(mpierr)
  if (nfail /= 0) error stop 1

contains

  ! Reproducible data in (-1, 1), different on every rank, tensor and step.
  subroutine fill4(x, tensor, s)
    real(4), intent(out) :: x(:)
    integer, intent(in) :: tensor, s
    integer :: j
    do j = 1, size(x)
      x(j) = real(sin(0.37d0 * j + 1.3d0 * rank + 0.71d0 * tensor + 0.11d0 * s) * &
                  cos(0.013d0 * j * (tensor + 1)), 4)
    end do
  end subroutine fill4

  subroutine fill4_2d(x, tensor, s)
    real(4), intent(out) :: x(:, :)
    integer, intent(in) :: tensor, s
    real(4) :: flat(size(x))
    call fill4(flat, tensor, s)
    x = reshape(flat, shape(x))
  end subroutine fill4_2d

  subroutine fill8(x, tensor, s)
    real(8), intent(out) :: x(:)
    integer, intent(in) :: tensor, s
    integer :: j
    do j = 1, size(x)
      x(j) = sin(0.37d0 * j + 1.3d0 * rank + 0.71d0 * tensor + 0.11d0 * s) * cos(0.013d0 * j * (tensor + 1))
    end do
  end subroutine fill8

  ! Bit-identical arrays (also for signed zeros).
  logical function same4(a, b)
    real(4), intent(in) :: a(:), b(:)
    same4 = size(a) == size(b)
    if (same4) same4 = all(transfer(a, 0_c_int32_t, size(a)) == transfer(b, 0_c_int32_t, size(b)))
  end function same4

  logical function same8(a, b)
    real(8), intent(in) :: a(:), b(:)
    same8 = size(a) == size(b)
    if (same8) same8 = all(transfer(a, 0_c_int64_t, size(a)) == transfer(b, 0_c_int64_t, size(b)))
  end function same8

  ! The residual named ef_key `key` on nb and on bl: bit-identical.
  subroutine compare_residual(key, count, dtype, what)
    integer, intent(in) :: key, count, dtype
    character(len=*), intent(in) :: what
    type(cc_coll_params) :: p
    real(c_double), allocatable :: r1(:), r2(:)
    integer :: s1, s2
    p = cc_coll_params(mask=CC_COLL_PARAMS_FIELD_EF_KEY, ef_key=int(key, c_int64_t))
    allocate(r1(count), r2(count))
    s1 = ef_get_residual(nb%ptr, p, c_null_ptr, int(count, c_size_t), int(dtype, c_int), r1)
    s2 = ef_get_residual(bl%ptr, p, c_null_ptr, int(count, c_size_t), int(dtype, c_int), r2)
    call expect(what // ': cc_coll_ef_get_residual', s1, CC_COLL_OK)
    call expect(what // ': cc_coll_ef_get_residual', s2, CC_COLL_OK)
    call check(what // ': equal to the blocking calls', same8(r1, r2))
    call check(what // ': not all zero', any(r1 /= 0))
  end subroutine compare_residual

end program fortran_nonblocking
