"""Registers, dynamic shared memory and resident blocks per SM of the level-0 kernels on this GPU
(development aid for the balances of cuzk/_cuda_msm.py): `python bench/affine_occupancy.py`.
Session 6 (H200, sm_90): flat G1 170 registers (2 blocks of 128 per SM), affine G1 182 (1 block of
256), flat/affine G2 255.  The batch kernels' lanes are in device memory (J = chunks / resident
threads, 0 here)."""
from cuzk import _cuda_batch as B
from cuzk import _cuda_msm as M
from cuzk._cuda_pending import XYZZ_WORDS


def main():
    st = M._state(None)
    print(f"{'kernel':34s} {'T':>4s} {'J':>3s} {'regs':>5s} {'smem KB':>8s} {'blocks/SM':>9s}")
    for g in ("g1", "g2"):
        field = XYZZ_WORDS[g] * 2                       # bytes of one coordinate
        for name, T, J, smem in (("cuzk_msm_sum_points_flat_" + g, M._SUM_THREADS, 1, 0),
                                 ("cuzk_msm_sum_points_affine_" + g, M._AFFINE_THREADS, M._affine_lanes(),
                                  M._AFFINE_THREADS * field),
                                 ("cuzk_msm_sum_points_batch_" + g, M._BATCH_THREADS, 0, 0)):
            f = st.fn(name, smem)
            print(f"{name:34s} {T:4d} {J:3d} {f.num_regs:5d} {smem / 1024:8.1f} {f.occupancy(T, smem):9d}")
        name, T = "cuzk_batch_add_affine_" + g, B._AFFINE_THREADS       # the batch additions' affine kernel
        smem = T * XYZZ_WORDS[g] * 8
        f = B._state(None).fn(name, smem)
        print(f"{name:34s} {T:4d} {0:3d} {f.num_regs:5d} {smem / 1024:8.1f} {f.occupancy(T, smem):9d}")


if __name__ == "__main__":
    main()
