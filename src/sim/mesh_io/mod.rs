//! Readers for mesh files: tetrahedral meshes (TetGen `.node`/`.ele`, Gmsh `.msh`) and triangle
//! surfaces (Wavefront `.obj`).
//!
//! The parsers take the file contents as text (`&str`) and do no I/O themselves, so they can be
//! used on files read from disk, embedded with `include_str!`, or loaded through an asset
//! server. They never panic: every malformed input produces a [`MeshIoError`] that names the
//! file kind and, where it makes sense, the 1-based line number and the offending token.
//! Geometry is not validated here (inverted or degenerate tetrahedra, unreferenced nodes, ...);
//! that is the job of whoever turns a [`RawTetMesh`] into a simulation mesh.
//!
//! # TetGen (`.node` + `.ele`)
//!
//! A `#` starts a comment anywhere on a line; blank lines are skipped.
//!
//! * `.node`: header `<#points> <dim> <#attributes> <boundary marker 0|1>` (`dim` must be 3),
//!   then one row per point: `index x y z [attributes...] [marker]`.
//! * `.ele`: header `<#tets> <nodes per tet: 4 or 10> <#attributes>`, then one row per tet:
//!   `index n0 n1 n2 n3 [6 more nodes if 10] [attributes...]`. For 10-node (quadratic) tets
//!   only the first four (corner) nodes are kept.
//!
//! Node indices are usually `0..n` or `1..n` (TetGen's "first number" is whatever the first
//! point uses); the `.ele` node references are resolved through the ids actually listed in the
//! `.node` file, so non-contiguous ids work too. Rows beyond the count declared in a header are
//! an error (they usually mean a wrong header).
//!
//! # Gmsh (`.msh`, ASCII, versions 2.2 and 4.1)
//!
//! The file starts with `$MeshFormat` / `<version> <file-type> <data-size>` / `$EndMeshFormat`.
//! Versions 2.0, 2.1, 2.2 and 4.1 with file-type 0 (ASCII) are read; binary files and other
//! versions (including 4.0) are rejected. Only `$Nodes` and `$Elements` are interpreted, every
//! other section (`$PhysicalNames`, `$Entities`, `$Comments`, ...) is skipped up to its
//! `$End...` line.
//!
//! * 2.2: `$Nodes` holds a count, then `id x y z` rows; `$Elements` holds a count, then
//!   `id type ntags tags... nodes...` rows.
//! * 4.1: `$Nodes` holds `numEntityBlocks numNodes minTag maxTag`, then per block
//!   `entityDim entityTag parametric numNodesInBlock`, the node tags (one per line), then the
//!   coordinates (one node per line). For parametric blocks (`parametric = 1`) each
//!   coordinate row carries `entityDim` extra parametric coordinates after `x y z`; they are
//!   checked to be numbers and otherwise ignored. `$Elements` holds
//!   `numEntityBlocks numElements minTag maxTag`, then per block
//!   `entityDim entityTag elementType numElementsInBlock` followed by `tag n1 n2 ...` rows.
//!
//! Element type 4 (4-node tetrahedron) is kept, as is type 11 (10-node tetrahedron, first four
//! nodes kept); all other element types (points, lines, triangles, hexahedra, ...) are skipped
//! silently. Node tags may be arbitrary; nodes are stored in file order and elements refer to
//! them by position. Nodes that no tetrahedron uses (e.g. only used by surface triangles) are
//! kept in [`RawTetMesh::positions`].
//!
//! # Wavefront OBJ (`.obj`)
//!
//! Triangle surfaces (the detailed meshes that get embedded in a coarse tet mesh), read by
//! [`read_obj`]. Only geometry is read: `v x y z [w]` rows and `f` rows whose corners are `i`,
//! `i/t`, `i//n` or `i/t/n` (1-based, or negative for "counted from the last vertex so far").
//! Polygons with more than three corners are split into a triangle fan. Every other statement
//! (`vn`, `vt`, `o`, `g`, `s`, `usemtl`, `mtllib`, ...) is skipped; `#` starts a comment.
//!
//! # Layout
//!
//! | file | what |
//! | --- | --- |
//! | `mod.rs` | [`RawTetMesh`] and the public entry points (this page) |
//! | `error.rs` | [`MeshIoError`], shared by every reader |
//! | `tokens.rs` | line/token iteration and number parsing shared by the readers |
//! | `node_ids.rs` | file node ids to positions, shared by the TetGen and Gmsh readers |
//! | `tetgen.rs` | [`read_tetgen`] |
//! | `gmsh.rs` | [`read_gmsh`] |
//! | `obj.rs` | [`read_obj`] |
//!
//! The readers run when a mesh is built from a file ([`crate::sim::TetMesh::from_tetgen`],
//! [`crate::sim::TetMesh::from_gmsh`], [`crate::sim::TriangleSurface::from_obj`]), before any
//! body exists; the step never calls them.

mod error;
mod gmsh;
mod node_ids;
mod obj;
#[cfg(test)]
mod test_files;
mod tetgen;
mod tokens;

pub use error::MeshIoError;
pub use gmsh::read_gmsh;
pub use obj::{RawSurface, read_obj};
pub use tetgen::read_tetgen;

/// A tetrahedral mesh as read from a file, before validation.
#[derive(Debug, Clone, PartialEq)]
pub struct RawTetMesh {
    /// Node positions, in file order.
    pub positions: Vec<[f64; 3]>,
    /// Tetrahedra as four indices into [`RawTetMesh::positions`] (corner nodes, file order).
    pub tets: Vec<[usize; 4]>,
}

#[cfg(test)]
mod tests {
    use super::test_files::*;
    use super::*;

    // --- Fuzz-style robustness ---------------------------------------------------------------

    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    /// A random mutation of an ASCII text: some bytes replaced by "interesting" characters,
    /// a line dropped or duplicated. The result stays ASCII, hence valid UTF-8.
    fn mutate(text: &str, rng: &mut XorShift) -> String {
        const ALPHABET: &[u8] = b"0123456789-+.eE $#\n\tx/nai";
        let mut bytes = text.as_bytes().to_vec();
        for _ in 0..1 + rng.below(3) {
            match rng.below(4) {
                0 | 1 if !bytes.is_empty() => {
                    let i = rng.below(bytes.len());
                    bytes[i] = ALPHABET[rng.below(ALPHABET.len())];
                }
                2 if !bytes.is_empty() => {
                    let i = rng.below(bytes.len());
                    bytes.remove(i);
                }
                _ => {
                    let i = rng.below(bytes.len() + 1);
                    bytes.insert(i, ALPHABET[rng.below(ALPHABET.len())]);
                }
            }
        }
        let mut out = String::from_utf8(bytes).expect("ASCII stays UTF-8");
        if rng.below(4) == 0 {
            let mut lines: Vec<&str> = out.lines().collect();
            if !lines.is_empty() {
                let i = rng.below(lines.len());
                if rng.below(2) == 0 {
                    lines.remove(i);
                } else {
                    lines.insert(i, lines[i]);
                }
            }
            out = lines.join("\n");
        }
        out
    }

    #[test]
    fn fuzz_no_panics() {
        let small_msh = [MSH22, MSH41];
        let (big_node, big_ele) = write_tetgen(&awkward_mesh(), 1);
        let big_msh = [write_gmsh22(&awkward_mesh()), write_gmsh41(&awkward_mesh())];

        // Every truncated prefix.
        for (node, ele) in [(NODE0, ELE0), (NODE1, ELE1), (&big_node[..], &big_ele[..])] {
            for cut in 0..=node.len() {
                let _ = read_tetgen(&node[..cut], ele);
            }
            for cut in 0..=ele.len() {
                let _ = read_tetgen(node, &ele[..cut]);
            }
        }
        for msh in small_msh
            .iter()
            .copied()
            .chain(big_msh.iter().map(String::as_str))
        {
            for cut in 0..=msh.len() {
                let _ = read_gmsh(&msh[..cut]);
            }
        }

        // Random mutations.
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        let mut outcomes = [0usize; 2];
        for _ in 0..3000 {
            let node = mutate(NODE1, &mut rng);
            let ele = mutate(ELE1, &mut rng);
            outcomes[usize::from(read_tetgen(&node, ELE1).is_ok())] += 1;
            outcomes[usize::from(read_tetgen(NODE1, &ele).is_ok())] += 1;
            for msh in small_msh {
                let text = mutate(msh, &mut rng);
                match read_gmsh(&text) {
                    Ok(mesh) => {
                        outcomes[1] += 1;
                        let n = mesh.positions.len();
                        assert!(mesh.tets.iter().flatten().all(|&v| v < n));
                    }
                    Err(err) => {
                        outcomes[0] += 1;
                        assert!(!err.to_string().is_empty());
                    }
                }
            }
        }
        // Both outcomes occur, so the mutations neither always break nor never break files.
        assert!(outcomes[0] > 0 && outcomes[1] > 0, "{outcomes:?}");
    }
}
