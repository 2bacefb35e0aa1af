//! The TetGen reader: [`read_tetgen`] over the text of a `.node` and an `.ele` file (format in
//! the [parent module](super)).

use super::RawTetMesh;
use super::error::{MeshIoError, Result};
use super::node_ids::{NodeIds, parse_corners, resolve};
use super::tokens::{
    DataLines, expect_fields, parse_f64, parse_i64, parse_u64, parse_usize, parse_xyz, prealloc,
    token_at,
};

/// File kind reported in errors for TetGen `.node` text.
pub(super) const NODE: &str = ".node";
/// File kind reported in errors for TetGen `.ele` text.
pub(super) const ELE: &str = ".ele";

/// Reads a TetGen mesh from the text of its `.node` and `.ele` files.
///
/// See the [module docs](super) for the accepted format. Node references in the `.ele` file are
/// resolved through the ids listed in the `.node` file (0-based, 1-based or arbitrary).
///
/// # Errors
///
/// Any [`MeshIoError`] describing the first problem found, with `file` set to `".node"` or
/// `".ele"`; [`MeshIoError::NoTetrahedra`] if the `.ele` file declares no tets.
pub fn read_tetgen(node_text: &str, ele_text: &str) -> Result<RawTetMesh> {
    let (positions, ids) = read_tetgen_nodes(node_text)?;
    let tets = read_tetgen_elements(ele_text, &ids)?;
    if tets.is_empty() {
        return Err(MeshIoError::NoTetrahedra { file: ELE });
    }
    Ok(RawTetMesh { positions, tets })
}

fn read_tetgen_nodes(text: &str) -> Result<(Vec<[f64; 3]>, NodeIds)> {
    let mut lines = DataLines::new(text, NODE, true);
    let Some((line, header)) = lines.next_data() else {
        return Err(MeshIoError::Empty { file: NODE });
    };
    expect_fields(NODE, line, &header, 4)?;
    let count = parse_usize(NODE, line, token_at(&header, 0))?;
    let dim = parse_usize(NODE, line, token_at(&header, 1))?;
    if dim != 3 {
        return Err(MeshIoError::UnsupportedDimension {
            file: NODE,
            line,
            dim,
        });
    }
    let attributes = parse_usize(NODE, line, token_at(&header, 2))?;
    let markers = parse_usize(NODE, line, token_at(&header, 3))?;
    if markers > 1 {
        return Err(MeshIoError::InvalidHeaderValue {
            file: NODE,
            line,
            field: "boundary marker flag",
            value: markers.to_string(),
            expected: "0 or 1",
        });
    }
    let fields = 4usize.saturating_add(attributes).saturating_add(markers);

    let mut positions = prealloc(count);
    let mut ids = NodeIds::default();
    for _ in 0..count {
        let (line, row) = lines.require("node rows")?;
        expect_fields(NODE, line, &row, fields)?;
        let id = parse_u64(NODE, line, token_at(&row, 0))?;
        let position = parse_xyz(NODE, line, &row, 1)?;
        for token in row.iter().skip(4).take(attributes) {
            parse_f64(NODE, line, token)?;
        }
        if markers == 1 {
            parse_i64(NODE, line, token_at(&row, fields - 1))?;
        }
        ids.push(id, NODE, line)?;
        positions.push(position);
    }
    if let Some((line, _)) = lines.next_data() {
        let extra = lines.count_extra_rows();
        return Err(MeshIoError::CountMismatch {
            file: NODE,
            line,
            what: "node rows",
            declared: count,
            found: count.saturating_add(extra),
        });
    }
    Ok((positions, ids))
}

fn read_tetgen_elements(text: &str, ids: &NodeIds) -> Result<Vec<[usize; 4]>> {
    let mut lines = DataLines::new(text, ELE, true);
    let Some((line, header)) = lines.next_data() else {
        return Err(MeshIoError::Empty { file: ELE });
    };
    expect_fields(ELE, line, &header, 3)?;
    let count = parse_usize(ELE, line, token_at(&header, 0))?;
    let nodes_per_tet = parse_usize(ELE, line, token_at(&header, 1))?;
    if nodes_per_tet != 4 && nodes_per_tet != 10 {
        return Err(MeshIoError::InvalidHeaderValue {
            file: ELE,
            line,
            field: "nodes per tetrahedron",
            value: nodes_per_tet.to_string(),
            expected: "4 or 10",
        });
    }
    let attributes = parse_usize(ELE, line, token_at(&header, 2))?;
    let fields = (1 + nodes_per_tet).saturating_add(attributes);

    let mut tets = prealloc(count);
    for _ in 0..count {
        let (line, row) = lines.require("tetrahedron rows")?;
        expect_fields(ELE, line, &row, fields)?;
        parse_u64(ELE, line, token_at(&row, 0))?;
        let corners = parse_corners(ELE, line, &row, 1)?;
        for token in row.iter().skip(5).take(nodes_per_tet - 4) {
            parse_u64(ELE, line, token)?;
        }
        for token in row.iter().skip(1 + nodes_per_tet) {
            parse_f64(ELE, line, token)?;
        }
        tets.push(resolve(ids, ELE, line, corners)?);
    }
    if let Some((line, _)) = lines.next_data() {
        let extra = lines.count_extra_rows();
        return Err(MeshIoError::CountMismatch {
            file: ELE,
            line,
            what: "tetrahedron rows",
            declared: count,
            found: count.saturating_add(extra),
        });
    }
    Ok(tets)
}

#[cfg(test)]
mod tests {
    use super::super::test_files::*;
    use super::*;

    #[test]
    fn tetgen_zero_based() {
        assert_eq!(read_tetgen(NODE0, ELE0).unwrap(), expected_small());
    }

    #[test]
    fn tetgen_one_based_with_attributes_and_markers() {
        assert_eq!(read_tetgen(NODE1, ELE1).unwrap(), expected_small());
    }

    #[test]
    fn tetgen_non_contiguous_ids_and_ten_node_tets() {
        let node = "5 3 0 0\n10 0 0 0\n20 1 0 0\n30 0 1 0\n40 0 0 1\n7 1 1 1\n";
        let ele = "2 10 0\n\
            0 10 20 30 40 10 10 10 10 10 10\n\
            1 20 30 40 7 7 7 7 7 7 7\n";
        assert_eq!(read_tetgen(node, ele).unwrap(), expected_small());
    }

    #[test]
    fn tetgen_crlf_line_endings() {
        let node = NODE0.replace('\n', "\r\n");
        let ele = ELE0.replace('\n', "\r\n");
        assert_eq!(read_tetgen(&node, &ele).unwrap(), expected_small());
    }

    #[test]
    fn tetgen_round_trip() {
        let mesh = awkward_mesh();
        for base in [0, 1] {
            let (node, ele) = write_tetgen(&mesh, base);
            assert_eq!(read_tetgen(&node, &ele).unwrap(), mesh, "base {base}");
        }
    }

    #[test]
    fn armadillo() {
        let node = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/assets/meshes/armadillo_4k.node"
        ))
        .unwrap();
        let ele = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/assets/meshes/armadillo_4k.ele"
        ))
        .unwrap();
        let mesh = read_tetgen(&node, &ele).unwrap();
        assert_eq!(mesh.positions.len(), 1180);
        assert_eq!(mesh.tets.len(), 3717);
        assert!(mesh.tets.iter().flatten().all(|&v| v < 1180));
        assert!(mesh.positions.iter().flatten().all(|c| c.is_finite()));
        // Every node is used by some tet in this mesh.
        let mut used = vec![false; 1180];
        for &v in mesh.tets.iter().flatten() {
            used[v] = true;
        }
        assert!(used.iter().all(|&u| u));
    }
}
