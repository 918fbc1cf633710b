"""NumPy reference of FLAME (Nguyen, Rieger, Chen, Yalame, Möllering, Fereidooni, Marchal, Miettinen, Mirhoseini,
Zeitouni, Koushanfar, Sadeghi, Schneider, USENIX Security 2022, "FLAME: Taming Backdoors in Federated Learning",
Algorithm 1), on the round's n client updates Δ_1, ..., Δ_n:

  1. clustering: HDBSCAN on the pairwise cosine distances c_ij = 1 - <Δ_i, Δ_j> / (||Δ_i|| ||Δ_j||) with minimum
     cluster size n/2 + 1 (integer division), so that at most one cluster, a majority, can form; the updates
     outside it are dropped. scikit-learn's `HDBSCAN(metric='precomputed', min_samples=1,
     allow_single_cluster=True)` here, as FLAME's re-implementations run the `hdbscan` package (min_samples=1
     there counts the nearest other point, 2 here; with either, the mutual reachability distance is the cosine
     distance itself). If no cluster forms, every update is kept.
  2. adaptive clipping: S = the median of ||Δ_1||, ..., ||Δ_n|| (all n updates, np.median: the mean of the two
     middle norms for even n), and each kept update becomes Δ_b min(1, S / ||Δ_b||);
  3. aggregation: the mean of the clipped kept updates, weighted by the clients' weights α_b (the paper's plain
     average Σ / L for equal weights);
  4. adaptive noise: + N(0, σ² I) with σ = λ S (the paper's λ = 0.001 for image classification).

The paper clusters the clients' local models W_i and measures S on ||W_i - G_{t-1}||; a server aggregator sees
the updates Δ_i = W_i - G_{t-1} (up to sign, which cosine distances and norms ignore) and clusters them, as most
re-implementations do. A cosine distance with a zero update is 1 (a zero vector has no direction); the diagonal
is 0.
"""

import numpy as np
from sklearn import cluster


def cosine_distances(points) -> np.ndarray:
  """[n, n] c_ij = 1 - cos(Δ_i, Δ_j), clipped into [0, 2], 1 against a zero row, 0 on the diagonal."""
  points = np.asarray(points, np.float64)
  norms = np.linalg.norm(points, axis=1)
  products = np.outer(norms, norms)
  similarity = np.divide(points @ points.T, products, out=np.zeros_like(products), where=products > 0)
  distances = np.clip(1.0 - similarity, 0.0, 2.0)
  np.fill_diagonal(distances, 0.0)
  return distances


def majority_cluster(points) -> np.ndarray:
  """Bool [n]: the updates in HDBSCAN's largest cluster (step 1; all of them if it finds none)."""
  points = np.asarray(points, np.float64)
  if len(points) < 2:  # scikit-learn needs a minimum cluster size >= 2
    return np.ones(len(points), bool)
  labels = cluster.HDBSCAN(
      min_cluster_size=len(points) // 2 + 1, min_samples=1, metric='precomputed', allow_single_cluster=True,
  ).fit_predict(cosine_distances(points))
  if labels.max() < 0:
    return np.ones(len(points), bool)
  clusters, sizes = np.unique(labels[labels >= 0], return_counts=True)
  return labels == clusters[np.argmax(sizes)]


def noise_free_aggregate(points, weights) -> tuple:
  """(steps 1-3: the weighted mean of the kept updates clipped to S, S the median norm, the kept mask)."""
  points, weights = np.asarray(points, np.float64), np.asarray(weights, np.float64)
  kept = majority_cluster(points)
  norms = np.linalg.norm(points, axis=1)
  median = float(np.median(norms))
  factors = np.minimum(1.0, np.divide(median, norms, out=np.ones_like(norms), where=norms > 0))
  clipped = points[kept] * factors[kept, None]
  return weights[kept] @ clipped / weights[kept].sum(), median, kept


def aggregate(points, weights, noise_scale: float, standard_normal) -> np.ndarray:
  """Steps 1-4: `noise_free_aggregate` + λ S z, z the given standard normal draws [d]."""
  mean, median, _ = noise_free_aggregate(points, weights)
  return mean + noise_scale * median * np.asarray(standard_normal, np.float64)
