pragma circom 2.0.0;

// cuzk test fixture: a chain of N+1 multiplications (N+1 = 20 R1CS constraints).
// Public signals, in snarkjs order: out, a, b (nPublic = 3).
// The linear terms give the A and B rows non-trivial coefficients (3, i, -1).
template MulChain(N) {
    signal input a;      // public
    signal input b;      // public
    signal input x;      // private
    signal output out;
    signal t[N];

    t[0] <== a * x;
    for (var i = 1; i < N; i++) {
        t[i] <== (t[i-1] + 3*b + i) * (t[i-1] - x);
    }
    out <== t[N-1] * b;
}

component main {public [a, b]} = MulChain(19);
