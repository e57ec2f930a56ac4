#!/bin/sh
# Downloads, on a Debian 12 machine with apt and a network, the Debian
# packages that a GPU machine without them needs to build libcc_coll and run
# its GPU tests and benchmarks (scripts/gpu/gpu_run.sh unpacks them there, into a
# private prefix, without dpkg -i and without a network).
#
#   scripts/gpu/gpu_deps.sh [DIR]        DIR defaults to .gpu-debs (git-ignored)
#
# The GPU machine is assumed to have a C/C++ toolchain, CMake, the CUDA
# toolkit and glibc >= 2.36 (Debian 12's), and nothing else of this list:
#   - Open MPI 4.1.4 (openmpi-bin, libopenmpi3, libopenmpi-dev) and the
#     libraries it loads (PMIx, hwloc, libevent, UCX, libfabric, verbs, PSM);
#   - OpenBLAS (pthread flavour) and LAPACKE;
#   - GoogleTest and Google Benchmark (headers and static/shared libraries);
#   - a few base libraries a minimal image may lack (zlib, libudev, libatomic,
#     libuuid, libgfortran, libquadmath): gpu_run.sh puts these last on the library
#     path, so the machine's own copies win where it has them.
# Not downloaded: gfortran (configure with -DCC_COLL_ENABLE_FORTRAN=OFF),
# Python packages (the Python tests are not run there), hwloc's optional
# plugins, ssh (one node only).
#
# The list is explicit, not apt's whole recursive closure, which would pull
# in compilers, perl and alternatives never used; the last step checks that
# every Depends of a package in the list is in the list, in the assumed base
# (libc6, libgcc-s1, libstdc++6) or named below as left out on purpose.
set -eu

cd "$(dirname "$0")/../.."
dest=${1:-.gpu-debs}

mpi="openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev
     libpmix2 libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7
     libfabric1 libibverbs1 ibverbs-providers librdmacm1 libnl-3-200 libnl-route-3-200
     libpsm-infinipath1 libpsm2-2 libucx0 libnuma1 libmunge2"
linalg="libopenblas0-pthread libopenblas-pthread-dev liblapacke liblapacke-dev libtmglib3"
testing="libgtest-dev libbenchmark-dev libbenchmark1debian"
# Unpacked into a separate fallback prefix by gpu_run.sh.
fallback="zlib1g libudev1 libuuid1 libatomic1 libgfortran5 libquadmath0"

# Assumed present on the GPU machine (toolchain and C/C++ runtime).
base="libc6 libgcc-s1 libstdc++6 gcc-12-base"
# Dependencies left out on purpose (see above), and virtual or alternative
# names the explicit list already satisfies.
left_out="libhwloc-plugins gfortran-mod-15 libibverbs-dev libhwloc-dev libevent-dev libpmix-dev
          libjs-jquery libjs-jquery-ui zlib1g-dev googletest libtmglib-dev libopenblas0
          adduser ssh-client libblas.so.3 liblapack.so.3 libblas.so liblapack.so"

all="$mpi $linalg $testing $fallback"

echo "gpu_deps: checking that every dependency is covered"
missing=""
for p in $all; do
  deps=$(apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
           --no-enhances "$p" | awk '$1 == "Depends:" || $1 == "PreDepends:" { gsub(/[<>]/, "", $2); print $2 }')
  for d in $deps; do
    case " $(echo $all $base $left_out) " in
      *" $d "*) ;;
      *) missing="$missing $p->$d" ;;
    esac
  done
done
if [ -n "$missing" ]; then
  echo "gpu_deps: dependencies not in the list:$missing" >&2
  echo "gpu_deps: add them to scripts/gpu/gpu_deps.sh (a list above) or to left_out" >&2
  exit 1
fi

mkdir -p "$dest"
rm -f "$dest"/*.deb
echo "gpu_deps: downloading into $dest"
(cd "$dest" && apt-get download $all)
{
  echo "# Downloaded by scripts/gpu/gpu_deps.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  for f in "$dest"/*.deb; do
    echo "$(dpkg-deb -f "$f" Package) $(dpkg-deb -f "$f" Version)"
  done
} > "$dest/MANIFEST"
for p in $fallback; do echo "$p"; done > "$dest/FALLBACK"
du -sh "$dest"
echo "gpu_deps: done. Carry $dest to the GPU machine with the working tree, then run scripts/gpu/gpu_run.sh there."
