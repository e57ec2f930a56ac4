#include "core/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sched.h>

namespace cc_coll::detail {

namespace {

// Workers wait for a generation number to change, claim parts from a shared
// counter, and count themselves out. Never destroyed (workers blocked on
// the condition variable at exit are harmless); a forked child starts a new,
// empty pool, since the parent's workers do not exist there.
class Pool {
public:
    void run(std::size_t parts, const std::function<void(std::size_t)> &body)
    {
        std::unique_lock<std::mutex> region(region_, std::try_to_lock);
        if (!region.owns_lock()) {  // another thread's region: run inline
            for (std::size_t p = 0; p < parts; ++p) body(p);
            return;
        }
        grow(parts - 1);
        {
            std::lock_guard<std::mutex> l(m_);
            body_ = &body;
            parts_ = parts;
            next_.store(1, std::memory_order_relaxed);
            active_ = std::min(parts - 1, workers_);  // workers to count out (the caller does the rest)
            ++generation_;
        }
        wake_.notify_all();
        body(0);
        // Help with parts no worker has claimed yet, then wait for the rest.
        for (std::size_t p; (p = next_.fetch_add(1)) < parts;) body(p);
        std::unique_lock<std::mutex> l(m_);
        done_.wait(l, [&] { return active_ == 0; });
        body_ = nullptr;
    }

private:
    void grow(std::size_t workers)
    {
        while (workers_ < workers && workers_ < static_cast<std::size_t>(kMaxThreads)) {
            const std::size_t id = workers_++;
            std::uint64_t start = 0;
            {
                std::lock_guard<std::mutex> l(m_);
                start = generation_;  // before the region that needs it
            }
            std::thread([this, id, start] { loop(id, start); }).detach();
        }
    }
    void loop(std::size_t id, std::uint64_t seen)
    {
        for (;;) {
            const std::function<void(std::size_t)> *body = nullptr;
            std::size_t parts = 0;
            {
                std::unique_lock<std::mutex> l(m_);
                wake_.wait(l, [&] { return generation_ != seen; });
                seen = generation_;
                if (id + 1 >= parts_) continue;  // not needed in this region
                body = body_;
                parts = parts_;
            }
            for (std::size_t p; (p = next_.fetch_add(1)) < parts;) (*body)(p);
            std::lock_guard<std::mutex> l(m_);
            if (--active_ == 0) done_.notify_one();
        }
    }

    std::mutex region_;  // one region at a time
    std::mutex m_;
    std::condition_variable wake_, done_;
    std::uint64_t generation_ = 0;
    const std::function<void(std::size_t)> *body_ = nullptr;
    std::size_t parts_ = 0;
    std::size_t active_ = 0;
    std::atomic<std::size_t> next_{0};
    std::size_t workers_ = 0;  // guarded by region_
};

std::atomic<Pool *> g_pool{nullptr};
std::once_flag g_atfork;

Pool &pool()
{
    std::call_once(g_atfork, [] {
        pthread_atfork(nullptr, nullptr, [] { g_pool.store(nullptr); });
    });
    Pool *p = g_pool.load();
    if (p != nullptr) return *p;
    Pool *fresh = new Pool;
    if (g_pool.compare_exchange_strong(p, fresh)) return *fresh;
    delete fresh;
    return *p;
}

}  // namespace

int default_threads(int node_ranks)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    int cpus = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0) cpus = CPU_COUNT(&set);
    if (cpus <= 0) cpus = static_cast<int>(std::thread::hardware_concurrency());
    if (node_ranks < 1) node_ranks = 1;
    const int t = cpus / node_ranks;
    return t < 1 ? 1 : (t > kMaxThreads ? kMaxThreads : t);
}

std::size_t parallel_parts(std::size_t n, int threads, std::size_t grain)
{
    if (threads <= 1 || n == 0) return 1;
    if (grain == 0) grain = 1;
    const std::size_t by_size = (n + grain - 1) / grain;
    const std::size_t t = static_cast<std::size_t>(threads);
    const std::size_t parts = by_size < t ? by_size : t;
    return parts < 1 ? 1 : parts;
}

void run_parts(std::size_t parts, const std::function<void(std::size_t part)> &body)
{
    // A region inside a region (on its caller or on a worker) runs inline:
    // the pool is busy with the outer one.
    thread_local bool in_region = false;
    if (parts <= 1 || in_region) {
        for (std::size_t p = 0; p < parts; ++p) body(p);
        return;
    }
    in_region = true;
    pool().run(parts, [&](std::size_t p) {
        const bool outer = in_region;
        in_region = true;
        body(p);
        in_region = outer;
    });
    in_region = false;
}

}  // namespace cc_coll::detail
