// simt.hpp: runs CUDA kernel source on the CPU, one warp at a time, with the
// 32 lanes of a warp in lockstep at every warp collective. Included (with
// `-include`) before an unmodified .cu file, it supplies what that file takes
// from CUDA: `__global__`/`__device__`/`__forceinline__`, `uint4`,
// `make_uint4`, `__ldg`, `__stcs`, `__popc`, `threadIdx`/`blockIdx`/`blockDim`/`gridDim`,
// `__shfl_sync` and `__all_sync`. Anything else (shared memory,
// `__syncthreads`, other intrinsics) fails to compile, on purpose: blocks and
// warps run one after another, so only warp-level cooperation is emulated.
//
// Each lane is a coroutine on its own stack. A lane runs until it reaches a
// warp collective (or returns from the kernel); when every lane of the warp
// has stopped, the collective is checked and computed and the lanes resume.
// What would be undefined on a GPU is reported and ends the process (exit
// status 2): lanes that stop at different collectives (intrinsic or call
// site), lanes that return while others wait at a collective, a mask other
// than the warp's full set of lanes, an invalid launch configuration. Memory
// faults are reported as well: every buffer made by `DeviceBuffer` sits
// between inaccessible guard pages, with canary bytes in the slack; build with
// `-fsanitize=alignment` and trap-on-error, and a misaligned access (a
// 16-byte `uint4` load at an address that is not a multiple of 16, which
// faults on a GPU) traps too.
//
// What it cannot see: timing, coalescing, the memory model (lanes run one
// after another between collectives, blocks and warps sequentially, so races
// go unnoticed unless they change the result; `launch` can shuffle the order
// to make that likelier).
//
// Lanes start through ucontext (`makecontext`) and switch with
// `_setjmp`/`_longjmp`, which, unlike `swapcontext`, make no system call.
// Jumping between stacks is exactly what glibc's fortified longjmp refuses,
// hence the #undef before any system header.

#pragma once
#undef _FORTIFY_SOURCE

#include <csetjmp>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <source_location>

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

// ---- what the kernel source takes from CUDA --------------------------------

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};
using uint3 = dim3;

struct alignas(16) uint4 {
    unsigned x, y, z, w;
};

inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

// The scheduler sets these before it resumes a lane (threadIdx) or starts a
// block. A lane may keep its own copy in a register across a collective:
// that copy is its own, so it stays right.
inline uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

template <typename T>
inline T __ldg(const T* p) {
    return *p;
}

inline int __popc(unsigned x) { return __builtin_popcount(x); }

// A streaming store (evict first): a plain store here.
template <typename T>
inline void __stcs(T* p, T v) {
    *p = v;
}

namespace simt {

constexpr unsigned kWarpSize = 32;
constexpr size_t kLaneStack = 64 * 1024;

[[noreturn]] inline void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline void init();

enum class Op { AllSync, ShflSync };

inline const char* op_name(Op op) { return op == Op::AllSync ? "__all_sync" : "__shfl_sync"; }

// What a lane brings to a collective.
struct Arrival {
    Op op;
    unsigned mask;
    uint64_t value;
    int src_lane;
    int width;
    std::source_location where;
};

enum class LaneState { Fresh, Waiting, Ready, Exited };

struct Lane {
    jmp_buf home;  // the top of the lane's stack, where a kernel run starts
    jmp_buf at;    // where a waiting lane resumes
    LaneState state;
    uint3 tid;
    unsigned collectives;  // collectives completed so far, for messages
    Arrival arrival;
    uint64_t result;
};

struct Stats {
    uint64_t blocks, warps, resumes, collectives;
};

inline Lane lanes[kWarpSize];
inline jmp_buf scheduler;
inline unsigned current_lane, current_warp;
inline bool in_kernel;
inline void (*kernel_call)(void*);
inline void* kernel_object;
inline Stats stats;
inline const char* case_label = "";

// ---- reporting --------------------------------------------------------------

// "0-4,6,9-31"
inline void format_lanes(char* out, size_t cap, uint32_t set) {
    size_t n = 0;
    out[0] = 0;
    for (unsigned l = 0; l < kWarpSize && n < cap; ++l) {
        if (!(set >> l & 1u)) continue;
        unsigned e = l;
        while (e + 1 < kWarpSize && (set >> (e + 1) & 1u)) ++e;
        n += e == l ? snprintf(out + n, cap - n, "%s%u", n ? "," : "", l)
                    : snprintf(out + n, cap - n, "%s%u-%u", n ? "," : "", l, e);
        l = e;
    }
}

inline int where_in_kernel(char* out, size_t cap) {
    if (!in_kernel) return snprintf(out, cap, "%s", case_label);
    return snprintf(out, cap, "%s: block (%u,%u,%u) warp %u lane %u", case_label, blockIdx.x,
                    blockIdx.y, blockIdx.z, current_warp, current_lane);
}

inline void fail(const char* fmt, ...) {
    char head[256];
    where_in_kernel(head, sizeof head);
    fprintf(stderr, "simt error: %s: ", head);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    _exit(2);
}

inline const char* lanes_word(uint32_t set) { return __builtin_popcount(set) == 1 ? "lane" : "lanes"; }

inline void describe(char* out, size_t cap, const Arrival& a, unsigned nth) {
    const char* file = a.where.file_name();
    const char* slash = strrchr(file, '/');
    snprintf(out, cap, "%s at %s:%u:%u (collective #%u, mask 0x%08x)", op_name(a.op),
             slash ? slash + 1 : file, unsigned(a.where.line()), unsigned(a.where.column()), nth,
             a.mask);
}

// ---- guarded buffers and the fault handler ----------------------------------

struct Guarded {
    const char* name;
    const unsigned char* begin;  // first data byte
    const unsigned char* end;    // one past the last
    const unsigned char* map;    // the whole mapping, guard pages included
    size_t map_size;
    bool is_stack;  // a lane's stack: `map` is the one guard page under it
};

constexpr int kMaxGuarded = 64;
inline Guarded guarded[kMaxGuarded];
inline int guarded_count;
inline size_t page;  // set by init() (sysconf is not for signal handlers)
constexpr unsigned char kCanary = 0xA5;

inline void report_fault(int sig, siginfo_t* info, void*) {
    char head[256], what[320];
    where_in_kernel(head, sizeof head);
    const unsigned char* addr = static_cast<const unsigned char*>(info->si_addr);
    if (sig == SIGILL) {
        snprintf(what, sizeof what,
                 "trapped: a misaligned access (built with -fsanitize=alignment, which traps "
                 "where a GPU raises a misaligned-address error)");
    } else {
        snprintf(what, sizeof what,
                 "memory fault at %p outside every buffer's guard pages (a wild pointer, or a "
                 "misaligned 16-byte access)",
                 info->si_addr);
        for (int i = 0; i < guarded_count; ++i) {
            const Guarded& g = guarded[i];
            if (addr < g.map || addr >= g.map + g.map_size) continue;
            const long long at = (long long)(addr - g.begin);
            const size_t size = size_t(g.end - g.begin);
            if (g.is_stack)
                snprintf(what, sizeof what, "stack overflow (a lane's stack is %zu bytes)", size);
            else if (addr < g.map + page || addr >= g.map + g.map_size - page)
                snprintf(what, sizeof what,
                         "out-of-bounds access to %s: byte %lld of a %zu-byte buffer", g.name, at,
                         size);
            else
                snprintf(what, sizeof what, "write to read-only %s: byte %lld of %zu", g.name,
                         at, size);
            break;
        }
    }
    char line[640];
    const int n = snprintf(line, sizeof line, "simt error: %s: %s\n", head, what);
    if (write(2, line, size_t(n)) < 0) _exit(2);
    _exit(2);
}

inline void register_guarded(const Guarded& g) {
    if (guarded_count == kMaxGuarded) fail("more than %d guarded allocations", kMaxGuarded);
    guarded[guarded_count++] = g;
}

inline void unregister_guarded(const unsigned char* map) {
    for (int i = 0; i < guarded_count; ++i)
        if (guarded[i].map == map) guarded[i] = guarded[--guarded_count];
}

// Device memory: `size` bytes at an address that is `offset` mod
// `alignment` (a power of two <= 16), ending as close before an inaccessible
// page as that allows (so reads and writes past the end fault), with an
// inaccessible page before it and canary bytes in the slack around it.
// `read_only` buffers fault on writes.
class DeviceBuffer {
  public:
    DeviceBuffer(const char* name, const void* src, size_t size, unsigned alignment,
                 unsigned offset, bool read_only)
        : name_(name), size_(size) {
        init();
        const size_t data_pages = (size + 16 + page - 1) / page * page;
        map_size_ = data_pages + 2 * page;
        void* m = mmap(nullptr, map_size_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) fail("mmap of %zu bytes for %s failed", map_size_, name);
        map_ = static_cast<unsigned char*>(m);
        unsigned char* first = map_ + page;
        if (mprotect(first, data_pages, PROT_READ | PROT_WRITE) != 0) fail("mprotect failed");
        memset(first, kCanary, data_pages);
        unsigned char* tight = first + data_pages - size;
        data_ = tight - ((uintptr_t(tight) - offset) & (alignment - 1u));
        if (size) memcpy(data_, src, size);
        if (read_only && mprotect(first, data_pages, PROT_READ) != 0) fail("mprotect failed");
        register_guarded({name, data_, data_ + size, map_, map_size_, false});
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    ~DeviceBuffer() {
        unregister_guarded(map_);
        munmap(map_, map_size_);
    }

    unsigned char* data() { return data_; }
    size_t size() const { return size_; }

    // Fails when the kernel wrote into the slack around the data.
    void check_canaries() const {
        const unsigned char* first = map_ + page;
        const unsigned char* last = map_ + map_size_ - page;
        for (const unsigned char* p = first; p < last; ++p) {
            if (p == data_) p = data_ + size_;
            if (p < last && *p != kCanary)
                fail("out-of-bounds write to %s: byte %lld of a %zu-byte buffer was changed",
                     name_, (long long)(p - data_), size_);
        }
    }

  private:
    const char* name_;
    size_t size_;
    size_t map_size_;
    unsigned char* map_;
    unsigned char* data_;
};

// ---- lanes ------------------------------------------------------------------

inline unsigned char* lane_stacks;

[[noreturn]] inline void lane_main(int index) {
    Lane* lane = &lanes[index];
    for (;;) {
        // Park here until a warp needs this lane, then run the kernel once.
        if (_setjmp(lane->home) == 0) _longjmp(scheduler, 1);
        kernel_call(kernel_object);
        lane->state = LaneState::Exited;
    }
}

inline void install_fault_handler() {
    static char alt_stack[64 * 1024];
    stack_t ss{};
    ss.ss_sp = alt_stack;
    ss.ss_size = sizeof alt_stack;
    sigaltstack(&ss, nullptr);
    struct sigaction sa {};
    sa.sa_sigaction = report_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGBUS, &sa, nullptr);
    sigaction(SIGILL, &sa, nullptr);
}

// Installs the fault handler, gives every lane a stack (with a guard page
// under it) and parks it. Idempotent.
inline void init() {
    if (lane_stacks) return;
    page = size_t(sysconf(_SC_PAGESIZE));
    install_fault_handler();
    const size_t each = kLaneStack + page;
    void* m = mmap(nullptr, each * kWarpSize, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) fail("mmap of the lane stacks failed");
    lane_stacks = static_cast<unsigned char*>(m);
    for (unsigned l = 0; l < kWarpSize; ++l) {
        unsigned char* guard = lane_stacks + l * each;
        mprotect(guard, page, PROT_NONE);
        register_guarded({"lane stack", guard + page, guard + each, guard, page, true});
        ucontext_t uc;
        getcontext(&uc);
        uc.uc_stack.ss_sp = guard + page;
        uc.uc_stack.ss_size = kLaneStack;
        uc.uc_link = nullptr;
        makecontext(&uc, reinterpret_cast<void (*)()>(lane_main), 1, int(l));
        if (_setjmp(scheduler) == 0) setcontext(&uc);
    }
}

// Called by a lane: stop here until every lane of the warp has arrived.
__attribute__((noinline)) inline uint64_t arrive(const Arrival& a) {
    Lane* lane = &lanes[current_lane];
    lane->arrival = a;
    lane->state = LaneState::Waiting;
    if (_setjmp(lane->at) == 0) _longjmp(scheduler, 1);
    return lane->result;
}

inline void resume(unsigned l) {
    Lane& lane = lanes[l];
    current_lane = l;
    threadIdx = lane.tid;
    ++stats.resumes;
    const bool fresh = lane.state == LaneState::Fresh;
    if (_setjmp(scheduler) == 0) _longjmp(fresh ? lane.home : lane.at, 1);
}

// xorshift64*: the order lanes resume in and blocks run in, when shuffled.
struct Rng {
    uint64_t s;
    uint64_t next() {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        return s * 0x2545F4914F6CDD1Dull;
    }
};

// All `n` lanes of the warp have stopped: check they stopped together at the
// same collective, then compute it.
inline void complete_collective(unsigned n) {
    uint32_t exited = 0, waiting = 0;
    for (unsigned l = 0; l < n; ++l) {
        (lanes[l].state == LaneState::Exited ? exited : waiting) |= 1u << l;
    }
    char a[160], b[160], set1[128], set2[128];
    const unsigned first = unsigned(__builtin_ctz(waiting));
    const Arrival& lead = lanes[first].arrival;
    describe(a, sizeof a, lead, lanes[first].collectives + 1);
    if (exited) {
        format_lanes(set1, sizeof set1, exited);
        format_lanes(set2, sizeof set2, waiting);
        current_lane = unsigned(__builtin_ctz(exited));
        fail("%s %s returned from the kernel while %s %s wait at %s: a diverged warp "
             "collective, undefined on a GPU",
             lanes_word(exited), set1, lanes_word(waiting), set2, a);
    }
    const uint32_t present = n == kWarpSize ? 0xffffffffu : (1u << n) - 1u;
    for (unsigned l = 0; l < n; ++l) {
        const Arrival& x = lanes[l].arrival;
        current_lane = l;
        if (x.op != lead.op || x.where.line() != lead.where.line() ||
            x.where.column() != lead.where.column() ||
            strcmp(x.where.file_name(), lead.where.file_name()) != 0) {
            describe(b, sizeof b, x, lanes[l].collectives + 1);
            fail("lane %u is at %s while lane %u is at %s: a diverged warp collective, "
                 "undefined on a GPU",
                 l, b, first, a);
        }
        if (x.mask != present) {
            format_lanes(set1, sizeof set1, present);
            fail("%s passes mask 0x%08x but the warp's lanes are %s: every lane must take part "
                 "and be named",
                 op_name(x.op), x.mask, set1);
        }
        if (x.op == Op::ShflSync && (x.width != lead.width || x.width < 1 ||
                                     x.width > int(kWarpSize) || (x.width & (x.width - 1))))
            fail("__shfl_sync width %d (lane %u: %d): must be the same power of two <= 32 "
                 "in every lane",
                 x.width, first, lead.width);
    }
    ++stats.collectives;
    if (lead.op == Op::AllSync) {
        bool all = true;
        for (unsigned l = 0; l < n; ++l) all = all && lanes[l].arrival.value != 0;
        for (unsigned l = 0; l < n; ++l) lanes[l].result = all;
    } else {
        const unsigned w = unsigned(lead.width);
        for (unsigned l = 0; l < n; ++l) {
            const unsigned src = (l & ~(w - 1)) | (unsigned(lanes[l].arrival.src_lane) & (w - 1));
            lanes[l].result = lanes[src].arrival.value;
        }
    }
    for (unsigned l = 0; l < n; ++l) {
        lanes[l].state = LaneState::Ready;
        ++lanes[l].collectives;
    }
}

inline void run_warp(unsigned warp, Rng* shuffle) {
    const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
    const unsigned n = threads - warp * kWarpSize < kWarpSize ? threads - warp * kWarpSize
                                                               : kWarpSize;
    current_warp = warp;
    ++stats.warps;
    for (unsigned l = 0; l < n; ++l) {
        const unsigned t = warp * kWarpSize + l;
        lanes[l].state = LaneState::Fresh;
        lanes[l].collectives = 0;
        lanes[l].tid = {t % blockDim.x, t / blockDim.x % blockDim.y,
                        t / (blockDim.x * blockDim.y)};
    }
    unsigned order[kWarpSize];
    for (unsigned l = 0; l < n; ++l) order[l] = l;
    for (;;) {
        if (shuffle)
            for (unsigned i = n - 1; i > 0; --i) {
                const unsigned j = unsigned(shuffle->next() % (i + 1));
                const unsigned t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
        bool any_waiting = false;
        for (unsigned i = 0; i < n; ++i) {
            const unsigned l = order[i];
            if (lanes[l].state != LaneState::Exited) resume(l);
            any_waiting = any_waiting || lanes[l].state == LaneState::Waiting;
        }
        if (!any_waiting) return;
        complete_collective(n);
    }
}

inline void check_config(dim3 grid, dim3 block) {
    const uint64_t threads = uint64_t(block.x) * block.y * block.z;
    if (block.x == 0 || block.y == 0 || block.z == 0 || block.x > 1024 || block.y > 1024 ||
        block.z > 64 || threads > 1024)
        fail("invalid launch configuration: block (%u,%u,%u) (at most (1024,1024,64) and 1024 "
             "threads)",
             block.x, block.y, block.z);
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 ||
        grid.z > 65535)
        fail("invalid launch configuration: grid (%u,%u,%u) (at most (2^31-1,65535,65535))",
             grid.x, grid.y, grid.z);
}

inline uint64_t gcd(uint64_t a, uint64_t b) {
    while (b) {
        const uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

// Runs `kernel` (a callable that calls one __global__ function) on every
// lane of every warp of every block of `grid`. `schedule` 0 runs blocks and
// lanes in order; any other value shuffles both (deterministically).
template <typename F>
void launch(dim3 grid, dim3 block, uint64_t schedule, F& kernel) {
    check_config(grid, block);
    init();
    kernel_object = &kernel;
    kernel_call = [](void* k) { (*static_cast<F*>(k))(); };
    gridDim = grid;
    blockDim = block;
    Rng rng{schedule * 0x9E3779B97F4A7C15ull | 1u};
    Rng* shuffle = schedule ? &rng : nullptr;
    const uint64_t blocks = uint64_t(grid.x) * grid.y * grid.z;
    // Shuffled blocks: k -> (step * k + start) mod blocks, a bijection when
    // step and blocks are coprime.
    uint64_t step = 1, start = 0;
    if (shuffle) {
        step = shuffle->next() % blocks | 1u;
        while (gcd(step, blocks) != 1) step += 2;
        start = shuffle->next() % blocks;
    }
    const unsigned warps = (block.x * block.y * block.z + kWarpSize - 1) / kWarpSize;
    in_kernel = true;
    for (uint64_t k = 0; k < blocks; ++k) {
        const uint64_t b = uint64_t((unsigned __int128)step * k % blocks + start) % blocks;
        blockIdx = {unsigned(b % grid.x), unsigned(b / grid.x % grid.y),
                    unsigned(b / (uint64_t(grid.x) * grid.y))};
        ++stats.blocks;
        for (unsigned w = 0; w < warps; ++w) run_warp(w, shuffle);
    }
    in_kernel = false;
}

}  // namespace simt

// ---- warp collectives -------------------------------------------------------

inline int __all_sync(unsigned mask, int predicate,
                      std::source_location where = std::source_location::current()) {
    return int(simt::arrive({simt::Op::AllSync, mask, predicate != 0, 0, 0, where}));
}

template <typename T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = int(simt::kWarpSize),
              std::source_location where = std::source_location::current()) {
    static_assert(sizeof(T) <= sizeof(uint64_t), "__shfl_sync of more than 8 bytes");
    uint64_t bits = 0;
    memcpy(&bits, &var, sizeof(T));
    bits = simt::arrive({simt::Op::ShflSync, mask, bits, src_lane, width, where});
    T out;
    memcpy(&out, &bits, sizeof(T));
    return out;
}
