// Self-test kernels for the driver layer and the kernel cache (program "selftest").
// NVRTC-clean: no standard headers; fixed-width types spelled as builtins.

typedef unsigned int selftest_u32_t;
typedef unsigned long long selftest_u64_t;

// Read by tests through Module.global_ptr.
__device__ selftest_u32_t cuzk_selftest_magic = 0xC0FFEE01u;

// d_out[i] = 3*i + 1 for i < n (grid-stride).
extern "C" __global__ void cuzk_selftest_iota3(selftest_u32_t* d_out, selftest_u32_t n)
{
    for (selftest_u32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        d_out[i] = 3u * i + 1u;
}

// d_out[i] = d_a[i] + d_b[i] mod 2^64 (grid-stride).
extern "C" __global__ void cuzk_selftest_add_u64(selftest_u64_t* d_out, const selftest_u64_t* d_a,
                                                 const selftest_u64_t* d_b, selftest_u64_t n)
{
    for (selftest_u64_t i = (selftest_u64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (selftest_u64_t)gridDim.x * blockDim.x)
        d_out[i] = d_a[i] + d_b[i];
}

// Echoes mixed-width scalar arguments, to check the host-side packing of
// kernel parameters (offsets follow the C ABI: each aligned to its size).
extern "C" __global__ void cuzk_selftest_args(selftest_u64_t* d_out, selftest_u32_t a, selftest_u64_t b,
                                              int c, float f, double d, unsigned char u8,
                                              short s16)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        d_out[0] = a;
        d_out[1] = b;
        d_out[2] = (selftest_u64_t)(long long)c;
        d_out[3] = (selftest_u64_t)__float_as_uint(f);
        d_out[4] = (selftest_u64_t)__double_as_longlong(d);
        d_out[5] = u8;
        d_out[6] = (selftest_u64_t)(long long)s16;
        d_out[7] = cuzk_selftest_magic;
    }
}

// Reverses each chunk of `chunk` words in place through dynamic shared memory
// (chunk * 4 bytes per block: above 48 KiB it needs set_max_dynamic_shared).
extern "C" __global__ void cuzk_selftest_reverse_chunks(selftest_u32_t* d_data, selftest_u32_t chunk)
{
    extern __shared__ selftest_u32_t s_buf[];
    selftest_u32_t* d = d_data + (selftest_u64_t)blockIdx.x * chunk;
    for (selftest_u32_t i = threadIdx.x; i < chunk; i += blockDim.x)
        s_buf[i] = d[i];
    __syncthreads();
    for (selftest_u32_t i = threadIdx.x; i < chunk; i += blockDim.x)
        d[i] = s_buf[chunk - 1u - i];
}

// Spins until *d_flag != 0 or `spins` iterations pass; lets tests observe
// Stream.query()/Event.query() returning False while work is pending.
extern "C" __global__ void cuzk_selftest_spin(volatile selftest_u32_t* d_flag, selftest_u64_t spins,
                                              selftest_u32_t* d_done)
{
    selftest_u64_t k = 0;
    while (*d_flag == 0u && k < spins) {
        __nanosleep(1000);
        ++k;
    }
    *d_done = 1u;
}
