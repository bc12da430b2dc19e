import numpy as np

__all__ = ["popcount", "prep_msm"]

def prep_msm(inputs: np.ndarray, aux: np.ndarray, a_aux: np.ndarray, b_input: np.ndarray,
             b_aux: np.ndarray, threads: int | None = 0, form: str = "canonical") -> dict: ...

def popcount(words: np.ndarray, nbits: int | None = None) -> int: ...
