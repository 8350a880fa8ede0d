//! The `.npy` preamble and header: magic, version, header length, and the Python
//! dict literal with `descr`, `fortran_order` and `shape`.

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
    /// the whole header). Errors are plain text; [`NpyFile`] adds the path.
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() < 10 || &bytes[..6] != MAGIC {
            return Err("the file does not start with the .npy magic \\x93NUMPY".into());
        }
        let version = (bytes[6], bytes[7]);
        let (len, start) = match version.0 {
            1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
            2 | 3 => {
                let b = bytes
                    .get(8..12)
                    .ok_or("the file ends inside the preamble")?;
                let len = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                (usize::try_from(len).unwrap_or(usize::MAX), 12)
            }
            major => {
                return Err(format!(
                    "format version {major}.{} is not one of 1.0, 2.0, 3.0",
                    version.1
                ))
            }
        };
        if len > MAX_HEADER_BYTES {
            return Err(format!("header length {len} is implausibly large"));
        }
        let text = bytes
            .get(start..start + len)
            .ok_or_else(|| format!("the file ends inside the {len}-byte header"))?;
        let text = std::str::from_utf8(text).map_err(|_| "the header is not UTF-8 text")?;
        if version.0 < 3 && !text.is_ascii() {
            return Err("a version 1.0/2.0 header must be ASCII".into());
        }
        let dict = parse_dict(text)?;
        let field = |k: &str| {
            dict.iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v)
                .ok_or_else(|| format!("the header has no {k:?} key"))
        };
        let descr = match field("descr")? {
            Literal::Str(s) => s.clone(),
            Literal::List => {
                return Err("structured dtypes (a list descr) are not supported".into())
            }
            _ => return Err("'descr' is not a string".into()),
        };
        let fortran_order = match field("fortran_order")? {
            Literal::Bool(b) => *b,
            _ => return Err("'fortran_order' is not True or False".into()),
        };
        let shape = match field("shape")? {
            Literal::Tuple(t) => t.clone(),
            _ => return Err("'shape' is not a tuple of integers".into()),
        };
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
fn parse_dict(text: &str) -> Result<Vec<(String, Literal)>, String> {
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
        return Err(format!(
            "unexpected text after the header dict at byte {}",
            p.i
        ));
    }
    Ok(out)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
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

    fn expect(&mut self, c: u8) -> Result<(), String> {
        self.ws();
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!(
                "header dict: expected {:?} at byte {}",
                c as char, self.i
            ))
        }
    }

    fn string(&mut self) -> Result<String, String> {
        self.ws();
        let quote = match self.s.get(self.i) {
            Some(&q @ (b'\'' | b'"')) => q,
            _ => return Err(format!("header dict: expected a string at byte {}", self.i)),
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
        Err("header dict: unterminated string".into())
    }

    fn int(&mut self) -> Result<u64, String> {
        self.ws();
        let start = self.i;
        while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        let digits = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
        let n = digits
            .parse::<u64>()
            .map_err(|_| format!("header dict: expected a non-negative integer at byte {start}"))?;
        // Python 2 wrote longs with an L suffix.
        let _ = self.eat(b'L');
        Ok(n)
    }

    fn value(&mut self) -> Result<Literal, String> {
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
                Err("header dict: unterminated list".into())
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
                Err(format!("header dict: unexpected value at byte {}", self.i))
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
        assert!(NpyHeader::parse(&bad_magic)
            .expect_err("magic")
            .contains("magic"));
        assert!(NpyHeader::parse(&file_bytes(4, good))
            .expect_err("version")
            .contains("version 4.0"));
        let mut short = file_bytes(1, good);
        short.truncate(30);
        assert!(NpyHeader::parse(&short)
            .expect_err("short")
            .contains("ends inside"));
        for (dict, want) in [
            ("{'descr': '<f4', 'shape': (3,), }", "fortran_order"),
            (
                "{'descr': '<f4', 'fortran_order': 0, 'shape': (3,)}",
                "True or False",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (-3,)}",
                "integer",
            ),
            (
                "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,)}",
                "structured",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)",
                "expected '}'",
            ),
            ("{'descr': '<f4 ", "unterminated"),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} x",
                "after the header",
            ),
        ] {
            let err = NpyHeader::parse(&file_bytes(1, dict)).expect_err(dict);
            assert!(err.contains(want), "{dict}: {err}");
        }
        let utf8 = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'é': 'x'}";
        assert!(NpyHeader::parse(&file_bytes(1, utf8))
            .expect_err("ascii")
            .contains("ASCII"));
        assert!(NpyHeader::parse(&file_bytes(3, utf8)).is_ok());
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
