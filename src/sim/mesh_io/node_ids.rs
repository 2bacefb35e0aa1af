//! [`NodeIds`]: the node ids a TetGen or Gmsh file lists, mapped to positions in file order, so
//! that element rows can refer to nodes by id (0-based, 1-based or arbitrary).

use std::collections::HashMap;

use super::error::{MeshIoError, Result};
use super::tokens::{parse_u64, token_at};

/// Maps file node ids to positions in file order. Stays a plain offset while the ids are
/// contiguous (`first, first + 1, ...`), and switches to a hash map on the first gap.
#[derive(Default)]
pub(super) struct NodeIds {
    first: u64,
    len: usize,
    map: Option<HashMap<u64, usize>>,
}

impl NodeIds {
    pub(super) fn push(&mut self, id: u64, file: &'static str, line: usize) -> Result<()> {
        let pos = self.len;
        if self.map.is_none() {
            if pos == 0 {
                self.first = id;
            }
            if id.checked_sub(self.first) == Some(pos as u64) {
                self.len += 1;
                return Ok(());
            }
            let mut map = HashMap::with_capacity(pos.saturating_mul(2).max(16));
            for k in 0..pos {
                map.insert(self.first.wrapping_add(k as u64), k);
            }
            self.map = Some(map);
        }
        if let Some(map) = self.map.as_mut()
            && map.insert(id, pos).is_some()
        {
            return Err(MeshIoError::DuplicateNodeId { file, line, id });
        }
        self.len += 1;
        Ok(())
    }

    pub(super) fn get(&self, id: u64) -> Option<usize> {
        match &self.map {
            Some(map) => map.get(&id).copied(),
            None => id
                .checked_sub(self.first)
                .filter(|&offset| offset < self.len as u64)
                .map(|offset| offset as usize),
        }
    }
}

pub(super) fn resolve(
    ids: &NodeIds,
    file: &'static str,
    line: usize,
    nodes: [u64; 4],
) -> Result<[usize; 4]> {
    let mut out = [0usize; 4];
    for (slot, id) in out.iter_mut().zip(nodes) {
        *slot = ids
            .get(id)
            .ok_or(MeshIoError::UnknownNodeId { file, line, id })?;
    }
    Ok(out)
}

/// Parses `tokens[start..start + 4]` as node ids.
pub(super) fn parse_corners(
    file: &'static str,
    line: usize,
    tokens: &[&str],
    start: usize,
) -> Result<[u64; 4]> {
    let mut out = [0u64; 4];
    for (k, slot) in out.iter_mut().enumerate() {
        *slot = parse_u64(file, line, token_at(tokens, start + k))?;
    }
    Ok(out)
}
