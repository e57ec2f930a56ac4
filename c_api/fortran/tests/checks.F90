! What the Fortran test programs share: this rank's number, the failure
! count, and the two checks that print a failure and count it.
module cc_coll_test_checks
  use cc_coll
  implicit none
  private
  public :: rank, nfail, expect, check

  integer, save :: rank = 0   ! this process's rank in MPI_COMM_WORLD
  integer, save :: nfail = 0  ! failed checks on this rank

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

end module cc_coll_test_checks
