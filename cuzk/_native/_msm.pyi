import numpy as np

__all__ = ["msm", "msm_indexed", "batch_add"]

def msm(points: np.ndarray, scalars: np.ndarray, group: str, threads: int = 0, *,
        _tune: dict | None = None) -> np.ndarray: ...
def msm_indexed(points: np.ndarray, scalars: np.ndarray, idx: np.ndarray, group: str,
                threads: int = 0, *, _tune: dict | None = None) -> np.ndarray: ...
def batch_add(points: np.ndarray, bitmap_words: np.ndarray, group: str, threads: int = 0, *,
              _tune: dict | None = None) -> np.ndarray: ...
