//! Sample files, error helpers and writers shared by the readers' unit tests (test builds only).

use std::fmt::Write as _;

use super::{MeshIoError, RawTetMesh, read_gmsh, read_tetgen};

// --- Valid sample files ------------------------------------------------------------------

pub(super) const NODE0: &str = "# five points, 0-based\n\
    5 3 0 0\n\
    0 0 0 0\n\
    1 1 0 0\n\
    \n\
    2 0 1 0\n\
    3 0 0 1  # the apex\n\
    4 1 1 1\n\
    # trailing comment\n";
pub(super) const ELE0: &str = "2 4 0\n0 0 1 2 3\n1 1 2 3 4\n";

pub(super) const NODE1: &str = "5 3 1 1\n\
    1 0 0 0 0.5 1\n\
    2 1 0 0 0.5 1\n\
    3 0 1 0 0.5 0\n\
    4 0 0 1 0.5 1\n\
    5 1 1 1 0.5 -1\n";
pub(super) const ELE1: &str = "2 4 1\n1 1 2 3 4 7\n2 2 3 4 5 7.5\n";

pub(super) const MSH22: &str = "$MeshFormat\n2.2 0 8\n$EndMeshFormat\n\
    $PhysicalNames\n1\n3 1 \"body\"\n$EndPhysicalNames\n\
    $Nodes\n5\n10 0 0 0\n11 1 0 0\n12 0 1 0\n13 0 0 1\n14 1 1 1\n$EndNodes\n\
    $Elements\n5\n\
    1 15 2 0 10 10\n\
    2 1 2 0 1 10 11\n\
    3 2 2 0 1 10 11 12\n\
    4 4 2 1 1 10 11 12 13\n\
    5 11 2 1 1 11 12 13 14 11 11 11 11 11 11\n\
    $EndElements\n";

pub(super) const MSH41: &str = "$MeshFormat\n4.1 0 8\n$EndMeshFormat\n\
    $Entities\n1 0 0 1\n1 0 0 0 0\n$EndEntities\n\
    $Nodes\n3 5 1 5\n\
    0 1 0 1\n1\n0 0 0\n\
    2 1 1 2\n2\n3\n1 0 0 0.5 0.5\n0 1 0 0.1 0.2\n\
    3 1 0 2\n4\n5\n0 0 1\n1 1 1\n\
    $EndNodes\n\
    $Elements\n3 4 1 4\n\
    2 1 2 1\n1 1 2 3\n\
    3 1 4 2\n2 1 2 3 4\n3 2 3 4 5\n\
    1 1 1 1\n4 1 2\n\
    $EndElements\n";

pub(super) fn expected_small() -> RawTetMesh {
    RawTetMesh {
        positions: vec![
            [0.0, 0.0, 0.0],
            [1.0, 0.0, 0.0],
            [0.0, 1.0, 0.0],
            [0.0, 0.0, 1.0],
            [1.0, 1.0, 1.0],
        ],
        tets: vec![[0, 1, 2, 3], [1, 2, 3, 4]],
    }
}

pub(super) fn tetgen_err(node: &str, ele: &str) -> MeshIoError {
    match read_tetgen(node, ele) {
        Ok(mesh) => panic!("expected an error, got {mesh:?}"),
        Err(err) => {
            assert!(!err.to_string().is_empty());
            err
        }
    }
}

pub(super) fn gmsh_err(msh: &str) -> MeshIoError {
    match read_gmsh(msh) {
        Ok(mesh) => panic!("expected an error, got {mesh:?}"),
        Err(err) => {
            assert!(!err.to_string().is_empty());
            err
        }
    }
}

pub(super) fn msh22(body: &str) -> String {
    format!("$MeshFormat\n2.2 0 8\n$EndMeshFormat\n{body}")
}

pub(super) const NODES22: &str = "$Nodes\n4\n1 0 0 0\n2 1 0 0\n3 0 1 0\n4 0 0 1\n$EndNodes\n";

// --- Writers used by the round-trip tests ------------------------------------------------

pub(super) fn write_tetgen(mesh: &RawTetMesh, base: usize) -> (String, String) {
    let mut node = format!("# written by the test\n{} 3 0 0\n", mesh.positions.len());
    for (i, p) in mesh.positions.iter().enumerate() {
        writeln!(node, "{} {} {} {}", i + base, p[0], p[1], p[2]).unwrap();
    }
    let mut ele = format!("{} 4 0\n", mesh.tets.len());
    for (i, t) in mesh.tets.iter().enumerate() {
        let [a, b, c, d] = t.map(|v| v + base);
        writeln!(ele, "{} {a} {b} {c} {d}", i + base).unwrap();
    }
    (node, ele)
}

pub(super) fn write_gmsh22(mesh: &RawTetMesh) -> String {
    let mut s = String::from("$MeshFormat\n2.2 0 8\n$EndMeshFormat\n$Nodes\n");
    writeln!(s, "{}", mesh.positions.len()).unwrap();
    for (i, p) in mesh.positions.iter().enumerate() {
        writeln!(s, "{} {} {} {}", 100 + 3 * i, p[0], p[1], p[2]).unwrap();
    }
    writeln!(s, "$EndNodes\n$Elements\n{}", mesh.tets.len() + 1).unwrap();
    writeln!(s, "1 2 2 0 1 100 103 106").unwrap();
    for (i, t) in mesh.tets.iter().enumerate() {
        let [a, b, c, d] = t.map(|v| 100 + 3 * v);
        writeln!(s, "{} 4 2 0 1 {a} {b} {c} {d}", i + 2).unwrap();
    }
    s.push_str("$EndElements\n");
    s
}

pub(super) fn write_gmsh41(mesh: &RawTetMesh) -> String {
    let n = mesh.positions.len();
    let mut s = String::from("$MeshFormat\n4.1 0 8\n$EndMeshFormat\n$Nodes\n");
    writeln!(s, "1 {n} 1 {n}\n3 1 0 {n}").unwrap();
    for i in 0..n {
        writeln!(s, "{}", i + 1).unwrap();
    }
    for p in &mesh.positions {
        writeln!(s, "{} {} {}", p[0], p[1], p[2]).unwrap();
    }
    let m = mesh.tets.len();
    writeln!(s, "$EndNodes\n$Elements\n2 {} 1 {}", m + 1, m + 1).unwrap();
    writeln!(s, "2 1 2 1\n1 1 2 3").unwrap();
    writeln!(s, "3 1 4 {m}").unwrap();
    for (i, t) in mesh.tets.iter().enumerate() {
        let [a, b, c, d] = t.map(|v| v + 1);
        writeln!(s, "{} {a} {b} {c} {d}", i + 2).unwrap();
    }
    s.push_str("$EndElements\n");
    s
}

pub(super) fn awkward_mesh() -> RawTetMesh {
    RawTetMesh {
        positions: vec![
            [0.1, -1.5e-7, 1.0 / 3.0],
            [1e20, 2.5, -0.0],
            [-7.25, 1e-300, 42.0],
            [3.0, 4.0, 5.0],
            [std::f64::consts::PI, -std::f64::consts::E, 0.7],
        ],
        tets: vec![[0, 1, 2, 3], [4, 3, 2, 1], [0, 2, 4, 3]],
    }
}
