! The cc_coll module's procedures with real ranks: arrays of several ranks
! through the generic interfaces, in place and out of place, partial counts,
! non-contiguous sections, params, the raw (c_ptr) form with F16, error
! codes and messages, the error-feedback store, statistics and destroy.
program fortran_api
  use mpi
  use, intrinsic :: iso_c_binding, only: c_int16_t, c_int64_t, c_loc, c_null_ptr
  use cc_coll
  implicit none

  type(cc_coll_comm) :: cc, dead
  type(cc_coll_params) :: p
  type(cc_coll_stats) :: st
  real(4) :: a(4, 5, 6), a_out(4, 5, 6), a_exp(4, 5, 6)
  real(8) :: b(7, 9), b_exp(7, 9), sec(20), sec_exp(20)
  real(4), target :: r(33), r_exp(33)
  real(4) :: part(10), part_in(10)
  real(8) :: g(1000), x
  integer(c_int16_t), target :: h(8)
  integer(c_int64_t) :: ef_bytes
  integer :: ierr, mpierr, rank, nranks, crank, csize, i, j, k, q, nfail
  integer(c_int16_t), parameter :: half_of(4) = [int(z'3C00', c_int16_t), int(z'4000', c_int16_t), &
                                                 int(z'4200', c_int16_t), int(z'4400', c_int16_t)]

  call MPI_Init(mpierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, mpierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, mpierr)
  nfail = 0

  call cc_coll_comm_create(MPI_COMM_WORLD, cc, ierr)
  call expect('cc_coll_comm_create', ierr, CC_COLL_OK)
  if (ierr /= CC_COLL_OK) call MPI_Abort(MPI_COMM_WORLD, 1, mpierr)
  call cc_coll_comm_rank(cc, crank, ierr)
  call expect('cc_coll_comm_rank', ierr, CC_COLL_OK)
  call cc_coll_comm_size(cc, csize, ierr)
  call expect('cc_coll_comm_size', ierr, CC_COLL_OK)
  call check('rank and size are those of MPI_COMM_WORLD', crank == rank .and. csize == nranks)

  ! Method NONE everywhere below unless a test says otherwise, whatever
  ! CC_COLL_METHOD holds.
  p%mask = CC_COLL_PARAMS_FIELD_METHOD
  p%method = CC_COLL_METHOD_NONE

  ! Rank-3 real(4), out of place, SUM: exact on integers.
  do k = 1, 6
    do j = 1, 5
      do i = 1, 4
        a(i, j, k) = real(mod(i + 2 * j + 3 * k + 5 * rank, 13) - 6, 4)
        a_exp(i, j, k) = real(sum([(mod(i + 2 * j + 3 * k + 5 * q, 13) - 6, q = 0, nranks - 1)]), 4)
      end do
    end do
  end do
  a_out = -99
  call cc_coll_allreduce(a, a_out, size(a), CC_COLL_SUM, cc, ierr, p)
  call expect('allreduce real(4) rank 3', ierr, CC_COLL_OK)
  call check('allreduce real(4) rank 3: exact sums', all(a_out == a_exp))
  call check('allreduce real(4) rank 3: sendbuf untouched', a(1, 1, 1) == real(mod(6 + 5 * rank, 13) - 6, 4))

  ! After a success the message is empty.
  call check('cc_coll_last_error() is empty after a success', len(cc_coll_last_error()) == 0)

  ! Rank-2 real(8), in place, AVG.
  do j = 1, 9
    do i = 1, 7
      b(i, j) = real(i * j + rank, 8)
      b_exp(i, j) = sum([(real(i * j + q, 8), q = 0, nranks - 1)]) / nranks
    end do
  end do
  call cc_coll_allreduce_inplace(b, size(b), CC_COLL_AVG, cc, ierr, p)
  call expect('allreduce_inplace real(8) AVG', ierr, CC_COLL_OK)
  call check('allreduce_inplace real(8) AVG', all(abs(b - b_exp) <= 1d-12 * abs(b_exp)))

  ! Without params (the communicator's configuration) on real(8).
  g = 1
  call cc_coll_allreduce_inplace(g, 1, CC_COLL_SUM, cc, ierr, p)
  call expect('allreduce_inplace count 1', ierr, CC_COLL_OK)
  call check('count 1 reduces only the first element', g(1) == nranks .and. all(g(2:) == 1))

  ! A partial count: the rest of recvbuf is left alone.
  part_in = 1
  part = -1
  call cc_coll_allreduce(part_in, part, 4, CC_COLL_SUM, cc, ierr, p)
  call expect('allreduce count 4 of 10', ierr, CC_COLL_OK)
  call check('count 4 of 10', all(part(1:4) == nranks) .and. all(part(5:) == -1))

  ! A non-contiguous section in place: the compiler passes a temporary and
  ! copies it back; the elements between are untouched.
  do i = 1, 20
    sec(i) = real(i + rank, 8)
    sec_exp(i) = real(i + rank, 8)
    if (mod(i, 2) == 1) sec_exp(i) = sum([(real(i + q, 8), q = 0, nranks - 1)])
  end do
  call cc_coll_allreduce_inplace(sec(1:20:2), 10, CC_COLL_SUM, cc, ierr, p)
  call expect('allreduce_inplace on sec(1:20:2)', ierr, CC_COLL_OK)
  call check('allreduce_inplace on sec(1:20:2)', all(sec == sec_exp))

  ! A scalar is an array of one element.
  x = 2
  call cc_coll_allreduce_inplace(x, 1, CC_COLL_SUM, cc, ierr, p)
  call expect('allreduce_inplace of a scalar', ierr, CC_COLL_OK)
  call check('allreduce_inplace of a scalar', x == 2 * nranks)

  ! count 0 succeeds, even with a zero-size array.
  call cc_coll_allreduce_inplace(sec(1:0), 0, CC_COLL_SUM, cc, ierr)
  call expect('count 0', ierr, CC_COLL_OK)

  ! The raw form: F32 in place through c_loc, and F16 bits in integer(2).
  r = [(real(i, 4), i = 1, 33)]
  r_exp = r * nranks
  call cc_coll_allreduce_raw(c_loc(r), c_loc(r), size(r), CC_COLL_F32, CC_COLL_SUM, cc, ierr, p)
  call expect('allreduce_raw F32 in place', ierr, CC_COLL_OK)
  call check('allreduce_raw F32 in place', all(r == r_exp))
  if (nranks <= 4) then
    h = half_of(1)
    call cc_coll_allreduce_raw(c_loc(h), c_loc(h), size(h), CC_COLL_F16, CC_COLL_SUM, cc, ierr, p)
    call expect('allreduce_raw F16', ierr, CC_COLL_OK)
    call check('allreduce_raw F16: 1.0 summed over the ranks', all(h == half_of(nranks)))
  end if

  ! Errors: codes and messages.
  call cc_coll_allreduce(part_in, part, -1, CC_COLL_SUM, cc, ierr)
  call expect('count -1', ierr, CC_COLL_ERR_INVALID_ARG)
  call cc_coll_allreduce(part_in, part, 10, 7, cc, ierr)          ! leaves a message ...
  call cc_coll_allreduce(part_in, part(1:5), 10, CC_COLL_SUM, cc, ierr)
  call expect('count 10 > size(recvbuf) 5', ierr, CC_COLL_ERR_INVALID_ARG)
  call check('... which a Fortran-side error clears', len(cc_coll_last_error()) == 0)
  call cc_coll_allreduce_inplace(b, size(b) + 1, CC_COLL_SUM, cc, ierr)
  call expect('count > size(buf)', ierr, CC_COLL_ERR_INVALID_ARG)
  call cc_coll_allreduce(part_in, part, 10, 7, cc, ierr)
  call expect('op 7', ierr, CC_COLL_ERR_INVALID_OP)
  call check('op 7: cc_coll_last_error() says so', index(cc_coll_last_error(), 'op') > 0)
  call cc_coll_allreduce_raw(c_null_ptr, c_null_ptr, 4, CC_COLL_F32, CC_COLL_SUM, cc, ierr)
  call expect('raw with NULL buffers', ierr, CC_COLL_ERR_NULL_BUFFER)
  call cc_coll_allreduce_raw(c_loc(r), c_loc(r), 4, 9, CC_COLL_SUM, cc, ierr)
  call expect('raw with dtype 9', ierr, CC_COLL_ERR_INVALID_DTYPE)
  p%mask = ishft(1_c_int64_t, 40)
  call cc_coll_allreduce(part_in, part, 10, CC_COLL_SUM, cc, ierr, p)
  call expect('params with an unknown mask bit', ierr, CC_COLL_ERR_INVALID_PARAMS)
  call check('unknown mask bit: a message', len(cc_coll_last_error()) > 0)
  p%mask = ior(CC_COLL_PARAMS_FIELD_METHOD, CC_COLL_PARAMS_FIELD_DENSITY)
  p%method = CC_COLL_METHOD_TOPK
  p%density = 0
  call cc_coll_allreduce(part_in, part, 10, CC_COLL_SUM, cc, ierr, p)
  call expect('density 0', ierr, CC_COLL_ERR_INVALID_ARG)
  p%density = 0.5d0
  p%method = 5
  call cc_coll_allreduce(part_in, part, 10, CC_COLL_SUM, cc, ierr, p)
  call expect('method 5', ierr, CC_COLL_ERR_INVALID_METHOD)

  ! TOPK with error feedback keeps a residual; reset_all drops it.
  p%mask = ior(ior(CC_COLL_PARAMS_FIELD_METHOD, CC_COLL_PARAMS_FIELD_DENSITY), &
               ior(CC_COLL_PARAMS_FIELD_EF, CC_COLL_PARAMS_FIELD_EF_KEY))
  p%method = CC_COLL_METHOD_TOPK
  p%density = 0.01d0
  p%ef = 1
  p%ef_key = 42
  call cc_coll_comm_reset_stats(cc, ierr)
  call expect('cc_coll_comm_reset_stats', ierr, CC_COLL_OK)
  g = [(sin(real(i + rank, 8)), i = 1, size(g))]
  call cc_coll_allreduce_inplace(g, size(g), CC_COLL_SUM, cc, ierr, p)
  call expect('TOPK with EF', ierr, CC_COLL_OK)
  call check('TOPK density 0.01: at most 10 nonzeros per rank', count(g /= 0) <= 10 * nranks)
  call cc_coll_ef_bytes(cc, ef_bytes, ierr)
  call expect('cc_coll_ef_bytes', ierr, CC_COLL_OK)
  call check('a residual of 1000 doubles is kept', ef_bytes >= 8000)
  st%mask = CC_COLL_STATS_FIELD_ALL
  call cc_coll_comm_get_stats(cc, st, ierr)
  call expect('cc_coll_comm_get_stats', ierr, CC_COLL_OK)
  call check('stats: one call of 8000 bytes', st%calls == 1 .and. st%bytes_uncompressed == 8000)
  call check('stats: fewer bytes on the wire', st%bytes_wire > 0 .and. st%bytes_wire < 8000)
  call cc_coll_ef_reset_all(cc, ierr)
  call expect('cc_coll_ef_reset_all', ierr, CC_COLL_OK)
  call cc_coll_ef_bytes(cc, ef_bytes, ierr)
  call check('no residual after cc_coll_ef_reset_all', ierr == CC_COLL_OK .and. ef_bytes == 0)

  ! Destroy: the handle is nulled; using it again is CC_COLL_ERR_INVALID_COMM.
  dead = cc
  call cc_coll_comm_destroy(cc, ierr)
  call expect('cc_coll_comm_destroy', ierr, CC_COLL_OK)
  call cc_coll_comm_destroy(cc, ierr)
  call expect('second cc_coll_comm_destroy', ierr, CC_COLL_ERR_INVALID_COMM)
  call cc_coll_comm_rank(dead, crank, ierr)
  call expect('cc_coll_comm_rank on a destroyed handle', ierr, CC_COLL_ERR_INVALID_COMM)
  call cc_coll_allreduce(part_in, part, 10, CC_COLL_SUM, dead, ierr)
  call expect('allreduce on a destroyed handle', ierr, CC_COLL_ERR_INVALID_COMM)
  call cc_coll_comm_create(MPI_COMM_NULL, cc, ierr)
  call expect('cc_coll_comm_create(MPI_COMM_NULL)', ierr, CC_COLL_ERR_INVALID_ARG)

  call MPI_Allreduce(MPI_IN_PLACE, nfail, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, mpierr)
  if (rank == 0 .and. nfail == 0) print '(a,i0,a)', 'fortran_api: ', nranks, ' ranks: passed'
  call MPI_Finalize(mpierr)
  if (nfail /= 0) error stop 1

contains

  subroutine expect(what, got, want)
    character(len=*), intent(in) :: what
    integer, intent(in) :: got, want
    if (got /= want) then
      print '(a,a,a,a,a,a,a,i0)', 'FAIL: ', what, ': ', cc_coll_status_string(got), ', expected ', &
            cc_coll_status_string(want), ' on rank ', rank
      if (len(cc_coll_last_error()) > 0) print '(a,a)', '  ', cc_coll_last_error()
      nfail = nfail + 1
    end if
  end subroutine expect

  subroutine check(what, ok)
    character(len=*), intent(in) :: what
    logical, intent(in) :: ok
    if (.not. ok) then
      print '(a,a,a,i0)', 'FAIL: ', what, ' on rank ', rank
      nfail = nfail + 1
    end if
  end subroutine check

end program fortran_api
