! The cc_coll module's compressed point-to-point between ranks 0 and 1 (the
! other ranks only take part in the final tally): the tag bound;
! uncompressed real(8) and real(4) (raw form) messages arrive exactly;
! LOWRANK of an exactly rank-1 Fortran matrix arrives whole, with the
! shape from cc_coll_set_lowrank_shape; lazy error propagation with TOPK
! keeps sum(sent) - sum(received) equal to the sender's residual, an
! uncompressed send on the channel empties it, lep_reset drops it; a
! receiver that disagrees gets CC_COLL_ERR_MISMATCH on both sides with
! nothing changed; Fortran-side and C-side argument errors.
program fortran_p2p
  use mpi
  use, intrinsic :: iso_c_binding, only: c_loc
  use cc_coll
  use cc_coll_test_checks
  implicit none

  integer, parameter :: n = 24, m = 16, nx = 16, tag_lr = 3, tag_x = 5, tag_f = 6
  type(cc_coll_comm) :: cc
  type(cc_coll_params) :: plr, ptopk
  real(8) :: d(7, 5), d_exp(7, 5), dpart(40), x(nx), got(nx), total(nx), res(nx), res2(nx), peer_total(nx)
  real(4), target :: f(10), f_exp(10)
  real(4) :: a(n, m), a_exp(n, m)
  real(8) :: res_lr(n * m)
  integer :: ierr, mpierr, nranks, peer, tag_ub, world_tag_ub, i, j, step
  integer :: status(MPI_STATUS_SIZE)
  logical :: flag
  integer(kind=MPI_ADDRESS_KIND) :: attr

  call MPI_Init(mpierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, mpierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, mpierr)
  nfail = 0
  if (nranks < 2) then
    if (rank == 0) print '(a)', 'fortran_p2p: needs at least 2 ranks'
    call MPI_Abort(MPI_COMM_WORLD, 1, mpierr)
  end if

  call cc_coll_comm_create(MPI_COMM_WORLD, cc, ierr)
  call expect('cc_coll_comm_create', ierr, CC_COLL_OK)
  if (ierr /= CC_COLL_OK) call MPI_Abort(MPI_COMM_WORLD, 1, mpierr)

  ! Each message uses MPI tags 2 tag and 2 tag + 1.
  call cc_coll_p2p_tag_ub(cc, tag_ub, ierr)
  call expect('cc_coll_p2p_tag_ub', ierr, CC_COLL_OK)
  call MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, attr, flag, mpierr)
  world_tag_ub = int(attr)
  call check('tag_ub: the largest t with 2 t + 1 <= MPI_TAG_UB', flag .and. tag_ub > tag_f .and. &
             2 * int(tag_ub, 8) + 1 <= world_tag_ub .and. 2 * int(tag_ub, 8) + 3 > world_tag_ub)

  if (rank <= 1) then
    peer = 1 - rank

    ! --- uncompressed: exact -------------------------------------------------------
    do j = 1, 5
      do i = 1, 7
        d_exp(i, j) = sin(real(i + 7 * j, 8))
      end do
    end do
    f_exp = [(real(i, 4) / 3, i = 1, 10)]
    if (rank == 0) then
      d = d_exp
      call cc_coll_send(d, size(d), peer, 1, .false., cc, ierr)
      call expect('send real(8) uncompressed', ierr, CC_COLL_OK)
      f = f_exp
      call cc_coll_send_raw(c_loc(f), size(f), CC_COLL_F32, peer, 2, .false., cc, ierr)
      call expect('send_raw F32 uncompressed', ierr, CC_COLL_OK)
    else
      dpart = -1
      call cc_coll_recv(dpart, size(d), peer, 1, cc, ierr)
      call expect('recv real(8) uncompressed', ierr, CC_COLL_OK)
      call check('real(8) arrives exactly, the rest of the buffer untouched', &
                 all(dpart(1:35) == reshape(d_exp, [35])) .and. all(dpart(36:) == -1))
      f = 0
      call cc_coll_recv_raw(c_loc(f), size(f), CC_COLL_F32, peer, 2, cc, ierr)
      call expect('recv_raw F32 uncompressed', ierr, CC_COLL_OK)
      call check('F32 arrives exactly', all(f == f_exp))
    end if

    ! --- LOWRANK of a rank-1 Fortran matrix: a(n, m) is the C matrix m x n -----------
    plr = cc_coll_params(mask=ior(CC_COLL_PARAMS_FIELD_METHOD, CC_COLL_PARAMS_FIELD_RANK), &
                         method=CC_COLL_METHOD_LOWRANK, rank=1)
    call cc_coll_set_lowrank_shape(plr, shape(a))
    do j = 1, m
      do i = 1, n
        a_exp(i, j) = real(cos(0.2d0 * i) * (1 + 0.1d0 * j), 4)
      end do
    end do
    if (rank == 0) then
      a = a_exp
      call cc_coll_send(a, size(a), peer, tag_lr, .true., cc, ierr, plr)
      call expect('send LOWRANK', ierr, CC_COLL_OK)
      call cc_coll_lep_get_residual(cc, peer, tag_lr, size(a), CC_COLL_F32, res_lr, ierr, plr)
      call expect('lep_get_residual after LOWRANK', ierr, CC_COLL_OK)
      call check('LOWRANK of a rank-1 matrix: residual ~ 0', maxval(abs(res_lr)) <= 1d-5)
    else
      a = 0
      call cc_coll_recv(a, size(a), peer, tag_lr, cc, ierr, plr)
      call expect('recv LOWRANK', ierr, CC_COLL_OK)
      call check('LOWRANK of a rank-1 matrix arrives whole', all(abs(a - a_exp) <= 1d-5 * maxval(abs(a_exp))))
    end if

    ! --- lazy error propagation with TOPK ----------------------------------------------
    ptopk = cc_coll_params(mask=ior(ior(CC_COLL_PARAMS_FIELD_METHOD, CC_COLL_PARAMS_FIELD_DENSITY), &
                                    CC_COLL_PARAMS_FIELD_EF), method=CC_COLL_METHOD_TOPK, density=0.25d0, ef=1)
    x = [(real(mod(5 * i, 11) - 5, 8) + 0.25d0 * i, i = 1, nx)]
    total = 0
    do step = 1, 3
      if (rank == 0) then
        call cc_coll_send(x, nx, peer, tag_x, .true., cc, ierr, ptopk)
        call expect('send TOPK with LEP', ierr, CC_COLL_OK)
      else
        got = 0
        call cc_coll_recv(got, nx, peer, tag_x, cc, ierr, ptopk)
        call expect('recv TOPK with LEP', ierr, CC_COLL_OK)
        call check('TOPK density 0.25: at most 4 of 16 elements arrive', count(got /= 0) <= 4)
        total = total + got
      end if
    end do
    if (rank == 1) call MPI_Send(total, nx, MPI_DOUBLE_PRECISION, peer, 99, MPI_COMM_WORLD, mpierr)
    if (rank == 0) then
      call MPI_Recv(peer_total, nx, MPI_DOUBLE_PRECISION, peer, 99, MPI_COMM_WORLD, status, mpierr)
      call cc_coll_lep_get_residual(cc, peer, tag_x, nx, CC_COLL_F64, res, ierr, ptopk)
      call expect('lep_get_residual after TOPK', ierr, CC_COLL_OK)
      call check('LEP: 3 x - sum(received) is the residual', all(abs(3 * x - peer_total - res) <= 1d-12))
      call check('LEP: the residual is not zero (TOPK dropped something)', any(res /= 0))
      ! The residual lives on (dest, tag): another tag has none.
      call cc_coll_lep_get_residual(cc, peer, tag_x + 1, nx, CC_COLL_F64, res2, ierr, ptopk)
      call check('another tag: no residual (zeros)', ierr == CC_COLL_OK .and. all(res2 == 0))
      call cc_coll_lep_get_residual(cc, peer, tag_x, nx - 1, CC_COLL_F64, res2, ierr, ptopk)
      call expect('lep_get_residual with another count', ierr, CC_COLL_ERR_MISMATCH)
    end if

    ! A receiver that disagrees (another count): MISMATCH on both sides, nothing changed.
    if (rank == 0) then
      call cc_coll_send(x, nx, peer, tag_x, .true., cc, ierr, ptopk)
      call expect('send that the receiver refuses', ierr, CC_COLL_ERR_MISMATCH)
      call cc_coll_lep_get_residual(cc, peer, tag_x, nx, CC_COLL_F64, res2, ierr, ptopk)
      call check('refused send: the residual is as before', ierr == CC_COLL_OK .and. all(res2 == res))
    else
      got = -7
      call cc_coll_recv(got, nx - 1, peer, tag_x, cc, ierr, ptopk)
      call expect('recv with another count', ierr, CC_COLL_ERR_MISMATCH)
      call check('refused recv: the buffer is untouched', all(got == -7))
    end if

    ! An uncompressed send on the channel carries x + e and empties the residual.
    if (rank == 0) then
      call cc_coll_send(x, nx, peer, tag_x, .false., cc, ierr, ptopk)
      call expect('uncompressed send on the LEP channel', ierr, CC_COLL_OK)
      call cc_coll_lep_get_residual(cc, peer, tag_x, nx, CC_COLL_F64, res2, ierr, ptopk)
      call check('uncompressed send: the residual is empty', ierr == CC_COLL_OK .and. all(abs(res2) <= 1d-12))
    else
      call cc_coll_recv(got, nx, peer, tag_x, cc, ierr, ptopk)
      call expect('recv of the uncompressed send', ierr, CC_COLL_OK)
      call check('uncompressed send carries x + the residual: 4 x in all', &
                 all(abs(total + got - 4 * x) <= 1d-12 * maxval(abs(x))))
    end if

    ! lep_reset drops a channel's residual.
    if (rank == 0) then
      call cc_coll_send(x, nx, peer, tag_f, .true., cc, ierr, ptopk)
      call expect('send TOPK on tag 6', ierr, CC_COLL_OK)
      call cc_coll_lep_get_residual(cc, peer, tag_f, nx, CC_COLL_F64, res2, ierr, ptopk)
      call check('tag 6: a residual', ierr == CC_COLL_OK .and. any(res2 /= 0))
      call cc_coll_lep_reset(cc, peer, tag_f, ierr, ptopk)
      call expect('cc_coll_lep_reset', ierr, CC_COLL_OK)
      call cc_coll_lep_get_residual(cc, peer, tag_f, nx, CC_COLL_F64, res2, ierr, ptopk)
      call check('after lep_reset: zeros', ierr == CC_COLL_OK .and. all(res2 == 0))
    else
      call cc_coll_recv(got, nx, peer, tag_f, cc, ierr, ptopk)
      call expect('recv TOPK on tag 6', ierr, CC_COLL_OK)
    end if

    ! --- argument errors (local: no message is sent) ------------------------------------
    call cc_coll_send(x, nx + 1, peer, tag_x, .false., cc, ierr)
    call expect('send count > size(buf)', ierr, CC_COLL_ERR_INVALID_ARG)
    call cc_coll_recv(got, -1, peer, tag_x, cc, ierr)
    call expect('recv count -1', ierr, CC_COLL_ERR_INVALID_ARG)
    call cc_coll_send(x, nx, rank, tag_x, .false., cc, ierr)
    call expect('send to oneself', ierr, CC_COLL_ERR_INVALID_ARG)
    call check('send to oneself: the message says so', index(cc_coll_last_error(), 'this rank') > 0)
    call cc_coll_recv(got, nx, peer, -1, cc, ierr)
    call expect('recv tag -1', ierr, CC_COLL_ERR_INVALID_ARG)
    call cc_coll_send(x, nx, peer, tag_ub + 1, .false., cc, ierr)
    call expect('send tag tag_ub + 1', ierr, CC_COLL_ERR_INVALID_ARG)
    call cc_coll_lep_get_residual(cc, peer, tag_x, nx + 1, CC_COLL_F64, res, ierr)
    call expect('lep_get_residual count > size(residual)', ierr, CC_COLL_ERR_INVALID_ARG)
    call cc_coll_lep_reset(cc, nranks, tag_x, ierr)
    call expect('lep_reset of rank nranks', ierr, CC_COLL_ERR_INVALID_ARG)
  end if

  call cc_coll_comm_destroy(cc, ierr)
  call expect('cc_coll_comm_destroy', ierr, CC_COLL_OK)
  call cc_coll_p2p_tag_ub(cc, tag_ub, ierr)
  call expect('tag_ub on a destroyed handle', ierr, CC_COLL_ERR_INVALID_COMM)

  call MPI_Allreduce(MPI_IN_PLACE, nfail, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, mpierr)
  if (rank == 0 .and. nfail == 0) print '(a,i0,a)', 'fortran_p2p: ', nranks, ' ranks: passed'
  call MPI_Finalize(mpierr)
  if (nfail /= 0) error stop 1

end program fortran_p2p
