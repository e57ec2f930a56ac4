# Finds MPI's C component and says which MPI it is (included once from the
# top-level CMakeLists.txt, in place of a bare find_package(MPI)).
#
# Selecting an MPI is FindMPI's business (docs/building.md, "Choosing the
# MPI"): MPI_C_COMPILER (and MPI_Fortran_COMPILER, MPIEXEC_EXECUTABLE), or
# MPI_EXECUTABLE_SUFFIX where the wrappers carry a suffix (Debian:
# -DMPI_EXECUTABLE_SUFFIX=.mpich selects mpicc.mpich, mpifort.mpich and
# mpiexec.mpich). A C wrapper given with such a suffix and no
# MPI_EXECUTABLE_SUFFIX implies the suffix, so that the Fortran wrapper and
# mpiexec found next are the same MPI's.
#
# Sets:
#   CC_COLL_MPI_FAMILY   "Open MPI", "MPICH" (the MPICH ABI: MPICH, Intel MPI,
#                        MVAPICH, Cray MPICH) or "other", from mpi.h
#   CC_COLL_MPI_LIBRARY_NAMES  the file names of MPI_C_LIBRARIES (libmpi.so,
#                        libmpich.so): what the package config compares a
#                        consumer's MPI with
# and provides cc_coll_check_mpi_fortran(), which stops when MPI's Fortran
# component belongs to another MPI than the C one.

if(NOT DEFINED MPI_EXECUTABLE_SUFFIX AND MPI_C_COMPILER MATCHES "(^|/)mpicc(\\.[A-Za-z0-9_]+)$")
  set(MPI_EXECUTABLE_SUFFIX "${CMAKE_MATCH_2}")
  message(STATUS "MPI: MPI_C_COMPILER ${MPI_C_COMPILER} implies MPI_EXECUTABLE_SUFFIX=${MPI_EXECUTABLE_SUFFIX} "
                 "(the same MPI's Fortran wrapper and mpiexec)")
endif()

find_package(MPI REQUIRED COMPONENTS C)

include(CheckCSourceCompiles)
set(CMAKE_REQUIRED_LIBRARIES MPI::MPI_C)
set(CMAKE_REQUIRED_QUIET ON)
# Not cached across MPIs: a build folder reconfigured with another MPI
# checks again.
unset(CC_COLL_MPI_H_OPEN_MPI CACHE)
unset(CC_COLL_MPI_H_MPICH CACHE)
check_c_source_compiles("#include <mpi.h>
#if !defined(OPEN_MPI)
#error not Open MPI
#endif
int main(void) { return 0; }" CC_COLL_MPI_H_OPEN_MPI)
check_c_source_compiles("#include <mpi.h>
#if !defined(MPICH_VERSION) && !defined(MPICH) && !defined(MPICH2) && !defined(I_MPI_VERSION) && !defined(MVAPICH2_VERSION)
#error not of the MPICH family
#endif
int main(void) { return 0; }" CC_COLL_MPI_H_MPICH)
unset(CMAKE_REQUIRED_LIBRARIES)
unset(CMAKE_REQUIRED_QUIET)
if(CC_COLL_MPI_H_OPEN_MPI)
  set(CC_COLL_MPI_FAMILY "Open MPI")
elseif(CC_COLL_MPI_H_MPICH)
  set(CC_COLL_MPI_FAMILY "MPICH")
else()
  set(CC_COLL_MPI_FAMILY "other")
endif()

set(CC_COLL_MPI_LIBRARY_NAMES "")
foreach(_lib IN LISTS MPI_C_LIBRARIES)
  get_filename_component(_name "${_lib}" NAME)
  list(APPEND CC_COLL_MPI_LIBRARY_NAMES "${_name}")
endforeach()
message(STATUS "MPI: ${CC_COLL_MPI_FAMILY} (C compiler wrapper ${MPI_C_COMPILER}, libraries ${MPI_C_LIBRARIES})")

# After find_package(MPI COMPONENTS Fortran): every library of MPI's C
# component must be among the Fortran component's, or the two are different
# MPIs (e.g. MPI_C_COMPILER=mpicc.mpich with the system's default mpif90).
function(cc_coll_check_mpi_fortran)
  if(NOT MPI_Fortran_FOUND OR NOT MPI_C_LIBRARIES OR NOT MPI_Fortran_LIBRARIES)
    return()
  endif()
  foreach(_lib IN LISTS MPI_C_LIBRARIES)
    if(NOT _lib IN_LIST MPI_Fortran_LIBRARIES)
      message(FATAL_ERROR
        "MPI's Fortran component (${MPI_Fortran_COMPILER}: ${MPI_Fortran_LIBRARIES}) is not the MPI the library is "
        "built with (${MPI_C_COMPILER}: ${MPI_C_LIBRARIES}). Select the same MPI for both: "
        "-DMPI_Fortran_COMPILER=<its Fortran wrapper>, or -DMPI_EXECUTABLE_SUFFIX=<suffix> (Debian: .mpich, "
        ".openmpi); or leave Fortran out with -DCC_COLL_ENABLE_FORTRAN=OFF.")
    endif()
  endforeach()
endfunction()
