! libcc_coll from Fortran: allreduce a 2-D real(4) array and a 3-D real(8)
! array with SUM and AVG (method NONE), then with TOPK, and check the results.
! Run: mpirun -n 2 ./cc_coll_example_fortran
program allreduce_example
  use mpi
  use cc_coll
  implicit none

  integer, parameter :: nx = 64, ny = 48, n1 = 10, n2 = 20, n3 = 30
  real(4) :: a(nx, ny), a_sum(nx, ny), a_exp(nx, ny)
  real(8), allocatable :: b(:, :, :), b_exp(:, :, :)
  type(cc_coll_comm) :: cc
  type(cc_coll_params) :: none, topk
  type(cc_coll_stats) :: stats
  integer :: ierr, rank, nranks, i, j, k, r
  logical :: ok

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  ok = .true.

  call cc_coll_comm_create(MPI_COMM_WORLD, cc, ierr)
  call check(ierr, 'cc_coll_comm_create')

  ! Method NONE (plain MPI_Allreduce), whatever CC_COLL_METHOD says.
  none%mask = CC_COLL_PARAMS_FIELD_METHOD
  none%method = CC_COLL_METHOD_NONE

  ! 1. SUM of a 2-D real(4) array: integer values, so the sum is exact.
  do j = 1, ny
    do i = 1, nx
      a(i, j) = real(mod(i + 7 * j + 3 * rank, 19) - 9, 4)
      a_exp(i, j) = real(sum([(mod(i + 7 * j + 3 * r, 19) - 9, r = 0, nranks - 1)]), 4)
    end do
  end do
  call cc_coll_allreduce(a, a_sum, size(a), CC_COLL_SUM, cc, ierr, none)
  call check(ierr, 'SUM of a(nx, ny)')
  if (any(a_sum /= a_exp)) call fail('SUM of a(nx, ny) differs from the exact sum')

  ! 2. AVG of a 3-D real(8) array, in place.
  allocate(b(n1, n2, n3), b_exp(n1, n2, n3))
  do k = 1, n3
    do j = 1, n2
      do i = 1, n1
        b(i, j, k) = real(i + j * k + rank, 8)
        b_exp(i, j, k) = real(i + j * k, 8) + real(nranks - 1, 8) / 2
      end do
    end do
  end do
  call cc_coll_allreduce_inplace(b, size(b), CC_COLL_AVG, cc, ierr, none)
  call check(ierr, 'AVG of b(n1, n2, n3)')
  if (any(abs(b - b_exp) > 1d-12 * abs(b_exp))) call fail('AVG of b(n1, n2, n3) is off')

  ! 3. TOPK at density 1 keeps every element: exactly MPI_Allreduce.
  topk%mask = ior(ior(CC_COLL_PARAMS_FIELD_METHOD, CC_COLL_PARAMS_FIELD_DENSITY), CC_COLL_PARAMS_FIELD_EF)
  topk%method = CC_COLL_METHOD_TOPK
  topk%density = 1
  topk%ef = 0
  do k = 1, n3
    do j = 1, n2
      do i = 1, n1
        b(i, j, k) = sin(real(i + 3 * j + 5 * k + 11 * rank, 8))
      end do
    end do
  end do
  call MPI_Allreduce(b, b_exp, size(b), MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call cc_coll_allreduce_inplace(b, size(b), CC_COLL_SUM, cc, ierr, topk)
  call check(ierr, 'TOPK density 1 of b(n1, n2, n3)')
  if (any(b /= b_exp)) call fail('TOPK density 1 differs from MPI_Allreduce')

  ! 4. TOPK at density 0.01 on a(nx, ny), the same on every rank: each rank
  !    keeps the same 1% largest magnitudes, so the result is nranks * a
  !    there and 0 elsewhere. Error feedback stays off (topk%ef = 0).
  topk%density = 0.01d0
  do j = 1, ny
    do i = 1, nx
      a(i, j) = real(mod(i * 13 + j * 29, 101) - 50, 4)
    end do
  end do
  call cc_coll_allreduce(a, a_sum, size(a), CC_COLL_SUM, cc, ierr, topk)
  call check(ierr, 'TOPK density 0.01 of a(nx, ny)')
  if (any(a_sum /= 0 .and. a_sum /= nranks * a)) call fail('TOPK kept elements are not nranks * a')
  if (maxval(abs(a_sum)) /= nranks * maxval(abs(a))) call fail('TOPK lost the largest element')
  if (rank == 0) print '(a,i0,a,i0,a)', 'TOPK kept ', count(a_sum /= 0), ' of ', size(a), ' elements'

  stats%mask = CC_COLL_STATS_FIELD_ALL
  call cc_coll_comm_get_stats(cc, stats, ierr)
  call check(ierr, 'cc_coll_comm_get_stats')
  if (rank == 0) print '(a,i0,a,i0,a,i0,a)', 'calls: ', stats%calls, ', bytes: ', &
                       stats%bytes_uncompressed, ' asked, ', stats%bytes_wire, ' sent'

  call cc_coll_comm_destroy(cc, ierr)
  call check(ierr, 'cc_coll_comm_destroy')
  deallocate(b, b_exp)

  call MPI_Allreduce(MPI_IN_PLACE, ok, 1, MPI_LOGICAL, MPI_LAND, MPI_COMM_WORLD, ierr)
  if (rank == 0 .and. ok) print '(a,i0,a)', 'allreduce_example: ', nranks, ' ranks: passed'
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

end program allreduce_example
