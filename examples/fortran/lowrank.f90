! libcc_coll from Fortran: one grouped allreduce of a LOWRANK (PowerSGD)
! weight matrix and a bias (LOWRANK without a shape: sent densely), then the
! weight's low-rank state.
!
! The library reads a buffer as a row-major (C order) rows x cols matrix, so
! the Fortran array w(n, m) is the m x n matrix w^T to it:
! cc_coll_set_lowrank_shape(params, shape(w)) sets rows = m, cols = n. The
! state's p(m, r) and q(n, r) then give the averaged w as
! matmul(q, transpose(p)).
! Run: mpirun -n 2 ./cc_coll_example_fortran_lowrank
program lowrank_example
  use mpi
  use, intrinsic :: iso_c_binding, only: c_int64_t, c_loc
  use cc_coll
  implicit none

  integer, parameter :: n = 64, m = 32
  real(4), target :: w(n, m), bias(n)
  real(4) :: w_exp(n, m)
  real(8), allocatable :: p(:, :), q(:, :)
  type(cc_coll_comm) :: cc
  type(cc_coll_params) :: pw, pb
  type(cc_coll_stats) :: stats
  integer(c_int64_t) :: rows, cols
  real(8) :: u, v
  integer :: ierr, rank, nranks, i, j, r
  logical :: ok

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  ok = .true.

  call cc_coll_comm_create(MPI_COMM_WORLD, cc, ierr)
  call check(ierr, 'cc_coll_comm_create')

  ! Every rank's w is a rank-2 matrix with the same two directions, so the
  ! average is rank 2 too, and PowerSGD at rank 2 recovers it.
  do j = 1, m
    do i = 1, n
      u = sin(0.1d0 * i) * cos(0.2d0 * j)
      v = cos(0.3d0 * i) * (j - m / 2) / real(m, 8)
      w(i, j) = real((rank + 1) * u + v, 4)
      w_exp(i, j) = real((nranks + 1) / 2d0 * u + v, 4)
    end do
  end do
  bias = real(rank, 4)

  ! w: LOWRANK at rank 2 with error feedback, its shape from the array's.
  pw%mask = ior(ior(CC_COLL_PARAMS_FIELD_METHOD, CC_COLL_PARAMS_FIELD_RANK), CC_COLL_PARAMS_FIELD_EF)
  pw%method = CC_COLL_METHOD_LOWRANK
  pw%rank = 2
  pw%ef = 1
  call cc_coll_set_lowrank_shape(pw, shape(w))      ! rows = m, cols = n
  ! bias: LOWRANK too, without a shape: a 1-D tensor, sent densely (as
  ! PyTorch's powerSGD_hook sends biases).
  pb%mask = CC_COLL_PARAMS_FIELD_METHOD
  pb%method = CC_COLL_METHOD_LOWRANK

  ! Both in place, in one call: P and Q of w take two MPI_Allreduce, the bias a third.
  call cc_coll_allreduce_group_inplace([c_loc(w), c_loc(bias)], [size(w), size(bias)], &
                                       [CC_COLL_F32, CC_COLL_F32], CC_COLL_AVG, cc, ierr, [pw, pb])
  call check(ierr, 'cc_coll_allreduce_group_inplace')
  if (any(abs(w - w_exp) > 1e-4 * maxval(abs(w_exp)))) call fail('w is not the average')
  if (any(bias /= real(nranks - 1, 4) / 2)) call fail('bias is not the average')

  ! The state of w: named by its address (as the call named it) and params.
  call cc_coll_lowrank_get_state(w, size(w), cc, ierr, pw, rows=rows, cols=cols, rank=r, p=p, q=q)
  call check(ierr, 'cc_coll_lowrank_get_state')
  if (rows /= m .or. cols /= n .or. r /= 2) call fail('the state is not m x n at rank 2')
  if (any(abs(matmul(q, transpose(p)) - w) > 1e-5 * maxval(abs(w)))) call fail('w is not matmul(q, transpose(p))')
  call cc_coll_lowrank_get_state(bias, size(bias), cc, ierr, pb, rank=r)
  call check(ierr, 'cc_coll_lowrank_get_state of the bias')
  if (r /= 0) call fail('the bias has factors')

  stats%mask = CC_COLL_STATS_FIELD_ALL
  call cc_coll_comm_get_stats(cc, stats, ierr)
  call check(ierr, 'cc_coll_comm_get_stats')
  if (rank == 0) print '(a,i0,a,i0,a,i0,a,i0,a)', 'w(', n, ', ', m, ') at rank 2 and the bias: ', &
                       stats%bytes_wire, ' bytes sent for ', stats%bytes_uncompressed, ' asked'

  call cc_coll_comm_destroy(cc, ierr)
  call check(ierr, 'cc_coll_comm_destroy')
  deallocate(p, q)

  call MPI_Allreduce(MPI_IN_PLACE, ok, 1, MPI_LOGICAL, MPI_LAND, MPI_COMM_WORLD, ierr)
  if (rank == 0 .and. ok) print '(a,i0,a)', 'lowrank_example: ', nranks, ' ranks: passed'
  call MPI_Finalize(ierr)
  if (.not. ok) error stop 1

contains

  ! Stops every rank when a libcc_coll call failed.
  subroutine check(status, what)
    integer, intent(in) :: status
    character(len=*), intent(in) :: what
    integer :: mpierr
    if (status /= CC_COLL_OK) then
      print '(a,a,i0,a,a)', what, ' failed on rank ', rank, ': ', cc_coll_status_string(status)
      print '(2a)', '  ', cc_coll_last_error()
      call MPI_Abort(MPI_COMM_WORLD, 1, mpierr)
    end if
  end subroutine check

  ! Records a wrong result.
  subroutine fail(what)
    character(len=*), intent(in) :: what
    print '(a,a,a,i0)', 'FAIL: ', what, ' on rank ', rank
    ok = .false.
  end subroutine fail

end program lowrank_example
