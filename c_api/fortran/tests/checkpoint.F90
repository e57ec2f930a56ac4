! The cc_coll module's checkpoints of the compression state: a TOPK run
! stopped after two steps, its blob exported (cc_coll_state_size,
! cc_coll_state_export) and imported into a new communicator, gives in its
! third step exactly what an uninterrupted run gives; a blob too small, a
! truncated or corrupt blob, and nbytes outside the array are errors that
! leave the state as it was.
program fortran_checkpoint
  use mpi
  use, intrinsic :: iso_c_binding, only: c_int8_t, c_int64_t
  use cc_coll
  use cc_coll_test_checks
  implicit none

  integer, parameter :: n = 200
  type(cc_coll_comm) :: a, b, c
  type(cc_coll_params) :: p
  real(8) :: x(n), whole(n, 3), resumed(n)
  integer(c_int8_t), allocatable :: blob(:), again(:), small(:), bad(:)
  integer(c_int64_t) :: nbytes, got
  integer :: ierr, mpierr, nranks, s

  call MPI_Init(mpierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, mpierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, mpierr)
  nfail = 0
  p = cc_coll_params(mask=ior(ior(CC_COLL_PARAMS_FIELD_METHOD, CC_COLL_PARAMS_FIELD_DENSITY), &
                              CC_COLL_PARAMS_FIELD_EF_KEY), method=CC_COLL_METHOD_TOPK, density=0.05d0, &
                     ef_key=7_c_int64_t)

  ! The uninterrupted run.
  call cc_coll_comm_create(MPI_COMM_WORLD, a, ierr)
  call expect('create a', ierr, CC_COLL_OK)
  do s = 1, 3
    call inputs(s)
    call cc_coll_allreduce(x, whole(:, s), n, CC_COLL_AVG, a, ierr, p)
    call expect('allreduce on a', ierr, CC_COLL_OK)
  end do
  call cc_coll_comm_destroy(a, ierr)

  ! Two steps, the blob...
  call cc_coll_comm_create(MPI_COMM_WORLD, b, ierr)
  do s = 1, 2
    call inputs(s)
    call cc_coll_allreduce(x, resumed, n, CC_COLL_AVG, b, ierr, p)
    call expect('allreduce on b', ierr, CC_COLL_OK)
  end do
  call cc_coll_state_size(b, nbytes, ierr)
  call expect('cc_coll_state_size', ierr, CC_COLL_OK)
  call check('a blob has its header at least', nbytes >= 48)
  allocate(blob(nbytes), small(nbytes - 1))
  call cc_coll_state_export(b, small, got, ierr)
  call expect('export into a blob too small', ierr, CC_COLL_ERR_INVALID_ARG)
  call check('a blob too small gets the size needed', got == nbytes)
  call cc_coll_state_export(b, blob, got, ierr)
  call expect('cc_coll_state_export', ierr, CC_COLL_OK)
  call check('export writes the size the query gave', got == nbytes)
  call cc_coll_comm_destroy(b, ierr)

  ! ...and the third step on a new communicator.
  call cc_coll_comm_create(MPI_COMM_WORLD, c, ierr)
  call cc_coll_state_import(c, blob, nbytes, ierr)
  call expect('cc_coll_state_import', ierr, CC_COLL_OK)
  call inputs(3)
  call cc_coll_allreduce(x, resumed, n, CC_COLL_AVG, c, ierr, p)
  call expect('allreduce on c', ierr, CC_COLL_OK)
  call check('the resumed step equals the uninterrupted one', all(resumed == whole(:, 3)))

  ! Bad blobs change nothing.
  call cc_coll_state_size(c, nbytes, ierr)
  allocate(again(nbytes), bad(nbytes))
  call cc_coll_state_export(c, again, got, ierr)
  bad = again
  call cc_coll_state_import(c, bad, nbytes - 1, ierr)
  call expect('a truncated blob', ierr, CC_COLL_ERR_INVALID_ARG)
  call check('a truncated blob: the message says so', index(cc_coll_last_error(), 'truncated') > 0)
  bad(nbytes / 2) = not(bad(nbytes / 2))
  call cc_coll_state_import(c, bad, nbytes, ierr)
  call expect('a corrupt blob', ierr, CC_COLL_ERR_INVALID_ARG)
  call check('a corrupt blob: the message says so', index(cc_coll_last_error(), 'checksum') > 0)
  call cc_coll_state_import(c, again, nbytes + 1, ierr)
  call expect('nbytes past the array', ierr, CC_COLL_ERR_INVALID_ARG)
  bad = 0
  call cc_coll_state_export(c, bad, got, ierr)
  call check('the state is as it was', all(bad == again))
  call cc_coll_comm_destroy(c, ierr)
  ! A main program's allocatables are not freed at its end.
  deallocate(blob, small, again, bad)

  call MPI_Allreduce(MPI_IN_PLACE, nfail, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, mpierr)
  if (rank == 0 .and. nfail == 0) print '(a,i0,a)', 'fortran_checkpoint: ', nranks, ' ranks: passed'
  call MPI_Finalize(mpierr)
  if (nfail /= 0) error stop 1

contains

  ! This rank's data of step s: integers, different on every rank and step.
  subroutine inputs(s)
    integer, intent(in) :: s
    integer :: i
    do i = 1, n
      x(i) = real(mod(i * (rank + 3) + 17 * s, 29) - 14, 8)
    end do
  end subroutine inputs

end program fortran_checkpoint
