pragma circom 2.0.0;

// cuzk test fixture: proves a private value v < 2^N by bit decomposition.
// N boolean constraints, one linear recomposition constraint (empty A and B rows),
// one output constraint. Public signals: sq = (v + 1)^2 (nPublic = 1).
template RangeCheck(N) {
    signal input v;      // private
    signal output sq;    // public
    signal bits[N];

    var acc = 0;
    for (var i = 0; i < N; i++) {
        bits[i] <-- (v >> i) & 1;
        bits[i] * (bits[i] - 1) === 0;
        acc += bits[i] * (1 << i);
    }
    acc === v;
    sq <== (v + 1) * (v + 1);
}

component main = RangeCheck(16);
