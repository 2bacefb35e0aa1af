//! Contact regions: constraints split into groups that share no vertex
//! (Lazarevych et al., section 3).
//!
//! Two constraints belong to the same region when they act on a common vertex, directly or
//! through a chain of constraints. Regions are independent problems: the velocity-level LCP of
//! one region never needs another's impulses, so regions are solved separately and in parallel,
//! and the cost grows with the largest region instead of the whole scene.
//!
//! The split is a union-find over vertices (path halving, union by size). Region ids are
//! deterministic: regions are numbered in the order of their first constraint, and each region
//! lists its constraints in increasing order, whatever the vertex numbering or thread count.

/// Constraints grouped into vertex-disjoint regions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContactRegions {
    /// Region of each constraint.
    pub region_of: Vec<u32>,
    /// Start of each region's constraints in [`ContactRegions::constraints`], plus the end.
    pub offsets: Vec<u32>,
    /// Constraint indices, region by region, increasing within a region.
    pub constraints: Vec<u32>,
    parent: Vec<u32>,
    size: Vec<u32>,
    first_root: Vec<u32>,
}

impl ContactRegions {
    /// Number of regions.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Whether there is no region (no constraints).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The constraints of region `r`.
    pub fn region(&self, r: usize) -> &[u32] {
        &self.constraints[self.offsets[r] as usize..self.offsets[r + 1] as usize]
    }

    /// Splits constraints into regions. `vertices(c)` lists the vertices constraint `c` acts
    /// on (indices below `vertex_count`; a global numbering across bodies). Buffers are reused
    /// between calls.
    ///
    /// # Panics
    /// If a vertex index is `>= vertex_count`.
    pub fn split<'a>(
        &mut self,
        constraint_count: usize,
        vertex_count: usize,
        vertices: impl Fn(usize) -> &'a [u32],
    ) {
        self.parent.clear();
        self.parent.extend(0..vertex_count as u32);
        self.size.clear();
        self.size.resize(vertex_count, 1);
        for c in 0..constraint_count {
            let vs = vertices(c);
            for w in vs.windows(2) {
                self.union(w[0], w[1]);
            }
        }
        // Number the regions by first constraint.
        self.first_root.clear();
        self.first_root.resize(vertex_count, u32::MAX);
        self.region_of.clear();
        let mut regions = 0u32;
        for c in 0..constraint_count {
            let region = match vertices(c).first() {
                Some(&v) => {
                    let root = self.find(v) as usize;
                    if self.first_root[root] == u32::MAX {
                        self.first_root[root] = regions;
                        regions += 1;
                    }
                    self.first_root[root]
                }
                // A constraint on no vertex is a region of its own.
                None => {
                    regions += 1;
                    regions - 1
                }
            };
            self.region_of.push(region);
        }
        // Counting sort by region: constraints stay increasing within each region.
        self.offsets.clear();
        self.offsets.resize(regions as usize + 1, 0);
        for &r in &self.region_of {
            self.offsets[r as usize + 1] += 1;
        }
        for r in 0..regions as usize {
            self.offsets[r + 1] += self.offsets[r];
        }
        self.constraints.clear();
        self.constraints.resize(constraint_count, 0);
        self.size.clear();
        self.size
            .extend_from_slice(&self.offsets[..regions as usize]);
        for (c, &r) in self.region_of.iter().enumerate() {
            let slot = &mut self.size[r as usize];
            self.constraints[*slot as usize] = c as u32;
            *slot += 1;
        }
        if constraint_count == 0 {
            self.offsets.clear();
        }
    }

    fn find(&mut self, mut v: u32) -> u32 {
        while self.parent[v as usize] != v {
            let grand = self.parent[self.parent[v as usize] as usize];
            self.parent[v as usize] = grand;
            v = grand;
        }
        v
    }

    fn union(&mut self, a: u32, b: u32) {
        let (mut ra, mut rb) = (self.find(a), self.find(b));
        if ra == rb {
            return;
        }
        if self.size[ra as usize] < self.size[rb as usize] {
            std::mem::swap(&mut ra, &mut rb);
        }
        self.parent[rb as usize] = ra;
        self.size[ra as usize] += self.size[rb as usize];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_merge_and_disjoint_constraints_stay_apart() {
        // c0: {0,1}, c1: {5,6}, c2: {1,2}, c3: {9}, c4: {2,7}, c5: {6,8}
        let cs: Vec<Vec<u32>> = vec![
            vec![0, 1],
            vec![5, 6],
            vec![1, 2],
            vec![9],
            vec![2, 7],
            vec![6, 8],
        ];
        let mut regions = ContactRegions::default();
        regions.split(cs.len(), 10, |c| &cs[c]);
        assert_eq!(regions.region_of, vec![0, 1, 0, 2, 0, 1]);
        assert_eq!(regions.len(), 3);
        assert_eq!(regions.region(0), &[0, 2, 4]);
        assert_eq!(regions.region(1), &[1, 5]);
        assert_eq!(regions.region(2), &[3]);
        // Reuse with nothing: no regions.
        regions.split(0, 10, |c| &cs[c]);
        assert!(regions.is_empty());
    }

    #[test]
    fn regions_are_exactly_the_connected_components() {
        // Random constraints on random vertex pairs; compare with a flood fill.
        let mut state = 0x1234_5678_9ABC_DEF1u64;
        let mut next = |m: u32| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % m as u64) as u32
        };
        let n = 300;
        let cs: Vec<Vec<u32>> = (0..200).map(|_| vec![next(n), next(n), next(n)]).collect();
        let mut regions = ContactRegions::default();
        regions.split(cs.len(), n as usize, |c| &cs[c]);
        // Flood fill over constraints that share a vertex.
        let mut label = vec![u32::MAX; cs.len()];
        let mut count = 0;
        for start in 0..cs.len() {
            if label[start] != u32::MAX {
                continue;
            }
            let mut stack = vec![start];
            label[start] = count;
            while let Some(c) = stack.pop() {
                for d in 0..cs.len() {
                    if label[d] == u32::MAX && cs[d].iter().any(|v| cs[c].contains(v)) {
                        label[d] = count;
                        stack.push(d);
                    }
                }
            }
            count += 1;
        }
        // Flood fill labels in order of first constraint, as the regions are numbered.
        assert_eq!(regions.region_of, label);
        assert_eq!(regions.len(), count as usize);
        let total: usize = (0..regions.len()).map(|r| regions.region(r).len()).sum();
        assert_eq!(total, cs.len());
    }
}
