//! The `.npy` preamble and header: magic, version, header length, and the Python
//! dict literal with `descr`, `fortran_order` and `shape`.

use super::error::{HeaderError, HeaderKey, Syntax};
use super::{MAGIC, MAX_HEADER_BYTES};

/// The parsed header of a `.npy` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpyHeader {
    /// `(major, minor)` format version.
    pub version: (u8, u8),
    /// The `descr` string as written (`<f4`, `|u1`, ...).
    pub descr: String,
    pub fortran_order: bool,
    pub shape: Vec<u64>,
    /// Byte offset of the array data in the file.
    pub data_offset: usize,
}

impl NpyHeader {
    /// Parses the preamble and header dict from the first bytes of a file (at least
    /// the whole header). [`super::NpyFile`] adds the path to errors.
    pub fn parse(bytes: &[u8]) -> Result<Self, HeaderError> {
        if bytes.get(..6) != Some(&MAGIC[..]) {
            return Err(HeaderError::BadMagic);
        }
        let Some((&[major, minor], rest)) = bytes[6..].split_first_chunk::<2>() else {
            return Err(HeaderError::TruncatedPreamble);
        };
        let (len, start) = match major {
            1 => {
                let b = rest
                    .first_chunk::<2>()
                    .ok_or(HeaderError::TruncatedPreamble)?;
                (usize::from(u16::from_le_bytes(*b)), 10)
            }
            2 | 3 => {
                let b = rest
                    .first_chunk::<4>()
                    .ok_or(HeaderError::TruncatedPreamble)?;
                (
                    usize::try_from(u32::from_le_bytes(*b)).unwrap_or(usize::MAX),
                    12,
                )
            }
            _ => return Err(HeaderError::UnsupportedVersion { major, minor }),
        };
        if len > MAX_HEADER_BYTES {
            return Err(HeaderError::HeaderTooLong { len });
        }
        let text = bytes
            .get(start..start + len)
            .ok_or(HeaderError::TruncatedHeader { len })?;
        let text = std::str::from_utf8(text).map_err(|_| HeaderError::NotUtf8)?;
        if major < 3 && !text.is_ascii() {
            return Err(HeaderError::NotAscii);
        }
        let dict = parse_dict(text)?;
        let field = |key: HeaderKey| {
            dict.iter()
                .find(|(k, _)| k == key.name())
                .map(|(_, v)| v)
                .ok_or(HeaderError::MissingKey { key })
        };
        let descr = match field(HeaderKey::Descr)? {
            Literal::Str(s) => s.clone(),
            Literal::List => return Err(HeaderError::StructuredDescr),
            _ => {
                return Err(HeaderError::BadValue {
                    key: HeaderKey::Descr,
                })
            }
        };
        let fortran_order = match field(HeaderKey::FortranOrder)? {
            Literal::Bool(b) => *b,
            _ => {
                return Err(HeaderError::BadValue {
                    key: HeaderKey::FortranOrder,
                })
            }
        };
        let shape = match field(HeaderKey::Shape)? {
            Literal::Tuple(t) => t.clone(),
            _ => {
                return Err(HeaderError::BadValue {
                    key: HeaderKey::Shape,
                })
            }
        };
        let version = (major, minor);
        Ok(Self {
            version,
            descr,
            fortran_order,
            shape,
            data_offset: start + len,
        })
    }

    /// Number of elements (`None` on overflow).
    pub fn elements(&self) -> Option<u64> {
        self.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))
    }
}

/// A Python literal as it can appear in a `.npy` header.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Literal {
    Str(String),
    Bool(bool),
    Int(u64),
    Tuple(Vec<u64>),
    /// A list (structured dtype descr); its contents are not needed.
    List,
}

/// Parses `{'key': value, ...}` with the values `.npy` headers use.
fn parse_dict(text: &str) -> Result<Vec<(String, Literal)>, HeaderError> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    p.expect(b'{')?;
    let mut out = Vec::new();
    loop {
        p.ws();
        if p.eat(b'}') {
            break;
        }
        let key = p.string()?;
        p.ws();
        p.expect(b':')?;
        let value = p.value()?;
        out.push((key, value));
        p.ws();
        if !p.eat(b',') {
            p.ws();
            p.expect(b'}')?;
            break;
        }
    }
    p.ws();
    if p.i != p.s.len() {
        return Err(p.error(Syntax::TrailingText));
    }
    Ok(out)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    /// A syntax error at the current byte.
    fn error(&self, problem: Syntax) -> HeaderError {
        self.error_at(self.i, problem)
    }

    fn error_at(&self, at: usize, problem: Syntax) -> HeaderError {
        HeaderError::Syntax { at, problem }
    }

    fn ws(&mut self) {
        while self.s.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), HeaderError> {
        self.ws();
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.error(Syntax::Expected(c as char)))
        }
    }

    fn string(&mut self) -> Result<String, HeaderError> {
        self.ws();
        let quote = match self.s.get(self.i) {
            Some(&q @ (b'\'' | b'"')) => q,
            _ => return Err(self.error(Syntax::ExpectedString)),
        };
        self.i += 1;
        let start = self.i;
        while let Some(&c) = self.s.get(self.i) {
            if c == quote {
                let s = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
                self.i += 1;
                return Ok(s);
            }
            // Skip the escaped character; descr strings never need unescaping.
            self.i += if c == b'\\' { 2 } else { 1 };
        }
        Err(self.error_at(start - 1, Syntax::UnterminatedString))
    }

    fn int(&mut self) -> Result<u64, HeaderError> {
        self.ws();
        let start = self.i;
        while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        let digits = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
        let n = digits
            .parse::<u64>()
            .map_err(|_| self.error_at(start, Syntax::ExpectedInteger))?;
        // Python 2 wrote longs with an L suffix.
        let _ = self.eat(b'L');
        Ok(n)
    }

    fn value(&mut self) -> Result<Literal, HeaderError> {
        self.ws();
        match self.s.get(self.i) {
            Some(b'\'' | b'"') => Ok(Literal::Str(self.string()?)),
            Some(b'(') => {
                self.i += 1;
                let mut dims = Vec::new();
                loop {
                    self.ws();
                    if self.eat(b')') {
                        break;
                    }
                    dims.push(self.int()?);
                    self.ws();
                    if !self.eat(b',') {
                        self.expect(b')')?;
                        break;
                    }
                }
                Ok(Literal::Tuple(dims))
            }
            Some(b'[') => {
                // Skip to the matching bracket; only its presence matters.
                let open = self.i;
                let mut depth = 0usize;
                while let Some(&c) = self.s.get(self.i) {
                    self.i += 1;
                    match c {
                        b'[' => depth += 1,
                        b']' => {
                            depth -= 1;
                            if depth == 0 {
                                return Ok(Literal::List);
                            }
                        }
                        _ => {}
                    }
                }
                Err(self.error_at(open, Syntax::UnterminatedList))
            }
            Some(c) if c.is_ascii_digit() => Ok(Literal::Int(self.int()?)),
            _ => {
                for (word, b) in [("True", true), ("False", false)] {
                    if self
                        .s
                        .get(self.i..)
                        .unwrap_or_default()
                        .starts_with(word.as_bytes())
                    {
                        self.i += word.len();
                        return Ok(Literal::Bool(b));
                    }
                }
                Err(self.error(Syntax::UnexpectedValue))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_bytes(version: u8, dict: &str) -> Vec<u8> {
        let mut v = MAGIC.to_vec();
        v.extend([version, 0]);
        if version == 1 {
            v.extend((dict.len() as u16).to_le_bytes());
        } else {
            v.extend((dict.len() as u32).to_le_bytes());
        }
        v.extend(dict.as_bytes());
        v
    }

    #[test]
    fn parses_numpy_written_headers_of_every_version() {
        let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 224, 224), }    \n";
        for version in [1u8, 2, 3] {
            let h = NpyHeader::parse(&file_bytes(version, dict)).expect("parse");
            assert_eq!(h.version, (version, 0));
            assert_eq!(h.descr, "<f4");
            assert!(!h.fortran_order);
            assert_eq!(h.shape, vec![3, 224, 224]);
            let pre = if version == 1 { 10 } else { 12 };
            assert_eq!(h.data_offset, pre + dict.len());
        }
    }

    #[test]
    fn parses_scalar_one_dim_double_quotes_and_python2_longs() {
        let h = NpyHeader::parse(&file_bytes(
            1,
            r#"{"shape": (), "fortran_order": True, "descr": "|b1"}"#,
        ))
        .expect("scalar");
        assert_eq!(h.shape, Vec::<u64>::new());
        assert!(h.fortran_order);
        assert_eq!(h.elements(), Some(1));
        let h = NpyHeader::parse(&file_bytes(
            1,
            "{'descr': '<i8', 'fortran_order': False, 'shape': (10L,), }",
        ))
        .expect("1-d");
        assert_eq!(h.shape, vec![10]);
    }

    #[test]
    fn refuses_bad_magic_versions_and_malformed_dicts() {
        let good = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
        let mut bad_magic = file_bytes(1, good);
        bad_magic[1] = b'X';
        assert_eq!(NpyHeader::parse(&bad_magic), Err(HeaderError::BadMagic));
        assert_eq!(NpyHeader::parse(b"\x93NUM"), Err(HeaderError::BadMagic));
        assert_eq!(
            NpyHeader::parse(&file_bytes(2, good)[..10]),
            Err(HeaderError::TruncatedPreamble)
        );
        assert_eq!(
            NpyHeader::parse(&file_bytes(4, good)),
            Err(HeaderError::UnsupportedVersion { major: 4, minor: 0 })
        );
        let mut short = file_bytes(1, good);
        short.truncate(30);
        assert_eq!(
            NpyHeader::parse(&short),
            Err(HeaderError::TruncatedHeader { len: good.len() })
        );
        let mut huge = file_bytes(2, good);
        huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            NpyHeader::parse(&huge),
            Err(HeaderError::HeaderTooLong { .. })
        ));
        let syntax = |at, problem| HeaderError::Syntax { at, problem };
        for (dict, want) in [
            (
                "{'descr': '<f4', 'shape': (3,), }",
                HeaderError::MissingKey {
                    key: HeaderKey::FortranOrder,
                },
            ),
            (
                "{'descr': '<f4', 'fortran_order': 0, 'shape': (3,)}",
                HeaderError::BadValue {
                    key: HeaderKey::FortranOrder,
                },
            ),
            (
                "{'descr': 1, 'fortran_order': False, 'shape': (3,)}",
                HeaderError::BadValue {
                    key: HeaderKey::Descr,
                },
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': 3}",
                HeaderError::BadValue {
                    key: HeaderKey::Shape,
                },
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (-3,)}",
                syntax(51, Syntax::ExpectedInteger),
            ),
            (
                "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,)}",
                HeaderError::StructuredDescr,
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)",
                syntax(54, Syntax::Expected('}')),
            ),
            ("{'descr': '<f4 ", syntax(10, Syntax::UnterminatedString)),
            ("{'descr': [('a', ", syntax(10, Syntax::UnterminatedList)),
            ("{'descr': <f4}", syntax(10, Syntax::UnexpectedValue)),
            ("{descr: 1}", syntax(1, Syntax::ExpectedString)),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} x",
                syntax(56, Syntax::TrailingText),
            ),
        ] {
            assert_eq!(NpyHeader::parse(&file_bytes(1, dict)), Err(want), "{dict}");
        }
        let utf8 = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'é': 'x'}";
        assert_eq!(
            NpyHeader::parse(&file_bytes(1, utf8)),
            Err(HeaderError::NotAscii)
        );
        assert!(NpyHeader::parse(&file_bytes(3, utf8)).is_ok());
        let mut latin1 = file_bytes(3, good);
        latin1[12] = 0xFF;
        assert_eq!(NpyHeader::parse(&latin1), Err(HeaderError::NotUtf8));
    }

    #[test]
    fn errors_read_as_sentences() {
        let e = HeaderError::Syntax {
            at: 7,
            problem: Syntax::Expected('}'),
        };
        assert_eq!(e.to_string(), "header dict: expected '}' at byte 7");
        assert_eq!(
            HeaderError::MissingKey {
                key: HeaderKey::Shape
            }
            .to_string(),
            "the header has no \"shape\" key"
        );
        assert_eq!(
            HeaderError::UnsupportedVersion { major: 4, minor: 1 }.to_string(),
            "format version 4.1 is not one of 1.0, 2.0, 3.0"
        );
    }

    #[test]
    fn damaged_headers_are_errors_never_panics() {
        let good = file_bytes(
            1,
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }   \n",
        );
        for at in 0..good.len() {
            for byte in [
                0u8, b'\'', b'(', b')', b'[', b'{', b'}', b',', b'\\', b'9', 0xFF,
            ] {
                let mut bad = good.clone();
                bad[at] = byte;
                let _ = NpyHeader::parse(&bad);
            }
            let _ = NpyHeader::parse(&good[..at]);
        }
        let huge = file_bytes(
            1,
            "{'descr': '<f4', 'fortran_order': False, 'shape': (18446744073709551615, 2), }",
        );
        let h = NpyHeader::parse(&huge).expect("parses");
        assert_eq!(h.elements(), None);
        let overflow = file_bytes(1, "{'shape': (99999999999999999999,)}");
        assert!(NpyHeader::parse(&overflow).is_err());
    }
}
