//! [`MeshIoError`], the one error type of every mesh reader, and the tests that each variant is
//! produced where the docs say (one test per variant, across the TetGen and Gmsh readers).

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

/// The result of a reader step.
pub(super) type Result<T> = std::result::Result<T, MeshIoError>;

#[cfg(test)]
mod tests {
    use super::super::test_files::*;
    use super::*;

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
}
