! Calls libcc_coll from Fortran through bind(C) interfaces: creates a
! communicator from the Fortran handle of MPI_COMM_WORLD, does an in-place
! SUM of a real(4) array and checks it against MPI_Allreduce.
! CC_COLL_VERSION_MAJOR / CC_COLL_VERSION_MINOR come from CMake (PROJECT_VERSION).
program fint_allreduce
  use mpi
  use, intrinsic :: iso_c_binding
  implicit none

  interface
    function cc_coll_comm_create_fint_versioned(mpi_comm, comm, header_major, header_minor) &
        bind(C, name="cc_coll_comm_create_fint_versioned") result(status)
      import :: c_int, c_ptr
      integer(c_int), value :: mpi_comm      ! MPI_Fint
      type(c_ptr), intent(out) :: comm       ! cc_coll_comm_h *
      integer(c_int), value :: header_major, header_minor
      integer(c_int) :: status
    end function

    function cc_coll_allreduce(sendbuf, recvbuf, count, dtype, op, params, comm, stream) &
        bind(C, name="cc_coll_allreduce") result(status)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: sendbuf, recvbuf
      integer(c_size_t), value :: count
      integer(c_int), value :: dtype, op     ! cc_coll_dtype_t, cc_coll_op_t
      type(c_ptr), value :: params, comm, stream
      integer(c_int) :: status
    end function

    function cc_coll_comm_destroy(comm) bind(C, name="cc_coll_comm_destroy") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: comm
      integer(c_int) :: status
    end function
  end interface

  integer(c_int), parameter :: CC_COLL_OK = 0, CC_COLL_F32 = 0, CC_COLL_SUM = 0
  integer(c_int), parameter :: CC_COLL_ERR_INVALID_COMM = -6, CC_COLL_ERR_VERSION_MISMATCH = -11
  integer, parameter :: n = 1001
  real(c_float), target :: buf(n)
  real(c_float) :: ref(n), mine(n)
  type(c_ptr) :: comm
  integer :: ierr, rank, nranks, i, r, st
  logical :: ok

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  ok = .true.

  ! A header version newer than the library must be refused.
  st = cc_coll_comm_create_fint_versioned(int(MPI_COMM_WORLD, c_int), comm, &
                                          int(CC_COLL_VERSION_MAJOR + 1, c_int), 0_c_int)
  if (st /= CC_COLL_ERR_VERSION_MISMATCH) then
    print '(a,i0,a,i0)', 'FAIL: create with major+1 returned ', st, ' on rank ', rank
    ok = .false.
  end if

  st = cc_coll_comm_create_fint_versioned(int(MPI_COMM_WORLD, c_int), comm, &
                                          int(CC_COLL_VERSION_MAJOR, c_int), int(CC_COLL_VERSION_MINOR, c_int))
  if (st /= CC_COLL_OK .or. .not. c_associated(comm)) then
    print '(a,i0,a,i0)', 'FAIL: cc_coll_comm_create_fint_versioned returned ', st, ' on rank ', rank
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end if

  do i = 1, n
    mine(i) = real(mod(i * 3 + rank * 5, 17) - 8, c_float)
  end do
  buf = mine
  call MPI_Allreduce(mine, ref, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)

  st = cc_coll_allreduce(c_loc(buf), c_loc(buf), int(n, c_size_t), CC_COLL_F32, CC_COLL_SUM, &
                         c_null_ptr, comm, c_null_ptr)
  if (st /= CC_COLL_OK) then
    print '(a,i0,a,i0)', 'FAIL: cc_coll_allreduce returned ', st, ' on rank ', rank
    ok = .false.
  else
    do i = 1, n
      if (buf(i) /= ref(i)) then
        print '(a,i0,a,f0.1,a,f0.1,a,i0)', 'FAIL: element ', i, ' is ', buf(i), ', expected ', ref(i), &
              ' on rank ', rank
        ok = .false.
        exit
      end if
    end do
    ! The data are integers in [-8, 8]: check the sum directly as well.
    if (buf(1) /= real(sum([(mod(3 + r * 5, 17) - 8, r = 0, nranks - 1)]), c_float)) then
      print '(a,i0)', 'FAIL: element 1 is not the exact sum on rank ', rank
      ok = .false.
    end if
  end if

  st = cc_coll_comm_destroy(comm)
  if (st /= CC_COLL_OK) then
    print '(a,i0)', 'FAIL: cc_coll_comm_destroy returned ', st
    ok = .false.
  end if
  st = cc_coll_comm_destroy(comm)
  if (st /= CC_COLL_ERR_INVALID_COMM) then
    print '(a,i0)', 'FAIL: second cc_coll_comm_destroy returned ', st
    ok = .false.
  end if

  call MPI_Allreduce(MPI_IN_PLACE, ok, 1, MPI_LOGICAL, MPI_LAND, MPI_COMM_WORLD, ierr)
  if (rank == 0 .and. ok) print '(a,i0,a)', 'fint_allreduce: ', nranks, ' ranks: passed'
  call MPI_Finalize(ierr)
  if (.not. ok) error stop 1
end program fint_allreduce
