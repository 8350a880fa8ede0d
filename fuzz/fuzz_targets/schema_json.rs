//! The schema JSON stored in every file: any bytes either fail to parse or give a
//! schema that writes back to JSON which parses to the same schema.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zring_engine::StoreSchema;

fuzz_target!(|data: &[u8]| {
    if let Ok(schema) = StoreSchema::from_json(data) {
        let text = schema.to_json();
        let again = StoreSchema::from_json(text.as_bytes())
            .unwrap_or_else(|e| panic!("{text} does not parse back: {e}"));
        assert_eq!(again, schema);
        let _ = schema.schema.validate();
        let _ = schema.schema.item_bytes();
    }
});
