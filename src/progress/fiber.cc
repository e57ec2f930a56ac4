#include "progress/fiber.hpp"

#include <ucontext.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <mutex>
#include <new>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define CC_COLL_FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CC_COLL_FIBER_ASAN 1
#endif
#endif
#ifdef CC_COLL_FIBER_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace cc_coll::detail::progress {

namespace {

thread_local Fiber *t_current = nullptr;

std::size_t page_size()
{
    static const std::size_t p = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    return p;
}

// Mapped stacks are kept for reuse: a training step posts and completes
// many requests, and mmap/munmap of 2 MiB each time would show.
class StackPool {
public:
    void *take()
    {
        {
            std::lock_guard<std::mutex> lock(m_);
            if (!free_.empty()) {
                void *s = free_.back();
                free_.pop_back();
                return s;
            }
        }
        const std::size_t guard = page_size();
        void *base = mmap(nullptr, Fiber::kStackBytes + guard, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (base == MAP_FAILED) throw std::bad_alloc();
        // The lowest page traps an overflow instead of overwriting memory.
        if (mprotect(base, guard, PROT_NONE) != 0) {
            munmap(base, Fiber::kStackBytes + guard);
            throw std::bad_alloc();
        }
        return static_cast<char *>(base) + guard;
    }
    void give(void *stack)
    {
        std::lock_guard<std::mutex> lock(m_);
        if (free_.size() < kKeep) {
            free_.push_back(stack);
            return;
        }
        munmap(static_cast<char *>(stack) - page_size(), Fiber::kStackBytes + page_size());
    }

private:
    static constexpr std::size_t kKeep = 16;
    std::mutex m_;
    std::vector<void *> free_;
};

StackPool &stacks()
{
    static StackPool *pool = new StackPool;  // outlives every fiber, at exit too
    return *pool;
}

}  // namespace

struct Fiber::Impl {
    ucontext_t self{};
    ucontext_t caller{};
    void *stack = nullptr;
    // AddressSanitizer's view of the stacks (the resumer's changes with
    // the thread that resumes).
    const void *caller_bottom = nullptr;
    std::size_t caller_size = 0;
    void *fake_stack = nullptr;
};

Fiber::Fiber(std::function<void()> body) : body_(std::move(body)), impl_(new Impl)
{
    try {
        impl_->stack = stacks().take();
    } catch (...) {
        delete impl_;
        throw;
    }
    getcontext(&impl_->self);
    impl_->self.uc_stack.ss_sp = impl_->stack;
    impl_->self.uc_stack.ss_size = kStackBytes;
    impl_->self.uc_link = nullptr;
    const auto p = reinterpret_cast<std::uintptr_t>(this);
    makecontext(&impl_->self, reinterpret_cast<void (*)()>(&Fiber::entry), 2, static_cast<unsigned>(p & 0xffffffffu),
                static_cast<unsigned>(static_cast<std::uint64_t>(p) >> 32));
}

Fiber::~Fiber()
{
    // A fiber is destroyed finished (or never started): nothing lives on
    // its stack.
    stacks().give(impl_->stack);
    delete impl_;
}

Fiber *Fiber::current() { return t_current; }

bool Fiber::resume()
{
    Fiber *outer = t_current;
    t_current = this;
#ifdef CC_COLL_FIBER_ASAN
    void *fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, impl_->stack, kStackBytes);
#endif
    swapcontext(&impl_->caller, &impl_->self);
#ifdef CC_COLL_FIBER_ASAN
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
    t_current = outer;
    return finished_;
}

void Fiber::switch_out()
{
#ifdef CC_COLL_FIBER_ASAN
    // A finished fiber's stack is dead: no fake stack to keep.
    __sanitizer_start_switch_fiber(finished_ ? nullptr : &impl_->fake_stack, impl_->caller_bottom,
                                   impl_->caller_size);
#endif
    swapcontext(&impl_->self, &impl_->caller);
#ifdef CC_COLL_FIBER_ASAN
    __sanitizer_finish_switch_fiber(impl_->fake_stack, &impl_->caller_bottom, &impl_->caller_size);
#endif
}

void Fiber::suspend()
{
    Fiber *f = t_current;
    if (f != nullptr) f->switch_out();
}

void Fiber::entry(unsigned lo, unsigned hi)
{
    auto *f = reinterpret_cast<Fiber *>(static_cast<std::uintptr_t>(lo) |
                                        (static_cast<std::uintptr_t>(hi) << 32));
#ifdef CC_COLL_FIBER_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &f->impl_->caller_bottom, &f->impl_->caller_size);
#endif
    // The body never throws across this frame (the engine wraps it).
    f->body_();
    f->finished_ = true;
    f->switch_out();
    // Never resumed again.
}

}  // namespace cc_coll::detail::progress
