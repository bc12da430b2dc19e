import numpy as np

__all__ = ["abc_eval", "snarkjs_h"]

def abc_eval(matrix: np.ndarray, constraint: np.ndarray, signal: np.ndarray, value: np.ndarray,
             witness: np.ndarray, n: int, row_mult: int = 1,
             threads: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...
def snarkjs_h(a: np.ndarray, b: np.ndarray, c: np.ndarray, J: int,
              threads: int | None = None) -> np.ndarray: ...
