#!/usr/bin/env bash
# One GPU-host round in one call: wheels, build, GPU tests, benches.  Usage (repo root):
#   bash bench/gpu_round.sh [STEP ...]     logs under $OUT (or /tmp/out); no step: build only
# Session 5's calls: tests msmflat / fixtests eng27 / afftests msmaff affsweep / part27 (bench/RESULTS.md).
# Session 6: tests affskew / affsm (removed) / prover single24 / eng27 with --single (bench/RESULTS.md).
# Session 7: tests msmprof msmprof27 / msmtests scat24 scat27 / eng27 scat27b / eng27 (P=4, all modes x 1-4 workers).
# Session 8: tests eng27 (two-lock, split vs adaptive, --single 2) / upload msm20 eng24ad seg27 /
#   tests upload eng27 (--stage-options "streams=1;streams=2") sqrab / eng27 msmk / g2aff22 (bench/RESULTS.md).
# Session 9: tests msm26 / msmbatch (batch v1) / msmbatch (v2) / tests eng27 (two-lock, --single 2) msm26b / batchsm.
# Session 10: batchlb (removed: the register cap lost) tailbal c22b / tests eng27 / batchaff / tests eng27 / final
#   (bench/RESULTS.md).
# Session 11: sortab (a binned sort, A/B against the atomic scatter: refuted, removed) / canon (H in canonical form
#   for the H MSM: −1.2 ms, removed) eng27 / ...
# Session 12: ldab ncu27 (the scatter's scalars evict-first: −4 ms at 2^27, kept; the applied entry in the lane row: +6 ms,
#   not kept) / mul2ab (1/d and inv·d as one call of two products: +28 ms at 2^27, removed) ncustall (level 0 is
#   latency-bound: 2 warps per scheduler) / tests eng27 / ncuntt / occab (cut by the budget while compiling; prepared for the next session)
# Session 13: occab (late loads and 3 blocks per SM: both lost) / pfab (the next lane prefetched into L1 or L2: lost)
#   hk27; the three knobs and both steps removed / eng27 (early_h=1;early_h=0) / tests / eng24e; abc27 prepared
# Session 14: tests abc27 / tests eng27 ("early_h=1;abc_scratch=0": the new defaults against abc_scratch off) / segab /
#   tailc eng27 (every mode x 1-2 workers, traces); segab and tailc refuted, both steps removed; session 15:
#   inlab (the batch level 0 with inlined Fq products) refuted and removed / eng27 (streams=1;streams=2 --single 3:
#   streams=2 adopted) / tests str24 / soak16 eng24all
# Session 16: fqmul (the Fq product on the FP64 pipe, prototype 4cb1bf1: 0.79-0.85x the IMAD product, no overlap;
#   step and prototype removed) / msmtab (issue 9's whole table) / wide27 (c = 20 for large uniform plain G1 MSMs);
#   stageab prepared (the batch level 0's loads staged in shared memory), no machine left to run it
# Session 17: stageab (staged loads: level 0 +4.3 % at 2^27, +4.8 % at 2^24; kernel and step removed) / tests /
#   karaab (the Fq product with one level of Karatsuba, 736e3dd: level 0 +2.7 % at 2^27; product and step removed)
# Session 18: binab (a binned sort in shared memory, 56186fc: the scatter 157 vs 81 ms at 2^27; removed) / wk1 /
#   k13e24
# Session 19: tests peer / peer27 / peerbatch eng27 (sppark's msm_t timed in the same process as cuzk's MSM, same points and scalars)
# Session 20: tests balsz (balanced batch additions, the new G1 default, on the GPU; G2 and small sizes timed) /
#   balg2 ones24 eng27 (ENG27_OPTS="--stage-options ones_kind=affine;ones_kind=auto": the kernels in whole proofs) /
#   tests skipab (segment levels skipped once every bucket holds one sum: kept) / eng27 / eng27 (the defaults twice);
#   winab prepared (the window step on one wave), not run
# Session 21: winab (WINAB27=1: the wave grid kept as the default).  Session 22: tests eng27 (ENG27_P=20) / msmtab /
#   eng24all soak16 / eng27 (ENG27_MODES=coarse,narrow,two-lock ENG27_W=1,2,3 with --trace) / eng27 (two-lock, 2 workers,
#   --trace: a call's files are capped at 8, so the best configuration's trace gets its own call); rowab prepared
# Session 23: tests rowab (row_check=on_failure: no change, GPU-bound at 2^24 with 20 partitions) / k5ab / eng27
#   (ENG27_OPTS="--stage-options precompute=4,h_window=20;precompute=5,h_window=20") / tests eng27 (--single 2)
#   eng24all (ENG24_P=20)
# Session 24: tests winvab (the H stage's last transform on the forward w table read mirrored: no inverse w table) /
#   prover eng27 (ENG27_OPTS="--stage-options share_sort=0;share_sort=1;...": B_G2's tail takes B_G1's sort) / tests eng27
# Session 25: eng27 (ENG27_OPTS="--stage-options side_scratch=0,precompute=4,h_window=20;side_scratch=1,...;precompute=auto":
#   the tails' scratch from a, b, c's buffer, and 5 H copies beside two partitions) / onesab eng27 (the batch additions
#   as one-bucket MSMs, prototype 6c267c6: slower, kind and step removed) / tests eng27 (--single 2)
# Session 26: streamtests stream27 (a streamed key in chunks: 2^27 inside a 30 GiB budget) / streamprof (its host side
#   under cProfile) / streamprof stream27 / tests stream27 (chunks sized by the budget) / stream27 eng27s (slots 2 vs 3)
# Session 31: no machine lent (refused starts, then paused); prepared: upbeside cpin27 tests / eng27s
#   (ENG27S_P=8 ENG27S_BUDGET=30 ENG27S_OPTS="--stage-options h_buffers=2,c_upload=register;h_buffers=2,c_upload=ring;h_buffers=2,c_upload=register")
# Session 32: no machine lent (paused); prepared for a multi-GPU kind (nvidia-h100-x2 / h200-x2): multitests multi24
#   multi27 (the engine on 1 and 2 devices in one process: MULTI_DEVICES=1,2), and session 31's calls above
# Session 33: no machine could be started (14 refused requests); the calls above still to run
# Session 34 (H100, kind nvidia-h100-x1): tests upbeside / sanitize (memcheck, synccheck, racecheck; initcheck cut by
#   its reports) / sanitize with SAN_TOOLS=initcheck (-DCUZK_INITCHECK: clean) / the same with SAN_DEFINES=" " (plain build)
# Session 35 (H100): eng27s (c_upload register;ring;register: ring kept) / tests / cpin27 / eng27 (ENG27_MODES=two-lock
#   ENG27_W=2 ENG27_OPTS="--stage-options key_where=auto;key_where=device --single 2": the card's own budget), then
#   one-off commands on a third machine (topology, bench_upload.py, a 2^26/2^27 partition, --single alone)
# Session 37 (H100): tests / eng27 (ENG27_MODES=two-lock ENG27_W=2,3: three workers before and after the key placement
#   for two in flight), the same beside 4 and 8 numpy copy loops (a busy host: the busy27 step, BUSY_LOOPS=4 / 8)
# Session 38 (H100): tests; then no machine could be started: nregab prepared (the batch level 0 under __maxnreg__ caps)
# Session 39: no machine could be started (14 refused starts); nregab gained NREG_SIZES / NREG_RUNS for a short call
# Session 40 (H100): tests / nregab (every cap lost: level 0 +10 to +34 %; knob and step removed); then no machine could
#   be started: cuab prepared (after git revert 5f6e2ea, CUAB_BASE=HEAD~1: Fq's lazy product in the batch additions)
# Session 41 (H100, then H200): cuab (the lazy product as a second product body: level 0 +5.9 % / +1.4 %) / eng27
#   (ENG27_MODES=two-lock ENG27_W=2 ENG27_OPTS="--single 2") / tests / a G1 table at 2^24-2^27 / hwin / cuab (the lazy
#   product as level 0's only product body, CUAB_BASE=bbf1850: +0.35 % / -0.7 %); neither kept
# Session 42 (H100; no H200 lent): peer g2tab (the peer step's 2^24 real_tail peer runs cut it at 300 s) / peergoal
#   (PEERGOAL_GK="26:4 27:2"; the goals' k, 26:13 27:5, need an H200), sppark's msm_t in the same process; cuab prepared
#   (after git revert c356d40, CUAB_BASE=c356d40: the batch level 0's rare paths out of line)
# Session 43 (H100; no H200 lent): cuab cuabskew (CUAB_BASE_DIR: the rare paths out of line against main's kernels:
#   not adopted) / tests
# Session 44 (H100; no H200 lent): eng27 (ENG27_MODES=coarse,two-lock ENG27_W=2: 1.00x on that H100, the key placed
#   differently per mode) / eng27 (the same with ENG27_OPTS="--stage-options key_where=auto;key_where=device") /
#   eng27 (ENG27_MODES=two-lock, key_where=device;key_where=auto: the order reversed)
# Session 45 (H100): eng27 with CUDA_DEVICE_MAX_CONNECTIONS=32 (no change) / eng27 twice (the key_where=auto engine
#   first in its process, and after a resident one: its a, b put waits 1.09 s on the GPU, 0.005 s first); poolab
#   prepared (the pool's internal dependencies off against on, one process), not run: the budget ran out
# Session 46 (H100): tests (the pool test's NameError, fixed) / poolab (off ran out of memory after a resident engine)
#   / the same with off from the start (OOM again) / "auto" twice with off (both fast): a resident key's plain
#   twiddle tables outlived its engine, unseen by the next engine's budget; keys now free the tables they built;
#   poolab rewritten to check that, not run: the budget ran out
# Session 47 (H100): tests poolab (the fix checked: "auto" after a resident engine as fast as first) / eng27
#   (ENG27_MODES=coarse,two-lock ENG27_W=2: 1.17x without stale tables)
#   / tests eng27 (ENG27_MODES=two-lock ENG27_W=2 ENG27_OPTS="--stage-options early_h=0;early_h=1": the early path
#   for a split key, 14.26 -> 14.02 s per 10)
#   / device_memory_probe.py --log-n 16, 22, 27 (the driver keeps 2.33 GB of local memory at 2^27: G2 affine level 0)
# Session 48: no machine started (19 requests); prepared: tests poolab (the hold's first GPU run) / g2lanes
# Session 49 (H100): tests poolab (the hold: 0.74 GB, untracked 0.90 -> 0.16 GB) / g2lanes (16 G2 lanes: +8.7 % uniform,
#   +43 % real_tail at 2^24; step removed)
# Sessions 50-51: no machine started.  Session 52 (H200): eng27 msmtests (ENG27_MODES=coarse,two-lock ENG27_W=2) /
#   peergoal (PEERGOAL_GK="27:5 24:13") / tests peergoal (PEERGOAL_GK="26:13") / eng27 (ENG27_MODES=two-lock ENG27_W=2
#   ENG27_OPTS="--stage-options streams=1;streams=2 --single 2": the region's serial breakdown)
# Session 53 (H100): regtests eng27 (ENG27_MODES=coarse,two-lock,overlap ENG27_W=2: the compute lock released once a region
#   is enqueued, so consecutive regions overlap on the GPU) / eng27 (the same, ENG27_W=3) / tests; prepared for an H200
#   (none started): eng27 (ENG27_MODES=coarse,two-lock,overlap ENG27_W=3: issue 10's ratio with three workers)
# Session 54 (H100; no H200 started, 10 requests): scatab (SCATAB_K27=2: the scatter through cursors, adopted) / tests;
#   the engine A/B run outside this script lacked the wheels (PYTHONPATH) and failed: eng27ab prepared for it
# Session 55 (H100; no H200 started, nine requests): eng27ab (ENG27AB_ENVS="CUZK_MSM_SCATTER=offsets ...=cursors", twice)
#   / peergoal (PEERGOAL_GK="24:13 26:4") / scatw's two commands; still for an H200: eng27 (ENG27_MODES=coarse,two-lock,
#   overlap ENG27_W=2,3), peergoal (27:5 26:13 24:13)
# Session 56: no call ran (18 requests, H200 and H100, 17:09-18:38 UTC; one machine taken back before its call finished);
#   the same two calls still wait for an H200
# Session 57: no call ran (four requests 20:13-20:37 UTC found no machine, then loans paused); the same two calls wait
# Session 58: eng27 (ENG27_MODES=coarse,two-lock ENG27_W=3, cut to fit the budget left after 17 refused requests) ran on
#   an H100 (none of the H200s asked for since 23:10 UTC came): 1.22x; the H200 calls above still wait
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 CUZK_CACHE_DIR=/tmp/cuzk-kc
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
t0=$(date +%s)
python3 -m pip install --no-build-isolation --no-deps -q -e . > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm --format=csv,noheader
git log --oneline -1 2>/dev/null || true
# cuab's A/B runs: bench_gpu_msm.py ARGS with the profile on, on the base tree (/tmp/cuab/base, made by the cuab
# step) and the working tree's in turn, CUAB_ROUNDS (2) times; every run appended to $OUT/NAME.log after an
# "== tree (round r)" line (one file per step: a device call brings back at most 8), its level-0 lines printed.
# A CUZK_MSM_PROFILE=1 bench_gpu_msm.py log as one line per row: the row, its gpu ms, and the medians of the
# steps count / scan / scatter / level0 over its timed runs (the profile lines before each row, less the warm-up).
prof_rows() {  # LOG
  python3 - "$1" <<'PY'
import re, statistics, sys
steps = []
for line in open(sys.argv[1]):
    m = re.search(r"msm g\d n=\d+ .*?: (.*) ms", line)
    if m:
        steps.append(dict((k, float(v)) for k, v in re.findall(r"(\w+)=([0-9.]+)", m.group(1))))
    elif line.startswith("  g") and ": gpu" in line:
        keep = steps[1:] or steps
        med = {k: statistics.median(s.get(k, 0.0) for s in keep) for k in ("count", "scan", "scatter", "level0")}
        head, tail = line.strip().split(": gpu", 1)
        print(f"{head}: gpu{tail.split(',')[0]}; " + " ".join(f"{k}={v:.2f}" for k, v in med.items()), flush=True)
        steps = []
PY
}
cuab_alternate() {  # NAME TIMEOUT_S ARGS...
  local name=$1 secs=$2 r v; shift 2
  for r in $(seq "${CUAB_ROUNDS:-2}"); do for v in base new; do
    if [ $v = base ]; then export CUZK_CU_DIR=/tmp/cuab/base/cuzk/cu; else unset CUZK_CU_DIR; fi
    echo "== $v (round $r)" | tee -a "$OUT/$name.log"
    CUZK_MSM_PROFILE=1 timeout "$secs" python3 bench/bench_gpu_msm.py "$@" 2>&1 | tee -a "$OUT/$name.log" \
      | grep -E '^g1 |level0=|rror' | sed -E 's/ (level1|level2|level3|level4|windows)=[0-9.]+//g' | sed "s/^/$v /"
  done; done; unset CUZK_CU_DIR
}
for step in "$@"; do
  case $step in
    msmtab) # issue 9's whole table on one tree: G1 2^20-2^27 and G2 2^20-2^24, uniform / bits90 / real_tail (≤ 2^24 == CPU)
           timeout 420 python3 bench/bench_gpu_msm.py --g1 20,22,24 --g2 20,22,24 --kinds uniform,bits90,real_tail --k 1,4 \
                --runs 5 --json "$OUT/msmtab24.json" 2>&1 | tee "$OUT/msmtab24.log" | tail -42
           timeout 300 python3 bench/bench_gpu_msm.py --g1 26,27 --g2 '' --kinds uniform,bits90,real_tail --k 2,4 \
                --no-check --runs 3 --json "$OUT/msmtab27.json" 2>&1 | tee "$OUT/msmtab27.log" | tail -16 ;;
    wide27) # sampled_window: c = 20 for plain G1 MSMs of uniform scalars from 2^26 (auto) against c = 16, same run;
            # 2^25 at c = 16 and 20 (checked against the CPU) for the threshold
           timeout 200 python3 bench/bench_gpu_msm.py --g1 25 --g2 '' --kinds uniform --c 16,20 --k 2,4 --runs 3 \
                --json "$OUT/wide25.json" 2>&1 | tee "$OUT/wide25.log" | tail -6
           timeout 360 python3 bench/bench_gpu_msm.py --g1 26,27 --g2 '' --kinds uniform,bits90,real_tail --c auto,16 --k 2,4 \
                --no-check --runs 3 --json "$OUT/wide27.json" 2>&1 | tee "$OUT/wide27.log" | tail -26 ;;
    wk1) # every window on one bucket set (k = W copies, Wk = 1: Yrrid's 12 copies and one 22-bit window) against the
         # defaults: G1 2^24 (== CPU) c = 16 / 20 / 22 with k = 4 / 12 / 13, and 2^26 c = 20 / 22
         CUZK_MSM_PROFILE=1 timeout 260 python3 bench/bench_gpu_msm.py --g1 24 --g2 '' --kinds uniform,bits90 --c 16,20,22 \
              --k 4,12,13 --runs 5 --json "$OUT/wk1_24.json" 2>&1 | tee "$OUT/wk1_24.log" | tail -18
         CUZK_MSM_PROFILE=1 timeout 300 python3 bench/bench_gpu_msm.py --g1 26 --g2 '' --kinds uniform --c 20,22 --k 4,12,13 \
              --no-check --runs 3 --json "$OUT/wk1_26.json" 2>&1 | tee "$OUT/wk1_26.log" | tail -7 ;;
    k13e24) # the engine at 2^24 with the H MSM on one bucket set (precompute auto: k = 13, c = 20) against the
            # previous default (k = 4, c = 16), same run
            timeout 300 python3 -m cuzk bench --log-n 24 --partitions 10 --workers-per-gpu 2 --lock-mode two-lock \
                --stage-options "precompute=4;precompute=auto" --backend cuda --cache-dir memory \
                --json "$OUT/k13e24.json" 2>&1 | tee "$OUT/k13e24.log" | tail -14 ;;
    peer) # a peer G1 MSM beside cuzk's in one process (bench_gpu_msm.py --peer; $PEER_LIB: a library built by the
          # caller outside the repository, e.g. sppark's msm_t behind the C ABI in bench_gpu_msm.py's doc):
          # 2^20-2^24, every sum checked against the CPU (peer27 / peergoal: the larger sizes); real_tail at 2^20
          # only (the peer's heavy buckets take ~5 s an MSM there, and 2^24's runs cut session 42's step at 300 s)
          timeout 300 python3 bench/bench_gpu_msm.py --peer "$PEER_LIB" --g1 20,22,24 --g2 '' --kinds uniform,bits90 \
               --k 1,4,13 --runs 5 --json "$OUT/peer24.json" 2>&1 | tee "$OUT/peer24.log" | tail -20
          timeout 120 python3 bench/bench_gpu_msm.py --peer "$PEER_LIB" --g1 20 --g2 '' --kinds real_tail \
               --k 1,4,13 --runs 5 --json "$OUT/peer20rt.json" 2>&1 | tee "$OUT/peer20rt.log" | tail -4 ;;
    scatab) # the scatter through absolute cursors (one atomic + one write per entry) against through off[b] (+ a
            # random 8-byte load): the GPU MSM tests with cursors, then CUZK_MSM_PROFILE's step times, the two
            # forms alternating in one process: G1 2^24 k = 13 (== CPU, three kinds), 2^27 k = $SCATAB_K27 (5: an
            # H200; 2 fits an H100) uniform, 2^18 to 2^20 buckets per pass (cursors: 4 bytes of bucket state each,
            # not 12)
          CUZK_MSM_SCATTER=cursors timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_msm.py 2>&1 \
               | tee "$OUT/scatab_tests.log" | tail -2
          CUZK_MSM_PROFILE=1 timeout 200 python3 bench/bench_gpu_msm.py --g1 24 --g2 '' --kinds uniform,bits90,real_tail \
               --c 20 --k 13 --scatter offsets,cursors,offsets,cursors --runs 5 --json "$OUT/scatab24.json" \
               > "$OUT/scatab24.log" 2>&1; grep -E "rror" "$OUT/scatab24.log" | tail -3; prof_rows "$OUT/scatab24.log"
          CUZK_MSM_PROFILE=1 timeout 200 python3 bench/bench_gpu_msm.py --g1 27 --g2 '' --kinds uniform --c 20 \
               --k ${SCATAB_K27:-5} --scatter-buckets 18,19,20 --scatter offsets,cursors,offsets,cursors --no-check --runs 3 --json "$OUT/scatab27.json" \
               > "$OUT/scatab27.log" 2>&1; grep -E "rror" "$OUT/scatab27.log" | tail -3; prof_rows "$OUT/scatab27.log" ;;
    scatw) # buckets per scatter pass with the cursor scatter: 2^17-2^19 at G1 2^24 k = 13 (== CPU), 2^17 against 2^18
           # at 2^27 k = 2 (fits an H100), profile on (the step times)
          CUZK_MSM_PROFILE=1 timeout 150 python3 bench/bench_gpu_msm.py --g1 24 --g2 '' --kinds uniform --c 20 --k 13 \
               --scatter-buckets 17,18,19 --runs 5 --json "$OUT/sb24.json" > "$OUT/sb24.log" 2>&1
          grep -E "rror" "$OUT/sb24.log" | tail -3; prof_rows "$OUT/sb24.log"
          CUZK_MSM_PROFILE=1 timeout 140 python3 bench/bench_gpu_msm.py --g1 27 --g2 '' --kinds uniform --c 20 --k 2 \
               --scatter-buckets 17,18,17,18 --no-check --runs 3 --json "$OUT/sb27.json" > "$OUT/sb27.log" 2>&1
          grep -E "rror" "$OUT/sb27.log" | tail -3; prof_rows "$OUT/sb27.log" ;;
    eng27ab) # the 2^27 engine once per environment in ENG27AB_ENVS (space-separated VAR=value[,VAR=value] items, each
             # its own process, in order: e.g. "CUZK_MSM_SCATTER=offsets CUZK_MSM_SCATTER=cursors CUZK_MSM_SCATTER=offsets"
             # for a knob read at import), two-lock, ENG27_W workers (2), 10 partitions
          i=0; for e in ${ENG27AB_ENVS:?set ENG27AB_ENVS}; do i=$((i+1))
            env ${e//,/ } timeout ${ENG27_TIMEOUT:-130} python3 -m cuzk bench --log-n 27 --partitions 10 \
                --workers-per-gpu ${ENG27_W:-2} --lock-mode two-lock --backend cuda --cache-dir memory ${ENG27_OPTS:-} \
                --json "$OUT/eng27ab_$i.json" > "$OUT/eng27ab_$i.log" 2>&1
            echo "== $i $e rc=$?"; grep -E "^ +27 " "$OUT/eng27ab_$i.log" | tail -1
          done ;;
    peergoal) # issue 9's goals at their k, $PEER_LIB's MSM (when set) timed in the same process on the same inputs:
              # G1 2^26 with 13 copies and 2^27 with 5 (each peer sum against cuzk's; ~90 GiB of device memory at
              # 2^27: an H200); real_tail without the peer (its heavy buckets take seconds an MSM there)
          for GK in ${PEERGOAL_GK:-26:13 27:5}; do   # PEERGOAL_GK="26:4 27:2": what fits an H100
            timeout 240 python3 bench/bench_gpu_msm.py ${PEER_LIB:+--peer "$PEER_LIB"} --g1 ${GK%:*} --g2 '' \
                 --kinds uniform,bits90 --k ${GK#*:} --no-check --runs 3 --json "$OUT/goal${GK%:*}.json" 2>&1 \
                 | tee "$OUT/goal${GK%:*}.log" | tail -3
            timeout 150 python3 bench/bench_gpu_msm.py --g1 ${GK%:*} --g2 '' --kinds real_tail --k ${GK#*:} --no-check \
                 --runs 3 2>&1 | tee "$OUT/goal${GK%:*}rt.log" | tail -1
          done ;;
    g2tab) timeout 300 python3 bench/bench_gpu_msm.py --g1 '' --g2 20,22,24 --kinds uniform,bits90,real_tail --k 1,4 \
               --runs 5 --json "$OUT/g2tab.json" 2>&1 | tee "$OUT/g2tab.log" | tail -20 ;;
    peerbatch) # a peer G1 batch addition beside cuzk's (bench_gpu_batch.py --peer, $PEER_LIB as for peer): 2^24 (== CPU)
               # and 2^27, 90 % and 45 % of the bits set, each peer sum against cuzk's
          timeout 300 python3 bench/bench_gpu_batch.py --peer "$PEER_LIB" --g1 24,27 --g2 '' --density 0.9,0.45 --fixed '' \
               --runs 7 --json "$OUT/peerbatch.json" 2>&1 | tee "$OUT/peerbatch.log" | tail -8 ;;
    balsz) # the balanced batch-addition kernel where session 19 did not time it: G1 below 2^24, G2 2^24 / 2^27
           # (B_G2's ones), each against xyzz and affine; G1 2^20/2^22 and G2 2^24 == CPU
          timeout 360 python3 bench/bench_gpu_batch.py --g1 20,22 --g2 24,27 --density 0.45,0.9 --kind balanced,xyzz,affine \
               --fixed '' --runs 5 --json "$OUT/balsz.json" 2>&1 | tee "$OUT/balsz.log" | tail -24 ;;
    balg2) # sparse G2 bitmaps between the measured 2^24 and 2^27: where balanced stops beating affine
          timeout 200 python3 bench/bench_gpu_batch.py --g1 '' --g2 25,26 --density 0.45 --kind balanced,affine \
               --fixed '' --check-max 0 --runs 5 --json "$OUT/balg2.json" 2>&1 | tee "$OUT/balg2.log" | tail -6 ;;
    skipab) # segment levels after the one that left every bucket one sum skipped (default) against every level of
            # the plan run (CUZK_MSM_SKIP_LEVELS=0), profile on: G1 2^24 k = 13 (== CPU), G2 2^22, G1 2^27 k = 4 (the H MSM)
          for SK in 1 0; do
            CUZK_MSM_SKIP_LEVELS=$SK CUZK_MSM_PROFILE=1 timeout 150 python3 bench/bench_gpu_msm.py --g1 24 --g2 22 \
                 --kinds uniform,bits90,real_tail --k 13 --runs 5 --json "$OUT/skip$SK-24.json" 2>&1 \
                 | tee "$OUT/skip$SK-24.log" | grep -v "^msm " | tail -8 | sed "s/^/skip=$SK /"
            CUZK_MSM_SKIP_LEVELS=$SK CUZK_MSM_PROFILE=1 timeout 150 python3 bench/bench_gpu_msm.py --g1 27 --g2 '' \
                 --kinds uniform --k 4 --runs 3 --no-check --json "$OUT/skip$SK-27.json" 2>&1 \
                 | tee "$OUT/skip$SK-27.log" | grep -v "^msm " | tail -3 | sed "s/^/skip=$SK /"
          done ;;
    winab) # the window step's grid: "spread" (default) against "wave" (one block per SM, longer running sums),
           # profile on (the windows= step): G1 2^24 with 13 copies (Wk = 1), then the 2^27 H MSM (k = 4, Wk = 4)
          for G in spread wave; do
            CUZK_MSM_WINDOW_GRID=$G CUZK_MSM_PROFILE=1 timeout 120 python3 bench/bench_gpu_msm.py --g1 24 --g2 '' \
                 --kinds uniform --k 13 --runs 3 --no-check --json "$OUT/win-$G-24.json" 2>&1 | tee "$OUT/win-$G-24.log" \
                 | grep "^msm \|^g1 " | tail -2 | sed "s/^/$G /"
          done
          [ -n "${WINAB27:-}" ] && for G in spread wave; do
            CUZK_MSM_WINDOW_GRID=$G CUZK_MSM_PROFILE=1 timeout 150 python3 bench/bench_gpu_msm.py --g1 27 --g2 '' \
                 --kinds uniform --k 4 --runs 3 --no-check --json "$OUT/win-$G-27.json" 2>&1 | tee "$OUT/win-$G-27.log" \
                 | grep "^msm \|^g1 " | tail -2 | sed "s/^/$G /"
          done ;;
    peer27) # the same at 2^26 (k 1, 4, 13) and 2^27 (k 1, 4), each peer sum against cuzk's
          timeout 240 python3 bench/bench_gpu_msm.py --peer "$PEER_LIB" --g1 26 --g2 '' --kinds uniform,bits90 --k 1,4,13 \
               --no-check --runs 3 --json "$OUT/peer26.json" 2>&1 | tee "$OUT/peer26.log" | tail -9
          timeout 300 python3 bench/bench_gpu_msm.py --peer "$PEER_LIB" --g1 27 --g2 '' --kinds uniform,bits90 --k 1,4 \
               --no-check --runs 3 --json "$OUT/peer27.json" 2>&1 | tee "$OUT/peer27.log" | tail -7 ;;
    tests) timeout 400 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tee "$OUT/gpu_tests.log" | tail -25 ;;
    regtests) # the engine on one GPU, two-lock and overlap (regions of partitions at once), bytes == CPU
           timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_prover.py -k "regions_on_one" 2>&1 \
                | tee "$OUT/gpu_reg_tests.log" | tail -4 ;;
    msm)   timeout 300 python3 bench/bench_gpu_msm.py --quick 2>&1 | tee "$OUT/msm.log" | tail -40 ;;
    batch) timeout 200 python3 bench/bench_gpu_batch.py 2>&1 | tee "$OUT/batch.log" | tail -20 ;;
    part)  timeout 400 python3 bench/bench_gpu_partition.py --log-n 16 20 --check-cpu 2>&1 | tee "$OUT/part.log" | tail -40 ;;
    part24) timeout 500 python3 bench/bench_gpu_partition.py --log-n 24 --json "$OUT/part24.json" 2>&1 | tee "$OUT/part24.log" | tail -40 ;;
    part24k2) timeout 300 python3 bench/bench_gpu_partition.py --log-n 24 --precompute 2 --json "$OUT/part24k2.json" 2>&1 | tee "$OUT/part24k2.log" | tail -40 ;;
    part27) timeout 420 python3 bench/bench_gpu_partition.py --log-n 27 --repeat 2 ${PART27_OPTS:-} --json "$OUT/part27.json" 2>&1 | tee "$OUT/part27.log" | tail -40 ;;
    part27c) timeout 560 python3 bench/bench_gpu_partition.py --log-n 27 --repeat 2 --config "" \
                --config "precompute=2,h_window=20" --json "$OUT/part27c.json" 2>&1 | tee "$OUT/part27c.log" | tail -40 ;;
    msmsweep) timeout 200 python3 bench/bench_gpu_msm.py --g1 24 --g2 '' --kinds uniform,bits90 --c auto,16,18 --k 1,2,4 --no-check --runs 3 --json "$OUT/msmsweep.json" 2>&1 | tee "$OUT/msmsweep.log" | tail -25 ;;
    msmprof) CUZK_MSM_PROFILE=1 timeout 200 python3 bench/bench_gpu_msm.py --g1 24 --g2 22 --kinds uniform,bits90 --c 16,20 --k 1,4 \
                --no-check --runs 2 2>&1 | tee "$OUT/msmprof.log" | grep -v "^ *$" | tail -45 ;;
    msmprof27) CUZK_MSM_PROFILE=1 timeout 260 python3 bench/bench_gpu_msm.py --g1 27 --g2 '' --kinds uniform,bits90 --c 16,20,22 --k 2 \
                --no-check --runs 2 --json "$OUT/msmprof27.json" 2>&1 | tee "$OUT/msmprof27.log" | grep -v "^ *$" | tail -45 ;;
    scat27) CUZK_MSM_PROFILE=1 timeout 300 python3 bench/bench_gpu_msm.py --g1 27 --g2 '' --kinds uniform,bits90 --c 20,22 --k 2 \
                --balance bucket,flat --scatter-buckets 18,19,20,32 --no-check --runs 2 --json "$OUT/scat27.json" 2>&1 \
                | tee "$OUT/scat27.log" | grep -v "^ *$" | grep -v "^msm " | tail -40 ;;
    scat27b) CUZK_MSM_PROFILE=1 timeout 150 python3 bench/bench_gpu_msm.py --g1 27 --g2 '' --kinds uniform --c 20 --k 2 \
                --balance flat --scatter-buckets 16,17,18 --no-check --runs 2 --json "$OUT/scat27b.json" 2>&1 \
                | tee "$OUT/scat27b.log" | grep -v "^ *$" | tail -12 ;;
    seg27) CUZK_MSM_PROFILE=1 timeout 200 python3 bench/bench_gpu_msm.py --g1 27 --g2 '' --kinds uniform,real_tail --c 20 --k 2 \
                --segment 64,128,256 --no-check --runs 2 --json "$OUT/seg27.json" 2>&1 \
                | tee "$OUT/seg27.log" | grep -v "^ *$" | tail -12 ;;
    scat24) CUZK_MSM_PROFILE=1 timeout 200 python3 bench/bench_gpu_msm.py --g1 24 --g2 22 --kinds uniform,bits90 --c 16,20 --k 1,4 \
                --scatter-buckets 17,19,32 --runs 3 --json "$OUT/scat24.json" 2>&1 \
                | tee "$OUT/scat24.log" | grep -v "^ *$" | grep -v "^msm " | tail -52 ;;
    msm20) timeout 200 python3 bench/bench_gpu_msm.py --g1 20 --g2 '' --kinds uniform,bits90 --c auto,12,13,14,15,16 --k 1,2,4,8 \
                --no-check --runs 7 --json "$OUT/msm20.json" 2>&1 | tee "$OUT/msm20.log" | grep -v "^ *$" | tail -52 ;;
    eng24ad) timeout 200 python3 -m cuzk bench --log-n 24 --partitions 8 --workers-per-gpu 2 --lock-mode two-lock \
                --thread-share split,adaptive --backend cuda --cache-dir memory --json "$OUT/eng24ad.json" 2>&1 \
                | tee "$OUT/eng24ad.log" | tail -8 ;;
    upload) timeout 150 python3 bench/bench_upload.py --gib 4 --threads 16,8,4 --chunk-mib 64,16 --json "$OUT/upload.json" 2>&1 \
                | tee "$OUT/upload.log" | tail -14 ;;
    msmk) timeout 240 python3 bench/bench_gpu_msm.py --g1 20,22,24 --g2 22 --kinds uniform,bits90 --c 16 --k 4,8,16 \
                --no-check --runs 5 --json "$OUT/msmk.json" 2>&1 | tee "$OUT/msmk.log" | grep -v "^ *$" | tail -22 ;;
    cuab) # the kernels of git revision $CUAB_BASE (default HEAD~1) against the working tree's, one call: both
          # compiled first; G1 2^20 batch (uniform, real_tail, bits90 == CPU) on the new tree; then CUAB_SIZES
          # (24,27) uniform c = 20 k = 2, CUAB_RUNS (3) runs, profile on, alternating base / new CUAB_ROUNDS (2)
          # times; last, the GPU tests of the batch additions and the MSM's level 0 on the new tree.
          # The device's git copy can lag the working tree (its HEAD is the commit printed above): name
          # CUAB_BASE as a commit hash, not HEAD~N.  Logs only: a device call brings back at most 8 files.
          # CUAB_BASE_DIR (a copy of a base's cuzk/cu carried beside the tree) replaces the git revision when set.
          rm -rf /tmp/cuab && mkdir -p /tmp/cuab/base/cuzk
          if [ -n "${CUAB_BASE_DIR:-}" ]; then cp -r "$CUAB_BASE_DIR" /tmp/cuab/base/cuzk/cu || continue
          else git archive "${CUAB_BASE:-HEAD~1}" cuzk/cu | tar -x -C /tmp/cuab/base \
            || { echo "cuab: no tree for ${CUAB_BASE:-HEAD~1}"; continue; }; fi
          CUZK_CU_DIR=/tmp/cuab/base/cuzk/cu python3 -c "from cuzk import _kernels as k; k.compile_program('msm')" &
          python3 -c "from cuzk import _kernels as k; k.compile_program('msm')" & wait
          timeout 150 python3 bench/bench_gpu_msm.py --g1 20 --g2 '' --kinds uniform,real_tail,bits90 --balance batch --c 16 \
            --k 1,4 --runs 1 2>&1 | grep -E '^g1 |MISMATCH|rror' | sed "s/^/new /"
          cuab_alternate cuab 200 --g1 ${CUAB_SIZES:-24,27} --g2 '' --kinds uniform --c 20 --k 2 --no-check --runs ${CUAB_RUNS:-3}
          timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_batch.py tests/test_gpu_msm.py \
            -k "batch_add or level0 or batch_many or distributions" 2>&1 | tee "$OUT/cuab_tests.log" | tail -3 ;;
    cuabskew) # after cuab, on its two compiled trees: level 0 at 2^24 (c = 16, k = 2) on bits90 and real_tail
          # (session 41's call 8)
          cuab_alternate cuabskew 150 --g1 24 --g2 '' --kinds bits90,real_tail --c 16 --k 2 --no-check --runs 3 ;;
    msm27u) timeout 200 python3 bench/bench_gpu_msm.py --g1 27 --g2 '' --kinds uniform --c 20 --k 2 \
                --no-check --runs 3 --json "$OUT/msm27u.json" 2>&1 | tee "$OUT/msm27u.log" | grep -v "^ *$" | tail -4 ;;
    sqrab) # A/B of the dedicated Fq squaring in one call: a copy of cuzk/cu with sqr() = the product
           rm -rf /tmp/cu_mul && cp -r cuzk/cu /tmp/cu_mul && sed -i '1i #define CUZK_MONT_SQR_AS_MUL 1' /tmp/cu_mul/ff/mont_t.cuh
           for v in mul sqr; do
             if [ $v = mul ]; then export CUZK_CU_DIR=/tmp/cu_mul; else unset CUZK_CU_DIR; fi
             timeout 120 python3 bench/bench_gpu_msm.py --g1 24 --g2 '' --kinds uniform --c 16 --k 4 --no-check --runs 5 \
               --json "$OUT/sqrab24-$v.json" 2>&1 | grep "^g1 " | sed "s/^/$v /"
             timeout 150 python3 bench/bench_gpu_msm.py --g1 27 --g2 '' --kinds uniform --c 20 --k 2 --no-check --runs 3 \
               --json "$OUT/sqrab27-$v.json" 2>&1 | grep "^g1 " | sed "s/^/$v /"
           done; unset CUZK_CU_DIR ;;
    g2aff22) timeout 120 python3 bench/bench_gpu_msm.py --g1 22 --g2 22 --kinds uniform,bits90,real_tail --c 16 --k 8 \
                --balance flat,affine --no-check --runs 5 --json "$OUT/g2aff22.json" 2>&1 | grep "^g[12] " ;;
    msmtests) timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests -k "msm or batch" 2>&1 | tee "$OUT/gpu_msm_tests.log" | tail -5 ;;
    msmall) timeout 400 python3 bench/bench_gpu_msm.py --g1 20,22,24 --g2 20,22,24 --kinds uniform,bits90,real_tail --k 1,4 \
                --runs 5 --json "$OUT/msmall.json" 2>&1 | tee "$OUT/msmall.log" | tail -40 ;;
    msmbatch) python3 bench/affine_occupancy.py 2>&1 | tee "$OUT/occupancy.log"
           timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_msm.py -k "balances or batch" 2>&1 \
                | tee "$OUT/gpu_batch_tests.log" | tail -4
           CUZK_MSM_PROFILE=1 timeout 260 python3 bench/bench_gpu_msm.py --g1 24 --g2 22 --kinds uniform,bits90,real_tail --c 16,20 --k 4 \
                --balance flat,batch --runs 3 --json "$OUT/msmbatch24.json" 2>&1 | tee "$OUT/msmbatch24.log" | grep -v "^ *$" | grep -v "^msm " | tail -26
           CUZK_MSM_PROFILE=1 timeout 200 python3 bench/bench_gpu_msm.py --g1 27 --g2 '' --kinds uniform --c 20 --k 2 \
                --balance flat,batch --no-check --runs 2 --json "$OUT/msmbatch27.json" 2>&1 | tee "$OUT/msmbatch27.log" | grep -v "^ *$" | grep -v "^msm " | tail -3 ;;
    msm26b) timeout 200 python3 bench/bench_gpu_msm.py --g1 26 --g2 '' --kinds uniform,bits90 --c 16,20 --k 2 --balance auto \
                --no-check --runs 3 --json "$OUT/msm26b.json" 2>&1 | tee "$OUT/msm26b.log" | grep -v "^ *$" | grep -v "^msm " | tail -5 ;;
    batchsm) timeout 150 python3 bench/bench_gpu_msm.py --g1 20,22 --g2 '' --kinds uniform,bits90 --c 16 --k 8,16 --balance auto,batch \
                --no-check --runs 5 --json "$OUT/batchsm.json" 2>&1 | grep "^g1 "
           for T in 64 256; do CUZK_MSM_BATCH_THREADS=$T timeout 60 python3 bench/bench_gpu_msm.py --g1 24 --g2 '' --kinds uniform --c 16 \
                --k 4 --balance batch --no-check --runs 5 --json "$OUT/batchT$T.json" 2>&1 | grep "^g1 " | sed "s/^/T=$T /"; done ;;
    tailbal) # the tail MSMs' level 0 by size and distribution (k = 1, as the tails run): G1 flat/batch, G2 flat/affine/batch
           timeout 200 python3 bench/bench_gpu_msm.py --g1 23,24 --g2 '' --kinds uniform,bits90,real_tail --k 1 \
                --balance flat,batch --no-check --runs 5 --json "$OUT/tailbal-g1.json" 2>&1 | grep "^g1 "
           timeout 200 python3 bench/bench_gpu_msm.py --g1 '' --g2 20,21,22 --kinds uniform,bits90,real_tail --k 1 \
                --balance flat,affine,batch --no-check --runs 5 --json "$OUT/tailbal-g2.json" 2>&1 | grep "^g2 " ;;
    c22b) # the H MSM at 2^27 with the batch level 0: c = 20 against 22 (12 windows; count and scatter grow)
           CUZK_MSM_PROFILE=1 timeout 200 python3 bench/bench_gpu_msm.py --g1 27 --g2 '' --kinds uniform --c 20,22 --k 2 \
                --balance batch --no-check --runs 2 --json "$OUT/c22b.json" 2>&1 | tee "$OUT/c22b.log" | grep -v "^ *$" | grep -v "^msm " | tail -8 ;;
    batchaff) # the batch additions' affine kernel against XYZZ: PoRep's densities and sizes (L, A: 2^27 G1 at 45 %;
           # B_G1 / B_G2: 2^25), lane widths at 2^27; issue 8's 90 % row; 2^20 and 2^24 checked against the CPU
           python3 bench/affine_occupancy.py 2>&1 | grep batch_add
           timeout 240 python3 bench/bench_gpu_batch.py --g1 20,24,25,27 --g2 20,25 --density 0.45,0.9 --kind xyzz,affine \
                --fixed '' --runs 5 --json "$OUT/batchaff.json" 2>&1 | tee "$OUT/batchaff.log" | tail -26
           timeout 150 python3 bench/bench_gpu_batch.py --g1 27 --g2 25 --density 0.45 --kind affine --lane-bits 8,16,32,64 \
                --fixed '' --runs 5 --json "$OUT/batchlanes.json" 2>&1 | tail -9 ;;
    ldab) # A/B in one call: count/scatter reading scalars and indices with ld.global.cs (the tree) against the default
          # policy (a copy of cuzk/cu with CUZK_MSM_SCALARS_CACHED), alternated; then the scatter's pass size again.
          # (Session 12's call 1 ran it against a carried copy of the previous kernels, with the since-removed lane-row
          # entry in "new": bench/RESULTS.md.)
          rm -rf /tmp/cu_cached && cp -r cuzk/cu /tmp/cu_cached && sed -i '1i #define CUZK_MSM_SCALARS_CACHED 1' /tmp/cu_cached/msm/msm.cu
          for v in cached cs cached cs; do
            if [ $v = cached ]; then export CUZK_CU_DIR=/tmp/cu_cached; else unset CUZK_CU_DIR; fi
            CUZK_MSM_PROFILE=1 timeout 200 python3 bench/bench_gpu_msm.py --g1 27 --g2 '' --kinds uniform --c 20 --k 2 --no-check \
              --runs 2 2>&1 | grep "^msm \|^g1 " | sed "s/^/$v /" | tee -a "$OUT/ldab27.log"
          done
          for v in cached cs; do
            if [ $v = cached ]; then export CUZK_CU_DIR=/tmp/cu_cached; else unset CUZK_CU_DIR; fi
            CUZK_MSM_PROFILE=1 timeout 200 python3 bench/bench_gpu_msm.py --g1 24 --g2 '' --kinds uniform,bits90,real_tail --c 16 \
              --k 4 --runs 3 2>&1 | grep "^msm \|^g1 " | sed "s/^/$v /" | tee -a "$OUT/ldab24.log" | grep "^$v g1"
          done; unset CUZK_CU_DIR
          CUZK_MSM_PROFILE=1 timeout 200 python3 bench/bench_gpu_msm.py --g1 27 --g2 '' --kinds uniform --c 20 --k 2 --no-check \
            --scatter-buckets 17,19,20 --runs 2 2>&1 | grep "^msm \|^g1 " | tee "$OUT/ldab27s.log" ;;
    ncustall) # why the batch level 0 waits: warp states, occupancy, pipes (G1 2^24, c = 16, k = 4; kernel replay)
          timeout ${NCU_TIMEOUT:-200} ncu --clock-control none -k "regex:sum_points_batch_g1" --launch-count 1 \
            --section WarpStateStats --section Occupancy --section ComputeWorkloadAnalysis --section LaunchStats \
            --section MemoryWorkloadAnalysis \
            python3 bench/bench_gpu_msm.py --g1 24 --g2 '' --kinds uniform --c 16 --k 4 --no-check --runs 1 > "$OUT/ncustall.log" 2>&1
          grep -v "^==PROF==" "$OUT/ncustall.log" | grep -v "^ *$" | grep -v "^g1 \|^  *---" | tail -90 ;;
    ncuntt) # are the H NTT's passes and the batch additions latency-bound too? (warp states, pipes; 2^24 H, G1 2^24 ones)
          timeout 150 ncu --clock-control none -k "regex:cuzk_ntt_pass" --launch-count 2 --section WarpStateStats \
            --section ComputeWorkloadAnalysis --section LaunchStats --section Occupancy \
            python3 bench/bench_gpu_ntt.py --ntt 24 --h '' --check-ntt '' --check-h '' --runs 1 > "$OUT/ncuntt.log" 2>&1
          timeout 150 ncu --clock-control none -k "regex:batch_add_affine_g1" --launch-count 1 --section WarpStateStats \
            --section ComputeWorkloadAnalysis --section LaunchStats --section Occupancy \
            python3 bench/bench_gpu_batch.py --g1 24 --g2 '' --density 0.45 --kind affine --fixed '' --runs 1 >> "$OUT/ncuntt.log" 2>&1
          grep "cuzk_\|Registers Per\|Achieved Active\|Issue Slots Busy\|highest-utilized\|Warp Cycles Per Issued\|stalled\|about .*%\|rror" \
            "$OUT/ncuntt.log" | head -60 ;;
    hk27) # the H MSM with more precomputed copies: fewer bucket groups, so c = 22 (12 windows) without c = 22's
          # 12.6 M buckets of k = 2 (session 10: level 0 no smaller, count + scatter doubled)
          CUZK_MSM_PROFILE=1 timeout 300 python3 bench/bench_gpu_msm.py --g1 27 --g2 '' --kinds uniform --c 20,22 --k 2,4,6 \
            --no-check --runs 2 --json "$OUT/hk27.json" 2>&1 | grep "^msm \|^g1 " | tee "$OUT/hk27.log" | grep "^g1 " ;;
    ncu27) # hardware counters of the 2^27 H MSM's scatter passes and batch level 0 (single-pass metrics: no replay)
          timeout ${NCU_TIMEOUT:-240} ncu --clock-control none -k "regex:scatter_g1|sum_points_batch_g1" --launch-count 15 \
            --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed \
            python3 bench/bench_gpu_msm.py --g1 27 --g2 '' --kinds uniform --c 20 --k 2 --no-check --runs 1 > "$OUT/ncu27.log" 2>&1
          grep -v "^==PROF==" "$OUT/ncu27.log" | grep -i "scatter_g1\|sum_points_batch\|duration\|bytes\|rate\|throughput\|error\|ERR" | tail -60 ;;
    final) # after a refactor of the batch kernels: their GPU tests, and the MSM batch level 0 timed at 2^24 (s10c1: 101.73 ms)
           timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_batch.py tests/test_gpu_msm.py \
                -k "matches_cpu or balances or batch" 2>&1 | tee "$OUT/gpu_final_tests.log" | tail -3
           timeout 90 python3 bench/bench_gpu_msm.py --g1 24 --g2 '' --kinds uniform --c 16 --k 4 --balance batch --runs 5 \
                --json "$OUT/final24.json" 2>&1 | grep "^g1 " ;;
    msm26) CUZK_MSM_PROFILE=1 timeout 300 python3 bench/bench_gpu_msm.py --g1 26 --g2 '' --kinds uniform,bits90,real_tail --c 16,20 --k 2,4 \
                --no-check --runs 3 --json "$OUT/msm26.json" 2>&1 | tee "$OUT/msm26.log" | grep -v "^ *$" | grep -v "^msm " | tail -40 ;;
    msm27) timeout 400 python3 bench/bench_gpu_msm.py --g1 26,27 --g2 '' --kinds uniform,bits90,real_tail --c 16,20 --k 1,2 \
                --no-check --runs 3 --json "$OUT/msm27.json" 2>&1 | tee "$OUT/msm27.log" | tail -16 ;;
    engine24s) timeout 480 python3 -m cuzk bench --log-n 24 --partitions 8 --workers-per-gpu 1,2,3,4 \
                --lock-mode coarse,narrow,two-lock --thread-share split,shared --backend cuda --json "$OUT/engine24s.json" \
                2>&1 | tee "$OUT/engine24s.log" | tail -30 ;;
    eng24e) timeout 240 python3 -m cuzk bench --log-n 24 --partitions 8 --workers-per-gpu 2 --lock-mode coarse,narrow,two-lock \
                --backend cuda --cache-dir memory --stage-options "early_h=1;early_h=0" --json "$OUT/eng24e.json" 2>&1 \
                | tee "$OUT/eng24e.log" | tail -16 ;;
    abc27) # the H MSM's scratch in a, b, c's buffer (abc_scratch, prepared in session 13, emulator-tested) with 4 H copies,
           # against the default (2 copies, scratch from the pool), 10 partitions each; the JSON's "pools" has each pool's
           # reserved bytes after the run (the real peak against the budget)
           timeout 420 python3 -m cuzk bench --log-n 27 --partitions 10 --workers-per-gpu 2 --lock-mode two-lock --backend cuda \
                --cache-dir memory --stage-options "precompute=2,h_window=20;precompute=4,h_window=20,abc_scratch=1" \
                --json "$OUT/abc27.json" 2>&1 | tee "$OUT/abc27.log" | tail -12 ;;
    eng24w2) timeout 230 python3 -m cuzk bench --log-n 24 --partitions 8 --workers-per-gpu 2 --lock-mode narrow,two-lock \
                --thread-share split,shared --backend cuda --json "$OUT/eng24w2.json" --trace "${TRACE_DIR:-$OUT/trace24}" 2>&1 | tail -12 ;;
    ones24) # the batch additions' kernel inside whole 2^24 proofs (stage option ones_kind): auto (balanced for
            # PoRep's sparse ones, G1 and G2) against affine and xyzz for all four queries, same run, same bytes
           timeout 240 python3 -m cuzk bench --log-n 24 --partitions 10 --workers-per-gpu 2 --lock-mode two-lock \
                --stage-options "ones_kind=auto;ones_kind=affine;ones_kind=xyzz" --backend cuda --cache-dir memory \
                --json "$OUT/ones24.json" 2>&1 | tee "$OUT/ones24.log" | tail -12 ;;
    str24) timeout 240 python3 -m cuzk bench --log-n 24 --partitions 10 --workers-per-gpu 2 --lock-mode two-lock \
                --stage-options "streams=1;streams=2" --single 3 --backend cuda --cache-dir memory \
                --json "$OUT/str24.json" 2>&1 | tee "$OUT/str24.log" | tail -16 ;;
    k5ab) # the 2^27 H MSM with 5 copies (Wk = 3, precompute "auto" where they fit) against 4 (Wk = 4): the MSM alone
          # (c = 20, uniform, not checked: 2^27), then the engine (two-lock, 2 workers, 20 partitions, same process)
          timeout 200 python3 bench/bench_gpu_msm.py --g1 27 --g2 '' --kinds uniform --c 20 --k 4,5 --no-check --runs 3 \
               --json "$OUT/k5msm.json" 2>&1 | tee "$OUT/k5msm.log" | tail -4
          timeout 400 python3 -m cuzk bench --log-n 27 --partitions 20 --workers-per-gpu 2 --lock-mode two-lock \
               --stage-options "precompute=4,h_window=20;precompute=auto" --backend cuda --cache-dir memory \
               --json "$OUT/k5eng.json" 2>&1 | tee "$OUT/k5eng.log" | grep -v "^  engine" | tail -12 ;;
    winvab) # the H stage's last transform reading the forward w table mirrored (default: no winv table, 4 GiB less
      # at 2^27) against the built inverse table (CUZK_NTT_INV_W=table), alternated in one call; H == CPU at 2^12, 2^20
      for v in mirror table mirror table; do
        echo "== CUZK_NTT_INV_W=$v"
        CUZK_NTT_INV_W=$v timeout 150 python3 bench/bench_gpu_ntt.py --ntt '' --h 24,27 --check-ntt '' --runs 9 \
          --json "$OUT/winv-$v.json" 2>&1 | tee -a "$OUT/winvab.log" | tail -4
      done ;;
    deepab) # the H stage on deep tables (the three deepest levels' twiddles computed: 1 GiB of tables instead of 8
      # at 2^27; a streamed key's default) against full tables, alternated in one process; H == CPU at 2^12, 2^20
      timeout 300 python3 bench/bench_gpu_ntt.py --ntt '' --h 24,27 --deep 0,1,0,1 --check-ntt '' --runs 9 \
        --json "$OUT/deepab.json" 2>&1 | tee "$OUT/deepab.log" | tail -12 ;;
    tight27) # one 2^27 partition on a streamed key inside small budgets (24 GB cards: ~22 GiB usable; deep H tables),
      # against the resident key; at 40 GiB deep against full tables (the same slots); at 22 GiB H in 3 and 2 buffers
      # (h_buffers: 4 / 8 GiB less per partition, larger slots) against 4; 13.6 GiB (a 16 GB card: "auto" takes 2
      # buffers, c uploaded during the region); every proof verified
      timeout 560 python3 bench/bench_gpu_partition.py --log-n 27 --repeat 2 --config "precompute=1" \
        ${TIGHT27_CONFIGS:---config "where=host,budget_gib=20" --config "where=host,budget_gib=22" --config "where=host,budget_gib=22,h_buffers=3" --config "where=host,budget_gib=22,h_buffers=2" --config "where=host,budget_gib=13.6" --config "where=host,budget_gib=40" --config "where=host,budget_gib=40,h_tables=full"} \
        --json "$OUT/tight27.json" 2>&1 | tee "$OUT/tight27.log" | grep -v "^ " | tail -30 ;;
    upbeside) # page-locking beside a busy GPU and another thread's enqueues (c_upload=register's calls), with the
      # upload paths of 4 GiB (DMA, ring, register + DMA + unregister)
      timeout 150 python3 bench/bench_upload.py --gib 4 --threads 16 --chunk-mib 16 --runs 3 --beside \
        --json "$OUT/upbeside.json" 2>&1 | tee "$OUT/upbeside.log" | tail -12 ;;
    cpin27) # one 2^27 partition on a streamed key with H in two buffers: c page-locked in place and copied by DMA
      # in the region (c_upload=register) against the worker's ring (c_upload=ring, the default), at 13.6 and
      # 22 GiB; 3 buffers at 22 GiB for reference; every proof verified
      timeout 420 python3 bench/bench_gpu_partition.py --log-n 27 --repeat 3 --config "where=host,budget_gib=13.6,c_upload=ring" \
        --config "where=host,budget_gib=13.6,c_upload=register" --config "where=host,budget_gib=22,h_buffers=2,c_upload=ring" \
        --config "where=host,budget_gib=22,h_buffers=2,c_upload=register" --config "where=host,budget_gib=22,h_buffers=3" \
        --json "$OUT/cpin27.json" 2>&1 | tee "$OUT/cpin27.log" | grep -v "^ " | tail -30 ;;
    splitab) # a partly resident 2^27 key (deep tables: H, L, B resident in 80 GiB, A streamed) with its other
      # reductions on the side stream beside H's MSM (split_side=1) against one stream (the default), the engine
      # with two workers over 10 partitions, in 80 and 60 GiB (session 27, full tables, one stream: 15.59 / 16.36 s)
      timeout 560 python3 -m cuzk bench --log-n 27 --partitions 10 --workers-per-gpu 2 --lock-mode two-lock \
        --backend cuda --cache-dir memory --vram-budget ${SPLITAB_BUDGET:-80,60} \
        --stage-options "split_side=0;split_side=1" --json "$OUT/splitab.json" 2>&1 | tee "$OUT/splitab.log" | tail -16 ;;
    rowab) # row_check=on_failure (the CPU row check only when a verified proof fails) against beside, same run:
           # 2^24, where the engine is host-bound (two-lock, 2 and 4 workers)
           timeout 300 python3 -m cuzk bench --log-n 24 --partitions 20 --workers-per-gpu 2,4 --lock-mode two-lock \
                --stage-options "row_check=beside;row_check=on_failure" --backend cuda --cache-dir memory \
                --json "$OUT/rowab.json" 2>&1 | tee "$OUT/rowab.log" | tail -16 ;;
    eng24all) timeout ${ENG24_TIMEOUT:-300} python3 -m cuzk bench --log-n 24 --partitions ${ENG24_P:-10} --workers-per-gpu 1,2,3,4 \
                --lock-mode coarse,narrow,two-lock --backend cuda --cache-dir memory --json "$OUT/eng24all.json" 2>&1 \
                | tee "$OUT/eng24all.log" | tail -16 ;;
    eng24n) timeout 150 python3 -m cuzk bench --log-n 24 --partitions 8 --workers-per-gpu 2 --lock-mode narrow \
                --backend cuda --json "$OUT/eng24n.json" --trace "${TRACE_DIR:-$OUT/trace24}" 2>&1 | tail -6 ;;
    eng24w1) timeout 80 python3 -m cuzk bench --log-n 24 --partitions 8 --workers-per-gpu 1 --lock-mode coarse \
                --backend cuda --json "$OUT/eng24w1.json" 2>&1 | tail -6 ;;
    soak16) timeout 90 python3 bench/bench_engine_soak.py --backend cuda --log-n 16 --proofs 200 --workers-per-gpu 2 \
                --lock-mode narrow --sample-every 20 --json "$OUT/soak16.json" 2>&1 | tail -30 ;;
    streamtests) timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests -k "streamed or partly" 2>&1 | tee "$OUT/gpu_stream_tests.log" | tail -4 ;;
    stream27) # a 2^27 partition with its key streamed from host memory in chunks sized by the budget, inside 30 GiB (a 32 GB
              # card's arithmetic) and 40 GiB, against the key resident without copies (the same MSMs), one keygen
              timeout ${STREAM27_TIMEOUT:-480} python3 bench/bench_gpu_partition.py --log-n 27 --repeat 2 --config "precompute=1" \
                --config "where=host,budget_gib=30" ${STREAM27_CONFIGS:---config where=host,budget_gib=40} \
                --json "$OUT/stream27.json" 2>&1 | tee "$OUT/stream27.log" | tail -45 ;;
    streamprof) # the host side of a streamed partition under cProfile (2^24, 64 MiB chunks: ~150 chunk reductions)
              timeout 300 python3 bench/bench_gpu_partition.py --log-n 24 --repeat 2 --profile --config "precompute=1" \
                --config "where=host,stream_chunk=67108864" --config "where=host" --json "$OUT/streamprof.json" > "$OUT/streamprof.log" 2>&1; tail -40 "$OUT/streamprof.log" ;;
    multitests) # two devices (a multi-GPU kind): the engine over both GPUs, resident and streamed key (one page-lock)
              timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests -k "two_gpus or two_streamed or engine" 2>&1 \
                | tee "$OUT/gpu_multi_tests.log" | tail -6 ;;
    multi24) # multi-GPU scaling: the engine on 1 and 2 devices, the same 2^24 partitions, one process (ratio: "vs fewest dev")
              timeout ${MULTI_TIMEOUT:-400} python3 -m cuzk bench --log-n 24 --partitions ${MULTI_P:-20} --workers-per-gpu 2 \
                --lock-mode two-lock --devices ${MULTI_DEVICES:-1,2} --backend cuda --cache-dir memory ${MULTI_OPTS:-} \
                --json "$OUT/multi24.json" 2>&1 | tee "$OUT/multi24.log" | tail -8 ;;
    multi27) # the same at 2^27 (a sector proof's 10 partitions per configuration; what each card's budget holds decides
             # whether the key is resident or streamed, printed per row)
              timeout ${MULTI_TIMEOUT:-560} python3 -m cuzk bench --log-n 27 --partitions ${MULTI_P:-10} --workers-per-gpu 2 \
                --lock-mode two-lock --devices ${MULTI_DEVICES:-1,2} --backend cuda --cache-dir memory ${MULTI_OPTS:-} \
                --json "$OUT/multi27.json" 2>&1 | tee "$OUT/multi27.log" | tail -8 ;;
    poolab) # engines in one process at 2^27, two-lock, 2 workers (an 80 GB card): a resident key (its full H tables,
            # 8 GiB) first, then "auto" (deep tables) with the pool's internal dependencies on, then off (session 46:
            # before keys freed their tables, "auto"'s a, b put waited 1.09 s here and off ran out of memory); the
            # put's split, the pool's bytes and the engine's untracked bytes at its start per row printed last (first
            # in its process: put 0.19 s, pool 80.7 GB; untracked 0 in every row once keys free their tables)
        timeout ${POOLAB_TIMEOUT:-300} python3 -m cuzk bench --log-n 27 --partitions ${POOLAB_P:-4} --workers-per-gpu 2 \
            --lock-mode two-lock --backend cuda --cache-dir memory --stage-options \
            "key_where=device;key_where=auto,pool_deps=1;key_where=auto,pool_deps=0" \
            --json "$OUT/poolab.json" 2>&1 | tee "$OUT/poolab.log" | grep "^   27\|options"
        python3 -c "import json, sys
for r in json.load(open(sys.argv[1]))['results']:
    print(r['stage_options'], round(r['s_per_10_partitions'], 3), r['pools'], r.get('untracked_bytes'),
          {k: round(v, 3) for k, v in r['stage_median_s'].items() if 'put' in k})" "$OUT/poolab.json" ;;
    eng27s) # the engine at 2^27 with its key streamed from host memory (a budget too small for the resident key)
              timeout ${ENG27S_TIMEOUT:-400} python3 -m cuzk bench --log-n 27 --partitions ${ENG27S_P:-10} --workers-per-gpu 2 \
                --lock-mode two-lock --backend cuda --cache-dir memory --vram-budget ${ENG27S_BUDGET:-40} ${ENG27S_OPTS:-} \
                --json "$OUT/eng27s.json" 2>&1 | tee "$OUT/eng27s.log" | tail -12 ;;
    enginetests) timeout 90 python3 -m pytest -m gpu -q -p no:cacheprovider tests -k "engine or stages" 2>&1 | tail -4 ;;
    hwin) # the H MSM's window without copies (session 36: c = 20 against window_bits' 16; kept from 2^27 on):
          # plain G1 MSMs of uniform scalars at k = 1; pair with eng27 and ENG27_OPTS="--stage-options h_window=16;"
          timeout 240 python3 bench/bench_gpu_msm.py --g1 26,27 --g2 '' --kinds uniform --c 16,18,20 --k 1 --no-check \
                --runs 3 --json "$OUT/hwin.json" 2>&1 | tee "$OUT/hwin.log" | tail -10 ;;
    busy27) # the engine at 2^27 on a busy host: $BUSY_LOOPS (default 8) numpy copy loops of 2 GiB run beside it
            # (session 37: 4 and 8 loops, workers 2 and 3); the ring's rate printed with the loops running
            pids=()
            for _ in $(seq "${BUSY_LOOPS:-8}"); do
              python3 -c "import numpy as np
a = np.ones(1 << 28); b = np.empty_like(a)
while True: np.copyto(b, a)" & pids+=($!)
            done
            sleep 3
            timeout 60 python3 bench/bench_upload.py --gib 4 --threads 8 --chunk-mib 16 --runs 3 2>&1 | grep -i ring
            timeout ${BUSY_TIMEOUT:-420} python3 -m cuzk bench --log-n 27 --partitions 10 --workers-per-gpu ${BUSY_W:-2,3} \
                --lock-mode two-lock --backend cuda --cache-dir memory --json "$OUT/busy27.json" 2>&1 | tee "$OUT/busy27.log" | tail -6
            kill "${pids[@]}" ;;
    eng27) timeout ${ENG27_TIMEOUT:-460} python3 -m cuzk bench --log-n 27 --partitions ${ENG27_P:-10} --workers-per-gpu ${ENG27_W:-2} \
                --lock-mode ${ENG27_MODES:-coarse,narrow} --backend cuda --cache-dir memory ${ENG27_OPTS:-} --json "$OUT/eng27.json" \
                2>&1 | tee "$OUT/eng27.log" | tail -20 ;;
    fixtests) timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests -k "cuda_backend or engine or stages" 2>&1 \
                | tee "$OUT/gpu_fix_tests.log" | tail -5 ;;
    afftests) timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_msm.py -k "level0_balances" 2>&1 \
                | tee "$OUT/gpu_aff_tests.log" | tail -4 ;;
    msmaff) CUZK_MSM_PROFILE=1 timeout 260 python3 bench/bench_gpu_msm.py --g1 24 --g2 22 --kinds uniform,bits90,real_tail --c 16 \
                --k 1,4 --balance bucket,flat,affine --no-check --runs 3 --json "$OUT/msmaff.json" 2>&1 | tee "$OUT/msmaff.log" \
                | grep -v "^msm " | tail -40 ;;
    affsweep) # block size T and lanes J of the affine level 0 (J: the one #define in msm.cuh, edited on the GPU host only)
        for T in 128 64; do CUZK_MSM_AFFINE_THREADS=$T CUZK_MSM_PROFILE=1 timeout 60 python3 bench/bench_gpu_msm.py --g1 24 --g2 '' \
            --kinds uniform --c 16 --k 1 --balance affine --no-check --runs 3 2>&1 | sed "s/^/T=$T /" | grep "level0\|g1 " | tail -2; done
        cp cuzk/cu/msm/msm.cuh /tmp/msm.cuh.orig
        for J in 4 16; do sed -i "s/^#define CUZK_MSM_AFFINE_LANES .*/#define CUZK_MSM_AFFINE_LANES $J/" cuzk/cu/msm/msm.cuh
            CUZK_MSM_PROFILE=1 timeout 100 python3 bench/bench_gpu_msm.py --g1 24 --g2 '' --kinds uniform --c 16 --k 1 --balance affine \
            --no-check --runs 3 2>&1 | sed "s/^/J=$J /" | grep "level0\|g1 " | tail -2; done
        cp /tmp/msm.cuh.orig cuzk/cu/msm/msm.cuh ;;
    prover) timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_prover.py 2>&1 \
                | tee "$OUT/gpu_prover_tests.log" | tail -3 ;;
    single24) timeout 300 python3 -m cuzk bench --log-n 24 --lock-mode none --single 4 --backend cuda --cache-dir memory \
                ${SINGLE_OPTS:-} --json "$OUT/single24.json" 2>&1 | tee "$OUT/single24.log" | tail -6 ;;
    eng24tl) timeout ${ENG24_TIMEOUT:-200} python3 -m cuzk bench --log-n 24 --partitions 8 --workers-per-gpu 1,2,3,4 \
                --lock-mode narrow,two-lock --backend cuda --cache-dir memory --single 2 --json "$OUT/eng24tl.json" \
                2>&1 | tee "$OUT/eng24tl.log" | grep -v "^ *circuit\|keygen\|assignment" | tail -30 ;;
    affskew) timeout 200 python3 bench/bench_gpu_msm.py --g1 24 --g2 22,24 --kinds uniform,bits90,real_tail --c 16 --k 1,4 \
                --balance flat,affine --no-check --runs 3 --json "$OUT/affskew.json" 2>&1 | tee "$OUT/affskew.log" | tail -40 ;;
    msmflat) CUZK_MSM_PROFILE=1 timeout 300 python3 bench/bench_gpu_msm.py --g1 24 --g2 22 --kinds uniform,bits90,real_tail \
                --c 16,18,20,22 --k 1,4 --balance bucket,flat --no-check --runs 3 --json "$OUT/msmflat.json" 2>&1 \
                | tee "$OUT/msmflat.log" | grep -v "^msm " | tail -50 ;;
    msmfull) timeout 400 python3 bench/bench_gpu_msm.py --json "$OUT/msm.json" 2>&1 | tee "$OUT/msmfull.log" | tail -40 ;;
    engine24) timeout 300 python3 -m cuzk bench --log-n 24 --partitions 8 --workers-per-gpu 1,2,3 \
                --lock-mode coarse,narrow,two-lock --backend cuda --json "$OUT/engine24.json" \
                --trace "$OUT/trace24" 2>&1 | tee "$OUT/engine24.log" | tail -16 ;;
    engine20) timeout 400 python3 -m cuzk bench --log-n 20 --partitions 12 --workers-per-gpu 1,2,3 \
                --lock-mode coarse,narrow,two-lock --backend cuda --json "$OUT/engine20.json" \
                --trace "$OUT/trace20" 2>&1 | tee "$OUT/engine20.log" | tail -30 ;;
    sanitize) # compute-sanitizer over the GPU tests at small sizes (never run before session 34): memcheck (global
      # and shared out-of-bounds, misaligned accesses), synccheck (barriers), racecheck (shared-memory hazards: a
      # subset of NTT/H, MSM, batch-addition tests and one 2^10 proof; it is the slowest), initcheck (reads of device memory never written); kernels with
      # -lineinfo (CUZK_NVRTC_OPTIONS) so reports name source lines.  The API errors our tests provoke on purpose are
      # not reported (--report-api-errors no): a real one fails its test.  $OUT/san-TOOL.log per tool
      # CUZK_INITCHECK: the MSM level 0 "batch" loads a lane's accumulator and prefix product before it
      # knows whether the lane wrote them (unused when not; msm.cuh): that build reads only what was written
      export CUZK_NVRTC_OPTIONS="-lineinfo ${SAN_DEFINES:--DCUZK_INITCHECK}"
      SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
      ts=$(date +%s)                      # the programs at once (NVRTC without the GIL): ~80 s, not ~150 one by one
      python3 -c "import concurrent.futures as f, cuzk._kernels as k; print(list(f.ThreadPoolExecutor(8).map(
        lambda p: len(k.compile_program(p, 'sm_90')), k.programs())))" \
        > "$OUT/san-compile.log" 2>&1 || tail -5 "$OUT/san-compile.log"
      echo "kernels compiled in $(( $(date +%s) - ts )) s"
      python3 -m pytest -m gpu -q --collect-only -p no:cacheprovider tests 2>/dev/null | grep '::' | grep -E \
        'fr_arithmetic|python_dft|ntt_matches_cpu\[([1-9]|1[0-4])-|compose\[10\]|h_stage_matches_python|h_stage_matches_cpu\[(1|4|11|12|15)\]|snarkjs_h_matches_cpu\[(1|3|11|12|16)\]|fewer_buffers_equals_four\[12-|g1_distributions\[10-|sizes_and_forms\[[a-z]+-(0|1|4|12|16)-|window_width|segment_sizes|g1_precomputed|_indexed|g2_distributions|g2_sizes\[(0|10|16)-|enqueue_resident|level0_balances|batch_add_matches_cpu\[.*-(1|1000|4097|65537)\]|fixed_base_matches_cpu\[g[12]-(1|7|3000|5000)-|pinned_slots_rotate|proof_bytes_equal_cpu\[(10|12)\]|keygen_bytes_equal_cpu\[10\]|side_stream|streamed_key|partly_resident|two_streamed|row_check|test_prover.py::test_cuda|test_snarkjs_prove.py::test_cuda' \
        > /tmp/san_all.txt
      # whole proofs first, then the MSM, batch-addition and NTT/H kernels: a tool cut by its timeout has covered
      # the stages together before the single kernels
      for f in test_gpu_prover test_prover test_snarkjs_prove test_gpu_msm test_gpu_batch test_gpu_ntt; do
        grep "^tests/$f.py::" /tmp/san_all.txt; done > /tmp/san_ids.txt
      grep -E 'proof_bytes_equal_cpu\[10\]|test_gpu_msm.py::test_msm_(g1_distributions|g1_segment|g2_distributions)|batch_add_matches_cpu\[.*-(1000|4097)\]|python_dft|h_stage_matches_python|ntt_matches_cpu\[([1-9]|10)-' \
        /tmp/san_ids.txt > /tmp/san_ids_race.txt
      echo "sanitize: $(wc -l < /tmp/san_ids.txt) tests ($(wc -l < /tmp/san_ids_race.txt) under racecheck)"
      for tool in ${SAN_TOOLS:-memcheck synccheck racecheck initcheck}; do
        ids=/tmp/san_ids.txt; [ "$tool" = racecheck ] && ids=/tmp/san_ids_race.txt
        lim=${SAN_TIMEOUT_OTHER:-85}; [ "$tool" = memcheck ] && lim=${SAN_TIMEOUT:-170}
        mapfile -t san_ids < "$ids"         # node ids hold [..]: no globbing
        ts=$(date +%s)
        timeout "$lim" ${SAN:-compute-sanitizer} --tool "$tool" --report-api-errors no ${SAN_EXTRA:-} --print-limit ${SAN_PRINT:-200} \
          --error-exitcode 97 python3 -m pytest -q -p no:cacheprovider "${san_ids[@]}" > "$OUT/san-$tool.log" 2>&1
        echo "$tool: rc $? in $(( $(date +%s) - ts )) s; $(grep -c '^========= [A-Z]' "$OUT/san-$tool.log") report lines"
        grep -E 'SUMMARY|[0-9]+ (passed|failed)|^========= (Invalid|Race|Barrier|Uninit|Warning|Error|Program|Target)' \
          "$OUT/san-$tool.log" | sort | uniq -c | sort -rn | head -12
        grep -E '^=========     at ' "$OUT/san-$tool.log" | sed 's/+0x[0-9a-f]*//' | sort | uniq -c | sort -rn | head -8
      done ;;
    *) echo "unknown step $step" ;;
  esac
done
