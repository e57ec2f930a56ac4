// A fiber: a function run on its own stack that can suspend itself and be
// resumed later, from any thread (one at a time). The progress engine
// (progress/engine.hpp) runs each non-blocking collective as one fiber:
// the collective's algorithm is the blocking one, and every MPI operation it
// makes inside a fiber is started non-blocking and awaited by suspending
// (transport/mpi_transport.cc, progress::await), so that whoever drives the
// engine (its progress thread, or the caller inside cc_coll_test/wait)
// interleaves many collectives on one thread.
//
// Built on ucontext (POSIX makecontext/swapcontext); the stacks are mmap'd
// with a guard page below them, and AddressSanitizer is told of every
// switch.
#pragma once

#include <cstddef>
#include <functional>

namespace cc_coll::detail::progress {

class Fiber {
public:
    // The fiber's stack: enough for the algorithms and BLAS/LAPACK below
    // them; committed page by page as it is touched.
    static constexpr std::size_t kStackBytes = std::size_t{2} << 20;

    // Throws std::bad_alloc when no stack can be mapped.
    explicit Fiber(std::function<void()> body);
    ~Fiber();
    Fiber(const Fiber &) = delete;
    Fiber &operator=(const Fiber &) = delete;

    // Runs the fiber until it suspends or its body returns; returns whether
    // the body has returned. Not called on a finished fiber, nor from inside
    // a fiber.
    bool resume();
    bool finished() const { return finished_; }

    // The fiber the calling thread is running, or nullptr outside fibers.
    static Fiber *current();
    // From inside a fiber: back to the resume() that ran it.
    static void suspend();

private:
    struct Impl;
    static void entry(unsigned lo, unsigned hi);
    void switch_out();

    std::function<void()> body_;
    Impl *impl_;
    bool finished_ = false;
};

}  // namespace cc_coll::detail::progress
