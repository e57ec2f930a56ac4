! An ordinary Fortran MPI program (no libcc_coll module, no libcc_coll link)
! that uses MPI_Iallreduce, built three times: with include 'mpif.h'
! (-DPRELOAD_MPIF_H), `use mpi` (-DPRELOAD_USE_MPI) and `use mpi_f08`
! (-DPRELOAD_USE_MPI_F08). The preload tests run it under
! LD_PRELOAD=libcc_coll_preload.so.
!
! Every step posts, on recurring buffers, an eligible real(4) sum out of
! place and one in place, an integer sum and a ring of MPI_Isend/MPI_Irecv;
! makes the same real(4) sums with blocking MPI_Allreduce into twin
! buffers; then completes the requests, in one array, with MPI_Wait,
! MPI_Waitall, MPI_Test, MPI_Waitany or MPI_Testsome (by step). The inputs
! are small whole numbers, so every sum is exact in any order. Checks: each
! real(4) MPI_Iallreduce equals its blocking twin, the integer sum and the
! messages are exact, and some real(4) result differs from the exact sum
! (it was compressed). Rank 0 writes "<name>: N ranks: PASS" on stderr after
! MPI_Finalize when every rank passed.
program preload_fortran_iallreduce
#if defined(PRELOAD_USE_MPI_F08)
  use mpi_f08
#elif defined(PRELOAD_USE_MPI)
  use mpi
#endif
  use, intrinsic :: iso_fortran_env, only: error_unit, output_unit
  implicit none
#if defined(PRELOAD_MPIF_H)
  include 'mpif.h'
  character(len=*), parameter :: name = 'fortran_iallreduce_mpif_h'
#elif defined(PRELOAD_USE_MPI)
  character(len=*), parameter :: name = 'fortran_iallreduce_use_mpi'
#else
  character(len=*), parameter :: name = 'fortran_iallreduce_use_mpi_f08'
#endif
  integer, parameter :: n4 = 300000      ! 1.14 MiB of real(4)
  integer, parameter :: nmsg = 1024
  integer, parameter :: steps = 10
  integer, parameter :: nreq = 5
  real(4), allocatable, asynchronous :: s4(:), a4(:), b4(:), at(:), bt(:)
  integer, allocatable, asynchronous :: ia(:), ib(:), msg_out(:), msg_in(:)
#if defined(PRELOAD_USE_MPI_F08)
  type(MPI_Request) :: reqs(nreq)
#else
  integer :: reqs(nreq)
#endif
  integer :: rank, nranks, ierr, t, i, k, q, failures, total, nbad, idx, outcount, indices(nreq), prev, next
  integer :: compressed_steps, rc, ndone
  logical :: flag, done, differ

  failures = 0
  compressed_steps = 0
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  prev = mod(rank + nranks - 1, nranks)
  next = mod(rank + 1, nranks)
  allocate (s4(n4), a4(n4), b4(n4), at(n4), bt(n4), ia(n4), ib(n4), msg_out(nmsg), msg_in(nmsg))

  do t = 1, steps
    do i = 1, n4
      s4(i) = real(ival(rank, i, 10 * t), 4)
      b4(i) = real(ival(rank, i, 10 * t + 1), 4)
      ia(i) = ival(rank, i, 10 * t + 2)
    end do
    bt = b4
    do i = 1, nmsg
      msg_out(i) = ival(rank, i, 10 * t + 3)
    end do
    rc = 0
    call MPI_Irecv(msg_in, nmsg, MPI_INTEGER, prev, 7, MPI_COMM_WORLD, reqs(1), ierr)
    rc = ior(rc, ierr)
    call MPI_Iallreduce(s4, a4, n4, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, reqs(2), ierr)
    rc = ior(rc, ierr)
    call MPI_Iallreduce(ia, ib, n4, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, reqs(3), ierr)
    rc = ior(rc, ierr)
    call MPI_Iallreduce(MPI_IN_PLACE, b4, n4, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, reqs(4), ierr)
    rc = ior(rc, ierr)
    call MPI_Isend(msg_out, nmsg, MPI_INTEGER, next, 7, MPI_COMM_WORLD, reqs(5), ierr)
    rc = ior(rc, ierr)
    call expect(rc == MPI_SUCCESS, 'posting failed')

    ! The blocking twins, while the requests are in flight.
    call MPI_Allreduce(s4, at, n4, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
    call MPI_Allreduce(MPI_IN_PLACE, bt, n4, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)

    select case (mod(t, 5))
    case (0)
      do k = 1, nreq
        call MPI_Wait(reqs(k), MPI_STATUS_IGNORE, ierr)
        call expect(ierr == MPI_SUCCESS, 'MPI_Wait')
      end do
    case (1)
      call MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE, ierr)
      call expect(ierr == MPI_SUCCESS, 'MPI_Waitall')
    case (2)
      do
        flag = .true.
        do k = 1, nreq
          if (reqs(k) /= MPI_REQUEST_NULL) then
            call MPI_Test(reqs(k), done, MPI_STATUS_IGNORE, ierr)
            flag = .false.
          end if
        end do
        if (flag) exit
      end do
    case (3)
      ! One request per call, nreq calls. The index is not checked: MPICH
      ! 4.0's Fortran MPI_Waitany answers MPI_UNDEFINED + 1 once no request
      ! is left, and its mpi_f08 one counts from 0 (the same without the
      ! shim); every request must be done afterwards, which is checked.
      do k = 1, nreq
        call MPI_Waitany(nreq, reqs, idx, MPI_STATUS_IGNORE, ierr)
        call expect(ierr == MPI_SUCCESS, 'MPI_Waitany')
      end do
    case default
      ndone = 0
      do while (ndone < nreq)
        call MPI_Testsome(nreq, reqs, outcount, indices, MPI_STATUSES_IGNORE, ierr)
        call expect(ierr == MPI_SUCCESS .and. outcount /= MPI_UNDEFINED, 'MPI_Testsome')
        if (outcount == MPI_UNDEFINED) exit
        ndone = ndone + outcount
      end do
    end select
    do k = 1, nreq
      call expect(reqs(k) == MPI_REQUEST_NULL, 'a request is still active')
    end do

    nbad = 0
    do i = 1, n4
      if (ib(i) /= sum([(ival(q, i, 10 * t + 2), q = 0, nranks - 1)])) nbad = nbad + 1
    end do
    do i = 1, nmsg
      if (msg_in(i) /= ival(prev, i, 10 * t + 3)) nbad = nbad + 1
    end do
    call expect(nbad == 0, 'the integer sum or a message is wrong')
    call expect(all(a4 == at), 'real(4) MPI_Iallreduce differs from its blocking twin')
    call expect(all(b4 == bt), 'real(4) MPI_Iallreduce in place differs from its blocking twin')
    differ = .false.
    do i = 1, n4
      if (a4(i) /= real(sum([(ival(q, i, 10 * t), q = 0, nranks - 1)]), 4)) differ = .true.
    end do
    if (differ) compressed_steps = compressed_steps + 1
  end do
  call expect(compressed_steps > 0, 'no real(4) MPI_Iallreduce was compressed')

  deallocate (s4, a4, b4, at, bt, ia, ib, msg_out, msg_in)
  call MPI_Allreduce(failures, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  flush (output_unit)
  call MPI_Finalize(ierr)
  if (rank == 0) then
    if (total == 0) then
      write (error_unit, '(a,i0,a)') name//': ', nranks, ' ranks: PASS'
    else
      write (error_unit, '(a,i0,a)') name//': ', total, ' checks FAILED'
    end if
  end if
  if (total /= 0) error stop 1

contains

  ! An integer in [-1000, 1000].
  integer function ival(r, i, salt)
    integer, intent(in) :: r, i, salt
    ival = int(mod(int(i, 8) * 7919_8 + int(r, 8) * 104729_8 + int(salt, 8) * 31_8, 2001_8)) - 1000
  end function ival

  subroutine expect(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      write (error_unit, '(a,i0,a)') name//': rank ', rank, ': FAIL: '//what
      failures = failures + 1
    end if
  end subroutine expect

end program preload_fortran_iallreduce
