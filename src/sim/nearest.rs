//! Nearest points of a fixed point set, through a uniform grid (counting-sorted buckets).

use crate::sim::math::Vec3;

/// Most grid cells a [`PointGrid`] allocates; a larger set gets coarser cells.
const MAX_CELLS: usize = 1 << 21;

/// A uniform grid over a point set for nearest-point queries.
pub(crate) struct PointGrid<'a> {
    points: &'a [Vec3],
    lo: Vec3,
    cell: f64,
    dims: [usize; 3],
    /// `starts[c]..starts[c + 1]` are cell `c`'s entries of `items`.
    starts: Vec<u32>,
    items: Vec<u32>,
}

impl<'a> PointGrid<'a> {
    /// A grid of cells about `cell` wide over `points` (all finite, at least one).
    pub(crate) fn new(points: &'a [Vec3], cell: f64) -> Self {
        let (lo, hi) = crate::sim::mesh::bounds(points);
        let extent = hi - lo;
        let mut cell = cell.max(extent.max() * 1e-6).max(1e-12);
        let dims = loop {
            let dims = [0, 1, 2].map(|a| (extent[a] / cell).floor() as usize + 1);
            if dims.iter().product::<usize>() <= MAX_CELLS {
                break dims;
            }
            cell *= 2.0;
        };
        let mut grid = Self {
            points,
            lo,
            cell,
            dims,
            starts: vec![0; dims.iter().product::<usize>() + 1],
            items: vec![0; points.len()],
        };
        for p in points {
            let c = grid.flat(grid.cell_of(p));
            grid.starts[c + 1] += 1;
        }
        for c in 1..grid.starts.len() {
            grid.starts[c] += grid.starts[c - 1];
        }
        let mut fill = grid.starts.clone();
        for (i, p) in points.iter().enumerate() {
            let c = grid.flat(grid.cell_of(p));
            grid.items[fill[c] as usize] = i as u32;
            fill[c] += 1;
        }
        grid
    }

    fn cell_of(&self, p: &Vec3) -> [usize; 3] {
        [0, 1, 2].map(|a| {
            let f = ((p[a] - self.lo[a]) / self.cell).floor();
            (f.max(0.0) as usize).min(self.dims[a] - 1)
        })
    }

    fn flat(&self, c: [usize; 3]) -> usize {
        (c[2] * self.dims[1] + c[1]) * self.dims[0] + c[0]
    }

    /// Visits the points of the cells at Chebyshev distance exactly `ring` from `centre`.
    fn visit_ring(&self, centre: [usize; 3], ring: usize, mut visit: impl FnMut(u32)) {
        let range = |a: usize| {
            let lo = centre[a].saturating_sub(ring);
            let hi = (centre[a] + ring).min(self.dims[a] - 1);
            lo..=hi
        };
        for k in range(2) {
            for j in range(1) {
                for i in range(0) {
                    let on_ring = [i, j, k]
                        .iter()
                        .zip(&centre)
                        .any(|(&c, &m)| c.abs_diff(m) == ring);
                    if !on_ring {
                        continue;
                    }
                    let c = self.flat([i, j, k]);
                    for &item in &self.items[self.starts[c] as usize..self.starts[c + 1] as usize] {
                        visit(item);
                    }
                }
            }
        }
    }

    /// The largest ring that can still hold a point.
    fn max_ring(&self) -> usize {
        self.dims.iter().copied().max().unwrap_or(1)
    }

    /// The `k` nearest points to `q` as `(distance, index)`, nearest first, into `out`.
    pub(crate) fn nearest(&self, q: &Vec3, k: usize, out: &mut Vec<(f64, u32)>) {
        out.clear();
        let k = k.min(self.points.len());
        if k == 0 {
            return;
        }
        let centre = self.cell_of(q);
        // Distance from q to the outside of its own cell's block of rings: a point found at
        // ring r is at least (r - 1) cells away in some axis.
        for ring in 0..=self.max_ring() {
            self.visit_ring(centre, ring, |i| {
                out.push(((self.points[i as usize] - q).norm(), i));
            });
            if out.len() >= k {
                out.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                out.truncate(k);
                // Every point beyond ring `ring` is more than `ring * cell` away from `q`
                // (`q` lies in or, clamped, beyond its centre cell).
                if out[k - 1].0 <= ring as f64 * self.cell {
                    return;
                }
            }
        }
        out.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        out.truncate(k);
    }

    /// The distance from `q` to the nearest point, or `cap` when none is nearer than `cap`.
    pub(crate) fn distance(&self, q: &Vec3, cap: f64) -> f64 {
        let centre = self.cell_of(q);
        let mut best = cap;
        for ring in 0..=self.max_ring() {
            if ring > 0 && (ring - 1) as f64 * self.cell >= best {
                break;
            }
            self.visit_ring(centre, ring, |i| {
                best = best.min((self.points[i as usize] - q).norm());
            });
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::test_rng::Rng;

    #[test]
    fn nearest_points_match_a_brute_force_search() {
        let mut rng = Rng(7);
        let points: Vec<Vec3> = (0..500)
            .map(|_| Vec3::new(rng.signed(), 0.3 * rng.unit(), 2.0 * rng.signed()))
            .collect();
        for cell in [0.01, 0.1, 0.5, 5.0] {
            let grid = PointGrid::new(&points, cell);
            let mut found = Vec::new();
            for _ in 0..100 {
                // Queries inside and well outside the points' bounds.
                let q = Vec3::new(3.0 * rng.signed(), rng.signed(), 3.0 * rng.signed());
                let mut all: Vec<(f64, u32)> = points
                    .iter()
                    .enumerate()
                    .map(|(i, p)| ((p - q).norm(), i as u32))
                    .collect();
                all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                grid.nearest(&q, 6, &mut found);
                assert_eq!(found, all[..6].to_vec(), "cell {cell}, query {q:?}");
                assert_eq!(grid.distance(&q, f64::INFINITY), all[0].0);
                assert_eq!(grid.distance(&q, all[0].0 * 0.5), all[0].0 * 0.5);
            }
        }
    }
}
