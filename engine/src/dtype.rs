//! Element types, named as NumPy and ml_dtypes name them.
//!
//! This module imports nothing from the crate so that `error` can carry a
//! [`DType`]; parsing a name or a NumPy descr reports `Error` and so lives in
//! `schema`.

use std::fmt;

/// The element type of a store's records. Stored values are little-endian.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    Bool,
    U8,
    U16,
    U32,
    U64,
    I8,
    I16,
    I32,
    I64,
    F16,
    BF16,
    F32,
    F64,
    Complex64,
    Complex128,
    F8E4M3FN,
    F8E5M2,
    /// ml_dtypes `float8_e4m3fnuz`: no infinities, one NaN (0x80), no negative zero.
    F8E4M3FNUZ,
    /// ml_dtypes `float8_e5m2fnuz`: no infinities, one NaN (0x80), no negative zero.
    F8E5M2FNUZ,
    /// ml_dtypes `float8_e8m0fnu`: exponent only (MX block scales), unsigned.
    F8E8M0FNU,
}

impl DType {
    /// Every dtype, in a stable order.
    pub const ALL: [DType; 20] = [
        DType::Bool,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::Complex64,
        DType::Complex128,
        DType::F8E4M3FN,
        DType::F8E5M2,
        DType::F8E4M3FNUZ,
        DType::F8E5M2FNUZ,
        DType::F8E8M0FNU,
    ];

    /// The canonical name (NumPy's `dtype.name`; ml_dtypes' names for bfloat16 and float8).
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::Complex64 => "complex64",
            DType::Complex128 => "complex128",
            DType::F8E4M3FN => "float8_e4m3fn",
            DType::F8E5M2 => "float8_e5m2",
            DType::F8E4M3FNUZ => "float8_e4m3fnuz",
            DType::F8E5M2FNUZ => "float8_e5m2fnuz",
            DType::F8E8M0FNU => "float8_e8m0fnu",
        }
    }

    /// Bytes per element.
    pub fn itemsize(self) -> usize {
        match self {
            DType::Bool
            | DType::U8
            | DType::I8
            | DType::F8E4M3FN
            | DType::F8E5M2
            | DType::F8E4M3FNUZ
            | DType::F8E5M2FNUZ
            | DType::F8E8M0FNU => 1,
            DType::U16 | DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 | DType::Complex64 => 8,
            DType::Complex128 => 16,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(d.name().parse::<DType>().expect("parse"), d);
        }
        assert!("float128".parse::<DType>().is_err());
    }

    #[test]
    fn numpy_descrs_map_and_big_endian_is_refused() {
        assert_eq!(DType::from_numpy_descr("<f4").expect("f4"), DType::F32);
        assert_eq!(DType::from_numpy_descr("|u1").expect("u1"), DType::U8);
        assert_eq!(DType::from_numpy_descr("|b1").expect("b1"), DType::Bool);
        assert_eq!(
            DType::from_numpy_descr("<c16").expect("c16"),
            DType::Complex128
        );
        let err = DType::from_numpy_descr(">i4").expect_err("big endian");
        assert!(err.to_string().contains("big-endian"));
        assert!(DType::from_numpy_descr("<U8").is_err());
    }
}
