"""Registers, local memory, shared memory and resident blocks per SM of the affine level-0 kernels
on this GPU (development aid for the "affine"/"affine_sm" balances): `python bench/affine_occupancy.py`."""
from cuzk import _cuda_msm as M
from cuzk._cuda_pending import XYZZ_WORDS


def main():
    st = M._state(None)
    print(f"{'kernel':38s} {'T':>4s} {'J':>3s} {'regs':>5s} {'smem KB':>8s} {'blocks/SM':>9s}")
    for g in ("g1", "g2"):
        field = XYZZ_WORDS[g] * 2
        for name, T, J, smem in (
                ("cuzk_msm_sum_points_flat_" + g, M._SUM_THREADS, 1, 0),
                ("cuzk_msm_sum_points_affine_" + g, M._AFFINE_THREADS, M._affine_lanes(),
                 M._AFFINE_THREADS * field),
                ("cuzk_msm_sum_points_affine_sm_" + g, M._AFFINE_SM_THREADS,
                 M._affine_lanes("CUZK_MSM_AFFINE_SM_LANES_" + g),
                 (1 + 2 * M._affine_lanes("CUZK_MSM_AFFINE_SM_LANES_" + g)) * M._AFFINE_SM_THREADS * field)):
            f = st.fn(name, smem)
            print(f"{name:38s} {T:4d} {J:3d} {f.num_regs:5d} {smem / 1024:8.1f} {f.occupancy(T, smem):9d}")


if __name__ == "__main__":
    main()
