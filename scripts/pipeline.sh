#!/bin/sh
# Installs the dependencies, builds libcc_coll and runs the Optimus-CC
# pipeline example (examples/pipeline.c, docs/pipeline.md) on 4 ranks:
# 2 pipeline stages x 2 data-parallel replicas. It trains a small network
# uncompressed, with compressed backpropagation (CB) without and with lazy
# error propagation (LEP), and with CB + LEP + compressed data parallelism,
# prints losses and bytes, and exits non-zero when one of its checks fails.
# Extra arguments go to the example (try --help).
. "$(dirname "$0")/common.sh"

cc_coll_install_deps
cc_coll_build -DCC_COLL_BUILD_TESTS=OFF
echo "== mpirun -np 4 cc_coll_example_pipeline"
# --oversubscribe: 4 ranks also on machines with fewer cores.
mpirun --oversubscribe -np 4 "$CC_COLL_BUILD_DIR/examples/cc_coll_example_pipeline" "$@"
