! The cc_coll module's procedures with real ranks: arrays of several ranks
! through the generic interfaces, in place and out of place, partial counts,
! non-contiguous sections, params, the raw (c_ptr) form with F16, error
! codes and messages, the error-feedback store, statistics and destroy;
! method SKETCH and its params fields; the reduce-scatter generics against
! MPI_Reduce_scatter_block.
program fortran_api
  use mpi
  use, intrinsic :: iso_c_binding, only: c_int16_t, c_int64_t, c_loc, c_null_ptr
  use cc_coll
  use cc_coll_test_checks
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
  integer(c_int64_t) :: ef_bytes, state_b
  integer :: ierr, mpierr, nranks, crank, csize, i, j, k, q
  real(4), allocatable :: rs(:, :), rs_in(:, :), rs_out(:), rs_exp(:), sk(:), sk_topk(:), sk_exp(:)
  real(8), allocatable :: rd(:, :, :), rd_exp(:), dense(:), dense_exp(:)
  real(4), target, allocatable :: rr(:), rr_exp(:)
  integer, parameter :: rc = 37, nsk = 8 * 1024, ksk = 100
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
  ! A value past the library's last method (ids are listed, not counted).
  call cc_coll_method_at(cc_coll_method_count() - 1, k, ierr)
  call expect('the last method', ierr, CC_COLL_OK)
  p%method = k + 1
  call cc_coll_allreduce(part_in, part, 10, CC_COLL_SUM, cc, ierr, p)
  call expect('a method past the last', ierr, CC_COLL_ERR_INVALID_METHOD)

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
  call cc_coll_state_bytes(cc, state_b, ierr)
  call expect('cc_coll_state_bytes', ierr, CC_COLL_OK)
  call check('TOPK keeps no method state besides its residual', state_b == 0)
  st%mask = CC_COLL_STATS_FIELD_ALL
  call cc_coll_comm_get_stats(cc, st, ierr)
  call expect('cc_coll_comm_get_stats', ierr, CC_COLL_OK)
  call check('stats: one call of 8000 bytes', st%calls == 1 .and. st%bytes_uncompressed == 8000)
  call check('stats: fewer bytes on the wire', st%bytes_wire > 0 .and. st%bytes_wire < 8000)
  call cc_coll_ef_reset_all(cc, ierr)
  call expect('cc_coll_ef_reset_all', ierr, CC_COLL_OK)
  call cc_coll_ef_bytes(cc, ef_bytes, ierr)
  call check('no residual after cc_coll_ef_reset_all', ierr == CC_COLL_OK .and. ef_bytes == 0)

  ! --- method SKETCH ---------------------------------------------------------------
  ! Density 1 keeps every element: the sketch would outweigh the buffer, so
  ! the call is the dense allreduce, bit-identical to MPI_Allreduce.
  p = cc_coll_params()
  p%mask = ior(ior(CC_COLL_PARAMS_FIELD_METHOD, CC_COLL_PARAMS_FIELD_DENSITY), CC_COLL_PARAMS_FIELD_EF)
  p%method = CC_COLL_METHOD_SKETCH
  p%density = 1
  p%ef = 0
  allocate(dense(3000), dense_exp(3000))
  dense = [(sin(real(3 * i + 7 * rank, 8)), i = 1, size(dense))]
  call MPI_Allreduce(dense, dense_exp, size(dense), MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, mpierr)
  call cc_coll_allreduce_inplace(dense, size(dense), CC_COLL_SUM, cc, ierr, p)
  call expect('SKETCH density 1', ierr, CC_COLL_OK)
  call check('SKETCH density 1 equals MPI_Allreduce', all(dense == dense_exp))

  ! Density ksk/nsk on integer data: every rank's ksk largest magnitudes lie
  ! at the same ksk indices, one per column of the sketch's 1024-element
  ! blocks, so peeling decodes the exact sums; TOPK gives the same values.
  allocate(sk(nsk), sk_topk(nsk), sk_exp(nsk))
  do i = 1, nsk
    sk(i) = real(mod(7 * i + rank, 97) - 48, 4)
  end do
  sk_exp = 0
  do j = 0, ksk - 1
    i = 1 + j + 1024 * mod(5 * j, 8)
    sk(i) = real((1 - 2 * mod(j + rank, 2)) * (1000 + 10 * j + rank), 4)
    sk_exp(i) = real(sum([((1 - 2 * mod(j + q, 2)) * (1000 + 10 * j + q), q = 0, nranks - 1)]), 4)
  end do
  p%mask = ior(ior(ior(CC_COLL_PARAMS_FIELD_METHOD, CC_COLL_PARAMS_FIELD_DENSITY), CC_COLL_PARAMS_FIELD_EF), &
               ior(ior(CC_COLL_PARAMS_FIELD_SPARSIFIER, CC_COLL_PARAMS_FIELD_LOAD_FACTOR), CC_COLL_PARAMS_FIELD_SEED))
  p%density = (ksk - 0.5d0) / nsk
  p%sparsifier = CC_COLL_SPARSIFY_TOPK
  p%load_factor = 0.75d0
  p%seed = 12345
  call cc_coll_comm_reset_stats(cc, ierr)
  call cc_coll_allreduce(sk, sk_topk, nsk, CC_COLL_SUM, cc, ierr, p)
  call expect('SKETCH density 100/8192', ierr, CC_COLL_OK)
  call check('SKETCH density 100/8192: exact sums of the top k', all(sk_topk == sk_exp))
  st = cc_coll_stats(mask=CC_COLL_STATS_FIELD_ALL)
  call cc_coll_comm_get_stats(cc, st, ierr)
  call expect('cc_coll_comm_get_stats after SKETCH', ierr, CC_COLL_OK)
  call check('stats: SKETCH decoded 100 elements, all by peeling', st%sketch_elements == ksk .and. &
             st%sketch_peeled == ksk)
  call check('stats: SKETCH sent less than the buffer', st%bytes_wire < st%bytes_uncompressed)
  p%mask = ior(ior(CC_COLL_PARAMS_FIELD_METHOD, CC_COLL_PARAMS_FIELD_DENSITY), CC_COLL_PARAMS_FIELD_EF)
  p%method = CC_COLL_METHOD_TOPK
  call cc_coll_allreduce(sk, sk_topk, nsk, CC_COLL_SUM, cc, ierr, p)
  call expect('TOPK density 100/8192', ierr, CC_COLL_OK)
  call check('TOPK equals SKETCH', all(sk_topk == sk_exp))

  ! The threshold sparsifier: elements below 0.5 (here the ones of
  ! magnitude 1/1024 off the big positions) are zeroed when zero_fraction
  ! allows it.
  where (sk_exp == 0) sk = 2.0**(-10)
  p%mask = ior(ior(CC_COLL_PARAMS_FIELD_METHOD, CC_COLL_PARAMS_FIELD_EF), &
               ior(CC_COLL_PARAMS_FIELD_SPARSIFIER, CC_COLL_PARAMS_FIELD_ZERO_FRACTION))
  p%method = CC_COLL_METHOD_SKETCH
  p%sparsifier = CC_COLL_SPARSIFY_THRESHOLD
  p%zero_fraction = 0.99d0
  sk_topk = -1
  call cc_coll_allreduce(sk, sk_topk, nsk, CC_COLL_SUM, cc, ierr, p)
  call expect('SKETCH threshold', ierr, CC_COLL_OK)
  call check('SKETCH threshold: exact sums of the kept elements', all(sk_topk == sk_exp))

  ! Out-of-domain SKETCH fields.
  p%mask = ior(CC_COLL_PARAMS_FIELD_METHOD, CC_COLL_PARAMS_FIELD_LOAD_FACTOR)
  p%load_factor = 20.0d0
  call cc_coll_allreduce(sk, sk_topk, nsk, CC_COLL_SUM, cc, ierr, p)
  call expect('load_factor 20', ierr, CC_COLL_ERR_INVALID_ARG)
  call check('load_factor 20: the message names it', index(cc_coll_last_error(), 'load_factor') > 0)
  p%mask = ior(CC_COLL_PARAMS_FIELD_METHOD, CC_COLL_PARAMS_FIELD_SPARSIFIER)
  p%sparsifier = 2
  call cc_coll_allreduce(sk, sk_topk, nsk, CC_COLL_SUM, cc, ierr, p)
  call expect('sparsifier 2', ierr, CC_COLL_ERR_INVALID_ARG)
  p%mask = ior(CC_COLL_PARAMS_FIELD_METHOD, CC_COLL_PARAMS_FIELD_ZERO_FRACTION)
  p%zero_fraction = 1
  call cc_coll_allreduce(sk, sk_topk, nsk, CC_COLL_SUM, cc, ierr, p)
  call expect('zero_fraction 1', ierr, CC_COLL_ERR_INVALID_ARG)

  ! --- reduce-scatter ---------------------------------------------------------------
  ! Method NONE against MPI_Reduce_scatter_block on integer data: real(4)
  ! out of place (a rank-2 sendbuf, one column per rank), real(8) in place
  ! (a rank-3 buffer), SUM and AVG.
  p = cc_coll_params(mask=CC_COLL_PARAMS_FIELD_METHOD, method=CC_COLL_METHOD_NONE)
  allocate(rs(rc, nranks), rs_in(rc, nranks), rs_out(rc + 3), rs_exp(rc))
  do j = 1, nranks
    do i = 1, rc
      rs(i, j) = real(mod(3 * i + 5 * j + 7 * rank, 23) - 11, 4)
    end do
  end do
  rs_in = rs
  call MPI_Reduce_scatter_block(rs, rs_exp, rc, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, mpierr)
  rs_out = -99
  call cc_coll_reduce_scatter(rs, rs_out, rc, CC_COLL_SUM, cc, ierr, p)
  call expect('reduce_scatter real(4) NONE', ierr, CC_COLL_OK)
  call check('reduce_scatter real(4) NONE equals MPI_Reduce_scatter_block', all(rs_out(1:rc) == rs_exp))
  call check('reduce_scatter real(4): recvbuf past recvcount untouched', all(rs_out(rc + 1:) == -99))
  call check('reduce_scatter real(4): sendbuf untouched', all(rs == rs_in))
  call cc_coll_reduce_scatter(rs, rs_out, rc, CC_COLL_AVG, cc, ierr, p)
  call expect('reduce_scatter real(4) NONE AVG', ierr, CC_COLL_OK)
  call check('reduce_scatter real(4) NONE AVG', all(rs_out(1:rc) == rs_exp / nranks))

  ! TOPK and SKETCH at density 1 send everything: the same result.
  p%mask = ior(ior(CC_COLL_PARAMS_FIELD_METHOD, CC_COLL_PARAMS_FIELD_DENSITY), CC_COLL_PARAMS_FIELD_EF)
  p%density = 1
  p%ef = 1
  do q = 1, 2
    p%method = merge(CC_COLL_METHOD_TOPK, CC_COLL_METHOD_SKETCH, q == 1)
    rs_out = -99
    call cc_coll_reduce_scatter(rs, rs_out, rc, CC_COLL_SUM, cc, ierr, p)
    call expect('reduce_scatter real(4) TOPK/SKETCH density 1', ierr, CC_COLL_OK)
    call check('reduce_scatter TOPK/SKETCH density 1 equals MPI_Reduce_scatter_block', all(rs_out(1:rc) == rs_exp))
  end do

  p = cc_coll_params(mask=CC_COLL_PARAMS_FIELD_METHOD, method=CC_COLL_METHOD_NONE)
  allocate(rd(rc, 2, nranks), rd_exp(2 * rc))
  do k = 1, nranks
    do j = 1, 2
      do i = 1, rc
        rd(i, j, k) = real(i * j - 3 * k + 2 * rank, 8)
      end do
    end do
  end do
  call MPI_Reduce_scatter_block(rd, rd_exp, 2 * rc, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, mpierr)
  call cc_coll_reduce_scatter_inplace(rd, 2 * rc, CC_COLL_SUM, cc, ierr, p)
  call expect('reduce_scatter_inplace real(8) NONE', ierr, CC_COLL_OK)
  call check('reduce_scatter_inplace real(8) equals MPI_Reduce_scatter_block', &
             all(reshape(rd(:, :, 1), [2 * rc]) == rd_exp))

  ! The raw form, in place on real(4) through c_loc.
  allocate(rr(rc * nranks), rr_exp(rc))
  rr = [(real(mod(i + rank, 17), 4), i = 1, rc * nranks)]
  call MPI_Reduce_scatter_block(rr, rr_exp, rc, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, mpierr)
  call cc_coll_reduce_scatter_raw(c_loc(rr), c_loc(rr), rc, CC_COLL_F32, CC_COLL_SUM, cc, ierr, p)
  call expect('reduce_scatter_raw F32 in place', ierr, CC_COLL_OK)
  call check('reduce_scatter_raw F32 in place', all(rr(1:rc) == rr_exp))

  ! recvcount 0 succeeds; sizes the buffers cannot hold are Fortran-side errors.
  call cc_coll_reduce_scatter(rs, rs_out, 0, CC_COLL_SUM, cc, ierr, p)
  call expect('reduce_scatter recvcount 0', ierr, CC_COLL_OK)
  call cc_coll_reduce_scatter(rs, rs_out, -1, CC_COLL_SUM, cc, ierr, p)
  call expect('reduce_scatter recvcount -1', ierr, CC_COLL_ERR_INVALID_ARG)
  call cc_coll_reduce_scatter(rs, rs_out, rc + 1, CC_COLL_SUM, cc, ierr, p)
  call expect('reduce_scatter recvcount x P > size(sendbuf)', ierr, CC_COLL_ERR_INVALID_ARG)
  call cc_coll_reduce_scatter(rs, rs_out(1:rc - 1), rc, CC_COLL_SUM, cc, ierr, p)
  call expect('reduce_scatter recvcount > size(recvbuf)', ierr, CC_COLL_ERR_INVALID_ARG)
  call cc_coll_reduce_scatter_inplace(rd, 2 * rc + 1, CC_COLL_SUM, cc, ierr, p)
  call expect('reduce_scatter_inplace recvcount x P > size(buf)', ierr, CC_COLL_ERR_INVALID_ARG)
  call cc_coll_reduce_scatter(rs, rs_out, rc, 7, cc, ierr, p)
  call expect('reduce_scatter op 7', ierr, CC_COLL_ERR_INVALID_OP)

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
  call cc_coll_reduce_scatter(rs, rs_out, rc, CC_COLL_SUM, dead, ierr)
  call expect('reduce_scatter on a destroyed handle', ierr, CC_COLL_ERR_INVALID_COMM)
  call check('reduce_scatter on a destroyed handle: the message says so', &
             index(cc_coll_last_error(), 'cc_coll_reduce_scatter') > 0)
  call cc_coll_comm_create(MPI_COMM_NULL, cc, ierr)
  call expect('cc_coll_comm_create(MPI_COMM_NULL)', ierr, CC_COLL_ERR_INVALID_ARG)

  deallocate(rs, rs_in, rs_out, rs_exp, sk, sk_topk, sk_exp, rd, rd_exp, dense, dense_exp, rr, rr_exp, stat=ierr)
  call MPI_Allreduce(MPI_IN_PLACE, nfail, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, mpierr)
  if (rank == 0 .and. nfail == 0) print '(a,i0,a)', 'fortran_api: ', nranks, ' ranks: passed'
  call MPI_Finalize(mpierr)
  if (nfail /= 0) error stop 1

end program fortran_api
