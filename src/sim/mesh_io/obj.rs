//! The Wavefront OBJ reader: [`read_obj`] over the text of an `.obj` triangle surface (format in
//! the [parent module](super)). Like the other readers it does no I/O and never panics: a
//! malformed file gives a [`MeshIoError`] with its 1-based line.

use super::error::MeshIoError;
use super::tokens::{parse_coord, parse_i64};

/// File kind reported in errors.
const OBJ: &str = ".obj";

/// A triangle surface as read from a file, before validation.
#[derive(Debug, Clone, PartialEq)]
pub struct RawSurface {
    /// Vertex positions, in file order.
    pub positions: Vec<[f64; 3]>,
    /// Triangles as three indices into [`RawSurface::positions`] (file winding kept).
    pub triangles: Vec<[usize; 3]>,
}

/// Reads the vertices and faces of an `.obj` file's text.
///
/// # Errors
/// [`MeshIoError::Empty`] for a file with no vertex and no face, [`MeshIoError::BadNumber`] or
/// [`MeshIoError::NonFiniteCoordinate`] for a bad number, [`MeshIoError::WrongFieldCount`] for a
/// vertex with fewer than three coordinates or a face with fewer than three corners,
/// [`MeshIoError::UnknownNodeId`] for a face corner naming a vertex not defined before it, and
/// [`MeshIoError::UnexpectedEof`] for a file without faces.
pub fn read_obj(text: &str) -> Result<RawSurface, MeshIoError> {
    let mut positions: Vec<[f64; 3]> = Vec::new();
    let mut triangles: Vec<[usize; 3]> = Vec::new();
    let mut corners: Vec<usize> = Vec::new();
    let mut last_line = 0;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        last_line = line;
        let content = raw.split('#').next().unwrap_or("");
        let mut tokens = content.split_whitespace();
        let Some(keyword) = tokens.next() else {
            continue;
        };
        let fields: Vec<&str> = tokens.collect();
        match keyword {
            "v" => {
                if !(3..=4).contains(&fields.len()) {
                    return Err(MeshIoError::WrongFieldCount {
                        file: OBJ,
                        line,
                        expected: 3,
                        found: fields.len(),
                    });
                }
                positions.push([
                    parse_coord(OBJ, line, fields[0])?,
                    parse_coord(OBJ, line, fields[1])?,
                    parse_coord(OBJ, line, fields[2])?,
                ]);
            }
            "f" => {
                if fields.len() < 3 {
                    return Err(MeshIoError::WrongFieldCount {
                        file: OBJ,
                        line,
                        expected: 3,
                        found: fields.len(),
                    });
                }
                corners.clear();
                for field in &fields {
                    corners.push(resolve_corner(field, line, positions.len())?);
                }
                for k in 1..corners.len() - 1 {
                    triangles.push([corners[0], corners[k], corners[k + 1]]);
                }
            }
            _ => {}
        }
    }
    if positions.is_empty() && triangles.is_empty() {
        return Err(MeshIoError::Empty { file: OBJ });
    }
    if triangles.is_empty() {
        return Err(MeshIoError::UnexpectedEof {
            file: OBJ,
            line: last_line + 1,
            expected: "faces (`f` rows)",
        });
    }
    Ok(RawSurface {
        positions,
        triangles,
    })
}

/// The 0-based vertex index of one face corner (`i`, `i/t`, `i//n`, `i/t/n`; negative = relative).
fn resolve_corner(field: &str, line: usize, defined: usize) -> Result<usize, MeshIoError> {
    let token = field.split('/').next().unwrap_or("");
    let index = parse_i64(OBJ, line, token)?;
    let resolved = if index > 0 {
        Some(index as u64 - 1)
    } else if index < 0 {
        (defined as u64).checked_sub(index.unsigned_abs())
    } else {
        None
    };
    match resolved {
        Some(v) if v < defined as u64 => Ok(v as usize),
        _ => Err(MeshIoError::UnknownNodeId {
            file: OBJ,
            line,
            id: index.unsigned_abs(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_vertices_and_faces_in_every_corner_form() {
        let text = "# a quad and a triangle\nv 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0 1.0\nvn 0 0 1\n\
                    f 1 2/7 3//1 4/2/1\nf -1 -2 -4\n";
        let raw = read_obj(text).unwrap();
        assert_eq!(raw.positions.len(), 4);
        assert_eq!(raw.positions[3], [0.0, 1.0, 0.0]);
        assert_eq!(raw.triangles, vec![[0, 1, 2], [0, 2, 3], [3, 2, 0]]);
    }

    #[test]
    fn every_malformed_input_is_a_typed_error_with_its_line() {
        type Check = fn(&MeshIoError) -> bool;
        let cases: [(&str, Check); 7] = [
            ("", |e| matches!(e, MeshIoError::Empty { .. })),
            ("v 0 0 0\nv 1 0 0\n", |e| {
                matches!(e, MeshIoError::UnexpectedEof { line: 3, .. })
            }),
            ("v 0 0\n", |e| {
                matches!(e, MeshIoError::WrongFieldCount { line: 1, .. })
            }),
            ("v 0 0 x\n", |e| {
                matches!(e, MeshIoError::BadNumber { line: 1, .. })
            }),
            ("v 0 0 nan\n", |e| {
                matches!(e, MeshIoError::NonFiniteCoordinate { line: 1, .. })
            }),
            ("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 4\n", |e| {
                matches!(e, MeshIoError::UnknownNodeId { line: 4, id: 4, .. })
            }),
            ("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2\n", |e| {
                matches!(e, MeshIoError::WrongFieldCount { line: 4, .. })
            }),
        ];
        for (text, check) in cases {
            let e = read_obj(text).unwrap_err();
            assert!(check(&e), "{text:?} gave {e:?}");
        }
        // Zero and too-negative indices name no vertex.
        for face in ["f 0 1 2", "f -4 1 2"] {
            let text = format!("v 0 0 0\nv 1 0 0\nv 0 1 0\n{face}\n");
            assert!(matches!(
                read_obj(&text),
                Err(MeshIoError::UnknownNodeId { line: 4, .. })
            ));
        }
    }

    #[test]
    fn truncated_and_byte_flipped_files_never_panic() {
        let text = include_str!("../../../assets/meshes/bunny_10k.obj");
        let head = &text[..text.len().min(20_000)];
        for cut in (0..head.len()).step_by(997) {
            if head.is_char_boundary(cut) {
                let _ = read_obj(&head[..cut]);
            }
        }
        let mut bytes = head.as_bytes().to_vec();
        for i in (0..bytes.len()).step_by(389) {
            bytes[i] = bytes[i].wrapping_add(17);
            let _ = read_obj(&String::from_utf8_lossy(&bytes));
        }
    }
}
