#!/bin/sh
# Installs the dependencies, builds libcc_coll and runs the demo: a 64 MiB
# float allreduce on 2 ranks with MPI_Allreduce and every cc_coll method,
# printing time, bytes on the wire and relative error.
# Extra arguments go to the demo (try --help).
. "$(dirname "$0")/common.sh"

cc_coll_install_deps
cc_coll_build -DCC_COLL_BUILD_TESTS=OFF
echo "== mpirun -np 2 cc_coll_demo"
"$CC_COLL_BUILD_DIR/cc_coll_info" -v
mpirun -np 2 "$CC_COLL_BUILD_DIR/examples/cc_coll_demo" "$@"
