//! [`BodyHandle`] and [`ObstacleHandle`], and the handle to index maps of the world's bodies
//! and obstacles: O(1) lookups. A leaf.

use std::collections::HashMap;

/// Identifies a body in a [`super::SoftWorld`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BodyHandle(pub(crate) u32);

/// Identifies an obstacle in a [`super::SoftWorld`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObstacleHandle(pub(crate) u32);

/// The ids of a list's entries in list order, with each id's position.
#[derive(Debug, Default)]
pub(crate) struct HandleTable {
    ids: Vec<u32>,
    position: HashMap<u32, u32>,
}

/// `clone_from` copies nothing where the ids are already the same (a world snapshot taken
/// into a kept one, and a restore).
impl Clone for HandleTable {
    fn clone(&self) -> Self {
        Self {
            ids: self.ids.clone(),
            position: self.position.clone(),
        }
    }

    fn clone_from(&mut self, source: &Self) {
        if self.ids != source.ids {
            self.ids.clone_from(&source.ids);
            self.position.clone_from(&source.position);
        }
    }
}

impl HandleTable {
    /// Appends `id` (new) at the end of the list.
    pub fn push(&mut self, id: u32) {
        self.position.insert(id, self.ids.len() as u32);
        self.ids.push(id);
    }

    /// Where `id` is in the list.
    pub fn position(&self, id: u32) -> Option<usize> {
        self.position.get(&id).map(|&i| i as usize)
    }

    /// Removes `id`; returns where it was (the entries after it move up by one).
    pub fn remove(&mut self, id: u32) -> Option<usize> {
        let i = self.position.remove(&id)? as usize;
        self.ids.remove(i);
        for (k, later) in self.ids[i..].iter().enumerate() {
            self.position.insert(*later, (i + k) as u32);
        }
        Some(i)
    }

    /// The ids in list order.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_follow_pushes_and_removals() {
        let mut t = HandleTable::default();
        for id in [3, 7, 9, 12] {
            t.push(id);
        }
        assert_eq!(t.position(9), Some(2));
        assert_eq!(t.remove(7), Some(1));
        assert_eq!(t.remove(7), None);
        assert_eq!(t.ids(), &[3, 9, 12]);
        assert_eq!(
            [3, 9, 12].map(|id| t.position(id)),
            [Some(0), Some(1), Some(2)]
        );
        assert_eq!(t.position(7), None);
    }
}
