//! The Gmsh reader: [`read_gmsh`] over the text of an ASCII `.msh` file, versions 2.x and 4.1
//! (format in the [parent module](super)).

use super::RawTetMesh;
use super::error::{MeshIoError, Result};
use super::node_ids::{NodeIds, parse_corners, resolve};
use super::tokens::{
    DataLines, expect_fields, parse_f64, parse_i64, parse_u64, parse_usize, parse_xyz, prealloc,
    token_at,
};

/// File kind reported in errors for Gmsh `.msh` text.
const MSH: &str = ".msh";

#[derive(Clone, Copy, PartialEq, Eq)]
enum GmshVersion {
    V2,
    V41,
}

/// Gmsh element type of the 4-node tetrahedron.
const GMSH_TET4: u64 = 4;
/// Gmsh element type of the 10-node tetrahedron.
const GMSH_TET10: u64 = 11;

fn gmsh_tet_nodes(element_type: u64) -> Option<usize> {
    match element_type {
        GMSH_TET4 => Some(4),
        GMSH_TET10 => Some(10),
        _ => None,
    }
}

/// Gmsh node data being collected.
#[derive(Default)]
struct GmshNodes {
    positions: Vec<[f64; 3]>,
    ids: NodeIds,
}

/// A tetrahedron as read, before its node tags are resolved: (line, node tags).
type PendingTet = (usize, [u64; 4]);

/// Reads a Gmsh ASCII mesh (format 2.2 or 4.1) from the text of a `.msh` file.
///
/// Keeps the 4-node (type 4) and 10-node (type 11, corners only) tetrahedra and skips every
/// other element type; see the [module docs](super) for details.
///
/// # Errors
///
/// Any [`MeshIoError`] describing the first problem found, with `file` set to `".msh"`;
/// notably [`MeshIoError::GmshBinary`] and [`MeshIoError::UnsupportedGmshVersion`] for files
/// this reader does not handle, and [`MeshIoError::NoTetrahedra`] for surface-only meshes.
pub fn read_gmsh(msh_text: &str) -> Result<RawTetMesh> {
    let mut lines = DataLines::new(msh_text, MSH, false);
    let Some((line, first)) = lines.next_data() else {
        return Err(MeshIoError::Empty { file: MSH });
    };
    if first.as_slice() != ["$MeshFormat"] {
        return Err(MeshIoError::UnexpectedLine {
            file: MSH,
            line,
            expected: "$MeshFormat",
            found: first.join(" "),
        });
    }
    let version = read_gmsh_format(&mut lines)?;

    let mut nodes: Option<GmshNodes> = None;
    let mut elements: Option<Vec<PendingTet>> = None;
    while let Some((line, tokens)) = lines.next_data() {
        let header = match tokens.as_slice() {
            [single] if single.starts_with('$') && !single.starts_with("$End") => *single,
            _ => {
                return Err(MeshIoError::UnexpectedLine {
                    file: MSH,
                    line,
                    expected: "a section header ($Name)",
                    found: tokens.join(" "),
                });
            }
        };
        match header {
            "$MeshFormat" => {
                return Err(MeshIoError::DuplicateSection {
                    file: MSH,
                    line,
                    section: "$MeshFormat",
                });
            }
            "$Nodes" => {
                if nodes.is_some() {
                    return Err(MeshIoError::DuplicateSection {
                        file: MSH,
                        line,
                        section: "$Nodes",
                    });
                }
                nodes = Some(match version {
                    GmshVersion::V2 => read_gmsh2_nodes(&mut lines)?,
                    GmshVersion::V41 => read_gmsh41_nodes(&mut lines)?,
                });
            }
            "$Elements" => {
                if elements.is_some() {
                    return Err(MeshIoError::DuplicateSection {
                        file: MSH,
                        line,
                        section: "$Elements",
                    });
                }
                elements = Some(match version {
                    GmshVersion::V2 => read_gmsh2_elements(&mut lines)?,
                    GmshVersion::V41 => read_gmsh41_elements(&mut lines)?,
                });
            }
            other => skip_gmsh_section(&mut lines, other)?,
        }
    }

    let nodes = nodes.ok_or(MeshIoError::MissingSection {
        file: MSH,
        section: "$Nodes",
    })?;
    let elements = elements.ok_or(MeshIoError::MissingSection {
        file: MSH,
        section: "$Elements",
    })?;
    if elements.is_empty() {
        return Err(MeshIoError::NoTetrahedra { file: MSH });
    }
    let tets = elements
        .into_iter()
        .map(|(line, tags)| resolve(&nodes.ids, MSH, line, tags))
        .collect::<Result<Vec<_>>>()?;
    Ok(RawTetMesh {
        positions: nodes.positions,
        tets,
    })
}

/// Reads the body of `$MeshFormat` (after its header line) up to and including
/// `$EndMeshFormat`.
fn read_gmsh_format(lines: &mut DataLines<'_>) -> Result<GmshVersion> {
    let (line, format) = lines.require("the $MeshFormat line")?;
    if format.first().is_some_and(|t| t.starts_with('$')) {
        return Err(MeshIoError::UnexpectedLine {
            file: MSH,
            line,
            expected: "`version file-type data-size`",
            found: format.join(" "),
        });
    }
    expect_fields(MSH, line, &format, 3)?;
    let version = match token_at(&format, 0) {
        "2" | "2.0" | "2.1" | "2.2" => GmshVersion::V2,
        "4.1" => GmshVersion::V41,
        other => {
            return Err(MeshIoError::UnsupportedGmshVersion {
                file: MSH,
                line,
                version: other.to_owned(),
            });
        }
    };
    match parse_usize(MSH, line, token_at(&format, 1))? {
        0 => {}
        1 => return Err(MeshIoError::GmshBinary { file: MSH, line }),
        other => {
            return Err(MeshIoError::InvalidHeaderValue {
                file: MSH,
                line,
                field: "file-type",
                value: other.to_string(),
                expected: "0 (ASCII)",
            });
        }
    }
    parse_usize(MSH, line, token_at(&format, 2))?;
    let (line, end) = lines.require("$EndMeshFormat")?;
    if end.as_slice() != ["$EndMeshFormat"] {
        return Err(MeshIoError::UnexpectedLine {
            file: MSH,
            line,
            expected: "$EndMeshFormat",
            found: end.join(" "),
        });
    }
    Ok(version)
}

/// Skips an uninterpreted section, whose header `$Name` has been read, up to `$EndName`.
fn skip_gmsh_section(lines: &mut DataLines<'_>, header: &str) -> Result<()> {
    let name = header.strip_prefix('$').unwrap_or(header);
    let end = format!("$End{name}");
    while let Some((_, tokens)) = lines.next_data() {
        if tokens.first().is_some_and(|t| *t == end) {
            return Ok(());
        }
    }
    Err(MeshIoError::UnexpectedEof {
        file: MSH,
        line: lines.last.saturating_add(1),
        expected: "the end marker of a skipped section",
    })
}

fn read_gmsh2_nodes(lines: &mut DataLines<'_>) -> Result<GmshNodes> {
    let (line, header) = lines.require("the $Nodes count")?;
    expect_fields(MSH, line, &header, 1)?;
    let count = parse_usize(MSH, line, token_at(&header, 0))?;
    let mut nodes = GmshNodes {
        positions: prealloc(count),
        ids: NodeIds::default(),
    };
    for index in 0..count {
        let (line, row) = lines.gmsh_row("node rows", "nodes", count, index)?;
        expect_fields(MSH, line, &row, 4)?;
        let id = parse_u64(MSH, line, token_at(&row, 0))?;
        let position = parse_xyz(MSH, line, &row, 1)?;
        nodes.ids.push(id, MSH, line)?;
        nodes.positions.push(position);
    }
    lines.expect_end("$EndNodes", "nodes", count)?;
    Ok(nodes)
}

fn read_gmsh2_elements(lines: &mut DataLines<'_>) -> Result<Vec<PendingTet>> {
    let (line, header) = lines.require("the $Elements count")?;
    expect_fields(MSH, line, &header, 1)?;
    let count = parse_usize(MSH, line, token_at(&header, 0))?;
    let mut tets = Vec::new();
    for index in 0..count {
        let (line, row) = lines.gmsh_row("element rows", "elements", count, index)?;
        if row.len() < 3 {
            return Err(MeshIoError::WrongFieldCount {
                file: MSH,
                line,
                expected: 3,
                found: row.len(),
            });
        }
        parse_u64(MSH, line, token_at(&row, 0))?;
        let element_type = parse_u64(MSH, line, token_at(&row, 1))?;
        let num_tags = parse_usize(MSH, line, token_at(&row, 2))?;
        let Some(node_count) = gmsh_tet_nodes(element_type) else {
            continue;
        };
        let first_node = num_tags.saturating_add(3);
        expect_fields(MSH, line, &row, first_node.saturating_add(node_count))?;
        for token in row.iter().skip(3).take(num_tags) {
            parse_i64(MSH, line, token)?;
        }
        for token in row.iter().skip(first_node.saturating_add(4)) {
            parse_u64(MSH, line, token)?;
        }
        tets.push((line, parse_corners(MSH, line, &row, first_node)?));
    }
    lines.expect_end("$EndElements", "elements", count)?;
    Ok(tets)
}

/// Reads a Gmsh 4.1 block header `entityDim entityTag <value> count`, returning
/// `(line, entityDim, value, count)`.
fn read_gmsh41_block_header(
    lines: &mut DataLines<'_>,
    what: &'static str,
    declared: usize,
    index: usize,
) -> Result<(usize, usize, u64, usize)> {
    let (line, header) = lines.gmsh_row("an entity block header", what, declared, index)?;
    expect_fields(MSH, line, &header, 4)?;
    let entity_dim = parse_usize(MSH, line, token_at(&header, 0))?;
    if entity_dim > 3 {
        return Err(MeshIoError::InvalidHeaderValue {
            file: MSH,
            line,
            field: "entity dimension",
            value: entity_dim.to_string(),
            expected: "0, 1, 2 or 3",
        });
    }
    parse_i64(MSH, line, token_at(&header, 1))?;
    let value = parse_u64(MSH, line, token_at(&header, 2))?;
    let count = parse_usize(MSH, line, token_at(&header, 3))?;
    Ok((line, entity_dim, value, count))
}

/// Reads a Gmsh 4.1 section header `numEntityBlocks total minTag maxTag`, returning
/// `(line, numEntityBlocks, total)`.
fn read_gmsh41_section_header(
    lines: &mut DataLines<'_>,
    expected: &'static str,
) -> Result<(usize, usize, usize)> {
    let (line, header) = lines.require(expected)?;
    expect_fields(MSH, line, &header, 4)?;
    let blocks = parse_usize(MSH, line, token_at(&header, 0))?;
    let total = parse_usize(MSH, line, token_at(&header, 1))?;
    parse_u64(MSH, line, token_at(&header, 2))?;
    parse_u64(MSH, line, token_at(&header, 3))?;
    Ok((line, blocks, total))
}

fn read_gmsh41_nodes(lines: &mut DataLines<'_>) -> Result<GmshNodes> {
    let (header_line, blocks, total) = read_gmsh41_section_header(lines, "the $Nodes header")?;
    let mut nodes = GmshNodes {
        positions: prealloc(total),
        ids: NodeIds::default(),
    };
    let mut found = 0usize;
    for block in 0..blocks {
        let (line, entity_dim, parametric, count) =
            read_gmsh41_block_header(lines, "node entity blocks", blocks, block)?;
        if parametric > 1 {
            return Err(MeshIoError::InvalidHeaderValue {
                file: MSH,
                line,
                field: "parametric flag",
                value: parametric.to_string(),
                expected: "0 or 1",
            });
        }
        let fields = if parametric == 1 { 3 + entity_dim } else { 3 };
        for index in 0..count {
            let (line, row) = lines.gmsh_row("node tags", "node tags in block", count, index)?;
            expect_fields(MSH, line, &row, 1)?;
            let id = parse_u64(MSH, line, token_at(&row, 0))?;
            nodes.ids.push(id, MSH, line)?;
        }
        for index in 0..count {
            let (line, row) = lines.gmsh_row(
                "node coordinates",
                "node coordinates in block",
                count,
                index,
            )?;
            expect_fields(MSH, line, &row, fields)?;
            nodes.positions.push(parse_xyz(MSH, line, &row, 0)?);
            for token in row.iter().skip(3) {
                parse_f64(MSH, line, token)?;
            }
        }
        found = found.saturating_add(count);
    }
    if found != total {
        return Err(MeshIoError::CountMismatch {
            file: MSH,
            line: header_line,
            what: "nodes (sum over entity blocks)",
            declared: total,
            found,
        });
    }
    lines.expect_end("$EndNodes", "node entity blocks", blocks)?;
    Ok(nodes)
}

fn read_gmsh41_elements(lines: &mut DataLines<'_>) -> Result<Vec<PendingTet>> {
    let (header_line, blocks, total) = read_gmsh41_section_header(lines, "the $Elements header")?;
    let mut tets = Vec::new();
    let mut found = 0usize;
    for block in 0..blocks {
        let (_, _, element_type, count) =
            read_gmsh41_block_header(lines, "element entity blocks", blocks, block)?;
        let node_count = gmsh_tet_nodes(element_type);
        for index in 0..count {
            let (line, row) = lines.gmsh_row("element rows", "elements in block", count, index)?;
            let Some(node_count) = node_count else {
                continue;
            };
            expect_fields(MSH, line, &row, 1 + node_count)?;
            parse_u64(MSH, line, token_at(&row, 0))?;
            for token in row.iter().skip(5) {
                parse_u64(MSH, line, token)?;
            }
            tets.push((line, parse_corners(MSH, line, &row, 1)?));
        }
        found = found.saturating_add(count);
    }
    if found != total {
        return Err(MeshIoError::CountMismatch {
            file: MSH,
            line: header_line,
            what: "elements (sum over entity blocks)",
            declared: total,
            found,
        });
    }
    lines.expect_end("$EndElements", "element entity blocks", blocks)?;
    Ok(tets)
}

#[cfg(test)]
mod tests {
    use super::super::test_files::*;
    use super::*;

    #[test]
    fn gmsh22_mixed_elements() {
        assert_eq!(read_gmsh(MSH22).unwrap(), expected_small());
    }

    #[test]
    fn gmsh41_mixed_elements_and_parametric_nodes() {
        assert_eq!(read_gmsh(MSH41).unwrap(), expected_small());
    }

    #[test]
    fn gmsh_round_trips() {
        let mesh = awkward_mesh();
        assert_eq!(read_gmsh(&write_gmsh22(&mesh)).unwrap(), mesh);
        assert_eq!(read_gmsh(&write_gmsh41(&mesh)).unwrap(), mesh);
    }
}
