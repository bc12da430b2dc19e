// Host emulator of cuzk's CUDA kernels (developer/test tool only: built and
// loaded by tests/test_cu_emu.py through fake_driver.py; never shipped).
//
// Build: c++ -O2 -std=c++20 -shared -fPIC -fvisibility=hidden -pthread
//        -I<cuzk/cu> emu.cpp -o libcuzk_emu.so
//
// It compiles the real kernel sources (cuzk/cu/ntt/ntt.cu, cuzk/cu/msm/msm.cu and the
// headers they include) with CUZK_HOST_EMU: the field arithmetic runs through
// cuzk/cu/ff/carry.cuh's host branch, which reproduces the PTX carry-flag
// instructions bit for bit.  Nothing in the kernels is reimplemented here.
//
// Launch model.  Blocks are spread over a few host worker threads (CUDA
// guarantees nothing about block order or concurrency).  Inside a block every
// CUDA thread is a fiber (ucontext) with its own stack, run one at a time on
// the worker; __syncthreads() parks the fiber and the worker resumes the next
// one.  When every fiber is parked the barrier opens.  The stretches between
// barriers run the fibers in ascending thread order, then descending, and so
// on alternately: a read of another thread's write with no barrier between
// them sees the new value in some stretches and the old one in others, so a
// missing __syncthreads() is likely to give wrong results, not lucky ones.
// A barrier reached by only part of the block (some threads exited) is
// reported as an error, as is any launch the driver would refuse (0 or > 1024
// threads, argument count or sizes that do not match the kernel's
// parameters).  Dynamic shared memory is filled with 0xA5 before every block,
// and the carry flag is set to 1 whenever a fiber (re)starts, so code that
// reads either before writing it computes garbage.
//
// The kernels callable through emu_launch are listed in KERNELS below: the
// public ones of ntt.cu plus emu_* harness kernels that expose mont_t
// operations (Fr and Fq) that no public kernel calls on its own.

#include "cuda_emu.hpp"
#include "ntt/ntt.cu"
#include "msm/msm.cu"
#include "msm/batch_add.cu"
#include "ec/fixed_base.cu"
#include "ec_ops.cu"  // harness kernels of the XYZZ template (tests/test_cu_emu_ec.py)

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#define EMU_EXPORT extern "C" __attribute__((visibility("default")))

// ---------------------------------------------------------------- built-ins

namespace cuzk {
namespace cc {
thread_local uint32_t emu_cf;  // the carry flag of cuzk/cu/ff/carry.cuh's host branch
}
}  // namespace cuzk

thread_local dim3 threadIdx, blockIdx;
dim3 blockDim, gridDim;
thread_local void* emu_dyn_smem;

// The *_sync warp intrinsics of cuda_emu.hpp: any mask other than the calling lane's own bit
// names lanes this emulator never runs together, a bug in the emulated kernel or in the
// emulator's assumptions; fail loudly.
unsigned emu_check_mask(unsigned mask, const char* what)
{
    if (mask != emu_lane_bit()) {
        std::fprintf(stderr, "cuda_emu: %s with mask 0x%08x from lane %u\n", what, mask, threadIdx.x & 31u);
        std::abort();
    }
    return mask;
}

// ---------------------------------------------------------------- harness kernels

// Every mont_t operation on a[i], b[i]; 12 outputs per element, in order:
// a*b, a+b, a-b, -a, a.sqr(), a.to_mont(), a.from_mont(), one(), modulus(),
// a.pow_u32(b.l[0]), flags (l[0] = (a==b) | a.is_zero() << 1), zero().
template <class F>
static void emu_field_ops(F* d_out, const F* d_a, const F* d_b, uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const F a = d_a[i], b = d_b[i];
        F* o = d_out + 12 * i;
        o[0] = a * b;
        o[1] = a + b;
        o[2] = a - b;
        o[3] = -a;
        o[4] = a.sqr();
        o[5] = a.to_mont();
        o[6] = a.from_mont();
        o[7] = F::one();
        o[8] = F::modulus();
        o[9] = a.pow_u32(b.l[0]);
        F f = F::zero();
        f.l[0] = (a == b ? 1u : 0u) | (a.is_zero() ? 2u : 0u);
        o[10] = f;
        o[11] = F::zero();
    }
}
extern "C" __global__ void emu_fr_ops(cuzk::fr_t* d_out, const cuzk::fr_t* d_a,
                                      const cuzk::fr_t* d_b, uint64_t n)
{
    emu_field_ops(d_out, d_a, d_b, n);
}
extern "C" __global__ void emu_fq_ops(cuzk::fq_t* d_out, const cuzk::fq_t* d_a,
                                      const cuzk::fq_t* d_b, uint64_t n)
{
    emu_field_ops(d_out, d_a, d_b, n);
}

// ---------------------------------------------------------------- kernel table

namespace {

struct kernel_t {
    std::vector<unsigned> sizes;  // sizeof of each parameter
    std::function<void(void* const*)> run;
};

template <class... A, size_t... I>
void invoke(void (*f)(A...), void* const* args, std::index_sequence<I...>)
{
    f(*static_cast<std::decay_t<A>*>(args[I])...);
}

template <class... A>
kernel_t make_kernel(void (*f)(A...))
{
    return kernel_t{{(unsigned)sizeof(A)...},
                    [f](void* const* args) { invoke(f, args, std::index_sequence_for<A...>{}); }};
}

#define EMU_KERNEL(name) {#name, make_kernel(&name)}
const std::map<std::string, kernel_t> KERNELS = {
    EMU_KERNEL(cuzk_batch_add_g1), EMU_KERNEL(cuzk_batch_add_g2),
    EMU_KERNEL(cuzk_batch_add_affine_g1), EMU_KERNEL(cuzk_batch_add_affine_g2),
    EMU_KERNEL(cuzk_batch_add_balanced_g1), EMU_KERNEL(cuzk_batch_add_balanced_g2),
    EMU_KERNEL(cuzk_fixed_base_g1), EMU_KERNEL(cuzk_fixed_base_g2),
    EMU_KERNEL(emu_ec_ops_g1), EMU_KERNEL(emu_ec_ops_g2),
    EMU_KERNEL(emu_inverse_fr), EMU_KERNEL(emu_inverse_fq), EMU_KERNEL(emu_inverse_fq2),
    EMU_KERNEL(cuzk_ntt_pass), EMU_KERNEL(cuzk_ntt_pass_deep), EMU_KERNEL(cuzk_ntt_gen_zetas),
    EMU_KERNEL(cuzk_fr_mul),   EMU_KERNEL(cuzk_fr_add),
    EMU_KERNEL(cuzk_fr_sub),   EMU_KERNEL(cuzk_fr_bitrev), EMU_KERNEL(emu_fr_ops),
    EMU_KERNEL(emu_fq_ops),    EMU_KERNEL(cuzk_h_odd_gather),
    EMU_KERNEL(cuzk_msm_count), EMU_KERNEL(cuzk_msm_scatter), EMU_KERNEL(cuzk_msm_cursors),
    EMU_KERNEL(cuzk_msm_tiles_counts), EMU_KERNEL(cuzk_msm_apply_counts),
    EMU_KERNEL(cuzk_msm_tiles_segments), EMU_KERNEL(cuzk_msm_apply_segments),
    EMU_KERNEL(cuzk_msm_scan_block),
    EMU_KERNEL(cuzk_msm_sum_points_g1), EMU_KERNEL(cuzk_msm_sum_points_flat_g1), EMU_KERNEL(cuzk_msm_sum_points_affine_g1),
    EMU_KERNEL(cuzk_msm_sum_points_batch_g1),
    EMU_KERNEL(cuzk_msm_sum_partials_g1),
    EMU_KERNEL(cuzk_msm_windows_g1), EMU_KERNEL(cuzk_msm_precompute_g1),
    EMU_KERNEL(cuzk_msm_sum_points_g2), EMU_KERNEL(cuzk_msm_sum_points_flat_g2), EMU_KERNEL(cuzk_msm_sum_points_affine_g2),
    EMU_KERNEL(cuzk_msm_sum_points_batch_g2),
    EMU_KERNEL(cuzk_msm_sum_partials_g2),
    EMU_KERNEL(cuzk_msm_windows_g2), EMU_KERNEL(cuzk_msm_precompute_g2),
};
#undef EMU_KERNEL

// ---------------------------------------------------------------- fibers

constexpr size_t STACK_BYTES = 256 * 1024;  // per CUDA thread (plus one guard page)
enum : unsigned char { RUNNABLE, AT_BARRIER, DONE };

struct worker_t {
    const kernel_t* kernel = nullptr;
    void* const* args = nullptr;
    unsigned block = 0;
    ucontext_t sched;
    std::vector<ucontext_t> ctx;
    std::vector<unsigned char> state;
    std::vector<char*> stacks;  // usable stack bases (each above a PROT_NONE guard page)
    size_t page = 0;
    unsigned cur = 0;
    std::vector<uint4> smem_store;  // 16-byte aligned, as the device's
    std::string error;

    ~worker_t()
    {
        for (char* s : stacks) munmap(s - page, STACK_BYTES + page);
    }
    bool alloc_stacks()
    {
        page = (size_t)sysconf(_SC_PAGESIZE);
        ctx.resize(block);
        state.resize(block);
        for (unsigned t = 0; t < block; t++) {
            void* m = mmap(nullptr, STACK_BYTES + page, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m == MAP_FAILED) return false;
            mprotect(m, page, PROT_NONE);  // stack overflow faults instead of corrupting
            stacks.push_back((char*)m + page);
        }
        return true;
    }
};

thread_local worker_t* tl_worker;

void fiber_entry()
{
    worker_t* w = tl_worker;
    unsigned t = w->cur;
    w->kernel->run(w->args);
    w->state[t] = DONE;  // returning resumes uc_link (the scheduler)
}

// Runs block b on the calling worker; false (and w->error) on barrier divergence.
bool run_block(worker_t* w, unsigned b, size_t smem)
{
    blockIdx.x = b;
    blockIdx.y = blockIdx.z = 0;
    std::memset(w->smem_store.data(), 0xA5, w->smem_store.size() * sizeof(uint4));
    emu_dyn_smem = smem ? w->smem_store.data() : nullptr;
    for (unsigned t = 0; t < w->block; t++) {
        getcontext(&w->ctx[t]);
        w->ctx[t].uc_stack.ss_sp = w->stacks[t];
        w->ctx[t].uc_stack.ss_size = STACK_BYTES;
        w->ctx[t].uc_link = &w->sched;
        makecontext(&w->ctx[t], fiber_entry, 0);
        w->state[t] = RUNNABLE;
    }
    for (unsigned phase = 0;; phase++) {
        for (unsigned k = 0; k < w->block; k++) {
            unsigned t = (phase & 1) ? w->block - 1 - k : k;
            if (w->state[t] != RUNNABLE) continue;
            w->cur = t;
            threadIdx.x = t;
            threadIdx.y = threadIdx.z = 0;
            cuzk::cc::emu_cf = 1;
            swapcontext(&w->sched, &w->ctx[t]);
        }
        unsigned done = 0;
        for (unsigned t = 0; t < w->block; t++) done += w->state[t] == DONE;
        if (done == w->block) return true;
        if (done != 0) {
            char msg[200];
            std::snprintf(msg, sizeof msg,
                          "barrier divergence in block %u after barrier %u: %u of %u threads "
                          "exited while the others wait at __syncthreads()",
                          b, phase, done, w->block);
            w->error = msg;
            return false;
        }
        for (unsigned t = 0; t < w->block; t++) w->state[t] = RUNNABLE;
    }
}

std::mutex g_launch_mutex;  // blockDim/gridDim are process-wide

void set_error(char* err, size_t errlen, const std::string& msg)
{
    if (err && errlen) std::snprintf(err, errlen, "%s", msg.c_str());
}

}  // namespace

// __syncthreads: park the current fiber, back to the worker's scheduler.
void __syncthreads()
{
    worker_t* w = tl_worker;
    unsigned t = w->cur;
    w->state[t] = AT_BARRIER;
    swapcontext(&w->ctx[t], &w->sched);
    cuzk::cc::emu_cf = 1;
}

// ---------------------------------------------------------------- C API

// 1 if the emulator has kernel `name`, else 0.
EMU_EXPORT int emu_has_kernel(const char* name) { return KERNELS.count(name) ? 1 : 0; }

// Run kernel `name` on a grid of `grid` x `block` threads (1-D) with `smem`
// bytes of dynamic shared memory.  args[i] points at the i-th parameter's
// value, sizes[i] is its size in bytes (checked against the kernel).
// `workers`: host threads for the blocks (0: hardware concurrency).
// Returns 0, or 1 with a message in err (invalid launch, divergence).
EMU_EXPORT int emu_launch(const char* name, unsigned grid, unsigned block, unsigned smem,
                          unsigned nargs, const unsigned* sizes, void* const* args,
                          unsigned workers, char* err, size_t errlen)
{
    using std::to_string;
    const std::string kname(name);
    auto it = KERNELS.find(kname);
    if (it == KERNELS.end()) {
        set_error(err, errlen, "no kernel named " + kname);
        return 1;
    }
    const kernel_t& k = it->second;
    if (nargs != k.sizes.size()) {
        set_error(err, errlen, kname + ": " + to_string(nargs) + " arguments given, the kernel takes " +
                                   to_string(k.sizes.size()));
        return 1;
    }
    for (unsigned i = 0; i < nargs; i++)
        if (sizes[i] != k.sizes[i]) {
            set_error(err, errlen, kname + ": argument " + to_string(i) + " is " + to_string(sizes[i]) +
                                       " bytes, the kernel's parameter " + to_string(k.sizes[i]));
            return 1;
        }
    if (grid == 0 || block == 0 || block > 1024) {
        set_error(err, errlen, kname + ": invalid launch configuration grid=" + to_string(grid) +
                                   " block=" + to_string(block));
        return 1;
    }

    std::lock_guard<std::mutex> lk(g_launch_mutex);
    blockDim = dim3{block, 1, 1};
    gridDim = dim3{grid, 1, 1};
    if (workers == 0) workers = std::max(1u, std::thread::hardware_concurrency());
    workers = std::min(workers, grid);

    std::atomic<unsigned> next{0};
    std::atomic<bool> failed{false};
    std::vector<std::string> errors(workers);
    auto body = [&](unsigned wi) {
        worker_t w;
        w.kernel = &k;
        w.args = args;
        w.block = block;
        w.smem_store.resize(smem / sizeof(uint4) + 1);
        tl_worker = &w;
        if (!w.alloc_stacks()) {
            errors[wi] = "out of memory for fiber stacks";
            failed = true;
            return;
        }
        for (unsigned b; !failed && (b = next.fetch_add(1)) < grid;)
            if (!run_block(&w, b, smem)) {
                errors[wi] = w.error;
                failed = true;
            }
        tl_worker = nullptr;
    };
    std::vector<std::thread> pool;
    for (unsigned wi = 1; wi < workers; wi++) pool.emplace_back(body, wi);
    body(0);
    for (auto& th : pool) th.join();
    for (auto& e : errors)
        if (!e.empty()) {
            set_error(err, errlen, kname + ": " + e);
            return 1;
        }
    return 0;
}
