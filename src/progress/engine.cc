#include "progress/engine.hpp"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>

#include "core/comm.hpp"
#include "core/error.hpp"
#include "progress/fiber.hpp"

namespace cc_coll::detail::progress {

namespace {

enum Driver : int { kCaller = 0, kThread = 1 };

struct Request {
    std::uintptr_t id = 0;
    std::shared_ptr<Comm> comm;
    Driver driver = kCaller;
    std::vector<Range> reads, writes;
    std::unique_ptr<Fiber> fiber;
    // Under Engine::m_.
    bool done = false;
    bool handle_live = true;
    cc_coll_status_t status = CC_COLL_OK;
    std::string message;
};
using RequestPtr = std::shared_ptr<Request>;

bool overlaps(const Range &a, const Range &b) { return a.lo < b.hi && b.lo < a.hi && a.lo < a.hi && b.lo < b.hi; }

// After this many polls in a row that finish nothing, the progress thread
// sleeps kIdleSleep between polls instead of yielding: the wait for a
// large message on a slow link should not take a core from the caller.
constexpr int kSpinPolls = 64;
constexpr auto kIdleSleep = std::chrono::microseconds(50);

class Engine {
public:
    cc_coll_status_t post(const char *fn, const std::shared_ptr<Comm> &comm, std::vector<Range> reads,
                          std::vector<Range> writes, std::function<cc_coll_status_t()> body,
                          cc_coll_request_h *out)
    {
        Driver driver = kCaller;
        CC_COLL_TRY(choose_driver(fn, *comm, &driver));
        auto r = std::make_shared<Request>();
        r->comm = comm;
        r->driver = driver;
        r->reads = std::move(reads);
        r->writes = std::move(writes);
        Request *raw = r.get();
        r->fiber = std::make_unique<Fiber>([raw, fn, body = std::move(body)] {
            cc_coll_status_t st = CC_COLL_OK;
            try {
                clear_error();
                st = body();
            } catch (const std::bad_alloc &) {
                st = fail(CC_COLL_ERR_NO_MEMORY, "out of memory");
            } catch (const std::exception &e) {
                st = fail(CC_COLL_ERR_INTERNAL, "unexpected exception: %s", e.what());
            } catch (...) {
                st = fail(CC_COLL_ERR_INTERNAL, "unexpected non-standard exception");
            }
            raw->status = st;  // read once `done` is set, under the engine lock
            if (st != CC_COLL_OK) {
                // Named after the call that posted it, as the blocking
                // form's messages are.
                const std::string m = last_error();
                raw->message = m.rfind("cc_coll_", 0) == 0 ? m : std::string(fn) + ": " + m;
            }
        });
        {
            std::lock_guard<std::mutex> lock(m_);
            CC_COLL_TRY(check_buffers(fn, *r));
            r->id = next_id_++;
            queues_[comm.get()].push_back(r);
            table_.emplace(r->id, r);
            if (driver == kThread) {
                ++threaded_;
                start_thread_locked();
            }
        }
        *out = reinterpret_cast<cc_coll_request_h>(r->id);
        if (driver == kThread) {
            work_cv_.notify_one();
        } else {
            drive(kCaller);  // up to its first MPI wait: the agreement is on the wire
            clear_error();   // a request's failure is its own, not the post's
        }
        return CC_COLL_OK;
    }

    cc_coll_status_t find(const char *fn, cc_coll_request_h h, RequestPtr *out)
    {
        if (h == nullptr) return fail(CC_COLL_ERR_INVALID_ARG, "%s: request is NULL", fn);
        std::lock_guard<std::mutex> lock(m_);
        auto it = table_.find(reinterpret_cast<std::uintptr_t>(h));
        if (it == table_.end())
            return fail(CC_COLL_ERR_INVALID_ARG, "%s: request %p is not a live request (already freed, or never posted)",
                        fn, static_cast<void *>(h));
        *out = it->second;
        return CC_COLL_OK;
    }

    // One pass of the caller's driver (cc_coll_test).
    void wait_once() { drive(kCaller); }

    bool done(const Request &r)
    {
        std::lock_guard<std::mutex> lock(m_);
        return r.done;
    }

    void wait(const RequestPtr &r)
    {
        if (r->driver == kThread) {
            std::unique_lock<std::mutex> lock(m_);
            done_cv_.wait(lock, [&] { return r->done; });
            return;
        }
        while (!done(*r))
            if (!drive(kCaller)) std::this_thread::yield();
    }

    // The outcome of a completed request: its status, its message as the
    // calling thread's last error.
    cc_coll_status_t outcome(const char *fn, const Request &r)
    {
        std::lock_guard<std::mutex> lock(m_);
        if (r.status == CC_COLL_OK) return CC_COLL_OK;
        return fail(r.status, "%s", r.message.empty() ? fn : r.message.c_str());
    }

    void query(const Request &r, int *done, cc_coll_status_t *status, const char **message)
    {
        std::lock_guard<std::mutex> lock(m_);
        if (done) *done = r.done ? 1 : 0;
        if (status) *status = r.done ? r.status : CC_COLL_OK;
        if (message) *message = r.done ? r.message.c_str() : "";
    }

    void release(const RequestPtr &r)
    {
        std::lock_guard<std::mutex> lock(m_);
        r->handle_live = false;
        table_.erase(r->id);
    }

    std::size_t in_flight(const Comm &c)
    {
        std::lock_guard<std::mutex> lock(m_);
        auto it = queues_.find(&c);
        return it == queues_.end() ? 0 : it->second.size();
    }

    void drain(const Comm &c)
    {
        for (;;) {
            RequestPtr last;
            {
                std::lock_guard<std::mutex> lock(m_);
                auto it = queues_.find(&c);
                if (it == queues_.end() || it->second.empty()) return;
                last = it->second.back();
            }
            wait(last);
        }
    }

    void at_finalize()
    {
        for (;;) {
            RequestPtr any;
            {
                std::lock_guard<std::mutex> lock(m_);
                for (auto &q : queues_)
                    if (!q.second.empty()) {
                        any = q.second.back();
                        break;
                    }
            }
            if (!any) break;
            wait(any);
        }
        std::thread t;
        {
            std::lock_guard<std::mutex> lock(m_);
            stop_ = true;
            t = std::move(thread_);
        }
        work_cv_.notify_all();
        if (t.joinable()) t.join();
        std::lock_guard<std::mutex> lock(m_);
        stop_ = false;
    }

private:
    static cc_coll_status_t choose_driver(const char *fn, const Comm &comm, Driver *out)
    {
        const ProgressMode mode = comm.config().progress;
        if (mode == ProgressMode::Caller) {
            *out = kCaller;
            return CC_COLL_OK;
        }
        int provided = MPI_THREAD_SINGLE;
        if (MPI_Query_thread(&provided) != MPI_SUCCESS) provided = MPI_THREAD_SINGLE;
        if (provided == MPI_THREAD_MULTIPLE) {
            *out = kThread;
            return CC_COLL_OK;
        }
        if (mode == ProgressMode::Thread)
            return fail(CC_COLL_ERR_NOT_SUPPORTED,
                        "%s: CC_COLL_PROGRESS=thread needs MPI_THREAD_MULTIPLE, but MPI provides thread level %d "
                        "(initialise MPI with MPI_Init_thread(MPI_THREAD_MULTIPLE), or set CC_COLL_PROGRESS=caller "
                        "or auto)",
                        fn, provided);
        *out = kCaller;
        return CC_COLL_OK;
    }

    // Under m_: the new request's buffers against those of every request
    // in flight.
    cc_coll_status_t check_buffers(const char *fn, const Request &r)
    {
        for (auto &q : queues_)
            for (const RequestPtr &o : q.second) {
                for (const Range &w : r.writes) {
                    for (const Range &ow : o->writes)
                        if (overlaps(w, ow))
                            return fail(CC_COLL_ERR_INVALID_ARG,
                                        "%s: recvbuf overlaps the receive buffer of request %p, still in flight; "
                                        "a buffer belongs to its request until that completes",
                                        fn, reinterpret_cast<void *>(o->id));
                    for (const Range &orr : o->reads)
                        if (overlaps(w, orr))
                            return fail(CC_COLL_ERR_INVALID_ARG,
                                        "%s: recvbuf overlaps the send buffer of request %p, still in flight", fn,
                                        reinterpret_cast<void *>(o->id));
                }
                for (const Range &rd : r.reads)
                    for (const Range &ow : o->writes)
                        if (overlaps(rd, ow))
                            return fail(CC_COLL_ERR_INVALID_ARG,
                                        "%s: sendbuf overlaps the receive buffer of request %p, still in flight", fn,
                                        reinterpret_cast<void *>(o->id));
            }
        return CC_COLL_OK;
    }

    void start_thread_locked()
    {
        if (thread_.joinable()) return;
        thread_ = std::thread([this] { thread_main(); });
    }

    void thread_main()
    {
        int idle = 0;
        for (;;) {
            {
                std::unique_lock<std::mutex> lock(m_);
                work_cv_.wait(lock, [&] { return stop_ || threaded_ > 0; });
                if (threaded_ == 0) return;  // stop_
            }
            if (drive(kThread)) {
                idle = 0;
            } else if (++idle < kSpinPolls) {
                std::this_thread::yield();
            } else {
                std::this_thread::sleep_for(kIdleSleep);
            }
        }
    }

    // Resumes the first request of every queue of this driver once; a
    // request that completes gives way to the next of its queue at once.
    // Returns whether a request completed.
    bool drive(Driver d)
    {
        std::lock_guard<std::mutex> drive_lock(drive_[d]);
        std::vector<RequestPtr> heads;
        {
            std::lock_guard<std::mutex> lock(m_);
            for (auto &q : queues_)
                if (!q.second.empty() && q.second.front()->driver == d) heads.push_back(q.second.front());
        }
        bool finished = false;
        for (RequestPtr r : heads) {
            while (r && r->fiber->resume()) {
                finished = true;
                r = complete(r);
            }
        }
        return finished;
    }

    // Marks `r` done and returns the next request of its queue for the same
    // driver (or nullptr).
    RequestPtr complete(const RequestPtr &r)
    {
        RequestPtr next;
        std::unique_ptr<Fiber> fiber;
        {
            std::lock_guard<std::mutex> lock(m_);
            r->done = true;
            fiber = std::move(r->fiber);  // its stack back to the pool, outside the lock
            auto it = queues_.find(r->comm.get());
            if (it != queues_.end()) {
                auto &q = it->second;
                if (!q.empty() && q.front() == r) q.pop_front();
                if (q.empty()) queues_.erase(it);
                else if (q.front()->driver == r->driver) next = q.front();
            }
            if (r->driver == kThread) --threaded_;
        }
        done_cv_.notify_all();
        return next;
    }

    std::mutex m_;
    std::condition_variable done_cv_;
    std::condition_variable work_cv_;
    std::unordered_map<const Comm *, std::deque<RequestPtr>> queues_;
    std::unordered_map<std::uintptr_t, RequestPtr> table_;
    std::uintptr_t next_id_ = 1;
    std::size_t threaded_ = 0;
    bool stop_ = false;
    std::thread thread_;
    std::mutex drive_[2];
};

Engine &engine()
{
    static Engine *e = new Engine;  // never destroyed: its thread may outlive static destructors
    return *e;
}

}  // namespace

cc_coll_status_t post(const char *fn, const std::shared_ptr<Comm> &comm, std::vector<Range> reads,
                      std::vector<Range> writes, std::function<cc_coll_status_t()> body, cc_coll_request_h *out)
{
    return engine().post(fn, comm, std::move(reads), std::move(writes), std::move(body), out);
}

cc_coll_status_t test(const char *fn, cc_coll_request_h request, int *done)
{
    if (done == nullptr) return fail(CC_COLL_ERR_INVALID_ARG, "%s: done is NULL", fn);
    *done = 0;
    RequestPtr r;
    CC_COLL_TRY(engine().find(fn, request, &r));
    if (!engine().done(*r)) {
        if (r->driver == kCaller) engine().wait_once();
        if (!engine().done(*r)) return CC_COLL_OK;
    }
    *done = 1;
    return engine().outcome(fn, *r);
}

cc_coll_status_t wait(const char *fn, cc_coll_request_h request)
{
    RequestPtr r;
    CC_COLL_TRY(engine().find(fn, request, &r));
    engine().wait(r);
    return engine().outcome(fn, *r);
}

cc_coll_status_t query(const char *fn, cc_coll_request_h request, int *done, cc_coll_status_t *status,
                       const char **message)
{
    RequestPtr r;
    CC_COLL_TRY(engine().find(fn, request, &r));
    engine().query(*r, done, status, message);
    return CC_COLL_OK;
}

cc_coll_status_t release(const char *fn, cc_coll_request_h request)
{
    RequestPtr r;
    CC_COLL_TRY(engine().find(fn, request, &r));
    engine().release(r);
    return CC_COLL_OK;
}

std::size_t in_flight(const Comm &comm) { return engine().in_flight(comm); }

void drain(const Comm &comm) { engine().drain(comm); }

int await(MPI_Request *request)
{
    if (Fiber::current() == nullptr) return MPI_Wait(request, MPI_STATUS_IGNORE);
    for (;;) {
        int flag = 0;
        const int rc = MPI_Test(request, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || flag) return rc;
        Fiber::suspend();
    }
}

bool in_request() { return Fiber::current() != nullptr; }

void at_finalize() { engine().at_finalize(); }

}  // namespace cc_coll::detail::progress
