//! The text scanning every reader shares: [`DataLines`] walks the non-empty lines of a file as
//! whitespace-separated tokens with their 1-based line numbers, and the `parse_*` helpers turn
//! tokens into numbers or a typed [`MeshIoError`].

use super::error::{MeshIoError, Result};

/// Upper bound on pre-allocations driven by counts read from a header, so that a bogus header
/// (say `10^18` nodes) cannot make the reader abort on allocation before it finds the file is
/// shorter than claimed.
const MAX_PREALLOC: usize = 1 << 16;

/// Iterator over the non-empty lines of a text, split into whitespace-separated tokens.
pub(super) struct DataLines<'a> {
    lines: std::iter::Enumerate<std::str::Lines<'a>>,
    file: &'static str,
    strip_comments: bool,
    /// 1-based number of the last line consumed (0 before the first).
    pub(super) last: usize,
}

impl<'a> DataLines<'a> {
    pub(super) fn new(text: &'a str, file: &'static str, strip_comments: bool) -> Self {
        Self {
            lines: text.lines().enumerate(),
            file,
            strip_comments,
            last: 0,
        }
    }

    /// Next line with at least one token, with its 1-based line number.
    pub(super) fn next_data(&mut self) -> Option<(usize, Vec<&'a str>)> {
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
    pub(super) fn require(&mut self, expected: &'static str) -> Result<(usize, Vec<&'a str>)> {
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
    pub(super) fn gmsh_row(
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
    pub(super) fn count_extra_rows(&mut self) -> usize {
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
    pub(super) fn expect_end(
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

pub(super) fn expect_fields(
    file: &'static str,
    line: usize,
    tokens: &[&str],
    expected: usize,
) -> Result<()> {
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

pub(super) fn token_at<'t>(tokens: &[&'t str], i: usize) -> &'t str {
    // Callers check the field count first; an out-of-range index yields "" which then fails
    // to parse with a `BadNumber` instead of panicking.
    tokens.get(i).copied().unwrap_or("")
}

pub(super) fn parse_usize(file: &'static str, line: usize, token: &str) -> Result<usize> {
    token.parse().map_err(|_| MeshIoError::BadNumber {
        file,
        line,
        token: token.to_owned(),
        expected: "non-negative integer",
    })
}

pub(super) fn parse_u64(file: &'static str, line: usize, token: &str) -> Result<u64> {
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

pub(super) fn parse_f64(file: &'static str, line: usize, token: &str) -> Result<f64> {
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
pub(super) fn parse_xyz(
    file: &'static str,
    line: usize,
    tokens: &[&str],
    start: usize,
) -> Result<[f64; 3]> {
    Ok([
        parse_coord(file, line, token_at(tokens, start))?,
        parse_coord(file, line, token_at(tokens, start + 1))?,
        parse_coord(file, line, token_at(tokens, start + 2))?,
    ])
}

pub(super) fn prealloc<T>(declared: usize) -> Vec<T> {
    Vec::with_capacity(declared.min(MAX_PREALLOC))
}
