// The table of MPI_Iallreduce requests in flight and what advances them:
// a round of every request's next step (advance_locked), run from the
// completion functions (poke), before a blocking call on the same
// communicator (settle), at MPI_Finalize (finish_requests) and, under
// MPI_THREAD_MULTIPLE, from the shim's progress thread, so that requests
// also complete while the program waits in a call the shim does not see.

#include <chrono>
#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

#include <mpi.h>

#include "requests.hpp"
#include "state.hpp"

namespace cc_coll_preload {

namespace {

// After this many rounds of the progress thread in a row that move nothing,
// it sleeps kIdleSleep between rounds instead of yielding.
constexpr int kSpinRounds = 64;
constexpr auto kIdleSleep = std::chrono::microseconds(50);

}  // namespace

Requests &requests()
{
    static Requests *q = new Requests;  // never destroyed: its thread may outlive static destructors
    return *q;
}

// Advances every request once. Returns whether any moved. Under
// Requests::drive.
bool advance_locked()
{
    Requests &q = requests();
    bool moved = false;
    std::vector<ShimRequest *> done;
    for (std::size_t i = 0; i < q.deciding.size();) {
        Entry *e = q.deciding[i];
        moved = decide_locked(e, &done) || moved;
        if (e->undecided.empty()) {
            q.deciding.erase(q.deciding.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
            ++i;
        }
    }
    for (std::size_t i = 0; i < q.running.size();) {
        ShimRequest *r = q.running[i];
        if (finished_locked(r)) {
            done.push_back(r);
            q.running.erase(q.running.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
            ++i;
        }
    }
    for (ShimRequest *r : done) complete(r);
    return moved || !done.empty();
}

// One round from a completion function: advances the requests unless
// another thread is doing so.
bool poke()
{
    std::unique_lock<std::mutex> lock(requests().drive, std::try_to_lock);
    return lock.owns_lock() && advance_locked();
}

void settle(Entry *e)
{
    Requests &q = requests();
    for (;;) {
        {
            std::lock_guard<std::mutex> lock(q.drive);
            if (e->undecided.empty()) return;
            if (advance_locked()) continue;
        }
        std::this_thread::yield();
    }
}

// The shim's progress thread (MPI_THREAD_MULTIPLE): advances the requests
// while there are any.
void progress_main()
{
    Requests &q = requests();
    int idle = 0;
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(q.thread_mutex);
            q.wake.wait(lock, [&] { return q.stop || q.pending.load() != 0; });
            if (q.stop) return;
        }
        if (poke()) {
            idle = 0;
        } else if (++idle < kSpinRounds) {
            std::this_thread::yield();
        } else {
            std::this_thread::sleep_for(kIdleSleep);
        }
    }
}

// Counts a new request as pending, and wakes (or starts) the progress
// thread under MPI_THREAD_MULTIPLE.
void add_pending()
{
    Requests &q = requests();
    if (q.pending.fetch_add(1, std::memory_order_acq_rel) != 0) return;
    if (state().thread_level != MPI_THREAD_MULTIPLE) return;
    {
        std::lock_guard<std::mutex> lock(q.thread_mutex);
        if (q.stop) return;
        if (!q.thread.joinable()) q.thread = std::thread(progress_main);
    }
    q.wake.notify_one();
}

// At MPI_Finalize: every request runs to its end (every rank does the same
// in its MPI_Finalize), and the progress thread stops.
void finish_requests()
{
    Requests &q = requests();
    for (;;) {
        {
            std::lock_guard<std::mutex> lock(q.drive);
            advance_locked();
            if (q.pending.load() == 0) break;
        }
        std::this_thread::yield();
    }
    std::thread t;
    {
        std::lock_guard<std::mutex> lock(q.thread_mutex);
        q.stop = true;
        t = std::move(q.thread);
    }
    q.wake.notify_all();
    if (t.joinable()) t.join();
}
}  // namespace cc_coll_preload
