! An ordinary Fortran MPI program (use mpi; no libcc_coll) with the mix of
! reductions of recurring_allreduce.c: a one-off 2 MiB histogram of doubles
! and a recurring 1.14 MiB real(4) sum. The inputs are whole numbers, so the
! exact sums are known on every rank and any summation order gives them
! bit for bit.
!
!   fortran_recurring N     N: the CC_COLL_MIN_REPEATS in effect (>= 1)
!
! Under the shim with the default rule: the histogram is exact, the first N
! calls of the recurring sum are exact and the 20 after them compressed
! (more than half of the elements differ from the exact sum). Rank 0 prints
! "fortran_recurring: N ranks: PASS" after MPI_Finalize.
program fortran_recurring
  use mpi
  implicit none
  integer, parameter :: nhist = 262144, ngrad = 300000, extra = 20
  double precision, allocatable :: bins(:), hist(:), hexact(:)
  real, allocatable :: g(:), r(:), gexact(:)
  integer :: ierr, rank, nprocs, repeats, t, i, q, failures, total, differ
  character(len=32) :: arg

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  call get_command_argument(1, arg)
  read(arg, *) repeats
  failures = 0

  allocate(bins(nhist), hist(nhist), hexact(nhist))
  do i = 1, nhist
    bins(i) = dble(value(rank, i, 1))
    hexact(i) = 0d0
    do q = 0, nprocs - 1
      hexact(i) = hexact(i) + dble(value(q, i, 1))
    end do
  end do
  call MPI_Allreduce(bins, hist, nhist, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  differ = count(hist /= hexact)
  if (ierr /= MPI_SUCCESS .or. differ /= 0) then
    write(0, '(a,i0,a,i0,a)') 'fortran_recurring: FAIL: histogram: ', differ, ' of ', nhist, ' elements differ'
    failures = failures + 1
  end if

  allocate(g(ngrad), r(ngrad), gexact(ngrad))
  do i = 1, ngrad
    g(i) = real(value(rank, i, 2))
    gexact(i) = 0.0
    do q = 0, nprocs - 1
      gexact(i) = gexact(i) + real(value(q, i, 2))
    end do
  end do
  do t = 1, repeats + extra
    call MPI_Allreduce(g, r, ngrad, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
    differ = count(r /= gexact)
    if (t <= repeats .or. nprocs == 1) then
      if (differ /= 0) then
        write(0, '(a,i0,a,i0,a)') 'fortran_recurring: FAIL: call ', t, ': ', differ, ' elements differ: not exact'
        failures = failures + 1
      end if
    else if (differ <= ngrad / 2) then
      write(0, '(a,i0,a,i0,a)') 'fortran_recurring: FAIL: call ', t, ': only ', differ, &
        ' elements differ: not compressed'
      failures = failures + 1
    end if
  end do

  deallocate(bins, hist, hexact, g, r, gexact)
  call MPI_Allreduce(failures, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_Finalize(ierr)
  if (rank == 0) then
    if (total == 0) then
      write(0, '(a,i0,a)') 'fortran_recurring: ', nprocs, ' ranks: PASS'
    else
      write(0, '(a,i0,a,i0,a)') 'fortran_recurring: ', nprocs, ' ranks: ', total, ' checks FAILED'
    end if
  end if

contains

  ! A whole number in [-1000, 1000], different on every rank.
  integer function value(r, i, salt)
    integer, intent(in) :: r, i, salt
    integer(kind=8) :: x
    x = int(r, 8) * 7919_8 + int(i, 8) * 104729_8 + int(salt, 8) * 1299709_8
    x = modulo(modulo(x, 1000003_8) * 2654435761_8, 2001_8)  ! below 2**63 throughout
    value = int(x) - 1000
  end function value

end program fortran_recurring
