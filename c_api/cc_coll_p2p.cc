// The extern "C" entry points of compressed point-to-point.
#include "cc_coll.h"
#include "entry.hpp"
