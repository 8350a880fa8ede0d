//! Empty: the checks are in `tests/`, against zring-engine built with serde_json's
//! `preserve_order` feature on (see Cargo.toml).
