! The cc_coll module's grouped allreduce and LOWRANK state with real ranks:
! a group of LOWRANK matrices (real(4) and real(8), exactly low-rank data,
! so PowerSGD recovers the average) beside small dense tensors and a
! LOWRANK tensor too small to compress; the layout convention (a Fortran
! a(n, m) is the C matrix m x n, and the result is matmul(q, transpose(p)));
! cc_coll_set_lowrank_shape; get_state before and after, state_bytes, set_q
! round trip, start_iter; the in-place form with both count kinds; F16
! through c_loc; Fortran-side and C-side errors, and a group the ranks
! disagree on.
program fortran_group
  use mpi
  use, intrinsic :: iso_c_binding, only: c_int, c_int16_t, c_int64_t, c_size_t, c_ptr, c_loc, c_null_ptr
  use cc_coll
  use cc_coll_test_checks
  implicit none

  integer, parameter :: n1 = 24, m1 = 16, n2 = 30, m2 = 20, nb = 7, ns = 5
  type(cc_coll_comm) :: cc
  type(cc_coll_params) :: pw, pv, pb, ps, pstart, p4(4)
  type(cc_coll_stats) :: st
  real(4), target :: w_in(n1, m1), w_out(n1, m1), w_exp(n1, m1), bias(nb), bias_exp(nb)
  real(8), target :: v(n2, m2), v_exp(n2, m2), small(ns), small_exp(ns), fresh(6, 8), fresh_exp(6, 8)
  real(4), target :: one(10)
  integer(c_int16_t), target :: h(4)
  real(8), allocatable :: p(:, :), q(:, :), q_saved(:, :), p2(:, :), q2(:, :)
  type(c_ptr) :: sends(4), recvs(4)
  integer :: counts(4)
  integer(c_int) :: dtypes(4)
  integer(c_int64_t) :: rows, cols, calls, state_b
  integer :: ierr, mpierr, nranks, lr, i, j, rank_i
  real(8) :: avg1, tol

  call MPI_Init(mpierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, mpierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, mpierr)
  nfail = 0

  call cc_coll_comm_create(MPI_COMM_WORLD, cc, ierr)
  call expect('cc_coll_comm_create', ierr, CC_COLL_OK)
  if (ierr /= CC_COLL_OK) call MPI_Abort(MPI_COMM_WORLD, 1, mpierr)

  ! --- cc_coll_set_lowrank_shape: C order, the last extent is the rows -------------
  pw = cc_coll_params(mask=CC_COLL_PARAMS_FIELD_METHOD, method=CC_COLL_METHOD_LOWRANK)
  call cc_coll_set_lowrank_shape(pw, shape(w_in))
  call check('set_lowrank_shape(a(24, 16)): rows 16, cols 24, SHAPE bit added', pw%rows == m1 .and. &
             pw%cols == n1 .and. pw%mask == ior(CC_COLL_PARAMS_FIELD_METHOD, CC_COLL_PARAMS_FIELD_SHAPE))
  call cc_coll_set_lowrank_shape(ps, [2, 3, 5])
  call check('set_lowrank_shape([2, 3, 5]): rows 5, cols 6', ps%rows == 5 .and. ps%cols == 6)
  call cc_coll_set_lowrank_shape(ps, [9])
  call check('set_lowrank_shape([9]): rows 9, cols 1', ps%rows == 9 .and. ps%cols == 1)

  ! --- one group: two LOWRANK matrices, a dense bias, a LOWRANK tensor too small ---
  ! w: rank 1 on every rank, (rank + 1) x(i) y(j); real(4), out of place.
  ! v: rank 2 on every rank and in the sum; real(8), in place.
  do j = 1, m1
    do i = 1, n1
      w_in(i, j) = real((rank + 1) * sin(0.1d0 * i + 0.3d0) * cos(0.2d0 * j), 4)
    end do
  end do
  avg1 = real(nranks + 1, 8) / 2
  do j = 1, m1
    do i = 1, n1
      w_exp(i, j) = real(avg1 * sin(0.1d0 * i + 0.3d0) * cos(0.2d0 * j), 4)
    end do
  end do
  do j = 1, m2
    do i = 1, n2
      v(i, j) = (rank + 1) * sin(0.1d0 * i) * cos(0.3d0 * j) + (rank * rank + 1) * cos(0.05d0 * i * i) * sin(1.0d0 * j)
      v_exp(i, j) = avg1 * sin(0.1d0 * i) * cos(0.3d0 * j) + &
                    sum([(q2i(rank_i), rank_i = 0, nranks - 1)]) / nranks * cos(0.05d0 * i * i) * sin(1.0d0 * j)
    end do
  end do
  bias = [(real(i + rank, 4), i = 1, nb)]
  bias_exp = [(real(i, 4) + real(nranks - 1, 4) / 2, i = 1, nb)]
  small = [(real(3 * i - rank, 8), i = 1, ns)]
  small_exp = [(real(3 * i, 8) - real(nranks - 1, 8) / 2, i = 1, ns)]
  w_out = -1

  pw%mask = ior(ior(pw%mask, CC_COLL_PARAMS_FIELD_RANK), ior(CC_COLL_PARAMS_FIELD_EF, CC_COLL_PARAMS_FIELD_WARM_START))
  pw%rank = 1
  pw%ef = 1
  pw%warm_start = 1
  pv = cc_coll_params(mask=ior(ior(CC_COLL_PARAMS_FIELD_METHOD, CC_COLL_PARAMS_FIELD_RANK), &
                               ior(CC_COLL_PARAMS_FIELD_MIN_COMPRESSION_RATE, CC_COLL_PARAMS_FIELD_SEED)), &
                      method=CC_COLL_METHOD_LOWRANK, rank=2, min_compression_rate=1.5d0, seed=77)
  call cc_coll_set_lowrank_shape(pv, shape(v))
  pb = cc_coll_params(mask=CC_COLL_PARAMS_FIELD_METHOD, method=CC_COLL_METHOD_NONE)
  ! 5 elements in the near-square view (SHAPE with rows = cols = 0): a 3 x 2
  ! matrix at rank 1 fails (3 + 2) x 1 x 2 < 6, so it is dense.
  ps = cc_coll_params(mask=ior(ior(ior(CC_COLL_PARAMS_FIELD_METHOD, CC_COLL_PARAMS_FIELD_RANK), &
                               CC_COLL_PARAMS_FIELD_MIN_COMPRESSION_RATE), CC_COLL_PARAMS_FIELD_SHAPE), &
                      method=CC_COLL_METHOD_LOWRANK, rank=1, min_compression_rate=2, rows=0, cols=0)

  sends = [c_loc(w_in), c_loc(v), c_loc(bias), c_loc(small)]
  recvs = [c_loc(w_out), c_loc(v), c_loc(bias), c_loc(small)]
  counts = [size(w_in), size(v), size(bias), size(small)]
  dtypes = [CC_COLL_F32, CC_COLL_F64, CC_COLL_F32, CC_COLL_F64]
  p4 = [pw, pv, pb, ps]
  call cc_coll_comm_reset_stats(cc, ierr)
  call cc_coll_allreduce_group(sends, recvs, counts, dtypes, CC_COLL_AVG, cc, ierr, p4)
  call expect('group of 4 (LOWRANK f32, LOWRANK f64, NONE, small LOWRANK)', ierr, CC_COLL_OK)
  tol = 1d-4 * maxval(abs(w_exp))
  call check('LOWRANK rank 1 of a rank-1 real(4) matrix: the average', all(abs(w_out - w_exp) <= tol))
  call check('LOWRANK out of place: sendbuf untouched', &
             w_in(3, 5) == real((rank + 1) * sin(0.1d0 * 3 + 0.3d0) * cos(0.2d0 * 5), 4))
  tol = 1d-9 * maxval(abs(v_exp))
  call check('LOWRANK rank 2 of a rank-2 real(8) matrix: the average', all(abs(v - v_exp) <= tol))
  call check('NONE tensor of the group: exact average', all(bias == bias_exp))
  call check('LOWRANK tensor failing the compression test: exact average', all(small == small_exp))
  st%mask = CC_COLL_STATS_FIELD_ALL
  call cc_coll_comm_get_stats(cc, st, ierr)
  call expect('cc_coll_comm_get_stats', ierr, CC_COLL_OK)
  call check('stats: 4 tensors counted, bytes asked', st%calls == 4 .and. &
             st%bytes_uncompressed == 4 * (n1 * m1 + nb) + 8 * (n2 * m2 + ns))
  call check('stats: fewer bytes on the wire than asked', st%bytes_wire < st%bytes_uncompressed)

  ! --- the state: the library's matrices, and the result is matmul(q, transpose(p)) ---
  call cc_coll_lowrank_get_state(w_out, size(w_out), cc, ierr, pw, rows=rows, cols=cols, rank=lr, calls=calls, &
                                 p=p, q=q)
  call expect('get_state of w_out', ierr, CC_COLL_OK)
  call check('get_state of w(24, 16): rows 16, cols 24, rank 1, 1 call', rows == m1 .and. cols == n1 .and. &
             lr == 1 .and. calls == 1)
  call check('get_state: p(rows, rank), q(cols, rank)', all(shape(p) == [m1, 1]) .and. all(shape(q) == [n1, 1]))
  call check('AVG result of w(n, m) is matmul(q, transpose(p))', &
             all(abs(matmul(q, transpose(p)) - w_out) <= 1d-5 * maxval(abs(w_exp))))
  call cc_coll_lowrank_get_state_raw(c_loc(w_out), size(w_out), CC_COLL_F32, cc, ierr, pw, rank=lr, p=p2, q=q2)
  call expect('get_state_raw of w_out', ierr, CC_COLL_OK)
  call check('get_state_raw equals the generic form', lr == 1 .and. all(p2 == p) .and. all(q2 == q))

  call cc_coll_lowrank_get_state(v, size(v), cc, ierr, pv, rows=rows, cols=cols, rank=lr, calls=calls, p=p, q=q)
  call expect('get_state of v', ierr, CC_COLL_OK)
  call check('get_state of v(30, 20): rows 20, cols 30, rank 2, 1 call', rows == m2 .and. cols == n2 .and. &
             lr == 2 .and. calls == 1)
  call check('AVG result of v(n, m) is matmul(q, transpose(p))', &
             all(abs(matmul(q, transpose(p)) - v) <= 1d-12 * maxval(abs(v_exp))))
  q_saved = q

  call cc_coll_lowrank_get_state(small, size(small), cc, ierr, ps, rows=rows, rank=lr, calls=calls, p=p, q=q)
  call expect('get_state of the small tensor', ierr, CC_COLL_OK)
  call check('small LOWRANK tensor: 1 call, never compressed (rank 0, empty p and q)', &
             calls == 1 .and. lr == 0 .and. size(p) == 0 .and. size(q) == 0)
  call cc_coll_lowrank_get_state(bias, size(bias), cc, ierr, pb, rows=rows, cols=cols, rank=lr, calls=calls)
  call expect('get_state of the NONE tensor', ierr, CC_COLL_OK)
  call check('NONE tensor: no LOWRANK state', rows == 0 .and. cols == 0 .and. lr == 0 .and. calls == 0)

  ! A second step: warm start from the stored Q, still the average.
  do j = 1, m2
    do i = 1, n2
      v(i, j) = (rank + 1) * sin(0.1d0 * i) * cos(0.3d0 * j) + (rank * rank + 1) * cos(0.05d0 * i * i) * sin(1.0d0 * j)
    end do
  end do
  call cc_coll_allreduce_group_inplace([c_loc(v)], [int(size(v), c_size_t)], [CC_COLL_F64], CC_COLL_AVG, cc, &
                                       ierr, [pv])
  call expect('group in place, c_size_t counts, second step of v', ierr, CC_COLL_OK)
  call check('second step of v: the average again', all(abs(v - v_exp) <= 1d-9 * maxval(abs(v_exp))))
  call cc_coll_lowrank_get_state(v, size(v), cc, ierr, pv, calls=calls)
  call check('second step of v: 2 calls', ierr == CC_COLL_OK .and. calls == 2)

  ! --- set_q: a checkpointed Q comes back as it was ---------------------------------
  call cc_coll_state_bytes(cc, state_b, ierr)
  call expect('cc_coll_state_bytes', ierr, CC_COLL_OK)
  call check('state_bytes counts the factors of v (P and Q of 20 x 30 at rank 2, real(8))', &
             state_b > (m2 + n2) * 2 * 8)
  call cc_coll_ef_reset_all(cc, ierr)
  call expect('cc_coll_ef_reset_all', ierr, CC_COLL_OK)
  call cc_coll_state_bytes(cc, state_b, ierr)
  call check('ef_reset_all gives the state bytes back', ierr == CC_COLL_OK .and. state_b == 0)
  call cc_coll_lowrank_get_state(v, size(v), cc, ierr, pv, rank=lr, calls=calls)
  call check('ef_reset_all drops the LOWRANK state', ierr == CC_COLL_OK .and. lr == 0 .and. calls == 0)
  call cc_coll_lowrank_set_q(v, size(v), q_saved, cc, ierr, pv)
  call expect('set_q of v', ierr, CC_COLL_OK)
  call cc_coll_lowrank_get_state(v, size(v), cc, ierr, pv, rows=rows, cols=cols, rank=lr, calls=calls, p=p, q=q)
  call expect('get_state after set_q', ierr, CC_COLL_OK)
  call check('after set_q: the shape, rank 2, 0 calls', rows == m2 .and. cols == n2 .and. lr == 2 .and. calls == 0)
  call check('after set_q: q is the one set, bit for bit', all(shape(q) == shape(q_saved)) .and. all(q == q_saved))
  call check('after set_q: no P yet (zeros)', all(shape(p) == [m2, 2]) .and. all(p == 0))
  call cc_coll_lowrank_set_q(v, size(v), q_saved(1:n2 - 1, :), cc, ierr, pv)
  call expect('set_q with q(cols - 1, r): Fortran-side shape check', ierr, CC_COLL_ERR_INVALID_ARG)
  call cc_coll_lowrank_set_q(v, size(v), q_saved(:, 1:1), cc, ierr, pv)
  call expect('set_q with q(cols, r - 1): Fortran-side shape check', ierr, CC_COLL_ERR_INVALID_ARG)
  call cc_coll_lowrank_set_q(w_out, size(w_out), reshape([(1d0, i = 1, n1)], [n1, 1]), cc, ierr, pw)
  call expect('set_q of the real(4) w_out', ierr, CC_COLL_OK)
  call cc_coll_lowrank_get_state(w_out, size(w_out), cc, ierr, pw, rank=lr, q=q)
  call check('set_q of real(4): q read back', ierr == CC_COLL_OK .and. lr == 1 .and. all(q == 1))

  ! --- start_iter: the first call is dense (exact on full-rank data), then LOWRANK ---
  pstart = cc_coll_params(mask=ior(ior(CC_COLL_PARAMS_FIELD_METHOD, CC_COLL_PARAMS_FIELD_RANK), &
                                   ior(CC_COLL_PARAMS_FIELD_START_ITER, CC_COLL_PARAMS_FIELD_MIN_COMPRESSION_RATE)), &
                          method=CC_COLL_METHOD_LOWRANK, rank=1, start_iter=1, min_compression_rate=1)
  call cc_coll_set_lowrank_shape(pstart, shape(fresh))
  do j = 1, 8
    do i = 1, 6
      fresh(i, j) = real(i * j + mod(i + 3 * j, 5) + rank, 8)
      fresh_exp(i, j) = real(i * j + mod(i + 3 * j, 5), 8) + real(nranks - 1, 8) / 2
    end do
  end do
  call cc_coll_allreduce_group_inplace([c_loc(fresh)], [size(fresh)], [CC_COLL_F64], CC_COLL_AVG, cc, ierr, [pstart])
  call expect('start_iter 1: first call', ierr, CC_COLL_OK)
  call check('start_iter 1: the first call is the exact dense average', all(fresh == fresh_exp))
  call cc_coll_lowrank_get_state(fresh, size(fresh), cc, ierr, pstart, rank=lr, calls=calls)
  call check('start_iter 1: 1 call, not compressed', ierr == CC_COLL_OK .and. lr == 0 .and. calls == 1)
  call cc_coll_allreduce_group_inplace([c_loc(fresh)], [size(fresh)], [CC_COLL_F64], CC_COLL_AVG, cc, ierr, [pstart])
  call expect('start_iter 1: second call', ierr, CC_COLL_OK)
  call cc_coll_lowrank_get_state(fresh, size(fresh), cc, ierr, pstart, rows=rows, cols=cols, rank=lr, calls=calls)
  call check('start_iter 1: the second call is compressed, 8 x 6 at rank 1', ierr == CC_COLL_OK .and. &
             lr == 1 .and. calls == 2 .and. rows == 8 .and. cols == 6)

  ! --- F16 bits through c_loc, in a group with a real(4) tensor, without params -------
  h = int(z'3C00', c_int16_t)                          ! 1.0
  one = 1
  call cc_coll_allreduce_group_inplace([c_loc(h), c_loc(one)], [size(h), size(one)], [CC_COLL_F16, CC_COLL_F32], &
                                       CC_COLL_SUM, cc, ierr, [pb, pb])
  call expect('group with F16 and F32', ierr, CC_COLL_OK)
  if (nranks == 2) call check('F16 1.0 summed over 2 ranks is 2.0', all(h == int(z'4000', c_int16_t)))
  call check('F32 1.0 summed', all(one == nranks))
  call cc_coll_allreduce_group_inplace([c_loc(one)], [size(one)], [CC_COLL_F32], CC_COLL_SUM, cc, ierr)
  call expect('group without params (the communicator defaults)', ierr, CC_COLL_OK)

  ! --- errors -------------------------------------------------------------------------
  call cc_coll_allreduce_group_inplace([c_loc(one)], [size(one)], [CC_COLL_F32], 7, cc, ierr, [pb])
  call expect('group op 7', ierr, CC_COLL_ERR_INVALID_OP)                  ! leaves a message ...
  call cc_coll_allreduce_group(sends, recvs, counts(1:3), dtypes, CC_COLL_SUM, cc, ierr, p4)
  call expect('group: 3 counts for 4 tensors', ierr, CC_COLL_ERR_INVALID_ARG)
  call check('... which a Fortran-side error clears', len(cc_coll_last_error()) == 0)
  call cc_coll_allreduce_group(sends(1:3), recvs, counts, dtypes, CC_COLL_SUM, cc, ierr, p4)
  call expect('group: 3 sendbufs for 4 tensors', ierr, CC_COLL_ERR_INVALID_ARG)
  call cc_coll_allreduce_group(sends, recvs, counts, dtypes(1:2), CC_COLL_SUM, cc, ierr, p4)
  call expect('group: 2 dtypes for 4 tensors', ierr, CC_COLL_ERR_INVALID_ARG)
  call cc_coll_allreduce_group(sends, recvs, counts, dtypes, CC_COLL_SUM, cc, ierr, p4(1:3))
  call expect('group: 3 params for 4 tensors', ierr, CC_COLL_ERR_INVALID_ARG)
  call cc_coll_allreduce_group_inplace([c_loc(one)], [-1], [CC_COLL_F32], CC_COLL_SUM, cc, ierr, [pb])
  call expect('group: count -1', ierr, CC_COLL_ERR_INVALID_ARG)
  call cc_coll_allreduce_group_inplace([c_loc(one)], [size(one)], [9_c_int], CC_COLL_SUM, cc, ierr, [pb])
  call expect('group: dtype 9', ierr, CC_COLL_ERR_INVALID_DTYPE)
  call cc_coll_allreduce_group_inplace([c_null_ptr], [4], [CC_COLL_F32], CC_COLL_SUM, cc, ierr, [pb])
  call expect('group: a NULL buffer', ierr, CC_COLL_ERR_NULL_BUFFER)
  ps = cc_coll_params(mask=ior(CC_COLL_PARAMS_FIELD_METHOD, CC_COLL_PARAMS_FIELD_SHAPE), &
                      method=CC_COLL_METHOD_LOWRANK, rows=3)
  call cc_coll_allreduce_group_inplace([c_loc(one)], [size(one)], [CC_COLL_F32], CC_COLL_SUM, cc, ierr, [ps])
  call expect('group: LOWRANK rows 3 do not divide 10 elements', ierr, CC_COLL_ERR_INVALID_ARG)
  call check('rows 3 of 10: the message names the tensor', index(cc_coll_last_error(), 'tensor 0') > 0)
  call cc_coll_allreduce_group_inplace(sends(1:0), counts(1:0), dtypes(1:0), CC_COLL_SUM, cc, ierr)
  call expect('group of 0 tensors', ierr, CC_COLL_OK)
  call cc_coll_lowrank_get_state(w_out, size(w_out) + 1, cc, ierr)
  call expect('get_state: count > size(recvbuf)', ierr, CC_COLL_ERR_INVALID_ARG)
  call cc_coll_lowrank_get_state_raw(c_loc(w_out), size(w_out), 9, cc, ierr)
  call expect('get_state_raw: dtype 9', ierr, CC_COLL_ERR_INVALID_DTYPE)
  ps = cc_coll_params(mask=ior(CC_COLL_PARAMS_FIELD_METHOD, CC_COLL_PARAMS_FIELD_SHAPE), &
                      method=CC_COLL_METHOD_LOWRANK, rows=3)
  call cc_coll_lowrank_set_q(one, size(one), q_saved, cc, ierr, ps)
  call expect('set_q: LOWRANK rows 3 do not divide 10 elements', ierr, CC_COLL_ERR_INVALID_ARG)
  ! rows = 0 asks for the near-square view and needs cols = 0.
  ps = cc_coll_params(mask=ior(CC_COLL_PARAMS_FIELD_METHOD, CC_COLL_PARAMS_FIELD_SHAPE), &
                      method=CC_COLL_METHOD_LOWRANK, rows=0, cols=5)
  call cc_coll_allreduce_group_inplace([c_loc(one)], [size(one)], [CC_COLL_F32], CC_COLL_SUM, cc, ierr, [ps])
  call expect('group: LOWRANK rows 0 with cols 5', ierr, CC_COLL_ERR_INVALID_ARG)
  call check('rows 0 with cols 5: the message says why', index(cc_coll_last_error(), 'rows = 0 with') > 0)
  ! A rank-1 array without SHAPE is 1-D: sent densely (exact sum), no factors,
  ! its call count advances; set_q refuses it.
  ps = cc_coll_params(mask=ior(ior(CC_COLL_PARAMS_FIELD_METHOD, CC_COLL_PARAMS_FIELD_RANK), CC_COLL_PARAMS_FIELD_EF_KEY), &
                      method=CC_COLL_METHOD_LOWRANK, rank=1, ef_key=4242)
  one = [(real(i + rank, 4), i = 1, size(one))]
  call cc_coll_allreduce_group_inplace([c_loc(one)], [size(one)], [CC_COLL_F32], CC_COLL_SUM, cc, ierr, [ps])
  call expect('group: a 1-D LOWRANK tensor', ierr, CC_COLL_OK)
  call check('1-D LOWRANK tensor: the exact sum', &
             all(one == [(real(nranks * i + nranks * (nranks - 1) / 2, 4), i = 1, size(one))]))
  call cc_coll_lowrank_get_state(one, size(one), cc, ierr, ps, rows=rows, cols=cols, rank=lr, calls=calls)
  call check('1-D LOWRANK tensor: no factors, 1 call', ierr == CC_COLL_OK .and. rows == 0 .and. cols == 0 .and. &
             lr == 0 .and. calls == 1)
  call cc_coll_lowrank_set_q(one, size(one), q_saved, cc, ierr, ps)
  call expect('set_q of a 1-D tensor (no SHAPE)', ierr, CC_COLL_ERR_INVALID_ARG)
  call check('set_q without SHAPE: the message says why', index(cc_coll_last_error(), 'sent densely') > 0)
  if (nranks > 1) then
    ! Rank 0 passes one element fewer: every rank learns of it.
    one = 1
    call cc_coll_allreduce_group_inplace([c_loc(one)], [size(one) - merge(1, 0, rank == 0)], [CC_COLL_F32], &
                                         CC_COLL_SUM, cc, ierr, [pb])
    call expect('group the ranks disagree on', ierr, CC_COLL_ERR_MISMATCH)
    call check('disagreement: nothing reduced', all(one == 1))
  end if

  call cc_coll_comm_destroy(cc, ierr)
  call expect('cc_coll_comm_destroy', ierr, CC_COLL_OK)
  call cc_coll_allreduce_group_inplace([c_loc(one)], [size(one)], [CC_COLL_F32], CC_COLL_SUM, cc, ierr, [pb])
  call expect('group on a destroyed handle', ierr, CC_COLL_ERR_INVALID_COMM)
  call cc_coll_lowrank_get_state(v, size(v), cc, ierr, pv)
  call expect('get_state on a destroyed handle', ierr, CC_COLL_ERR_INVALID_COMM)

  deallocate(p, q, q_saved, p2, q2, stat=ierr)
  call MPI_Allreduce(MPI_IN_PLACE, nfail, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, mpierr)
  if (rank == 0 .and. nfail == 0) print '(a,i0,a)', 'fortran_group: ', nranks, ' ranks: passed'
  call MPI_Finalize(mpierr)
  if (nfail /= 0) error stop 1

contains

  ! The second factor's weight on rank r.
  pure function q2i(r) result(x)
    integer, intent(in) :: r
    real(8) :: x
    x = real(r * r + 1, 8)
  end function q2i

end program fortran_group
