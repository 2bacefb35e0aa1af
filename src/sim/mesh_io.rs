//! Readers for tetrahedral mesh files.
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

use std::collections::HashMap;

/// File kind reported in errors for TetGen `.node` text.
const NODE: &str = ".node";
/// File kind reported in errors for TetGen `.ele` text.
const ELE: &str = ".ele";
/// File kind reported in errors for Gmsh `.msh` text.
const MSH: &str = ".msh";

/// Upper bound on pre-allocations driven by counts read from a header, so that a bogus header
/// (say `10^18` nodes) cannot make the reader abort on allocation before it finds the file is
/// shorter than claimed.
const MAX_PREALLOC: usize = 1 << 16;

/// A tetrahedral mesh as read from a file, before validation.
#[derive(Debug, Clone, PartialEq)]
pub struct RawTetMesh {
    /// Node positions, in file order.
    pub positions: Vec<[f64; 3]>,
    /// Tetrahedra as four indices into [`RawTetMesh::positions`] (corner nodes, file order).
    pub tets: Vec<[usize; 4]>,
}

/// Everything that can go wrong while reading a mesh file.
///
/// `file` is the kind of file the problem is in (`".node"`, `".ele"` or `".msh"`); `line` is a
/// 1-based line number in that file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MeshIoError {
    /// The input holds no data at all (only whitespace, and comments for TetGen).
    #[error("{file}: the file is empty")]
    Empty {
        /// File kind.
        file: &'static str,
    },
    /// A required Gmsh section (`$MeshFormat`, `$Nodes` or `$Elements`) never appears.
    #[error("{file}: missing section {section}")]
    MissingSection {
        /// File kind.
        file: &'static str,
        /// The section that is missing, e.g. `"$Nodes"`.
        section: &'static str,
    },
    /// A line holds something other than what the format requires at that point (e.g. a
    /// Gmsh file that does not start with `$MeshFormat`, or text outside any section).
    #[error("{file} line {line}: expected {expected}, found `{found}`")]
    UnexpectedLine {
        /// File kind.
        file: &'static str,
        /// 1-based line number.
        line: usize,
        /// What was expected there.
        expected: &'static str,
        /// The line's content (whitespace-normalised).
        found: String,
    },
    /// A token that should be a number is not one (or is out of range for its field).
    #[error("{file} line {line}: `{token}` is not a valid {expected}")]
    BadNumber {
        /// File kind.
        file: &'static str,
        /// 1-based line number.
        line: usize,
        /// The offending token.
        token: String,
        /// The kind of number expected, e.g. `"non-negative integer"`.
        expected: &'static str,
    },
    /// A line has the wrong number of whitespace-separated fields.
    #[error("{file} line {line}: expected {expected} fields, found {found}")]
    WrongFieldCount {
        /// File kind.
        file: &'static str,
        /// 1-based line number.
        line: usize,
        /// Number of fields the format requires on this line.
        expected: usize,
        /// Number of fields present.
        found: usize,
    },
    /// The text ends while more data was expected (e.g. a header declares more rows than the
    /// file holds, or a section is not terminated).
    #[error("{file}: unexpected end of file at line {line} while reading {expected}")]
    UnexpectedEof {
        /// File kind.
        file: &'static str,
        /// The line after the last line of the file, where the missing data was expected.
        line: usize,
        /// What was being read.
        expected: &'static str,
    },
    /// The number of rows found disagrees with the count a header declares (extra rows, a
    /// Gmsh section that ends early, or Gmsh 4.1 blocks that do not add up to the total).
    #[error("{file} line {line}: {what}: header declares {declared}, found {found}")]
    CountMismatch {
        /// File kind.
        file: &'static str,
        /// 1-based line number where the mismatch shows.
        line: usize,
        /// What is being counted.
        what: &'static str,
        /// Count declared by the header.
        declared: usize,
        /// Count actually found.
        found: usize,
    },
    /// The TetGen `.node` header declares a dimension other than 3.
    #[error("{file} line {line}: dimension {dim} is not supported (only 3)")]
    UnsupportedDimension {
        /// File kind.
        file: &'static str,
        /// 1-based line number.
        line: usize,
        /// The declared dimension.
        dim: usize,
    },
    /// A header field holds a number outside the values the format allows (boundary marker
    /// flag not 0/1, nodes per tet not 4/10, Gmsh file-type or parametric flag, entity
    /// dimension, ...).
    #[error("{file} line {line}: invalid {field} `{value}` (expected {expected})")]
    InvalidHeaderValue {
        /// File kind.
        file: &'static str,
        /// 1-based line number.
        line: usize,
        /// The header field.
        field: &'static str,
        /// The value found.
        value: String,
        /// The allowed values.
        expected: &'static str,
    },
    /// The same node id is defined twice.
    #[error("{file} line {line}: node id {id} is defined twice")]
    DuplicateNodeId {
        /// File kind.
        file: &'static str,
        /// 1-based line number of the second definition.
        line: usize,
        /// The repeated id.
        id: u64,
    },
    /// An element refers to a node id that the file does not define.
    #[error("{file} line {line}: element refers to unknown node id {id}")]
    UnknownNodeId {
        /// File kind (`".ele"` or `".msh"`).
        file: &'static str,
        /// 1-based line number of the element.
        line: usize,
        /// The unknown id.
        id: u64,
    },
    /// The Gmsh file has a version other than 2.0, 2.1, 2.2 or 4.1.
    #[error("{file} line {line}: Gmsh format version {version} is not supported (use 2.2 or 4.1)")]
    UnsupportedGmshVersion {
        /// File kind.
        file: &'static str,
        /// 1-based line number of the format line.
        line: usize,
        /// The version string found.
        version: String,
    },
    /// The Gmsh file is in binary format (file-type 1); only ASCII is supported.
    #[error("{file} line {line}: binary Gmsh files are not supported (save as ASCII)")]
    GmshBinary {
        /// File kind.
        file: &'static str,
        /// 1-based line number of the format line.
        line: usize,
    },
    /// A Gmsh section that may appear only once appears again.
    #[error("{file} line {line}: section {section} appears more than once")]
    DuplicateSection {
        /// File kind.
        file: &'static str,
        /// 1-based line number of the repeated section header.
        line: usize,
        /// The repeated section, e.g. `"$Nodes"`.
        section: &'static str,
    },
    /// The file parses but contains no tetrahedra.
    #[error("{file}: the file contains no tetrahedra")]
    NoTetrahedra {
        /// File kind.
        file: &'static str,
    },
    /// A coordinate is NaN or infinite (a `nan`/`inf` literal, or a value that overflows).
    #[error("{file} line {line}: coordinate `{token}` is not finite")]
    NonFiniteCoordinate {
        /// File kind.
        file: &'static str,
        /// 1-based line number.
        line: usize,
        /// The offending token.
        token: String,
    },
}

type Result<T> = std::result::Result<T, MeshIoError>;

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

/// Iterator over the non-empty lines of a text, split into whitespace-separated tokens.
struct DataLines<'a> {
    lines: std::iter::Enumerate<std::str::Lines<'a>>,
    file: &'static str,
    strip_comments: bool,
    /// 1-based number of the last line consumed (0 before the first).
    last: usize,
}

impl<'a> DataLines<'a> {
    fn new(text: &'a str, file: &'static str, strip_comments: bool) -> Self {
        Self {
            lines: text.lines().enumerate(),
            file,
            strip_comments,
            last: 0,
        }
    }

    /// Next line with at least one token, with its 1-based line number.
    fn next_data(&mut self) -> Option<(usize, Vec<&'a str>)> {
        for (i, raw) in self.lines.by_ref() {
            self.last = i + 1;
            let content = if self.strip_comments {
                raw.split_once('#').map_or(raw, |(before, _)| before)
            } else {
                raw
            };
            let tokens: Vec<&'a str> = content.split_whitespace().collect();
            if !tokens.is_empty() {
                return Some((i + 1, tokens));
            }
        }
        None
    }

    /// Like [`DataLines::next_data`], but the end of the text is an error.
    fn require(&mut self, expected: &'static str) -> Result<(usize, Vec<&'a str>)> {
        match self.next_data() {
            Some(found) => Ok(found),
            None => Err(MeshIoError::UnexpectedEof {
                file: self.file,
                line: self.last.saturating_add(1),
                expected,
            }),
        }
    }

    /// Row `index` (0-based) of `declared` rows inside a Gmsh section: the end of the text is an
    /// error, and so is a `$...` line (the section ended early).
    fn gmsh_row(
        &mut self,
        expected: &'static str,
        what: &'static str,
        declared: usize,
        index: usize,
    ) -> Result<(usize, Vec<&'a str>)> {
        let (line, tokens) = self.require(expected)?;
        if tokens.first().is_some_and(|t| t.starts_with('$')) {
            return Err(MeshIoError::CountMismatch {
                file: self.file,
                line,
                what,
                declared,
                found: index,
            });
        }
        Ok((line, tokens))
    }

    /// Counts the data lines up to the end of the text (TetGen) or up to the next `$` line
    /// (Gmsh), consuming them.
    fn count_extra_rows(&mut self) -> usize {
        let mut extra = 1;
        while let Some((_, tokens)) = self.next_data() {
            if tokens.first().is_some_and(|t| t.starts_with('$')) {
                break;
            }
            extra += 1;
        }
        extra
    }

    /// Expects a Gmsh section end marker; extra data rows before it are a count mismatch.
    fn expect_end(
        &mut self,
        marker: &'static str,
        what: &'static str,
        declared: usize,
    ) -> Result<()> {
        let (line, tokens) = self.require(marker)?;
        if tokens.as_slice() == [marker] {
            return Ok(());
        }
        if tokens.first().is_some_and(|t| t.starts_with('$')) {
            return Err(MeshIoError::UnexpectedLine {
                file: self.file,
                line,
                expected: marker,
                found: tokens.join(" "),
            });
        }
        let extra = self.count_extra_rows();
        Err(MeshIoError::CountMismatch {
            file: self.file,
            line,
            what,
            declared,
            found: declared.saturating_add(extra),
        })
    }
}

fn expect_fields(file: &'static str, line: usize, tokens: &[&str], expected: usize) -> Result<()> {
    if tokens.len() == expected {
        Ok(())
    } else {
        Err(MeshIoError::WrongFieldCount {
            file,
            line,
            expected,
            found: tokens.len(),
        })
    }
}

fn token_at<'t>(tokens: &[&'t str], i: usize) -> &'t str {
    // Callers check the field count first; an out-of-range index yields "" which then fails
    // to parse with a `BadNumber` instead of panicking.
    tokens.get(i).copied().unwrap_or("")
}

fn parse_usize(file: &'static str, line: usize, token: &str) -> Result<usize> {
    token.parse().map_err(|_| MeshIoError::BadNumber {
        file,
        line,
        token: token.to_owned(),
        expected: "non-negative integer",
    })
}

fn parse_u64(file: &'static str, line: usize, token: &str) -> Result<u64> {
    token.parse().map_err(|_| MeshIoError::BadNumber {
        file,
        line,
        token: token.to_owned(),
        expected: "non-negative integer",
    })
}

pub(super) fn parse_i64(file: &'static str, line: usize, token: &str) -> Result<i64> {
    token.parse().map_err(|_| MeshIoError::BadNumber {
        file,
        line,
        token: token.to_owned(),
        expected: "integer",
    })
}

fn parse_f64(file: &'static str, line: usize, token: &str) -> Result<f64> {
    token.parse().map_err(|_| MeshIoError::BadNumber {
        file,
        line,
        token: token.to_owned(),
        expected: "number",
    })
}

pub(super) fn parse_coord(file: &'static str, line: usize, token: &str) -> Result<f64> {
    let value = parse_f64(file, line, token)?;
    if value.is_finite() {
        Ok(value)
    } else {
        Err(MeshIoError::NonFiniteCoordinate {
            file,
            line,
            token: token.to_owned(),
        })
    }
}

/// Parses `x y z` from `tokens[start..start + 3]`.
fn parse_xyz(file: &'static str, line: usize, tokens: &[&str], start: usize) -> Result<[f64; 3]> {
    Ok([
        parse_coord(file, line, token_at(tokens, start))?,
        parse_coord(file, line, token_at(tokens, start + 1))?,
        parse_coord(file, line, token_at(tokens, start + 2))?,
    ])
}

fn prealloc<T>(declared: usize) -> Vec<T> {
    Vec::with_capacity(declared.min(MAX_PREALLOC))
}

/// Maps file node ids to positions in file order. Stays a plain offset while the ids are
/// contiguous (`first, first + 1, ...`), and switches to a hash map on the first gap.
#[derive(Default)]
struct NodeIds {
    first: u64,
    len: usize,
    map: Option<HashMap<u64, usize>>,
}

impl NodeIds {
    fn push(&mut self, id: u64, file: &'static str, line: usize) -> Result<()> {
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

    fn get(&self, id: u64) -> Option<usize> {
        match &self.map {
            Some(map) => map.get(&id).copied(),
            None => id
                .checked_sub(self.first)
                .filter(|&offset| offset < self.len as u64)
                .map(|offset| offset as usize),
        }
    }
}

fn resolve(ids: &NodeIds, file: &'static str, line: usize, nodes: [u64; 4]) -> Result<[usize; 4]> {
    let mut out = [0usize; 4];
    for (slot, id) in out.iter_mut().zip(nodes) {
        *slot = ids
            .get(id)
            .ok_or(MeshIoError::UnknownNodeId { file, line, id })?;
    }
    Ok(out)
}

/// Parses `tokens[start..start + 4]` as node ids.
fn parse_corners(
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

// ---------------------------------------------------------------------------------------------
// TetGen
// ---------------------------------------------------------------------------------------------

/// Reads a TetGen mesh from the text of its `.node` and `.ele` files.
///
/// See the [module docs](self) for the accepted format. Node references in the `.ele` file are
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

// ---------------------------------------------------------------------------------------------
// Gmsh
// ---------------------------------------------------------------------------------------------

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
/// other element type; see the [module docs](self) for details.
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
    use super::*;
    use std::fmt::Write as _;

    // --- Valid sample files ------------------------------------------------------------------

    const NODE0: &str = "# five points, 0-based\n\
        5 3 0 0\n\
        0 0 0 0\n\
        1 1 0 0\n\
        \n\
        2 0 1 0\n\
        3 0 0 1  # the apex\n\
        4 1 1 1\n\
        # trailing comment\n";
    const ELE0: &str = "2 4 0\n0 0 1 2 3\n1 1 2 3 4\n";

    const NODE1: &str = "5 3 1 1\n\
        1 0 0 0 0.5 1\n\
        2 1 0 0 0.5 1\n\
        3 0 1 0 0.5 0\n\
        4 0 0 1 0.5 1\n\
        5 1 1 1 0.5 -1\n";
    const ELE1: &str = "2 4 1\n1 1 2 3 4 7\n2 2 3 4 5 7.5\n";

    const MSH22: &str = "$MeshFormat\n2.2 0 8\n$EndMeshFormat\n\
        $PhysicalNames\n1\n3 1 \"body\"\n$EndPhysicalNames\n\
        $Nodes\n5\n10 0 0 0\n11 1 0 0\n12 0 1 0\n13 0 0 1\n14 1 1 1\n$EndNodes\n\
        $Elements\n5\n\
        1 15 2 0 10 10\n\
        2 1 2 0 1 10 11\n\
        3 2 2 0 1 10 11 12\n\
        4 4 2 1 1 10 11 12 13\n\
        5 11 2 1 1 11 12 13 14 11 11 11 11 11 11\n\
        $EndElements\n";

    const MSH41: &str = "$MeshFormat\n4.1 0 8\n$EndMeshFormat\n\
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

    fn expected_small() -> RawTetMesh {
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

    fn tetgen_err(node: &str, ele: &str) -> MeshIoError {
        match read_tetgen(node, ele) {
            Ok(mesh) => panic!("expected an error, got {mesh:?}"),
            Err(err) => {
                assert!(!err.to_string().is_empty());
                err
            }
        }
    }

    fn gmsh_err(msh: &str) -> MeshIoError {
        match read_gmsh(msh) {
            Ok(mesh) => panic!("expected an error, got {mesh:?}"),
            Err(err) => {
                assert!(!err.to_string().is_empty());
                err
            }
        }
    }

    fn msh22(body: &str) -> String {
        format!("$MeshFormat\n2.2 0 8\n$EndMeshFormat\n{body}")
    }

    const NODES22: &str = "$Nodes\n4\n1 0 0 0\n2 1 0 0\n3 0 1 0\n4 0 0 1\n$EndNodes\n";

    // --- Writers used by the round-trip tests ------------------------------------------------

    fn write_tetgen(mesh: &RawTetMesh, base: usize) -> (String, String) {
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

    fn write_gmsh22(mesh: &RawTetMesh) -> String {
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

    fn write_gmsh41(mesh: &RawTetMesh) -> String {
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

    fn awkward_mesh() -> RawTetMesh {
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

    // --- Valid files -------------------------------------------------------------------------

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

    // --- One test per error variant ----------------------------------------------------------

    #[test]
    fn err_empty() {
        assert_eq!(tetgen_err("", ELE0), MeshIoError::Empty { file: ".node" });
        assert_eq!(
            tetgen_err(NODE0, "  \n# only a comment\n"),
            MeshIoError::Empty { file: ".ele" }
        );
        assert_eq!(gmsh_err("\n  \n"), MeshIoError::Empty { file: ".msh" });
    }

    #[test]
    fn err_missing_section() {
        assert_eq!(
            gmsh_err(&msh22(NODES22)),
            MeshIoError::MissingSection {
                file: ".msh",
                section: "$Elements"
            }
        );
        assert_eq!(
            gmsh_err(&msh22("$Elements\n0\n$EndElements\n")),
            MeshIoError::MissingSection {
                file: ".msh",
                section: "$Nodes"
            }
        );
    }

    #[test]
    fn err_unexpected_line() {
        assert_eq!(
            gmsh_err("$Nodes\n1\n1 0 0 0\n$EndNodes\n"),
            MeshIoError::UnexpectedLine {
                file: ".msh",
                line: 1,
                expected: "$MeshFormat",
                found: "$Nodes".into()
            }
        );
        assert!(matches!(
            gmsh_err(&msh22("stray text\n")),
            MeshIoError::UnexpectedLine { line: 4, .. }
        ));
    }

    #[test]
    fn err_bad_number() {
        assert_eq!(
            tetgen_err("1 3 0 0\n0 1.0 abc 2.0\n", ELE0),
            MeshIoError::BadNumber {
                file: ".node",
                line: 2,
                token: "abc".into(),
                expected: "number"
            }
        );
        assert_eq!(
            tetgen_err(NODE0, "1 4 0\n0 0 1 -2 3\n"),
            MeshIoError::BadNumber {
                file: ".ele",
                line: 2,
                token: "-2".into(),
                expected: "non-negative integer"
            }
        );
        assert!(matches!(
            gmsh_err(&msh22("$Nodes\n1\n1 0 0 zz\n$EndNodes\n")),
            MeshIoError::BadNumber { line: 6, ref token, .. } if token == "zz"
        ));
    }

    #[test]
    fn err_wrong_field_count() {
        assert_eq!(
            tetgen_err("1 3 0 0\n0 1.0 2.0\n", ELE0),
            MeshIoError::WrongFieldCount {
                file: ".node",
                line: 2,
                expected: 4,
                found: 3
            }
        );
        let elements = "$Elements\n1\n1 4 2 0 1 1 2 3\n$EndElements\n";
        assert_eq!(
            gmsh_err(&msh22(&format!("{NODES22}{elements}"))),
            MeshIoError::WrongFieldCount {
                file: ".msh",
                line: 13,
                expected: 9,
                found: 8
            }
        );
    }

    #[test]
    fn err_unexpected_eof() {
        assert_eq!(
            tetgen_err("3 3 0 0\n0 0 0 0\n1 1 0 0\n", ELE0),
            MeshIoError::UnexpectedEof {
                file: ".node",
                line: 4,
                expected: "node rows"
            }
        );
        assert!(matches!(
            gmsh_err(&msh22("$Nodes\n2\n1 0 0 0\n")),
            MeshIoError::UnexpectedEof { line: 7, .. }
        ));
        assert!(matches!(
            gmsh_err(&msh22("$Comments\nhello\n")),
            MeshIoError::UnexpectedEof { line: 6, .. }
        ));
    }

    #[test]
    fn err_count_mismatch() {
        assert_eq!(
            tetgen_err(NODE0, "1 4 0\n0 0 1 2 3\n1 1 2 3 4\n"),
            MeshIoError::CountMismatch {
                file: ".ele",
                line: 3,
                what: "tetrahedron rows",
                declared: 1,
                found: 2
            }
        );
        assert_eq!(
            gmsh_err(&msh22("$Nodes\n3\n1 0 0 0\n$EndNodes\n")),
            MeshIoError::CountMismatch {
                file: ".msh",
                line: 7,
                what: "nodes",
                declared: 3,
                found: 1
            }
        );
        // Gmsh 4.1: blocks hold 1 node but the header says 2.
        let msh = "$MeshFormat\n4.1 0 8\n$EndMeshFormat\n\
            $Nodes\n1 2 1 2\n3 1 0 1\n1\n0 0 0\n$EndNodes\n";
        assert!(matches!(
            gmsh_err(msh),
            MeshIoError::CountMismatch {
                line: 5,
                declared: 2,
                found: 1,
                ..
            }
        ));
    }

    #[test]
    fn err_unsupported_dimension() {
        assert_eq!(
            tetgen_err("4 2 0 0\n0 0 0\n1 1 0\n2 0 1\n3 1 1\n", ELE0),
            MeshIoError::UnsupportedDimension {
                file: ".node",
                line: 1,
                dim: 2
            }
        );
    }

    #[test]
    fn err_invalid_header_value() {
        assert!(matches!(
            tetgen_err(NODE0, "1 8 0\n0 0 1 2 3 0 1 2 3\n"),
            MeshIoError::InvalidHeaderValue {
                file: ".ele",
                line: 1,
                field: "nodes per tetrahedron",
                ..
            }
        ));
        assert!(matches!(
            tetgen_err("1 3 0 2\n0 0 0 0 1\n", ELE0),
            MeshIoError::InvalidHeaderValue { file: ".node", .. }
        ));
        assert!(matches!(
            gmsh_err("$MeshFormat\n4.1 7 8\n$EndMeshFormat\n"),
            MeshIoError::InvalidHeaderValue {
                line: 2,
                field: "file-type",
                ..
            }
        ));
    }

    #[test]
    fn err_duplicate_node_id() {
        assert_eq!(
            tetgen_err("3 3 0 0\n0 0 0 0\n1 1 0 0\n0 0 1 0\n", ELE0),
            MeshIoError::DuplicateNodeId {
                file: ".node",
                line: 4,
                id: 0
            }
        );
        assert!(matches!(
            gmsh_err(&msh22("$Nodes\n2\n5 0 0 0\n5 1 0 0\n$EndNodes\n")),
            MeshIoError::DuplicateNodeId { line: 7, id: 5, .. }
        ));
    }

    #[test]
    fn err_unknown_node_id() {
        assert_eq!(
            tetgen_err(NODE0, "2 4 0\n0 0 1 2 3\n1 1 2 3 5\n"),
            MeshIoError::UnknownNodeId {
                file: ".ele",
                line: 3,
                id: 5
            }
        );
        // 1-based node file, 0 is unknown.
        assert!(matches!(
            tetgen_err(NODE1, "1 4 0\n0 0 1 2 3\n"),
            MeshIoError::UnknownNodeId { id: 0, .. }
        ));
        let elements = "$Elements\n1\n1 4 0 1 2 3 99\n$EndElements\n";
        assert_eq!(
            gmsh_err(&msh22(&format!("{NODES22}{elements}"))),
            MeshIoError::UnknownNodeId {
                file: ".msh",
                line: 13,
                id: 99
            }
        );
    }

    #[test]
    fn err_unsupported_gmsh_version() {
        for version in ["4.0", "3.0", "1", "abc"] {
            let msh = format!("$MeshFormat\n{version} 0 8\n$EndMeshFormat\n");
            assert_eq!(
                gmsh_err(&msh),
                MeshIoError::UnsupportedGmshVersion {
                    file: ".msh",
                    line: 2,
                    version: version.into()
                }
            );
        }
    }

    #[test]
    fn err_gmsh_binary() {
        assert_eq!(
            gmsh_err("$MeshFormat\n4.1 1 8\n\u{1}\n$EndMeshFormat\n"),
            MeshIoError::GmshBinary {
                file: ".msh",
                line: 2
            }
        );
    }

    #[test]
    fn err_duplicate_section() {
        assert_eq!(
            gmsh_err(&msh22(&format!("{NODES22}{NODES22}"))),
            MeshIoError::DuplicateSection {
                file: ".msh",
                line: 11,
                section: "$Nodes"
            }
        );
    }

    #[test]
    fn err_no_tetrahedra() {
        assert_eq!(
            tetgen_err(NODE0, "0 4 0\n"),
            MeshIoError::NoTetrahedra { file: ".ele" }
        );
        let elements = "$Elements\n1\n1 2 2 0 1 1 2 3\n$EndElements\n";
        assert_eq!(
            gmsh_err(&msh22(&format!("{NODES22}{elements}"))),
            MeshIoError::NoTetrahedra { file: ".msh" }
        );
    }

    #[test]
    fn err_non_finite_coordinate() {
        for token in ["nan", "NaN", "inf", "-infinity", "1e999"] {
            let node = format!("2 3 0 0\n0 0 0 0\n1 1 {token} 0\n");
            assert_eq!(
                tetgen_err(&node, ELE0),
                MeshIoError::NonFiniteCoordinate {
                    file: ".node",
                    line: 3,
                    token: token.into()
                }
            );
        }
        assert!(matches!(
            gmsh_err(&msh22("$Nodes\n1\n1 inf 0 0\n$EndNodes\n")),
            MeshIoError::NonFiniteCoordinate { line: 6, .. }
        ));
    }

    #[test]
    fn huge_declared_counts_do_not_allocate() {
        let err = tetgen_err("1000000000000000000 3 0 0\n0 0 0 0\n", ELE0);
        assert!(matches!(err, MeshIoError::UnexpectedEof { line: 3, .. }));
        let attrs = format!("1 3 {} 0\n0 0 0 0\n", usize::MAX);
        assert!(matches!(
            tetgen_err(&attrs, ELE0),
            MeshIoError::WrongFieldCount { .. }
        ));
        let err = gmsh_err(&msh22("$Elements\n1\n1 4 18446744073709551615 1 2 3 4\n"));
        assert!(matches!(err, MeshIoError::WrongFieldCount { .. }));
    }

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
