! An ordinary Fortran MPI program (no libcc_coll module, no libcc_coll link),
! built three times: with include 'mpif.h' (-DPRELOAD_MPIF_H), `use mpi`
! (-DPRELOAD_USE_MPI) and `use mpi_f08` (-DPRELOAD_USE_MPI_F08). The preload
! tests run it under LD_PRELOAD=libcc_coll_preload.so.
!
!   <program> compressed   eligible calls must show top-k compression with
!                          error feedback (large error at step 1, running
!                          mean converging to the exact sum)
!   <program> exact        every call must be exact
!
! Either way the ineligible calls (integer sum, a small real sum) must be
! bit-identical to the locally computed sums. Rank 0 writes
! "<name>: ... PASS" on stderr after MPI_Finalize when every rank passed.
program preload_fortran_allreduce
#if defined(PRELOAD_USE_MPI_F08)
  use mpi_f08
#elif defined(PRELOAD_USE_MPI)
  use mpi
#endif
  use, intrinsic :: iso_fortran_env, only: error_unit, output_unit
  implicit none
#if defined(PRELOAD_MPIF_H)
  include 'mpif.h'
  character(len=*), parameter :: name = 'fortran_mpif_h'
#elif defined(PRELOAD_USE_MPI)
  character(len=*), parameter :: name = 'fortran_use_mpi'
#else
  character(len=*), parameter :: name = 'fortran_use_mpi_f08'
#endif
  integer, parameter :: n4 = 300000      ! 1.14 MiB of real(4)
  integer, parameter :: n8 = 150000      ! 1.14 MiB of real(8)
  integer, parameter :: steps = 200
  real(4), allocatable :: g4(:), r4(:), s4(:)
  real(8), allocatable :: g8(:), b8(:), exact(:), acc(:)
  integer, allocatable :: ia(:), ib(:)
  integer :: rank, nranks, ierr, t, i, q, failures, total, nbad
  logical :: compressed
  character(len=32) :: mode
  double precision :: err1, errt, e

  failures = 0
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  call get_command_argument(1, mode)
  if (mode /= 'compressed' .and. mode /= 'exact') then
    if (rank == 0) write (error_unit, '(a)') 'usage: '//name//' compressed|exact'
    call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
  end if
  compressed = mode == 'compressed'

  ! --- real(4), out of place: T steps, running mean ------------------------
  allocate (g4(n4), r4(n4), s4(n4), exact(n4), acc(n4))
  exact = 0
  acc = 0
  do i = 1, n4
    g4(i) = real(gval(rank, i, 1), 4)
    do q = 0, nranks - 1
      exact(i) = exact(i) + real(gval(q, i, 1), 4)
    end do
  end do
  do t = 1, steps
    call MPI_Allreduce(g4, r4, n4, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
    call expect(ierr == MPI_SUCCESS, 'real(4) allreduce ierr')
    acc = acc + r4
    if (t == 1) err1 = relerr(acc / t, exact)
    if (t == steps) errt = relerr(acc / t, exact)
  end do
  if (rank == 0) write (output_unit, '(a,2es11.3)') name//': real(4) out of place: errors at step 1, T:', err1, errt
  call expect_convergence(err1, errt, 1d-6, 'real(4) out of place')

  ! --- real(4), MPI_IN_PLACE, one call on a fresh buffer -----------------------
  s4 = g4
  call MPI_Allreduce(MPI_IN_PLACE, s4, n4, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
  e = relerr(real(s4, 8), exact)
  if (compressed) then
    call expect(e > 0.5d0, 'real(4) in place: not compressed')
  else
    call expect(e < 1d-6, 'real(4) in place: not exact')
  end if
  deallocate (exact, acc)

  ! --- real(8), MPI_IN_PLACE: T steps, running mean ------------------------
  allocate (g8(n8), b8(n8), exact(n8), acc(n8))
  exact = 0
  acc = 0
  do i = 1, n8
    g8(i) = gval(rank, i, 2)
    do q = 0, nranks - 1
      exact(i) = exact(i) + gval(q, i, 2)
    end do
  end do
  do t = 1, steps
    b8 = g8
    call MPI_Allreduce(MPI_IN_PLACE, b8, n8, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    call expect(ierr == MPI_SUCCESS, 'real(8) allreduce ierr')
    acc = acc + b8
    if (t == 1) err1 = relerr(acc / t, exact)
    if (t == steps) errt = relerr(acc / t, exact)
  end do
  if (rank == 0) write (output_unit, '(a,2es11.3)') name//': real(8) in place: errors at step 1, T:', err1, errt
  call expect_convergence(err1, errt, 1d-12, 'real(8) in place')

  ! --- real(8), out of place, one call into a fresh buffer -----------------------
  call MPI_Allreduce(g8, b8, n8, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  e = relerr(b8, exact)
  if (compressed) then
    call expect(e > 0.5d0, 'real(8) out of place: not compressed')
  else
    call expect(e < 1d-12, 'real(8) out of place: not exact')
  end if

  ! --- ineligible: integer sum (1.14 MiB), small real(4) sum in place -----------
  allocate (ia(n4), ib(n4))
  do i = 1, n4
    ia(i) = ival(rank, i, 3)
  end do
  call MPI_Allreduce(ia, ib, n4, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  nbad = 0
  do i = 1, n4
    if (ib(i) /= sum([(ival(q, i, 3), q = 0, nranks - 1)])) nbad = nbad + 1
  end do
  call expect(nbad == 0, 'integer sum differs from the exact sum')
  do i = 1, 1000
    s4(i) = real(ival(rank, i, 4), 4)
  end do
  call MPI_Allreduce(MPI_IN_PLACE, s4, 1000, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
  nbad = 0
  do i = 1, 1000
    if (s4(i) /= real(sum([(ival(q, i, 4), q = 0, nranks - 1)]), 4)) nbad = nbad + 1
  end do
  call expect(nbad == 0, 'small real(4) sum in place differs from the exact sum')

  deallocate(g4, r4, s4, g8, b8, exact, acc, ia, ib, stat=ierr)
  call MPI_Allreduce(failures, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  flush (output_unit)
  call MPI_Finalize(ierr)
  if (rank == 0) then
    if (total == 0) then
      write (error_unit, '(a,i0,a)') name//': ', nranks, ' ranks, '//trim(mode)//': PASS'
    else
      write (error_unit, '(a,i0,a)') name//': ', total, ' checks FAILED'
    end if
  end if
  if (total /= 0) error stop 1

contains

  ! A non-integer value in (-1, 1), the same on every rank for (r, i, salt).
  double precision function gval(r, i, salt)
    integer, intent(in) :: r, i, salt
    gval = sin(0.7d0 * i + 1.3d0 * r + salt) * cos(0.013d0 * i * (r + 1) + 0.5d0 * salt)
  end function gval

  ! An integer in [-1000, 1000].
  integer function ival(r, i, salt)
    integer, intent(in) :: r, i, salt
    ival = int(mod(int(i, 8) * 7919_8 + int(r, 8) * 104729_8 + int(salt, 8) * 31_8, 2001_8)) - 1000
  end function ival

  double precision function relerr(a, b)
    double precision, intent(in) :: a(:), b(:)
    relerr = sqrt(sum((a - b)**2) / sum(b**2))
  end function relerr

  subroutine expect(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      write (error_unit, '(a,i0,a)') name//': rank ', rank, ': FAIL: '//what
      failures = failures + 1
    end if
  end subroutine expect

  subroutine expect_convergence(e1, et, exact_tol, what)
    double precision, intent(in) :: e1, et, exact_tol
    character(len=*), intent(in) :: what
    if (compressed) then
      call expect(e1 > 0.5d0, what//': step 1 error is small: not compressed')
      call expect(et < 0.5d0 * e1, what//': the running mean does not converge')
    else
      call expect(e1 < exact_tol .and. et < exact_tol, what//': not exact')
    end if
  end subroutine expect_convergence

end program preload_fortran_allreduce
